//! The admin server: `/metrics` in Prometheus text format, `/healthz` (the
//! process answers) and `/readyz` (every readiness check passed).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// Named readiness checks: `/readyz` answers 200 only when all have passed.
/// A check starts failing when registered.
#[derive(Clone, Default)]
pub struct Readiness(Arc<Mutex<BTreeMap<&'static str, bool>>>);

impl Readiness {
    /// Adds a check that has not passed yet.
    pub fn register(&self, check: &'static str) {
        self.checks().entry(check).or_insert(false);
    }

    /// Records the outcome of a check.
    pub fn set(&self, check: &'static str, ready: bool) {
        self.checks().insert(check, ready);
    }

    /// The checks that have not passed, in name order.
    pub fn pending(&self) -> Vec<&'static str> {
        self.checks()
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(check, _)| *check)
            .collect()
    }

    fn checks(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, bool>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Clone)]
struct AdminState {
    readiness: Readiness,
    standard: Arc<Registry>,
    registry: Arc<RwLock<Registry>>,
}

/// Binds the admin address now, so a taken port fails start-up, and serves
/// until `shutdown` is cancelled. `/metrics` is `standard` (unprefixed,
/// fixed at start) followed by the component's `registry`.
pub(crate) async fn serve(
    addr: SocketAddr,
    readiness: Readiness,
    standard: Arc<Registry>,
    registry: Arc<RwLock<Registry>>,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<Result<(), Error>>), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::AdminBind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| Error::AdminBind { addr, source })?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AdminState {
            readiness,
            standard,
            registry,
        });
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .map_err(Error::AdminServe)
    });
    Ok((local, task))
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    let pending = state.readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", pending.join(", ")),
        )
    }
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut body = String::new();
    let registry = state.registry.read().unwrap_or_else(|p| p.into_inner());
    let encoded = text::encode_registry(&mut body, &state.standard)
        .and_then(|()| text::encode_registry(&mut body, &registry))
        .and_then(|()| text::encode_eof(&mut body));
    match encoded {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {e}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_lists_pending_checks_until_they_pass() {
        let readiness = Readiness::default();
        readiness.register("kube-api");
        readiness.register("caches");
        assert_eq!(readiness.pending(), vec!["caches", "kube-api"]);
        readiness.set("kube-api", true);
        assert_eq!(readiness.pending(), vec!["caches"]);
        readiness.set("caches", true);
        assert!(readiness.pending().is_empty());
    }

    #[test]
    fn registering_again_keeps_a_passed_check() {
        let readiness = Readiness::default();
        readiness.set("kube-api", true);
        readiness.register("kube-api");
        assert!(readiness.pending().is_empty());
    }
}
