//! The status of the ServiceBackup that describes a snapshot, written with
//! server-side apply as field manager `backup-runner`. backup-runner never
//! creates records; it fills in those that exist.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use navique_api::conditions;
use navique_api::grpc::snapshot::v1::{DumpProgress, Phase, Snapshot, TestRestore};
use navique_api::services::{
    BackupPhase, BackupProgress, ServiceBackup, ServiceBackupStatus, TestRestoreResult,
    TestRestoreStatus,
};

use crate::Error;
use crate::layout::BackupKey;

pub const FIELD_MANAGER: &str = "backup-runner";
const ATTEMPTS: u32 = 4;

/// The record's phase for a snapshot phase: VERIFYING is still Running,
/// since only Completed promises a verified archive.
pub fn backup_phase(phase: Phase) -> BackupPhase {
    match phase {
        Phase::Unspecified | Phase::Pending => BackupPhase::Pending,
        Phase::Running | Phase::Verifying => BackupPhase::Running,
        Phase::Completed => BackupPhase::Completed,
        Phase::Failed => BackupPhase::Failed,
    }
}

fn time(timestamp: Option<&prost_types::Timestamp>) -> Option<Time> {
    let timestamp = timestamp?;
    Timestamp::new(timestamp.seconds, timestamp.nanos)
        .ok()
        .map(Time)
}

/// `bytes` for people, in binary units: `12 B`, `1.5 KiB`, `220.5 MiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Precision is lost only past 2^53 bytes, far beyond one decimal.
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The status that describes `snapshot`; location, size and checksum only
/// once it is Completed.
pub fn backup_status(snapshot: &Snapshot, message: &str) -> ServiceBackupStatus {
    let phase = backup_phase(snapshot.phase());
    let completed = phase == BackupPhase::Completed;
    let terminal = completed || phase == BackupPhase::Failed;
    ServiceBackupStatus {
        phase: Some(phase),
        location: completed.then(|| snapshot.location.clone()),
        size_bytes: completed.then(|| i64::try_from(snapshot.size_bytes).unwrap_or(i64::MAX)),
        size: completed.then(|| human_size(snapshot.size_bytes)),
        checksum: completed.then(|| format!("sha256:{}", snapshot.sha256)),
        start_time: time(snapshot.started_at.as_ref()),
        completion_time: if terminal {
            time(snapshot.completed_at.as_ref())
        } else {
            None
        },
        expiration_time: None,
        message: (!message.is_empty()).then(|| message.to_owned()),
        progress: snapshot.progress.as_ref().map(|p| {
            // The dump ended once the attempt verifies or completes.
            let dumped = matches!(snapshot.phase(), Phase::Verifying | Phase::Completed);
            progress_status(p, dumped)
        }),
        test_restore: snapshot.test_restore.as_ref().map(test_restore_status),
        conditions: Vec::new(),
    }
}

fn progress_status(progress: &DumpProgress, dumped: bool) -> BackupProgress {
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    BackupProgress {
        dumped_bytes: int(progress.dumped_bytes),
        stored_bytes: int(progress.stored_bytes),
        database_bytes: (progress.database_bytes > 0).then(|| int(progress.database_bytes)),
        tables_done: int(progress.tables_done),
        tables: int(progress.tables),
        summary: crate::progress::summary(progress, dumped),
    }
}

fn test_restore_status(result: &TestRestore) -> TestRestoreStatus {
    TestRestoreStatus {
        result: if result.passed {
            TestRestoreResult::Passed
        } else {
            TestRestoreResult::Failed
        },
        tables: i64::try_from(result.tables).unwrap_or(i64::MAX),
        rows: i64::try_from(result.rows).unwrap_or(i64::MAX),
        message: (!result.message.is_empty()).then(|| result.message.clone()),
        completion_time: time(result.completed_at.as_ref()),
    }
}

/// `status` as written on `record`: with the `expirationTime` that its
/// retention gives it and its `Ready` condition, which is True once the
/// backup is Completed and False otherwise, with the phase as its reason
/// and the status message as its message. The condition keeps the record's
/// transition time while its status holds.
pub fn for_record(
    record: &ServiceBackup,
    status: &ServiceBackupStatus,
    now: Timestamp,
) -> ServiceBackupStatus {
    let described = ServiceBackup {
        status: Some(status.clone()),
        ..record.clone()
    };
    let phase = status.phase.unwrap_or(BackupPhase::Pending);
    let mut conditions = record
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::upsert(
        &mut conditions,
        conditions::ready(
            phase == BackupPhase::Completed,
            phase.as_str(),
            status.message.clone().unwrap_or_default(),
            record.metadata.generation,
            now,
        ),
    );
    ServiceBackupStatus {
        expiration_time: described.expiration().ok().flatten().map(Time),
        conditions,
        ..status.clone()
    }
}

#[derive(Clone)]
pub struct StatusWriter {
    client: Client,
}

impl StatusWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// Writes `status` on the ServiceBackup `backup.backup_name` if it
    /// exists and describes this service; false when there is none.
    pub async fn write(
        &self,
        backup: &BackupKey,
        status: &ServiceBackupStatus,
    ) -> Result<bool, Error> {
        let api = Api::<ServiceBackup>::namespaced(self.client.clone(), &backup.namespace);
        let name = &backup.backup_name;
        let Some(record) = api.get_opt(name).await.map_err(Error::kube(format!(
            "read ServiceBackup {}/{name}",
            backup.namespace
        )))?
        else {
            return Ok(false);
        };
        let reference = &record.spec.service_ref;
        if reference.name != backup.service
            || reference
                .uid
                .as_deref()
                .is_some_and(|uid| uid != backup.uid)
        {
            tracing::warn!(
                record = %name,
                service = %backup.service_display(),
                "the ServiceBackup of this name describes another service; not writing its status"
            );
            return Ok(false);
        }
        self.apply(
            &backup.namespace,
            name,
            &for_record(&record, status, Timestamp::now()),
        )
        .await
    }

    /// Server-side applies `status` to the ServiceBackup `namespace/name`;
    /// false when it does not exist.
    pub async fn apply(
        &self,
        namespace: &str,
        name: &str,
        status: &ServiceBackupStatus,
    ) -> Result<bool, Error> {
        let api = Api::<ServiceBackup>::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({
            "apiVersion": "services.kube-dc.com/v1alpha1",
            "kind": "ServiceBackup",
            "status": status,
        });
        match api
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(response)) if response.code == 404 => Ok(false),
            Err(e) => Err(Error::kube(format!(
                "write the status of ServiceBackup {namespace}/{name}"
            ))(e)),
        }
    }

    /// [`Self::write`], retried with backoff; a lasting failure is logged
    /// (the manual controller and the requester heal it by asking again).
    pub async fn write_retrying(&self, backup: &BackupKey, status: &ServiceBackupStatus) {
        let mut delay = Duration::from_millis(500);
        for attempt in 1..=ATTEMPTS {
            match self.write(backup, status).await {
                Ok(_) => return,
                Err(e) if attempt == ATTEMPTS => {
                    tracing::warn!(error = %navique_runtime::one_line(&e), "giving up writing the ServiceBackup status");
                }
                Err(e) => {
                    tracing::debug!(error = %e, "retrying the ServiceBackup status");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(phase: Phase) -> Snapshot {
        Snapshot {
            phase: phase as i32,
            location: "s3://b/k.dump".into(),
            size_bytes: 12,
            sha256: "ab".into(),
            started_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            completed_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_060,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn phases_map_to_the_record_phases() {
        assert_eq!(backup_phase(Phase::Pending), BackupPhase::Pending);
        assert_eq!(backup_phase(Phase::Running), BackupPhase::Running);
        assert_eq!(backup_phase(Phase::Verifying), BackupPhase::Running);
        assert_eq!(backup_phase(Phase::Completed), BackupPhase::Completed);
        assert_eq!(backup_phase(Phase::Failed), BackupPhase::Failed);
    }

    #[test]
    fn only_a_completed_snapshot_reports_where_and_what_it_stored() {
        let done = backup_status(&snapshot(Phase::Completed), "");
        assert_eq!(done.location.as_deref(), Some("s3://b/k.dump"));
        assert_eq!(done.size_bytes, Some(12));
        assert_eq!(done.checksum.as_deref(), Some("sha256:ab"));
        assert!(done.completion_time.is_some());
        assert_eq!(done.message, None);

        let running = backup_status(&snapshot(Phase::Verifying), "reading back");
        assert_eq!(running.phase, Some(BackupPhase::Running));
        assert_eq!(running.location, None);
        assert_eq!(running.checksum, None);
        assert_eq!(running.completion_time, None);
        assert_eq!(running.message.as_deref(), Some("reading back"));

        let failed = backup_status(&snapshot(Phase::Failed), "pg_dump failed");
        assert_eq!(failed.size_bytes, None);
        assert_eq!(failed.size, None);
        assert!(failed.completion_time.is_some());
    }

    #[test]
    fn progress_reads_100_percent_once_the_dump_ended_and_test_restores_their_result() {
        let mut running = snapshot(Phase::Running);
        running.progress = Some(DumpProgress {
            dumped_bytes: 300,
            stored_bytes: 80,
            database_bytes: 1000,
            tables_done: 1,
            tables: 3,
        });
        let status = backup_status(&running, "");
        let progress = status.progress.unwrap();
        assert_eq!(progress.summary, "30% 1/3 tables");
        assert_eq!(progress.database_bytes, Some(1000));
        let mut verifying = running.clone();
        verifying.phase = Phase::Verifying as i32;
        if let Some(progress) = verifying.progress.as_mut() {
            progress.tables_done = 3;
        }
        assert_eq!(
            backup_status(&verifying, "").progress.unwrap().summary,
            "100% 3/3 tables"
        );
        verifying.test_restore = Some(TestRestore {
            passed: false,
            tables: 3,
            rows: 7,
            message: "row counts differ: ...".into(),
            completed_at: None,
        });
        let failed = backup_status(&verifying, "").test_restore.unwrap();
        assert_eq!(failed.result, TestRestoreResult::Failed);
        assert_eq!((failed.tables, failed.rows), (3, 7));
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(231_211_008), "220.5 MiB");
        assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
        assert_eq!(human_size(u64::MAX), "16.0 EiB");
        let done = backup_status(&snapshot(Phase::Completed), "");
        assert_eq!(done.size.as_deref(), Some("12 B"));
    }

    fn record() -> ServiceBackup {
        use navique_api::services::{BackupOrigin, ServiceBackupSpec, ServiceRef};
        let mut record = ServiceBackup::new(
            "b",
            ServiceBackupSpec {
                service_ref: ServiceRef {
                    name: "db".into(),
                    uid: None,
                },
                origin: BackupOrigin::Manual,
                retention: None,
            },
        );
        record.metadata.generation = Some(1);
        record
    }

    fn ready(status: &ServiceBackupStatus) -> (&str, &str, &str, Timestamp) {
        let ready = conditions::find(&status.conditions, "Ready").unwrap();
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str(),
            ready.last_transition_time.0,
        )
    }

    #[test]
    fn ready_is_true_once_completed_and_false_with_the_phase_before() {
        let at = |s| Timestamp::from_second(s).unwrap();
        let mut record = record();
        let running = for_record(
            &record,
            &backup_status(&snapshot(Phase::Running), "dumping orders-db"),
            at(10),
        );
        assert_eq!(
            ready(&running),
            ("False", "Running", "dumping orders-db", at(10))
        );
        record.status = Some(running);
        let verifying = for_record(
            &record,
            &backup_status(&snapshot(Phase::Verifying), "reading back"),
            at(20),
        );
        assert_eq!(
            ready(&verifying),
            ("False", "Running", "reading back", at(10)),
            "still False: the transition time holds"
        );
        record.status = Some(verifying);
        let done = for_record(
            &record,
            &backup_status(&snapshot(Phase::Completed), ""),
            at(30),
        );
        assert_eq!(ready(&done), ("True", "Completed", "", at(30)));
        let failed = for_record(
            &record,
            &backup_status(&snapshot(Phase::Failed), "pg_dump failed"),
            at(40),
        );
        assert_eq!(
            ready(&failed),
            ("False", "Failed", "pg_dump failed", at(10))
        );
    }
}
