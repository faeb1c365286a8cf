//! Lease-based leader election: only the replica holding the Lease runs the
//! reconcilers, and it stops them the moment it cannot prove it still holds
//! it, so two replicas never reconcile at once.

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseParams};
use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::retry::Backoff;
use crate::{Error, LeaderElectionArgs};

/// This replica's hold on the leader Lease, handed to the work it guards:
/// a token cancelled when the hold is lost, and [`Leadership::confirm`] for
/// the moments a stale leader must not act, such as dropping a database.
#[derive(Clone)]
pub struct Leadership {
    token: CancellationToken,
    lease: Option<Arc<HeldLease>>,
}

struct HeldLease {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
}

impl Leadership {
    /// Leadership without election (a single replica, or a test): only the
    /// token can end it.
    pub fn unelected(token: CancellationToken) -> Self {
        Self { token, lease: None }
    }

    /// Cancelled on shutdown or when the Lease is lost.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Confirms, by reading the Lease now, that this replica still holds it
    /// and that it has not expired. The renewal loop notices a lost Lease
    /// only at its next renewal; a destructive step calls this right before
    /// it acts, so that a replica paused past its Lease (a long GC, a
    /// stopped VM) never acts alongside the new leader.
    pub async fn confirm(&self) -> Result<(), Error> {
        let lost = |lease: &HeldLease| Error::LeadershipLost {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
        };
        if self.token.is_cancelled() {
            return Err(match &self.lease {
                Some(lease) => lost(lease),
                None => Error::ShuttingDown,
            });
        }
        let Some(lease) = &self.lease else {
            return Ok(());
        };
        let stored = lease
            .api
            .get(&lease.name)
            .await
            .map_err(|source| Error::LeaseRead {
                namespace: lease.namespace.clone(),
                name: lease.name.clone(),
                source,
            })?;
        if holds(&stored, &lease.identity, Timestamp::now()) {
            Ok(())
        } else {
            Err(lost(lease))
        }
    }
}

/// Whether nobody holds the Lease: its holder released it (or never took it).
fn is_released(lease: &Lease) -> bool {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        .is_none_or(str::is_empty)
}

/// Resolves when a watch of the Lease shows it released. kube-lease-manager
/// makes a standby sleep until the holder's Lease would expire; a leader
/// that shuts down releases it at once, and this lets the standby see that.
async fn until_released(events: &mut (impl Stream<Item = Result<Lease, watcher::Error>> + Unpin)) {
    while let Some(event) = events.next().await {
        match event {
            Ok(lease) if is_released(&lease) => return,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "Lease watch failed; retrying"),
        }
    }
    // The stream never ends; should it, expiry still hands the Lease over.
    std::future::pending::<()>().await;
}

/// Whether `identity` holds the Lease at `now`: it is the holder and the
/// last renewal plus the duration is still ahead.
fn holds(lease: &Lease, identity: &str, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    spec.holder_identity.as_deref() == Some(identity)
        && renewed.0 + SignedDuration::from_secs(seconds.into()) > now
}

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
        F: FnOnce(Leadership) -> Fut,
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
        let work = work(Leadership {
            token: token.clone(),
            lease: Some(Arc::new(HeldLease {
                api: Api::namespaced(self.client.clone(), &namespace),
                namespace: namespace.clone(),
                name: name.to_owned(),
                identity: identity.clone(),
            })),
        });
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
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.component));
        let mut events = watcher(
            Api::<Lease>::namespaced(self.client.clone(), namespace),
            config,
        )
        .default_backoff()
        .applied_objects()
        .boxed();
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
                    // The manager trusts its copy until the holder's expiry;
                    // a new one reads the released Lease and takes it.
                    () = until_released(&mut events) => {
                        tracing::debug!("the Lease was released");
                        manager = None;
                        Ok(())
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: Timestamp, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(seconds),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_without_a_holder_is_released() {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        assert!(!is_released(&lease("pod-a", now, 15)));
        assert!(is_released(&Lease::default()));
        assert!(is_released(&Lease {
            spec: Some(LeaseSpec::default()),
            ..Default::default()
        }));
        assert!(is_released(&lease("", now, 15)));
    }

    #[test]
    fn the_holder_holds_a_lease_until_it_expires() {
        let renewed: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        let lease = lease("pod-a", renewed, 15);
        let at = |seconds| renewed + SignedDuration::from_secs(seconds);
        assert!(holds(&lease, "pod-a", at(14)));
        assert!(!holds(&lease, "pod-a", at(15)), "expired");
        assert!(!holds(&lease, "pod-b", at(1)), "another holder");
        assert!(!holds(&Lease::default(), "pod-a", at(1)), "never held");
    }
}
