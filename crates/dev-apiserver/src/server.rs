//! The HTTPS server: accepts connections, authenticates, routes each request
//! to discovery, OpenAPI or the REST handlers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::attributes::UserInfo;
use crate::auth::{self, Users};
use crate::resources::{self, ResourceType};
use crate::status::ApiError;
use crate::store::Store;
use crate::{discovery, faults, gc, openapi, rbac, rest};

/// The largest request body accepted, as kube-apiserver's limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

pub type Body = BoxBody<Bytes, Infallible>;

/// How requests are authorized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Authorization {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// The stored Roles, ClusterRoles and bindings decide.
    Rbac,
}

/// Everything a request may touch.
pub struct State {
    pub store: Store,
    types: RwLock<Vec<Arc<ResourceType>>>,
    pub users: Users,
    pub authorization: Authorization,
    /// Webhook services resolved to local addresses: (namespace, name).
    services: HashMap<(String, String), std::net::SocketAddr>,
    pub bookmark_interval: Duration,
    /// Namespaces whose termination is running.
    pub terminating: std::sync::Mutex<std::collections::HashSet<String>>,
    pub gc: gc::Wakeup,
    pub faults: std::sync::Mutex<Vec<faults::Fault>>,
    /// Bumped by `/debug/compact`: open watches end, so that clients resume
    /// from a compacted resourceVersion and must relist.
    pub compactions: tokio::sync::watch::Sender<u64>,
}

impl State {
    pub fn new(
        users: Users,
        authorization: Authorization,
        services: HashMap<(String, String), std::net::SocketAddr>,
        bookmark_interval: Duration,
    ) -> Arc<Self> {
        let state = Arc::new(Self {
            store: Store::default(),
            types: RwLock::new(resources::builtins()),
            users,
            authorization,
            services,
            bookmark_interval,
            terminating: Default::default(),
            gc: gc::Wakeup::new(),
            faults: Default::default(),
            compactions: tokio::sync::watch::Sender::new(0),
        });
        crate::namespaces::create_defaults(&state);
        state
    }

    /// The local address of a webhook's service, as configured.
    pub fn resolve_service(
        &self,
        namespace: &str,
        name: &str,
        _port: u16,
    ) -> Option<std::net::SocketAddr> {
        self.services
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }

    /// Whether `request` is allowed, per the authorization mode.
    pub fn authorize(&self, request: &rbac::Request<'_>) -> Result<(), ApiError> {
        if self.authorization == Authorization::AlwaysAllow {
            return Ok(());
        }
        match self.with_rbac(|rbac| rbac.authorize(request)) {
            rbac::Decision::Allow { .. } => Ok(()),
            rbac::Decision::Deny => Err(ApiError::rbac_forbidden(request)),
        }
    }

    /// Runs `f` on the stored RBAC objects.
    pub fn with_rbac<T>(&self, f: impl FnOnce(&rbac::Rbac<'_>) -> T) -> T {
        let txn = self.store.lock();
        let all = |plural: &str| -> Vec<serde_json::Value> {
            txn.list(
                &("rbac.authorization.k8s.io".to_owned(), plural.to_owned()),
                None,
                None,
            )
            .map(|(_, o)| o.clone())
            .collect()
        };
        let (roles, role_bindings, cluster_roles, cluster_role_bindings) = (
            all("roles"),
            all("rolebindings"),
            all("clusterroles"),
            all("clusterrolebindings"),
        );
        drop(txn);
        f(&rbac::Rbac {
            roles: &roles,
            role_bindings: &role_bindings,
            cluster_roles: &cluster_roles,
            cluster_role_bindings: &cluster_role_bindings,
        })
    }

    /// Every served resource type.
    pub fn types(&self) -> Vec<Arc<ResourceType>> {
        self.types.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Replaces the types a CRD registered (none, when it is deleted).
    pub fn set_crd_types(&self, crd: &str, new: Vec<ResourceType>) {
        let mut types = self.types.write().unwrap_or_else(|p| p.into_inner());
        types.retain(|t| t.crd.as_deref() != Some(crd));
        types.extend(new.into_iter().map(Arc::new));
    }
}

/// Serves HTTPS on `listener` until the process ends.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, state: Arc<State>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let state = state.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The parsed query string.
pub type Query = HashMap<String, String>;

/// A request as the handlers see it.
pub struct Req {
    pub user: UserInfo,
    pub method: Method,
    pub path: String,
    pub query: Query,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Req {
    pub fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// Whether the client asked for a meta.k8s.io Table.
    pub fn wants_table(&self) -> bool {
        self.header(header::ACCEPT).contains("as=Table")
    }

    /// `dryRun=All`.
    pub fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }
}

async fn handle(state: &Arc<State>, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query: Query = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    tracing::debug!(method = %parts.method, %path, ?query, "request");

    let user = match identify(state, &parts.headers) {
        Ok(user) => user,
        Err(_) if public(&path) => UserInfo::default(),
        Err(e) => return error(&e),
    };
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return error(&ApiError::new_request_too_large(e.to_string()));
        }
    };
    let req = Req {
        user,
        method: parts.method,
        path,
        query,
        headers: parts.headers,
        body,
    };
    match route(state, &req).await {
        Ok(response) => response,
        Err(e) => error(&e),
    }
}

/// Whether a path names resources (authorized by resource) rather than
/// discovery, OpenAPI or health (authorized by path).
fn is_resource_path(segments: &[&str]) -> bool {
    matches!(segments, ["api", "v1", _, ..] | ["apis", _, _, _, ..])
}

fn public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/readyz" | "/livez")
}

/// The request's user: its token's, or the one it impersonates when the
/// token's user may.
fn identify(state: &State, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let user = state
        .users
        .authenticate(headers)
        .ok_or_else(ApiError::unauthorized)?;
    let Some((target, checks)) = auth::impersonated(headers) else {
        return Ok(user);
    };
    for check in &checks {
        let request = rbac::Request {
            user: &user,
            verb: "impersonate",
            resource_request: true,
            api_group: check.api_group,
            resource: check.resource,
            subresource: &check.subresource,
            namespace: &check.namespace,
            name: &check.name,
            path: "",
        };
        state.authorize(&request)?;
    }
    Ok(target)
}

fn is_admin(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == "system:masters")
}

async fn route(state: &Arc<State>, req: &Req) -> Result<Response<Body>, ApiError> {
    let segments: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    if !is_resource_path(&segments) && !public(&req.path) {
        let request = rbac::Request {
            user: &req.user,
            verb: &req.method.as_str().to_lowercase(),
            resource_request: false,
            api_group: "",
            resource: "",
            subresource: "",
            namespace: "",
            name: "",
            path: &req.path,
        };
        state.authorize(&request)?;
    }
    match (req.method.clone(), segments.as_slice()) {
        (Method::GET, ["version"]) => Ok(json(StatusCode::OK, &discovery::version())),
        (Method::GET, ["healthz" | "readyz" | "livez"]) => Ok(text(StatusCode::OK, "ok")),
        (Method::GET, ["api"]) => Ok(discovery::core_versions(state, req)),
        (Method::GET, ["apis"]) => Ok(discovery::groups(state, req)),
        (Method::GET, ["api", "v1"]) => discovery::resources(state, "", "v1"),
        (Method::GET, ["apis", group]) => discovery::group(state, group),
        (Method::GET, ["apis", group, version]) => discovery::resources(state, group, version),
        (Method::GET, ["openapi", "v3"]) => Ok(json(StatusCode::OK, &openapi::root(state))),
        (Method::GET, ["openapi", "v3", rest @ ..]) => {
            openapi::document(state, &rest.join("/")).map(|doc| json(StatusCode::OK, &doc))
        }
        (_, ["debug", ..]) if !is_admin(&req.user) => Err(ApiError::bad_request(
            "the /debug endpoints are for system:masters",
        )),
        (Method::POST, ["debug", "compact"]) => {
            state.store.lock().compact();
            state.compactions.send_modify(|n| *n += 1);
            Ok(text(StatusCode::OK, "compacted"))
        }
        (Method::POST, ["debug", "drop-watches"]) => {
            state.compactions.send_modify(|n| *n += 1);
            Ok(text(StatusCode::OK, "dropped"))
        }
        (Method::POST, ["debug", "faults"]) => {
            let list: faults::FaultList = serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("invalid faults: {e}")))?;
            state
                .faults
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(list.faults);
            Ok(text(StatusCode::OK, "faults added"))
        }
        (Method::DELETE, ["debug", "faults"]) => {
            state
                .faults
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            Ok(text(StatusCode::OK, "faults cleared"))
        }
        (Method::POST, ["debug", "users"]) => {
            let user: auth::User = serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("invalid user: {e}")))?;
            state.users.add(user);
            Ok(text(StatusCode::OK, "user added"))
        }
        (_, ["api", "v1", rest @ ..]) => rest::handle(state, req, "", "v1", rest).await,
        (_, ["apis", group, version, rest @ ..]) if !rest.is_empty() => {
            rest::handle(state, req, group, version, rest).await
        }
        _ => Err(ApiError::path_not_found()),
    }
}

// === responses ===

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    json_as(status, value, "application/json")
}

pub fn json_as(status: StatusCode, value: &Value, content_type: &str) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full("")))
}

pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full("")))
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.body,
    )
}
