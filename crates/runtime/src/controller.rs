//! What every controller's reconcile loop shares, so that each component
//! exports the same metrics and retries the same way: the counters
//! `<kind>_reconciles_total` and `<kind>_reconcile_errors_total{error}`, the
//! histogram `<kind>_reconcile_duration_seconds`, the per-object backoff of
//! failures, and how an outcome is logged.

use std::future::Future;
use std::time::Instant;

use kube::Resource;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Unit;

use crate::{Component, FailureBackoff, intent, one_line};

/// A reconcile's error, as the metrics name it.
pub trait ReconcileError: std::error::Error + 'static {
    /// The `error` label of `reconcile_errors_total`: one fixed word per
    /// cause, so that the series stay few.
    fn metric_label(&self) -> &'static str;
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: &'static str,
}

/// One controller's reconcile metrics.
#[derive(Clone)]
pub struct ReconcileMetrics {
    reconciles: Counter,
    errors: Family<ErrorLabels, Counter>,
    duration: Histogram,
}

/// Metrics not registered anywhere (for tests that drive a reconcile).
impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self {
            reconciles: Counter::default(),
            errors: Family::default(),
            // 1 ms to 16 s.
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
        }
    }
}

impl ReconcileMetrics {
    /// Registers the three metrics under the component's prefix, each
    /// name starting with `prefix_` (nothing when `prefix` is empty);
    /// `kind` names what is reconciled in their help.
    pub fn register(component: &Component, prefix: &str, kind: &str) -> Self {
        let metrics = Self::default();
        let name = |metric: &str| {
            if prefix.is_empty() {
                metric.to_owned()
            } else {
                format!("{prefix}_{metric}")
            }
        };
        component.register_metrics(|registry| {
            registry.register(
                name("reconciles"),
                format!("{kind} reconciliations run"),
                metrics.reconciles.clone(),
            );
            registry.register(
                name("reconcile_errors"),
                format!("{kind} reconciliations that failed, by error"),
                metrics.errors.clone(),
            );
            registry.register_with_unit(
                name("reconcile_duration"),
                format!("Time a {kind} reconciliation took"),
                Unit::Seconds,
                metrics.duration.clone(),
            );
        });
        metrics
    }

    fn count_error(&self, error: &impl ReconcileError) {
        self.errors
            .get_or_create(&ErrorLabels {
                error: error.metric_label(),
            })
            .inc();
    }
}

/// Counts, times and logs one controller's reconciles, and spaces out the
/// retries of each failing object.
pub struct Tracker<K: Resource<DynamicType = ()>> {
    metrics: ReconcileMetrics,
    failures: FailureBackoff<ObjectRef<K>>,
    /// Whether a failing object waits out its backoff against early
    /// wake-ups until what it asks for changes.
    gated: bool,
}

impl<K: Resource<DynamicType = ()>> Tracker<K> {
    /// A failing object is retried on its backoff, not on the echo of its
    /// own status write; a change of what it asks for goes at once.
    pub fn new(metrics: ReconcileMetrics) -> Self {
        Self {
            metrics,
            failures: FailureBackoff::default(),
            gated: true,
        }
    }

    /// Every wake-up of a failing object reconciles it: for kinds woken
    /// by changes of other objects (a Lock, by its target's).
    pub fn ungated(metrics: ReconcileMetrics) -> Self {
        Self {
            gated: false,
            ..Self::new(metrics)
        }
    }

    /// Runs one reconcile of `object`, counted, timed and logged.
    pub async fn reconcile<E>(
        &self,
        object: &K,
        work: impl Future<Output = Result<Action, E>>,
    ) -> Result<Action, E> {
        let reference = ObjectRef::from_obj(object);
        if self.gated
            && let Some(wait) = self.failures.waiting(&reference, intent(object))
        {
            return Ok(Action::requeue(wait));
        }
        self.metrics.reconciles.inc();
        let started = Instant::now();
        let result = work.await;
        let took = started.elapsed();
        self.metrics.duration.observe(took.as_secs_f64());
        tracing::debug!(object = %reference, ?took, ok = result.is_ok(), "reconciled");
        if result.is_ok() {
            self.failures.succeeded(&reference);
        }
        result
    }

    /// Counts a failure that a reconcile reports in the object's status
    /// and retries on its own schedule, rather than returning it.
    pub fn count_failure(&self, error: &impl ReconcileError) {
        self.metrics.count_error(error);
    }

    /// The error policy: counts the failure and retries with backoff.
    pub fn failed(&self, object: &K, error: &impl ReconcileError) -> Action {
        self.metrics.count_error(error);
        let reference = ObjectRef::from_obj(object);
        let delay = if self.gated {
            self.failures.failed_with(reference.clone(), intent(object))
        } else {
            self.failures.failed(reference.clone())
        };
        tracing::warn!(object = %reference, error = %one_line(error), retry_in = ?delay, "reconcile failed");
        Action::requeue(delay)
    }
}

/// Logs a controller's outcomes that are not reconcile failures (those are
/// logged by [`Tracker::failed`]).
pub async fn log_outcome<K, E>(
    result: Result<(ObjectRef<K>, Action), controller::Error<E, watcher::Error>>,
) where
    K: Resource<DynamicType = ()>,
    E: std::error::Error + 'static,
{
    match result {
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(%object, "woken object no longer exists");
        }
        Err(e) => tracing::warn!(kind = %K::kind(&()), error = %one_line(&e), "watch failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[derive(Debug, thiserror::Error)]
    #[error("the server said no")]
    struct Refused;

    impl ReconcileError for Refused {
        fn metric_label(&self) -> &'static str {
            "refused"
        }
    }

    fn config_map(generation: i64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("team".into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn errors(metrics: &ReconcileMetrics) -> u64 {
        metrics
            .errors
            .get_or_create(&ErrorLabels { error: "refused" })
            .get()
    }

    #[tokio::test]
    async fn a_failing_object_waits_out_its_backoff_until_it_asks_for_something_else() {
        let metrics = ReconcileMetrics::default();
        let tracker = Tracker::<ConfigMap>::new(metrics.clone());
        let object = config_map(1);
        let failed = tracker.reconcile(&object, async { Err::<Action, _>(Refused) });
        let error = failed.await.unwrap_err();
        assert_ne!(tracker.failed(&object, &error), Action::await_change());
        assert_eq!(errors(&metrics), 1);
        // Woken again at once (its own status write): not run.
        let early: Result<Action, Refused> = tracker
            .reconcile(&object, async { panic!("ran during its backoff") })
            .await;
        assert!(matches!(early, Ok(Action { .. })));
        assert_eq!(metrics.reconciles.get(), 1);
        // A new generation goes at once.
        tracker
            .reconcile(&config_map(2), async {
                Ok::<_, Refused>(Action::await_change())
            })
            .await
            .unwrap();
        assert_eq!(metrics.reconciles.get(), 2);
        tracker.count_failure(&Refused);
        assert_eq!(errors(&metrics), 2);
    }

    #[tokio::test]
    async fn an_ungated_tracker_runs_every_wake_up() {
        let metrics = ReconcileMetrics::default();
        let tracker = Tracker::<ConfigMap>::ungated(metrics.clone());
        let object = config_map(1);
        tracker.failed(&object, &Refused);
        tracker
            .reconcile(&object, async { Ok::<_, Refused>(Action::await_change()) })
            .await
            .unwrap();
        assert_eq!(metrics.reconciles.get(), 1);
    }
}
