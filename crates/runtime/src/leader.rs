//! Lease-based leader election: only the replica holding the Lease runs the
//! reconcilers, and it stops them the moment it cannot prove it still holds
//! it, so two replicas never reconcile at once.

use std::future::Future;

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseParams};
use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::retry::Backoff;
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
        let name = self.component;
        let identity = args.identity();
        let span = tracing::info_span!("leader_election", lease = name, %namespace, %identity);
        let params = LeaseParams::new(&identity, args.lease_duration, args.lease_grace)
            .with_field_manager(format!("{name}-{identity}"));
        let Some(manager) = self
            .acquire(&namespace, params)
            .instrument(span.clone())
            .await
        else {
            return Ok(());
        };
        tracing::info!(parent: &span, "became the leader");
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
                            tracing::error!(parent: &span, error = %e, "cannot renew the Lease");
                        }
                        token.cancel();
                        let _ = work.await;
                        break Err(Error::LeadershipLost { namespace, name: name.to_owned() });
                    }
                },
            }
        };
        self.leader.set(0);
        // Hand over at once instead of making the next leader wait for expiry.
        if let Err(e) = manager.release().await {
            tracing::warn!(parent: &span, error = %e, "cannot release the Lease; it expires by itself");
        }
        outcome
    }

    /// Tries, with backoff, until the Lease is held; `None` on shutdown.
    async fn acquire(&self, namespace: &str, params: LeaseParams) -> Option<LeaseManager> {
        let mut backoff = Backoff::new();
        let mut manager = None;
        tracing::info!("waiting for leadership");
        loop {
            let attempt = match &manager {
                None => LeaseManager::new(
                    self.client.clone(),
                    self.component,
                    namespace,
                    params.clone(),
                    LeaseCreateMode::AutoCreate,
                )
                .await
                .map(|m| manager = Some(m)),
                Some(m) => tokio::select! {
                    () = self.shutdown.cancelled() => return None,
                    changed = m.changed() => match changed {
                        Ok(true) => return manager,
                        Ok(false) => Ok(()),
                        Err(e) => Err(e),
                    },
                },
            };
            if let Err(e) = attempt {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?delay, "cannot take part in leader election");
                if !Backoff::sleep(delay, self.shutdown).await {
                    return None;
                }
            }
        }
    }
}
