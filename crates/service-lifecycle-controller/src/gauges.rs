//! Gauges of state, from watches of every ManagedService and Stack,
//! recounted on every change:
//! - `managed_services{phase}`: ManagedServices in each phase (a service
//!   not yet given a phase is not counted);
//! - `deletions_blocked{kind, reason}`: ManagedServices and Stacks being
//!   deleted whose finalizer has not finished, by their `Ready` reason
//!   (what they wait for: a confirmation, an approval, a Lock, a failure).
//!
//! Only the leader reports them, so that replicas are never summed twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource};
use navique_api::conditions;
use navique_api::constants::condition_types::READY;
use navique_api::core::Stack;
use navique_api::services::{ManagedService, ServicePhase};
use navique_runtime::Component;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct BlockedLabels {
    kind: &'static str,
    reason: String,
}

/// The gauges, registered under the component's prefix.
#[derive(Clone)]
pub struct StateGauges {
    services: Family<PhaseLabels, Gauge>,
    blocked: Family<BlockedLabels, Gauge>,
    /// Every `deletions_blocked` series shown so far, so that one whose
    /// objects are gone reads 0 rather than its last count.
    shown: Arc<Mutex<BTreeSet<BlockedLabels>>>,
}

impl StateGauges {
    pub fn register(component: &Component) -> Self {
        let gauges = Self {
            services: Family::default(),
            blocked: Family::default(),
            shown: Arc::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "managed_services",
                "ManagedServices by status.phase (Provisioning, Ready, Deleting, Failed)",
                gauges.services.clone(),
            );
            registry.register(
                "deletions_blocked",
                "ManagedServices and Stacks being deleted and not yet gone, by kind and Ready reason",
                gauges.blocked.clone(),
            );
        });
        gauges
    }

    fn set_phases(&self, counts: &BTreeMap<&'static str, i64>) {
        for (phase, count) in counts {
            self.services
                .get_or_create(&PhaseLabels { phase })
                .set(*count);
        }
    }

    fn set_blocked(&self, kind: &'static str, counts: BTreeMap<String, i64>) {
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        for labels in shown.iter().filter(|l| l.kind == kind) {
            if !counts.contains_key(&labels.reason) {
                self.blocked.get_or_create(labels).set(0);
            }
        }
        for (reason, count) in counts {
            let labels = BlockedLabels { kind, reason };
            self.blocked.get_or_create(&labels).set(count);
            shown.insert(labels);
        }
    }
}

/// How many of `phases` are in each phase, every phase listed.
fn count_phases<'a>(
    phases: impl IntoIterator<Item = Option<ServicePhase>>,
) -> BTreeMap<&'a str, i64> {
    let mut counts: BTreeMap<&str, i64> =
        ServicePhase::ALL.iter().map(|p| (p.as_str(), 0)).collect();
    for phase in phases.into_iter().flatten() {
        *counts.entry(phase.as_str()).or_default() += 1;
    }
    counts
}

/// The reason each object being deleted (`Some` conditions) has not
/// finished, counted; `Unknown` for one with no `Ready` condition yet.
fn count_blocked<'a>(
    deleting: impl IntoIterator<Item = Option<&'a [Condition]>>,
) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for conditions in deleting.into_iter().flatten() {
        let reason = conditions::find(conditions, READY)
            .map(|c| c.reason.as_str())
            .filter(|r| !r.is_empty())
            .unwrap_or("Unknown");
        *counts.entry(reason.to_owned()).or_default() += 1;
    }
    counts
}

/// `object`'s conditions (none yet: empty) while it is being deleted.
fn deleting<'a>(
    object: &impl Resource,
    conditions: Option<&'a [Condition]>,
) -> Option<&'a [Condition]> {
    object.meta().deletion_timestamp.as_ref()?;
    Some(conditions.unwrap_or_default())
}

/// Keeps the gauges current until `token` is cancelled.
pub async fn run(client: Client, gauges: StateGauges, token: CancellationToken) {
    let services = {
        let gauges = gauges.clone();
        recount(
            Api::<ManagedService>::all(client.clone()),
            move |all: &[Arc<ManagedService>]| {
                gauges.set_phases(&count_phases(
                    all.iter().map(|s| s.status.as_ref().and_then(|s| s.phase)),
                ));
                gauges.set_blocked(
                    "ManagedService",
                    count_blocked(
                        all.iter()
                            .map(|s| deleting(&**s, s.status.as_ref().map(|s| &s.conditions[..]))),
                    ),
                );
            },
        )
    };
    let stacks = recount(Api::<Stack>::all(client), move |all: &[Arc<Stack>]| {
        gauges.set_blocked(
            "Stack",
            count_blocked(
                all.iter()
                    .map(|s| deleting(&**s, s.status.as_ref().map(|s| &s.conditions[..]))),
            ),
        );
    });
    tokio::select! {
        _ = futures::future::join(services, stacks) => {}
        () = token.cancelled() => {}
    }
}

/// Watches every `K` and calls `set` with all of them on each change.
async fn recount<K>(api: Api<K>, set: impl Fn(&[Arc<K>]))
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (store, writer) = reflector::store::<K>();
    reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .for_each(|event| {
            if let Err(e) = event {
                tracing::debug!(error = %e, kind = K::kind(&()).as_ref(), "watch for the state gauges failed; retrying");
            }
            set(&store.state());
            async {}
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn every_phase_is_counted_even_when_empty() {
        let counts = count_phases([
            Some(ServicePhase::Ready),
            Some(ServicePhase::Ready),
            Some(ServicePhase::Deleting),
            None,
        ]);
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            vec![
                ("Deleting", 1),
                ("Failed", 0),
                ("Provisioning", 0),
                ("Ready", 2)
            ]
        );
    }

    #[test]
    fn blocked_deletions_are_counted_by_ready_reason() {
        let ready = |reason: &str| {
            vec![conditions::ready(
                false,
                reason,
                "",
                None,
                Timestamp::UNIX_EPOCH,
            )]
        };
        let confirm = ready("DeletionConfirmationNeeded");
        let blocked = ready("DeletionBlocked");
        let counts = count_blocked([
            Some(&confirm[..]),
            Some(&confirm[..]),
            Some(&blocked[..]),
            None,
            Some(&[][..]),
        ]);
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            vec![
                ("DeletionBlocked".to_owned(), 1),
                ("DeletionConfirmationNeeded".to_owned(), 2),
                ("Unknown".to_owned(), 1)
            ]
        );
    }
}
