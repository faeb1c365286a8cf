//! The HTTPS server: TLS with the reloading certificate, HTTP/1.1 and
//! HTTP/2, one route per validator, graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use kube::core::admission::Operation;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::metrics::AdmissionMetrics;
use crate::review::{self, AsyncValidator, Decision};

/// The largest request body read. A review carries the object and the old
/// object, each up to etcd's 1.5 MiB; more than that is not a review.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// A client that has not finished its TLS handshake by then is dropped, so
/// that idle sockets cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish after shutdown starts;
/// the API server gives a webhook 10 s by default.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A validator and the path it is served on.
pub struct Route {
    pub path: &'static str,
    pub validator: Arc<dyn AsyncValidator>,
}

/// The routes: `POST <path>` with an AdmissionReview for each validator.
/// Anything else is 404 or 405.
pub fn router(routes: Vec<Route>, metrics: AdmissionMetrics) -> Router {
    routes
        .into_iter()
        .fold(Router::new(), |router, Route { path, validator }| {
            let metrics = metrics.clone();
            router.route(
                path,
                post(move |body: Bytes| {
                    let (validator, metrics) = (validator.clone(), metrics.clone());
                    async move { handle(path, &*validator, &metrics, &body).await }
                }),
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// One review: parsed, decided, answered, counted. A body that is not a
/// review but names a request uid is denied with the reason; one that names
/// none gets 400 with the reason, which the API server quotes in its
/// "failed calling webhook" error.
async fn handle(
    path: &'static str,
    validator: &dyn AsyncValidator,
    metrics: &AdmissionMetrics,
    body: &[u8],
) -> Response {
    let started = Instant::now();
    let request = match review::parse(body) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!(path, error = %e, "refused a malformed admission request");
            if let Some(answer) = review::refuse_unreadable(body, &e) {
                metrics.observe(path, "UNREADABLE", false, started.elapsed());
                let json = answer.to_string().into_bytes();
                return ([(header::CONTENT_TYPE, "application/json")], json).into_response();
            }
            return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
        }
    };
    let decision = match review::malformed(&request) {
        Some(problem) => Decision::Deny(problem),
        None => validator.validate(&request).await,
    };
    let operation = operation(&request.operation);
    let user = request.user_info.username.as_deref().unwrap_or_default();
    let namespace = request.namespace.as_deref().unwrap_or_default();
    match &decision {
        Decision::Allow => tracing::debug!(
            path, uid = %request.uid, operation, kind = %request.kind.kind, namespace,
            name = %request.name, user, "allowed"
        ),
        Decision::Warn(warnings) => tracing::debug!(
            path, uid = %request.uid, operation, kind = %request.kind.kind, namespace,
            name = %request.name, user, warnings = ?warnings, "allowed with warnings"
        ),
        Decision::Patch(operations) => tracing::debug!(
            path, uid = %request.uid, operation, kind = %request.kind.kind, namespace,
            name = %request.name, user, patch = %serde_json::Value::from(operations.clone()),
            "allowed with defaults"
        ),
        Decision::Deny(message) => tracing::info!(
            path, uid = %request.uid, operation, kind = %request.kind.kind, namespace,
            name = %request.name, user, reason = %message, "denied"
        ),
        Decision::Error(message) => tracing::warn!(
            path, uid = %request.uid, operation, kind = %request.kind.kind, namespace,
            name = %request.name, user, error = %message, "refused: cannot decide"
        ),
    }
    let response = match serde_json::to_vec(&review::answer(&request, &decision)) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => {
            tracing::error!(path, error = %e, "cannot encode the AdmissionReview answer");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode the answer: {e}\n"),
            )
                .into_response();
        }
    };
    metrics.observe(path, operation, decision.is_allowed(), started.elapsed());
    response
}

fn operation(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// The webhook server, bound but not serving yet.
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    acceptor: TlsAcceptor,
    app: Router,
}

impl Server {
    /// Binds `addr` now, so that a taken port fails start-up.
    pub async fn bind(
        addr: SocketAddr,
        tls: Arc<ServerConfig>,
        app: Router,
    ) -> Result<Self, Error> {
        let bind_error = |source| Error::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        Ok(Self {
            listener,
            local_addr,
            acceptor: TlsAcceptor::from(tls),
            app,
        })
    }

    /// The address it listens on (the port chosen when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown`, then stops accepting, lets the requests in
    /// flight finish (up to [`DRAIN_TIMEOUT`]) and returns.
    pub async fn serve(self, shutdown: CancellationToken) {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // The timer enables hyper's header read timeout and HTTP/2 pings.
        builder.http1().timer(TokioTimer::new());
        builder.http2().timer(TokioTimer::new());
        let graceful = GracefulShutdown::new();
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, mostly: wait for some to
                        // be released rather than spin.
                        tracing::warn!(error = %e, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            // Small responses on a busy HTTP/2 connection would otherwise
            // wait for the client's delayed ACK (~40 ms).
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            let acceptor = self.acceptor.clone();
            let service = TowerToHyperService::new(self.app.clone());
            let builder = builder.clone();
            let watcher = graceful.watcher();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                let stream = tokio::select! {
                    () = shutdown.cancelled() => return,
                    result = handshake => match result {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    },
                };
                let connection = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                if let Err(e) = watcher.watch(connection).await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
        drop(self.listener);
        if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "requests still in flight after {DRAIN_TIMEOUT:?}; closing their connections"
            );
        }
    }
}
