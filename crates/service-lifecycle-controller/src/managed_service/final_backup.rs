//! `SnapshotAndDelete`'s final backup: a ServiceBackup record with
//! `spec.origin: Final` and no owner (it outlives the service), and the
//! snapshot asked of backup-runner's `SnapshotService` under a key derived
//! from the service's uid, so that retries, restarts and duplicates all land
//! on one backup. Only a `COMPLETED` (stored and verified) snapshot lets the
//! deletion remove anything.

use std::time::Duration;

use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use navique_api::grpc::snapshot::v1 as pb;
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_api::services::{
    BackupOrigin, BackupVerification, ManagedService, ServiceBackup, ServiceBackupSpec,
    ServicePlan, ServiceRef,
};
use navique_runtime::grpc_tls::{self, GrpcTls};
use tonic::transport::Channel;

use crate::Error;

/// How to reach backup-runner.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BackupRunnerArgs {
    /// backup-runner's SnapshotService, e.g.
    /// https://navique-backup-runner.navique-system.svc:9090: https with
    /// this component's gRPC certificate (its identity is what backup-runner
    /// authorises), verifying backup-runner's against the gRPC CA; http
    /// only with --grpc-insecure-plaintext. Without it, `SnapshotAndDelete`
    /// deletions stay blocked.
    #[arg(long, env = "NAVIQUE_BACKUP_RUNNER_URL", value_name = "URL")]
    pub backup_runner_url: Option<String>,
}

/// A connection to backup-runner, made on first use and kept.
#[derive(Clone)]
pub struct BackupRunner {
    url: String,
    channel: Channel,
}

impl BackupRunner {
    /// `None` when no URL is configured; an error for an unusable one, or
    /// one that does not match `tls` (https unless plaintext).
    pub fn from_args(args: &BackupRunnerArgs, tls: &GrpcTls) -> Result<Option<Self>, Error> {
        let Some(url) = args.backup_runner_url.clone() else {
            return Ok(None);
        };
        let channel = grpc_tls::channel("--backup-runner-url", &url, tls, Duration::from_secs(5))
            .map_err(|e| Error::BackupRunnerConfig(e.to_string()))?;
        Ok(Some(Self { channel, url }))
    }

    /// Asks for the snapshot (starting it, or returning the one under the
    /// same key), carrying the current trace.
    pub async fn request(
        &self,
        request: pb::RequestSnapshotRequest,
    ) -> Result<pb::Snapshot, Error> {
        let request = traced(request, REQUEST_TIMEOUT);
        SnapshotServiceClient::new(self.channel.clone())
            .request_snapshot(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| self.failed(&status))
    }

    /// The snapshot under `key`; `None` when backup-runner knows none (it
    /// restarted, or none was asked for). Never starts one.
    pub async fn get(&self, key: &str) -> Result<Option<pb::Snapshot>, Error> {
        let request = traced(
            pb::GetSnapshotRequest {
                idempotency_key: key.to_owned(),
            },
            REQUEST_TIMEOUT,
        );
        match SnapshotServiceClient::new(self.channel.clone())
            .get_snapshot(request)
            .await
        {
            Ok(response) => Ok(Some(response.into_inner())),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(self.failed(&status)),
        }
    }

    /// Restores a snapshot and waits for pg_restore to finish.
    pub async fn restore(
        &self,
        request: pb::RestoreSnapshotRequest,
    ) -> Result<pb::RestoreResult, Error> {
        let request = traced(request, RESTORE_TIMEOUT);
        SnapshotServiceClient::new(self.channel.clone())
            .restore_snapshot(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| self.failed(&status))
    }

    fn failed(&self, status: &tonic::Status) -> Error {
        Error::BackupRunner {
            url: self.url.clone(),
            message: status_message(status),
        }
    }
}

/// How long a snapshot request may take (it only starts the snapshot).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a restore may take: it streams the whole archive.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// A request with a deadline and the current trace context.
fn traced<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    for (key, value) in navique_runtime::trace_headers() {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            value.parse(),
        ) {
            request.metadata_mut().insert(key, value);
        }
    }
    request
}

/// A gRPC failure in words: the transport's cause when it never connected.
fn status_message(status: &tonic::Status) -> String {
    let mut message = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message = format!("{message}: {cause_text}");
        }
        source = cause.source();
    }
    format!("{:?}: {message}", status.code())
}

/// The name of the service's final ServiceBackup.
pub fn record_name(service: &ManagedService) -> String {
    service.final_backup_name()
}

/// The idempotency key of the service's final snapshot: one per service.
pub fn idempotency_key(uid: &str) -> String {
    format!("{uid}/final")
}

/// What a snapshot's state means for the deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Stored and verified: the data may be removed.
    Completed { location: String },
    /// Still running; the message says where it is.
    Running(String),
    /// Failed: nothing is removed; the next attempt starts a new snapshot.
    Failed(String),
}

/// Reads a snapshot's phase.
pub fn progress(snapshot: &pb::Snapshot) -> Progress {
    match pb::Phase::try_from(snapshot.phase).unwrap_or(pb::Phase::Unspecified) {
        pb::Phase::Completed => Progress::Completed {
            location: snapshot.location.clone(),
        },
        pb::Phase::Failed => Progress::Failed(if snapshot.message.is_empty() {
            "the final backup failed".to_owned()
        } else {
            format!("the final backup failed: {}", snapshot.message)
        }),
        phase => Progress::Running(format!(
            "taking the final backup before removing the engine and its data ({}, {} bytes so far)",
            phase_name(phase),
            snapshot.size_bytes
        )),
    }
}

fn phase_name(phase: pb::Phase) -> &'static str {
    match phase {
        pb::Phase::Pending | pb::Phase::Unspecified => "pending",
        pb::Phase::Running => "running",
        pb::Phase::Verifying => "verifying",
        pb::Phase::Completed => "completed",
        pb::Phase::Failed => "failed",
    }
}

/// Creates the final ServiceBackup record unless it exists; one that
/// records another service is refused rather than reused.
pub async fn ensure_record(
    client: &Client,
    service: &ManagedService,
    name: &str,
) -> Result<(), Error> {
    let namespace = service.namespace().ok_or(Error::Unnamed)?;
    let uid = service.uid().ok_or(Error::Unnamed)?;
    let api = Api::<ServiceBackup>::namespaced(client.clone(), &namespace);
    let full_name = format!("{namespace}/{name}");
    let existing = api.get_opt(name).await.map_err(|source| Error::Read {
        kind: "ServiceBackup",
        name: full_name.clone(),
        source,
    })?;
    if let Some(existing) = existing {
        let ours = existing.spec.origin == BackupOrigin::Final
            && existing.spec.service_ref.uid.as_deref() == Some(uid.as_str());
        return if ours {
            Ok(())
        } else {
            Err(Error::FinalBackupNameTaken(full_name))
        };
    }
    let record = ServiceBackup::new(
        name,
        ServiceBackupSpec {
            service_ref: ServiceRef {
                name: service.name_any(),
                uid: Some(uid),
            },
            origin: BackupOrigin::Final,
            retention: service
                .spec
                .final_backup
                .as_ref()
                .and_then(|f| f.retention.clone()),
        },
    );
    match api.create(&PostParams::default(), &record).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(source) => Err(Error::Write {
            kind: "ServiceBackup",
            name: full_name,
            source,
        }),
    }
}

/// The restore of `record` into `service`: the archive is found by the
/// service it was taken of, so the record must name that service's uid.
pub fn restore_request(
    service: &ManagedService,
    plan: Option<&ServicePlan>,
    record: &ServiceBackup,
) -> Result<pb::RestoreSnapshotRequest, Error> {
    let namespace = service.namespace().ok_or(Error::Unnamed)?;
    let name = record.name_any();
    let completed = record.status.as_ref().and_then(|s| s.phase)
        == Some(navique_api::services::BackupPhase::Completed);
    if !completed {
        return Err(Error::Restore(format!(
            "spec.restoreFrom.backupName: ServiceBackup {name} is not Completed; only a verified backup can be restored"
        )));
    }
    let source = &record.spec.service_ref;
    let location = record.status.as_ref().and_then(|s| s.location.as_deref());
    let uid = source
        .uid
        .clone()
        .or_else(|| location.and_then(|l| uid_from_location(l, &source.name)))
        .ok_or_else(|| {
            Error::Restore(format!(
                "spec.restoreFrom.backupName: ServiceBackup {name} does not say which service's archive it is"
            ))
        })?;
    Ok(pb::RestoreSnapshotRequest {
        source_service: Some(pb::ServiceRef {
            namespace: namespace.clone(),
            name: source.name.clone(),
            uid,
        }),
        backup_name: name,
        target: Some(pb::ServiceRef {
            namespace,
            name: service.name_any(),
            uid: service.uid().ok_or(Error::Unnamed)?,
        }),
        jobs: jobs(plan),
    })
}

/// The plan's `backup.jobs`; 0 (unset) leaves them to backup-runner's
/// `--jobs`. The CRD bounds them to 1..16, and backup-runner refuses
/// anything else rather than guess.
pub fn jobs(plan: Option<&ServicePlan>) -> u32 {
    plan.and_then(|p| p.spec.backup.jobs).unwrap_or_default()
}

/// The uid of the service an archive was taken of, from its location:
/// backup-runner stores archives at `.../<namespace>/<service>-<uid>/<backup>.dump`,
/// or a parallel dump's folder `.../<backup>.d/` (docs/backups.md). What a
/// user's Manual record, which names the service only, needs to be restored.
fn uid_from_location(location: &str, service: &str) -> Option<String> {
    let mut parts = location.trim_end_matches('/').rsplit('/');
    let _archive = parts.next()?;
    let uid = parts.next()?.strip_prefix(service)?.strip_prefix('-')?;
    (uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| uid.to_owned())
}

/// The snapshot request of the service's final backup.
pub fn request_for(
    service: &ManagedService,
    plan: Option<&ServicePlan>,
    record: &str,
) -> Result<pb::RequestSnapshotRequest, Error> {
    let uid = service.uid().ok_or(Error::Unnamed)?;
    let verification = match verification(service, plan) {
        BackupVerification::Archive => pb::Verification::Archive,
        BackupVerification::Restore => pb::Verification::Restore,
    };
    Ok(pb::RequestSnapshotRequest {
        idempotency_key: idempotency_key(&uid),
        service: Some(pb::ServiceRef {
            namespace: service.namespace().ok_or(Error::Unnamed)?,
            name: service.name_any(),
            uid,
        }),
        origin: pb::Origin::Final as i32,
        backup_name: record.to_owned(),
        verification: verification as i32,
        jobs: jobs(plan),
    })
}

/// How the final backup is proven: the plan's floor, or more if the
/// service asks for it.
pub fn verification(service: &ManagedService, plan: Option<&ServicePlan>) -> BackupVerification {
    BackupVerification::effective(
        plan.and_then(|p| p.spec.backup.final_backup_verify),
        service.spec.final_backup.as_ref().and_then(|f| f.verify),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use navique_api::services::{FinalBackup, ManagedServiceSpec};

    fn service(final_backup: Option<FinalBackup>) -> ManagedService {
        let mut spec: ManagedServiceSpec = serde_json::from_value(serde_json::json!({
            "classRef": {"name": "postgresql"},
            "planRef": {"name": "ha"},
        }))
        .unwrap();
        spec.final_backup = final_backup;
        let mut service = ManagedService::new("orders-db", spec);
        service.metadata.uid = Some("0a1b2c3d-4e5f-6789-abcd-ef0123456789".to_owned());
        service.metadata.namespace = Some("shop".to_owned());
        service
    }

    #[test]
    fn the_record_is_named_after_the_service_unless_configured() {
        assert_eq!(record_name(&service(None)), "orders-db-final-0a1b2c3d");
        let named = FinalBackup {
            name: Some("orders-last".to_owned()),
            ..FinalBackup::default()
        };
        assert_eq!(record_name(&service(Some(named))), "orders-last");
    }

    #[test]
    fn one_key_per_service_whatever_the_record() {
        let request = request_for(&service(None), None, "orders-db-final-0a1b2c3d").unwrap();
        assert_eq!(
            request.idempotency_key,
            "0a1b2c3d-4e5f-6789-abcd-ef0123456789/final"
        );
        assert_eq!(request.origin, pb::Origin::Final as i32);
        assert_eq!(request.verification, pb::Verification::Archive as i32);
        assert_eq!(request.service.unwrap().namespace, "shop");
    }

    #[test]
    fn the_plans_jobs_reach_the_snapshot_request_and_unset_leave_them_to_backup_runner() {
        let mut plan: ServicePlan = serde_json::from_value(serde_json::json!({
            "apiVersion": "services.kube-dc.com/v1alpha1",
            "kind": "ServicePlan",
            "metadata": {"name": "ha"},
            "spec": {"classRef": {"name": "postgresql"}, "allowedDeletionPolicies": ["Retain"],
                     "backup": {"enabled": true, "jobs": 4}},
        }))
        .unwrap();
        let request = request_for(&service(None), Some(&plan), "r").unwrap();
        assert_eq!(request.jobs, 4);
        plan.spec.backup.jobs = None;
        assert_eq!(
            request_for(&service(None), Some(&plan), "r").unwrap().jobs,
            0
        );
        assert_eq!(request_for(&service(None), None, "r").unwrap().jobs, 0);
    }

    #[test]
    fn a_service_asks_for_more_proof_than_its_plan_never_for_less() {
        use BackupVerification::{Archive, Restore};
        let plan = |verify: Option<BackupVerification>| {
            let mut plan: ServicePlan = serde_json::from_value(serde_json::json!({
                "apiVersion": "services.kube-dc.com/v1alpha1",
                "kind": "ServicePlan",
                "metadata": {"name": "ha"},
                "spec": {"classRef": {"name": "postgresql"}, "allowedDeletionPolicies": ["Retain"]},
            }))
            .unwrap();
            plan.spec.backup.final_backup_verify = verify;
            plan
        };
        let asking = |verify| {
            service(Some(FinalBackup {
                verify,
                ..FinalBackup::default()
            }))
        };
        for (plan_floor, own, expected) in [
            (None, None, Archive),
            (None, Some(Restore), Restore),
            (Some(Restore), None, Restore),
            (Some(Restore), Some(Archive), Restore),
            (Some(Archive), Some(Restore), Restore),
        ] {
            let plan = plan(plan_floor);
            assert_eq!(
                verification(&asking(own), Some(&plan)),
                expected,
                "plan {plan_floor:?}, service {own:?}"
            );
        }
        let request = request_for(&asking(Some(Restore)), None, "r").unwrap();
        assert_eq!(request.verification, pb::Verification::Restore as i32);
    }

    #[test]
    fn a_manual_records_archive_names_its_service_uid() {
        let uid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
        assert_eq!(
            uid_from_location(
                &format!("s3://backups/navique/shop/orders-db-{uid}/before-migration.dump"),
                "orders-db"
            )
            .as_deref(),
            Some(uid)
        );
        assert_eq!(
            uid_from_location(&format!("file:///b/shop/orders-db-{uid}/x.d/"), "orders-db")
                .as_deref(),
            Some(uid),
            "a parallel dump's folder"
        );
        assert_eq!(
            uid_from_location(&format!("file:///b/shop/orders-{uid}/x.dump"), "orders-db"),
            None,
            "another service's folder"
        );
        assert_eq!(
            uid_from_location("file:///b/shop/orders-db-latest/x.dump", "orders-db"),
            None
        );
    }

    #[test]
    fn only_a_completed_snapshot_lets_the_deletion_go_on() {
        let snapshot = |phase: pb::Phase, message: &str| pb::Snapshot {
            phase: phase as i32,
            location: "s3://backups/shop/orders-db.dump".to_owned(),
            size_bytes: 2048,
            message: message.to_owned(),
            ..Default::default()
        };
        assert_eq!(
            progress(&snapshot(pb::Phase::Completed, "")),
            Progress::Completed {
                location: "s3://backups/shop/orders-db.dump".to_owned()
            }
        );
        assert_eq!(
            progress(&snapshot(pb::Phase::Verifying, "")),
            Progress::Running(
                "taking the final backup before removing the engine and its data (verifying, 2048 bytes so far)".to_owned()
            )
        );
        assert_eq!(
            progress(&snapshot(pb::Phase::Failed, "pg_dump: connection refused")),
            Progress::Failed("the final backup failed: pg_dump: connection refused".to_owned())
        );
        assert!(matches!(
            progress(&snapshot(pb::Phase::Unspecified, "")),
            Progress::Running(_)
        ));
    }
}
