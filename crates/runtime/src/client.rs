//! The Kubernetes API client every component uses: kube's own middleware
//! (base URL, retries of 429/503/504, credentials, impersonation headers,
//! timeouts, a span per request) over a connection pool of our own.
//!
//! kube's default pool has no timer, so a connection it opened in a burst
//! stayed open until the process ended (a hundred or more after 2,000
//! Locks, about 15 kB each), and it speaks only HTTP/1.1, one connection
//! per request in flight. This pool offers HTTP/2 (ALPN; kube-apiserver
//! serves it, as client-go uses it), so a component's requests and watches
//! share one connection, and closes an HTTP/1.1 connection idle for
//! [`IDLE_TIMEOUT`]. A proxy in the kubeconfig gets kube's own stack.

use std::time::Duration;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ConfigExt};
use kube::{Client, Config};
use tower::ServiceBuilder;
use tower::retry::RetryLayer;
use tower_http::trace::TraceLayer;

/// How long a pooled connection may stay idle: Go's `net/http` default,
/// which client-go keeps.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a client could not be built from a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("tls-server-name {name:?} is not a DNS name or IP address")]
    ServerName { name: String },
}

/// A client for `config`'s cluster.
pub fn client(config: Config) -> Result<Client, ClientError> {
    if config.proxy_url.is_some() {
        return Ok(Client::try_from(config)?);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    let tls = match &config.tls_server_name {
        Some(name) => {
            let server_name = name
                .clone()
                .try_into()
                .map_err(|_| ClientError::ServerName { name: name.clone() })?;
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(server_name))
        }
        None => tls,
    };
    let mut connector =
        TimeoutConnector::new(tls.enable_http1().enable_http2().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .timer(TokioTimer::new())
        .build::<_, Body>(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(TraceLayer::new_for_http().make_span_with(span))
        .map_err(tower::BoxError::from)
        .service(pool);
    Ok(Client::new(service, config.default_namespace))
}

/// A request's span, named as kube names it, so that traces read the same.
fn span(request: &http::Request<Body>) -> tracing::Span {
    tracing::debug_span!(
        "HTTP",
        http.method = %request.method(),
        http.url = %request.uri(),
        otel.name = request.extensions().get::<&'static str>().unwrap_or(&"HTTP"),
        otel.kind = "client",
    )
}
