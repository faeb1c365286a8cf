//! backup-runner's metrics, under the component's prefix
//! (`navique_backup_runner_`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use navique_api::services::{BackupPhase, ServiceBackup};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::Error;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    pub namespace: String,
    pub service: String,
}

#[derive(Clone)]
pub struct Metrics {
    pub started: Counter,
    pub completed: Counter,
    pub failed: Counter,
    pub uploaded: Counter,
    pub duration: Histogram,
    pub restores: Counter,
    pub restore_failures: Counter,
    pub expired: Counter,
    pub orphans_removed: Counter,
    pub failures: Family<FailureLabels, Counter>,
    pub last_success: Family<ServiceLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            started: Counter::default(),
            completed: Counter::default(),
            failed: Counter::default(),
            uploaded: Counter::default(),
            // 1 s to about 9 hours.
            duration: Histogram::new(exponential_buckets(1.0, 2.0, 16)),
            restores: Counter::default(),
            restore_failures: Counter::default(),
            expired: Counter::default(),
            orphans_removed: Counter::default(),
            failures: Family::default(),
            last_success: Family::default(),
        }
    }
}

impl Metrics {
    /// Counts a failed snapshot in `snapshots_failed` and, by the cause's
    /// [`Error::failure_reason`], in `snapshot_failures_total`.
    pub fn snapshot_failed(&self, error: &Error) {
        self.failed.inc();
        self.failures
            .get_or_create(&FailureLabels {
                reason: error.failure_reason(),
            })
            .inc();
    }

    /// Takes `record`'s completion into `last_successful_backup_timestamp_seconds`
    /// of its service when it is Completed and later than the one known.
    pub fn observe_record(&self, record: &ServiceBackup) {
        let Some(status) = record.status.as_ref() else {
            return;
        };
        let Some(Time(completed)) = status
            .completion_time
            .as_ref()
            .filter(|_| status.phase == Some(BackupPhase::Completed))
        else {
            return;
        };
        let labels = ServiceLabels {
            namespace: record.namespace().unwrap_or_default(),
            service: record.spec.service_ref.name.clone(),
        };
        let gauge = self.last_success.get_or_create(&labels);
        let seconds = completed.as_second();
        if seconds > gauge.get() {
            gauge.set(seconds);
        }
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "snapshots_started",
            "Snapshot attempts started (one per new idempotency key or retry of a failed one)",
            self.started.clone(),
        );
        registry.register(
            "snapshots_completed",
            "Snapshots stored and verified",
            self.completed.clone(),
        );
        registry.register(
            "snapshots_failed",
            "Snapshot attempts that failed",
            self.failed.clone(),
        );
        registry.register_with_unit(
            "uploaded",
            "Archive bytes sent to the object store",
            Unit::Bytes,
            self.uploaded.clone(),
        );
        registry.register_with_unit(
            "snapshot_duration",
            "Duration of snapshot attempts, from start to COMPLETED or FAILED",
            Unit::Seconds,
            self.duration.clone(),
        );
        registry.register("restores", "Restores started", self.restores.clone());
        registry.register(
            "restore_failures",
            "Restores that failed",
            self.restore_failures.clone(),
        );
        registry.register(
            "snapshot_failures",
            "Snapshot attempts that failed, by cause",
            self.failures.clone(),
        );
        registry.register_with_unit(
            "last_successful_backup_timestamp",
            "When the service's newest Completed ServiceBackup completed, as Unix time",
            Unit::Seconds,
            self.last_success.clone(),
        );
        registry.register(
            "backups_expired",
            "Backups whose retention ended: archive and record removed",
            self.expired.clone(),
        );
        registry.register(
            "orphaned_backup_objects_removed",
            "Store objects removed because their Project was gone for the grace",
            self.orphans_removed.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use navique_api::services::{BackupOrigin, ServiceBackupSpec, ServiceBackupStatus, ServiceRef};

    use super::*;

    fn record(phase: BackupPhase, completed: i64) -> ServiceBackup {
        let mut record = ServiceBackup::new(
            "b",
            ServiceBackupSpec {
                service_ref: ServiceRef {
                    name: "orders-db".into(),
                    uid: None,
                },
                origin: BackupOrigin::Scheduled,
                retention: None,
            },
        );
        record.metadata.namespace = Some("shop".into());
        record.status = Some(ServiceBackupStatus {
            phase: Some(phase),
            completion_time: Some(Time(Timestamp::from_second(completed).unwrap())),
            ..ServiceBackupStatus::default()
        });
        record
    }

    fn exposition(metrics: &Metrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn the_newest_completed_record_of_a_service_sets_its_last_success() {
        let metrics = Metrics::default();
        metrics.observe_record(&record(BackupPhase::Completed, 2_000));
        metrics.observe_record(&record(BackupPhase::Completed, 1_000));
        metrics.observe_record(&record(BackupPhase::Failed, 3_000));
        assert!(
            exposition(&metrics).contains(
                "last_successful_backup_timestamp_seconds{namespace=\"shop\",service=\"orders-db\"} 2000"
            ),
            "{}",
            exposition(&metrics)
        );
    }

    #[test]
    fn failures_are_counted_by_cause() {
        let metrics = Metrics::default();
        metrics.snapshot_failed(&Error::TooLarge { max: 1 });
        metrics.snapshot_failed(&Error::ShuttingDown);
        metrics.snapshot_failed(&Error::ShuttingDown);
        let text = exposition(&metrics);
        assert!(
            text.contains("snapshot_failures_total{reason=\"shutting_down\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("snapshot_failures_total{reason=\"too_large\"} 1"),
            "{text}"
        );
        assert!(text.contains("snapshots_failed_total 3"), "{text}");
    }
}
