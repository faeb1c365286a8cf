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

use crate::resources::{self, ResourceType};
use crate::status::ApiError;
use crate::store::Store;
use crate::{discovery, openapi, rest};

/// The largest request body accepted, as kube-apiserver's limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

pub type Body = BoxBody<Bytes, Infallible>;

/// Everything a request may touch.
pub struct State {
    pub store: Store,
    types: RwLock<Vec<Arc<ResourceType>>>,
    token: String,
    pub bookmark_interval: Duration,
    /// Bumped by `/debug/compact`: open watches end, so that clients resume
    /// from a compacted resourceVersion and must relist.
    pub compactions: tokio::sync::watch::Sender<u64>,
}

impl State {
    pub fn new(token: String, bookmark_interval: Duration) -> Arc<Self> {
        let state = Arc::new(Self {
            store: Store::default(),
            types: RwLock::new(resources::builtins()),
            token,
            bookmark_interval,
            compactions: tokio::sync::watch::Sender::new(0),
        });
        crate::namespaces::create_defaults(&state);
        state
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

    if !public(&path) && !authorized(state, &parts.headers) {
        return error(&ApiError::unauthorized());
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return error(&ApiError::new_request_too_large(e.to_string()));
        }
    };
    let req = Req {
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

fn public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/readyz" | "/livez")
}

fn authorized(state: &State, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| token == state.token)
}

async fn route(state: &Arc<State>, req: &Req) -> Result<Response<Body>, ApiError> {
    let segments: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
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
        (Method::POST, ["debug", "compact"]) => {
            state.store.lock().compact();
            state.compactions.send_modify(|n| *n += 1);
            Ok(text(StatusCode::OK, "compacted"))
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
