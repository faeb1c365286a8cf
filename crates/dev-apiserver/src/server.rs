//! The HTTPS server: accepts connections, authenticates, routes each request
//! to discovery, OpenAPI or the REST handlers.

use std::convert::Infallible;
use std::sync::Arc;

use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::attributes::UserInfo;
use crate::auth;
use crate::request::{Query, Req};
use crate::respond::{Body, error, json, text};
use crate::state::State;
use crate::status::ApiError;
use crate::{discovery, faults, openapi, rbac, rest};

/// The largest request body accepted, as kube-apiserver's limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

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
            state.faults.add(list.faults);
            Ok(text(StatusCode::OK, "faults added"))
        }
        (Method::DELETE, ["debug", "faults"]) => {
            state.faults.clear();
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
