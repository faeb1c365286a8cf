//! webhook: the validating admission webhook. It enforces deletionProtection,
//! plan-allowed deletion policies, the protection of retained objects and
//! backup records, and the Lock rule where ValidatingAdmissionPolicy is
//! unavailable.
//!
//! Each rule is a [`Validator`](review::Validator): a pure function from an
//! admission request to a decision, served on a path of its own by
//! [`server`], so that the webhook configuration sends each rule only the
//! requests it needs and each can be tested from AdmissionReview fixtures.
#![forbid(unsafe_code)]

mod args;
pub mod cluster;
mod error;
pub mod locks;
pub mod metrics;
pub mod review;
pub mod server;
pub mod services;
pub mod tls;

use std::sync::Arc;

pub use args::{Args, LockGuardArgs, ServerArgs, ServiceGuardArgs};
pub use error::Error;
use navique_runtime::Component;

use crate::cluster::{CacheWatches, ClusterCache};
use crate::locks::LockGuard;
use crate::metrics::AdmissionMetrics;
use crate::server::{Route, Server};
use crate::tls::ReloadingCertificate;

pub const NAME: &str = "webhook";

/// The readiness check that passes once the admission server listens.
const TLS_CHECK: &str = "tls";
/// The readiness check that passes once the Namespace and ServicePlan caches
/// of the managed-service guard have listed.
const CACHES_CHECK: &str = "caches";

pub async fn run(args: Args) -> Result<(), Error> {
    // Before anything else: a missing certificate is a deployment error that
    // no retry fixes, and it should not wait for the API server.
    let certificate = match args.server.certificate_files() {
        Some(files) => Some(ReloadingCertificate::load(files)?),
        None => None,
    };
    let mut component = Component::start(NAME, &args.common).await?;
    let outcome = match certificate {
        Some(certificate) => serve(&mut component, &args, certificate).await,
        None => {
            tracing::warn!("no --tls-cert-file and --tls-key-file: the admission server is off");
            connect_and_wait(&mut component, None).await
        }
    };
    let outcome = match outcome {
        Ok(()) => Ok(()),
        Err(Error::Runtime(e)) => Err(e),
        Err(e) => Err(navique_runtime::Error::Component(e.into())),
    };
    Ok(component.stop(outcome).await?)
}

/// Serves admission requests from now until shutdown, and connects to the
/// API server meanwhile to fill the managed-service guard's caches.
async fn serve(
    component: &mut Component,
    args: &Args,
    certificate: Arc<ReloadingCertificate>,
) -> Result<(), Error> {
    component.readiness().register(TLS_CHECK);
    component.readiness().register(CACHES_CHECK);
    let metrics = AdmissionMetrics::default();
    component.register_metrics(|registry| metrics.register(registry));
    // Served at once; until the caches have listed, requests that need a
    // lookup are refused.
    let (cache, watches) = ClusterCache::new();
    let routes = vec![
        Route {
            path: locks::PATH,
            validator: Arc::new(LockGuard::from(&args.lock_guard)),
        },
        Route {
            path: services::PATH,
            validator: Arc::new(args.service_guard.guard(cache.clone())),
        },
        Route {
            path: services::DEFAULTS_PATH,
            validator: Arc::new(services::ServiceDefaults { cluster: cache }),
        },
    ];
    let server = Server::bind(
        args.server.listen_addr,
        certificate.server_config()?,
        server::router(routes, metrics),
    )
    .await?;
    tracing::info!(addr = %server.local_addr(), "admission server listening");
    let shutdown = component.shutdown().clone();
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    tokio::spawn(
        certificate
            .clone()
            .watch(args.server.reload_interval(), shutdown.clone()),
    );
    component.readiness().set(TLS_CHECK, true);

    let outcome = connect_and_wait(component, Some(watches)).await;
    shutdown.cancel();
    component.readiness().set(TLS_CHECK, false);
    if let Err(e) = serving.await {
        tracing::warn!(error = %e, "the admission server task failed");
    }
    outcome
}

/// Connects, starts the caches' watches if any, and waits for shutdown.
async fn connect_and_wait(
    component: &mut Component,
    watches: Option<CacheWatches>,
) -> Result<(), Error> {
    let Some(client) = component.connect().await? else {
        return Ok(());
    };
    if let Some(watches) = watches {
        let readiness = component.readiness().clone();
        let shutdown = component.shutdown().clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = watches.run(client, || readiness.set(CACHES_CHECK, true)) => {}
            }
        });
    }
    component.shutdown().cancelled().await;
    Ok(())
}
