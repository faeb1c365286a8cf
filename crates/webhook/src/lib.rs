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
pub mod lock_finalizer;
pub mod lock_suspension;
pub mod locks;
pub mod metrics;
pub mod namespace_locks;
pub mod review;
pub mod self_managed_tls;
pub mod server;
pub mod services;
pub mod tls;

use std::sync::{Arc, OnceLock};

pub use args::{Args, LockGuardArgs, SelfManagedTlsArgs, ServerArgs, ServiceGuardArgs};
pub use error::Error;
use kube::Client;
use navique_runtime::Component;

use crate::cluster::{CacheWatches, ClusterCache};
use crate::locks::LockGuard;
use crate::metrics::AdmissionMetrics;
use crate::self_managed_tls::Settings;
use crate::server::{Route, Server};
use crate::tls::ReloadingCertificate;

pub const NAME: &str = "webhook";

/// The readiness check that passes once the admission server listens.
const TLS_CHECK: &str = "tls";
/// The readiness check that passes once the Namespace and ServicePlan caches
/// of the managed-service guard have listed.
const CACHES_CHECK: &str = "caches";

/// Where the serving certificate comes from.
enum Tls {
    /// Files, re-read when they change (cert-manager, an existing Secret).
    Files(Arc<ReloadingCertificate>),
    /// The self-managed CA's Secret.
    SelfManaged(Settings),
}

pub async fn run(args: Args) -> Result<(), Error> {
    // Before anything else: a missing certificate or self-managed settings
    // that cannot work are deployment errors that no retry fixes, and they
    // should not wait for the API server.
    let self_managed = args
        .self_managed_tls
        .settings()
        .map_err(navique_runtime::Error::InvalidFlag)?;
    let tls = match (args.server.certificate_files(), self_managed) {
        (Some(files), _) => Some(Tls::Files(ReloadingCertificate::load(files)?)),
        (None, Some(settings)) => Some(Tls::SelfManaged(settings)),
        (None, None) => None,
    };
    let mut component = Component::start(NAME, &args.common).await?;
    let outcome = match tls {
        Some(tls) => serve(&mut component, &args, tls).await,
        None => {
            tracing::warn!(
                "no --tls-cert-file and --tls-key-file, nor --tls-secret: the admission server is off"
            );
            connect_and_wait(&mut component, None, None, &OnceLock::new()).await
        }
    };
    let outcome = match outcome {
        Ok(()) => Ok(()),
        Err(Error::Runtime(e)) => Err(e),
        Err(e) => Err(navique_runtime::Error::Component(e.into())),
    };
    Ok(component.stop(outcome).await?)
}

/// Serves admission requests from now (with the self-managed CA, from when
/// it has a certificate) until shutdown, and connects to the API server
/// meanwhile to fill the managed-service guard's caches.
async fn serve(component: &mut Component, args: &Args, tls: Tls) -> Result<(), Error> {
    component.readiness().register(TLS_CHECK);
    component.readiness().register(CACHES_CHECK);
    let metrics = AdmissionMetrics::default();
    component.register_metrics(|registry| metrics.register(registry));
    let shutdown = component.shutdown().clone();
    let (certificate, client) = match tls {
        Tls::Files(files) => {
            tokio::spawn(
                files
                    .clone()
                    .watch(args.server.reload_interval(), shutdown.clone()),
            );
            (files.served().clone(), None)
        }
        Tls::SelfManaged(settings) => {
            // The certificate is in the cluster: connect first.
            let Some(client) = component.connect().await? else {
                return Ok(());
            };
            let Some(served) =
                self_managed_tls::start(client.clone(), settings, shutdown.clone()).await
            else {
                return Ok(());
            };
            (served, Some(client))
        }
    };
    // Served at once; until the caches have listed, requests that need a
    // lookup are refused.
    let (cache, watches) = ClusterCache::new();
    let api = Arc::new(OnceLock::new());
    let routes = vec![
        Route {
            path: lock_suspension::PATH,
            validator: Arc::new(lock_suspension::SuspensionGuard {
                client: api.clone(),
            }),
        },
        Route {
            path: lock_finalizer::PATH,
            validator: Arc::new(lock_finalizer::LockFinalizer),
        },
        Route {
            path: locks::PATH,
            validator: lock_guard(&args.lock_guard, cache.clone()),
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
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    component.readiness().set(TLS_CHECK, true);

    let outcome = connect_and_wait(component, client, Some(watches), &api).await;
    shutdown.cancel();
    component.readiness().set(TLS_CHECK, false);
    if let Err(e) = serving.await {
        tracing::warn!(error = %e, "the admission server task failed");
    }
    outcome
}

/// The Lock guard; with `--namespace-locks`, reading Namespaces from `cache`.
fn lock_guard(args: &LockGuardArgs, cache: Arc<ClusterCache>) -> Arc<dyn review::AsyncValidator> {
    let guard = LockGuard::from(args);
    if args.namespace_locks {
        Arc::new(namespace_locks::NamespaceLockGuard {
            guard,
            namespaces: cache,
        })
    } else {
        Arc::new(guard)
    }
}

/// Connects unless `client` is given, starts the caches' watches if any,
/// and waits for shutdown.
async fn connect_and_wait(
    component: &mut Component,
    client: Option<Client>,
    watches: Option<CacheWatches>,
    api: &OnceLock<Client>,
) -> Result<(), Error> {
    let client = match client {
        Some(client) => client,
        None => match component.connect().await? {
            Some(client) => client,
            None => return Ok(()),
        },
    };
    // The rules that ask the API server (the suspend verb) can from now on.
    let _ = api.set(client.clone());
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
