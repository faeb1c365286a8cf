//! Lease-based leader election: only the replica holding the Lease runs the
//! reconcilers, and it stops them the moment it cannot prove it still holds
//! it, so two replicas never reconcile at once.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;

use crate::{Error, LeaderElectionArgs};

pub(crate) struct Election<'a> {
    pub component: &'static str,
    pub client: Client,
    pub args: &'a LeaderElectionArgs,
    pub leader: &'a Gauge,
    pub shutdown: &'a CancellationToken,
}

impl Election<'_> {
    /// Waits for the Lease, then runs `work` until it returns, shutdown, or
    /// the Lease is lost (an error: the process should exit and restart).
    pub async fn run<F, Fut, E>(self, work: F) -> Result<(), Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let args = self.args;
        if args.lease_grace >= args.lease_duration {
            return Err(Error::InvalidFlag(format!(
                "--lease-grace ({}s) must be shorter than --lease-duration ({}s)",
                args.lease_grace, args.lease_duration
            )));
        }
        let namespace = args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| self.client.default_namespace().to_owned());
        let name = self.component.to_owned();
        let identity = args.identity();
        let failed = |source| Error::LeaderElection {
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        };
        let manager = LeaseManagerBuilder::new(self.client, &name)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .with_duration(args.lease_duration)
            .with_grace(args.lease_grace)
            .with_field_manager(format!("{}-{identity}", self.component))
            .build()
            .await
            .map_err(failed)?;

        tracing::info!(lease = %name, %namespace, %identity, "waiting for leadership");
        if !acquire(&manager, self.shutdown).await {
            return Ok(());
        }
        tracing::info!(lease = %name, %namespace, %identity, "became the leader");
        self.leader.set(1);

        let token = self.shutdown.child_token();
        let work = work(token.clone());
        tokio::pin!(work);
        let outcome = loop {
            tokio::select! {
                result = &mut work => break result.map_err(|e| Error::Component(e.into())),
                changed = manager.changed() => match changed {
                    Ok(true) => continue,
                    // Renewal failed or another replica took over: stop now.
                    Ok(false) | Err(_) => {
                        if let Err(e) = changed {
                            tracing::error!(error = %e, "cannot renew the Lease");
                        }
                        token.cancel();
                        let _ = work.await;
                        break Err(Error::LeadershipLost { namespace: namespace.clone(), name: name.clone() });
                    }
                },
            }
        };
        self.leader.set(0);
        // Hand over at once instead of making the next leader wait for expiry.
        if let Err(e) = manager.release().await {
            tracing::warn!(error = %e, "cannot release the Lease; it expires by itself");
        }
        outcome
    }
}

/// Tries until the Lease is held (true) or shutdown (false).
async fn acquire(manager: &LeaseManager, shutdown: &CancellationToken) -> bool {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return false,
            changed = manager.changed() => match changed {
                Ok(true) => return true,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot take part in leader election; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return false,
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            },
        }
    }
}
