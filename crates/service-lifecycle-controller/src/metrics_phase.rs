//! The `managed_services{phase}` gauge: how many ManagedServices are in
//! each phase, from a watch of them all, recounted on every change. Only
//! the leader reports it, so that replicas are never summed twice; a
//! service not yet given a phase is not counted.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use navique_api::services::{ManagedService, ServicePhase};
use navique_runtime::Component;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

/// The gauge, registered under the component's prefix.
#[derive(Clone)]
pub struct PhaseMetrics {
    services: Family<PhaseLabels, Gauge>,
}

impl PhaseMetrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self {
            services: Family::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "managed_services",
                "ManagedServices by status.phase (Provisioning, Ready, Deleting, Failed)",
                metrics.services.clone(),
            );
        });
        metrics
    }

    fn set(&self, counts: &BTreeMap<&'static str, i64>) {
        for (phase, count) in counts {
            self.services
                .get_or_create(&PhaseLabels { phase })
                .set(*count);
        }
    }
}

/// How many of `phases` are in each phase, every phase listed.
fn count<'a>(phases: impl IntoIterator<Item = Option<ServicePhase>>) -> BTreeMap<&'a str, i64> {
    let mut counts: BTreeMap<&str, i64> =
        ServicePhase::ALL.iter().map(|p| (p.as_str(), 0)).collect();
    for phase in phases.into_iter().flatten() {
        *counts.entry(phase.as_str()).or_default() += 1;
    }
    counts
}

/// Keeps the gauge current until `token` is cancelled.
pub async fn run(client: Client, metrics: PhaseMetrics, token: CancellationToken) {
    let (store, writer) = reflector::store::<ManagedService>();
    let events = reflector(
        writer,
        watcher(
            Api::<ManagedService>::all(client),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let recount = events.for_each(|event| {
        if let Err(e) = event {
            tracing::debug!(error = %e, "ManagedService watch for the phase gauge failed; retrying");
        }
        let counts = count(
            store
                .state()
                .iter()
                .map(|service| service.status.as_ref().and_then(|s| s.phase)),
        );
        metrics.set(&counts);
        async {}
    });
    tokio::select! {
        () = recount => {}
        () = token.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_is_counted_even_when_empty() {
        let counts = count([
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
}
