//! Manual and scheduled backups: a ServiceBackup a person created (origin
//! `Manual`, the default) or the lifecycle controller recorded at a plan's
//! schedule tick (`Scheduled`) that has no final phase yet gets its
//! snapshot, under the key `<service uid>/manual/<record uid>` and named
//! after the record. Final records are requested over gRPC by the deletion
//! that needs them.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use navique_api::grpc::snapshot::v1::{Origin, Verification};
use navique_api::services::{BackupOrigin, BackupPhase, ServiceBackup, ServiceBackupStatus};
use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::engine::SnapshotRequest;
use crate::layout::{BackupKey, manual_key};
use crate::snapshots::{Snapshots, is_terminal};
use crate::status::{backup_status, for_record};

/// How often an unfinished record is looked at again, so that a status
/// write lost to an API outage is made good.
const RECHECK: Duration = Duration::from_secs(60);
/// How long shutdown waits for reconciles in progress.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Whether the manual-backup controller takes a snapshot for `backup`.
pub fn wants_snapshot(backup: &ServiceBackup) -> bool {
    let phase = backup.status.as_ref().and_then(|s| s.phase);
    matches!(
        backup.spec.origin,
        BackupOrigin::Manual | BackupOrigin::Scheduled
    ) && !matches!(phase, Some(BackupPhase::Completed | BackupPhase::Failed))
        && backup.uid().is_some()
        && backup.namespace().is_some()
}

struct Context {
    snapshots: Arc<Snapshots>,
    /// Every wake-up of a failing record runs: its retry is what the
    /// backoff spaces out.
    tracker: Tracker<ServiceBackup>,
}

/// Runs until `shutdown`.
pub async fn run(
    client: Client,
    snapshots: Arc<Snapshots>,
    metrics: ReconcileMetrics,
    shutdown: CancellationToken,
) {
    let context = Arc::new(Context {
        snapshots,
        tracker: Tracker::ungated(metrics),
    });
    let controller = Controller::new(
        Api::<ServiceBackup>::all(client),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(shutdown.clone().cancelled_owned())
    .run(reconcile, error_policy, context)
    .for_each(log_outcome);
    // A controller whose first list never succeeded (no CRD yet) waits for
    // it even when shut down: bound the wait.
    let stopped = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = controller => {}
        () = stopped => tracing::debug!("stopped waiting for the manual-backup controller"),
    }
}

async fn reconcile(backup: Arc<ServiceBackup>, context: Arc<Context>) -> Result<Action, Error> {
    context
        .tracker
        .reconcile(&backup, take_snapshot(&backup, &context))
        .await
}

async fn take_snapshot(backup: &ServiceBackup, context: &Context) -> Result<Action, Error> {
    // Every record passes here, Final ones included.
    context.snapshots.engine().metrics().observe_record(backup);
    if !wants_snapshot(backup) {
        return Ok(Action::await_change());
    }
    let namespace = backup.namespace().unwrap_or_default();
    let name = backup.name_any();
    let reference = &backup.spec.service_ref;
    let engine = context.snapshots.engine();
    let writer = context.snapshots.status_writer();
    let service = match engine
        .service(&namespace, &reference.name, reference.uid.as_deref())
        .await
    {
        Ok(service) => service,
        Err(e @ (Error::ServiceNotFound { .. } | Error::ServiceUidMismatch { .. })) => {
            engine.metrics().snapshot_failed(&e);
            let now = Some(Time(Timestamp::now()));
            let status = ServiceBackupStatus {
                phase: Some(BackupPhase::Failed),
                start_time: now.clone(),
                completion_time: now,
                message: Some(e.to_string()),
                ..Default::default()
            };
            writer
                .apply(
                    &namespace,
                    &name,
                    &for_record(backup, &status, Timestamp::now()),
                )
                .await?;
            return Ok(Action::await_change());
        }
        Err(e) => return Err(e),
    };
    let service_uid = service.uid().unwrap_or_default();
    let backup_key = BackupKey::new(&namespace, &reference.name, &service_uid, &name)?;
    let request = SnapshotRequest {
        idempotency_key: manual_key(&service_uid, &backup.uid().unwrap_or_default()),
        backup: backup_key.clone(),
        origin: match backup.spec.origin {
            BackupOrigin::Scheduled => Origin::Scheduled,
            _ => Origin::Manual,
        },
        // A test restore is for final backups (`finalBackup.verify`).
        verification: Verification::Archive,
        // backup-runner's --jobs: the plan's are the final backup's.
        jobs: 0,
    };
    // A failed manual backup stays failed: a person asks again with a new record.
    let snapshot = context.snapshots.request(request, false)?;
    if is_terminal(snapshot.phase()) {
        // Normally written already; this heals a write that was lost.
        writer
            .write(&backup_key, &backup_status(&snapshot, &snapshot.message))
            .await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(RECHECK))
}

fn error_policy(backup: Arc<ServiceBackup>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&backup, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use navique_api::services::{ServiceBackupSpec, ServiceRef};

    fn record(origin: BackupOrigin, phase: Option<BackupPhase>) -> ServiceBackup {
        let mut backup = ServiceBackup::new(
            "b1",
            ServiceBackupSpec {
                service_ref: ServiceRef {
                    name: "db".into(),
                    uid: None,
                },
                origin,
                retention: None,
            },
        );
        backup.metadata.namespace = Some("ns".into());
        backup.metadata.uid = Some("rec-uid".into());
        backup.status = phase.map(|phase| ServiceBackupStatus {
            phase: Some(phase),
            ..Default::default()
        });
        backup
    }

    #[test]
    fn only_unfinished_manual_and_scheduled_records_get_a_snapshot() {
        assert!(wants_snapshot(&record(BackupOrigin::Manual, None)));
        assert!(wants_snapshot(&record(
            BackupOrigin::Manual,
            Some(BackupPhase::Running)
        )));
        assert!(!wants_snapshot(&record(
            BackupOrigin::Manual,
            Some(BackupPhase::Completed)
        )));
        assert!(!wants_snapshot(&record(
            BackupOrigin::Manual,
            Some(BackupPhase::Failed)
        )));
        assert!(!wants_snapshot(&record(BackupOrigin::Final, None)));
        assert!(wants_snapshot(&record(BackupOrigin::Scheduled, None)));
    }
}
