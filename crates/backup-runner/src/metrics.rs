//! backup-runner's metrics, under the component's prefix
//! (`navique_backup_runner_`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

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
        }
    }
}

impl Metrics {
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
