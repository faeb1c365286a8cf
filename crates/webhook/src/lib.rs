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
mod error;
pub mod locks;
pub mod metrics;
pub mod review;
pub mod server;
pub mod tls;

use std::sync::Arc;

pub use args::{Args, LockGuardArgs, ServerArgs};
pub use error::Error;
use navique_runtime::Component;

use crate::locks::LockGuard;
use crate::metrics::AdmissionMetrics;
use crate::server::{Route, Server};
use crate::tls::ReloadingCertificate;

pub const NAME: &str = "webhook";

/// The readiness check that passes once the admission server listens.
const TLS_CHECK: &str = "tls";

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
            connect_and_wait(&mut component).await
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
/// API server meanwhile (the validators to come read the cluster).
async fn serve(
    component: &mut Component,
    args: &Args,
    certificate: Arc<ReloadingCertificate>,
) -> Result<(), Error> {
    component.readiness().register(TLS_CHECK);
    let metrics = AdmissionMetrics::default();
    component.register_metrics(|registry| metrics.register(registry));
    let routes = vec![Route {
        path: locks::PATH,
        validator: Arc::new(LockGuard::from(&args.lock_guard)),
    }];
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

    let outcome = connect_and_wait(component).await;
    shutdown.cancel();
    component.readiness().set(TLS_CHECK, false);
    if let Err(e) = serving.await {
        tracing::warn!(error = %e, "the admission server task failed");
    }
    outcome
}

async fn connect_and_wait(component: &mut Component) -> Result<(), Error> {
    if component.connect().await?.is_some() {
        component.shutdown().cancelled().await;
    }
    Ok(())
}
