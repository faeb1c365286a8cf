use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ServiceRef;

/// Desired state of a ServiceBackup.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ServiceBackup",
    doc = "One backup of a ManagedService. A record has no owner: it outlives its service and goes with its Project. Its spec never changes.",
    namespaced,
    status = "ServiceBackupStatus",
    shortname = "sbk",
    category = "navique",
    printcolumn(
        name = "Service",
        type_ = "string",
        json_path = ".spec.serviceRef.name"
    ),
    printcolumn(name = "Origin", type_ = "string", json_path = ".spec.origin"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Size", type_ = "string", json_path = ".status.size"),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress.summary"
    ),
    printcolumn(
        name = "Completed",
        type_ = "date",
        json_path = ".status.completionTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("a ServiceBackup's spec is immutable"))]
#[serde(rename_all = "camelCase")]
pub struct ServiceBackupSpec {
    /// The service backed up.
    pub service_ref: ServiceRef,
    /// Why the backup was taken: `Manual` (a person asked), `Scheduled` (the
    /// plan's schedule) or `Final` (before a `SnapshotAndDelete` removal).
    #[serde(default)]
    pub origin: BackupOrigin,
    /// How long the record and its archive are kept once the backup has
    /// ended (`Completed` or `Failed`), as a duration such as `30d` or `720h`; then
    /// backup-runner deletes the archive and the record. Unset: kept until
    /// the Project goes. A `Final` backup is never removed while its
    /// service still exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::duration::PATTERN))]
    pub retention: Option<String>,
}

/// Why a backup was taken.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackupOrigin {
    #[default]
    Manual,
    Scheduled,
    Final,
}

impl BackupOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "Manual",
            Self::Scheduled => "Scheduled",
            Self::Final => "Final",
        }
    }
}

/// Progress and result of a backup.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBackupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// Where the archive is stored, e.g. `s3://bucket/my-project/orders-db/...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Size of the stored archive in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// [`Self::size_bytes`] for people, in binary units such as `220.5 MiB`
    /// (the SIZE column: printer columns cannot compute it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// `sha256:<hex>` of the stored archive, verified by reading it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// When `spec.retention` ends: `completionTime` plus the retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<Time>,
    /// Why the backup failed, or what it is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How far the dump is (while it runs) or went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<BackupProgress>,
    /// The test restore, when the backup was verified with `Restore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_restore: Option<TestRestoreStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// How far a dump is, written while it runs (every `--progress-interval`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupProgress {
    /// Bytes pg_dump wrote, before compression.
    pub dumped_bytes: i64,
    /// Bytes stored, after compression.
    pub stored_bytes: i64,
    /// `pg_database_size` when the dump started: the estimate
    /// [`Self::summary`]'s percent is of (a dump holds no indexes, so it
    /// ends below it). Absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_bytes: Option<i64>,
    /// Tables whose rows are dumped, of [`Self::tables`].
    pub tables_done: i64,
    pub tables: i64,
    /// The PROGRESS column, e.g. `41% 3/12 tables` (100% once dumped).
    pub summary: String,
}

/// A test restore into a scratch database, compared table by table with
/// the row counts read inside the dump's snapshot.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TestRestoreStatus {
    /// `Passed` or `Failed`.
    pub result: TestRestoreResult,
    /// Tables compared.
    pub tables: i64,
    /// Rows they held, in the source's snapshot and once restored.
    pub rows: i64,
    /// What differed, or why the restore failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TestRestoreResult {
    #[default]
    Passed,
    Failed,
}

/// Phase of a backup. Only `Completed` backups were verified after upload.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupPhase {
    Pending,
    Running,
    Completed,
    Failed,
}

impl BackupPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Completed => "Completed",
            Self::Failed => "Failed",
        }
    }
}

impl ServiceBackup {
    /// When the record and its archive expire: the end of a finished
    /// backup plus `spec.retention`. None while it runs or without a
    /// retention; an error for a retention that is not a duration.
    pub fn expiration(&self) -> Result<Option<Timestamp>, crate::Error> {
        let Some(retention) = self.spec.retention.as_deref() else {
            return Ok(None);
        };
        let retention = crate::duration::parse("spec.retention", retention)?;
        let Some(status) = self.status.as_ref() else {
            return Ok(None);
        };
        let finished = matches!(
            status.phase,
            Some(BackupPhase::Completed | BackupPhase::Failed)
        );
        let Some(Time(completed)) = status.completion_time.as_ref().filter(|_| finished) else {
            return Ok(None);
        };
        // At most ten years from a valid timestamp: always representable.
        let retention = SignedDuration::try_from(retention).unwrap_or(SignedDuration::MAX);
        Ok(completed.checked_add(retention).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        retention: Option<&str>,
        phase: BackupPhase,
        completed: Option<i64>,
    ) -> ServiceBackup {
        let mut backup = ServiceBackup::new(
            "b",
            ServiceBackupSpec {
                service_ref: ServiceRef {
                    name: "db".into(),
                    uid: None,
                },
                origin: BackupOrigin::Final,
                retention: retention.map(str::to_owned),
            },
        );
        backup.status = Some(ServiceBackupStatus {
            phase: Some(phase),
            completion_time: completed.map(|s| Time(Timestamp::from_second(s).unwrap())),
            ..Default::default()
        });
        backup
    }

    #[test]
    fn a_finished_backup_expires_its_retention_after_completion() {
        let at = |s| Some(Timestamp::from_second(s).unwrap());
        let completed = record(Some("1h30m"), BackupPhase::Completed, Some(1_000));
        assert_eq!(completed.expiration().unwrap(), at(1_000 + 5_400));
        let failed = record(Some("10s"), BackupPhase::Failed, Some(1_000));
        assert_eq!(failed.expiration().unwrap(), at(1_010));
    }

    #[test]
    fn running_or_unretained_backups_do_not_expire() {
        let running = record(Some("10s"), BackupPhase::Running, None);
        assert_eq!(running.expiration().unwrap(), None);
        let kept = record(None, BackupPhase::Completed, Some(1_000));
        assert_eq!(kept.expiration().unwrap(), None);
    }

    #[test]
    fn a_malformed_retention_names_the_field() {
        let bad = record(Some("30days"), BackupPhase::Completed, Some(1_000));
        assert_eq!(
            bad.expiration().unwrap_err().to_string(),
            "spec.retention: \"30days\" is not a duration such as 30d, 720h, 1h30m or 90s"
        );
    }
}
