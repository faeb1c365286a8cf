//! The error of the ManagedService controller and of the controllers that
//! follow a service (ServiceBindings, ServiceCredentialPolicies, the
//! ServicePlan status): what a reconcile could not do, with the object and
//! the cause a provider can act on. Stacks have their own
//! ([`crate::stack::Error`]).

use crate::postgres;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidParameters(String),
    #[error(
        "{kind} {name} is retained from a deleted service of the same name; ask your provider to remove the retained objects, or choose another name"
    )]
    RetainedNameInUse { kind: &'static str, name: String },
    #[error(
        "{kind} {name} exists and does not belong to this service; rename or remove it, or choose another service name"
    )]
    NameTaken { kind: &'static str, name: String },
    #[error(transparent)]
    Catalogue(#[from] postgres::catalogue::Error),
    #[error(transparent)]
    Engine(Box<postgres::Error>),
    #[error("cannot read {kind} {name}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write {kind} {name}")]
    Write {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete {kind} {name}")]
    Delete {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    BackupRunnerConfig(String),
    #[error(
        "no backup-runner is configured (--backup-runner-url), so no final backup can be taken; switch to Retain or Delete"
    )]
    NoBackupRunner,
    #[error("backup-runner at {url} cannot take the final backup: {message}")]
    BackupRunner { url: String, message: String },
    #[error("{0}")]
    Restore(String),
    #[error(
        "ServiceBackup {0} already records another backup; set spec.finalBackup.name to another name"
    )]
    FinalBackupNameTaken(String),
    #[error("not deleting: this replica cannot confirm it still leads")]
    NotLeader(#[source] navique_runtime::Error),
    #[error("cannot write the ManagedService's status")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot add or remove the ManagedService's finalizer")]
    Finalizer(#[source] kube::Error),
    #[error("the ManagedService has no name, namespace or uid")]
    Unnamed,
    #[error("the {0} has no name, namespace or uid")]
    Unidentified(&'static str),
    #[error("cannot write the status of {kind} {name}")]
    WriteObjectStatus {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    InvalidDuration(#[from] navique_api::Error),
    #[error("ServicePlan {plan}: backup.schedule {schedule:?} is not a cron schedule: {problem}")]
    InvalidSchedule {
        plan: String,
        schedule: String,
        problem: String,
    },
    #[error(
        "Secret {secret} changed while its password was being rotated; the rotation is retried"
    )]
    RotationOverwritten { secret: String },
}

impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        Error::Engine(Box::new(error))
    }
}

impl navique_runtime::controller::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::InvalidParameters(_) => "invalid_parameters",
            Error::RetainedNameInUse { .. } | Error::NameTaken { .. } => "name_in_use",
            Error::Catalogue(e) => e.metric_label(),
            Error::Engine(_) => "engine",
            Error::Read { .. } => "read",
            Error::Write { .. } => "write",
            Error::Delete { .. } => "delete",
            Error::NotLeader(_) => "not_leader",
            Error::BackupRunnerConfig(_) | Error::NoBackupRunner | Error::BackupRunner { .. } => {
                "backup_runner"
            }
            Error::FinalBackupNameTaken(_) => "final_backup",
            Error::Restore(_) => "restore",
            Error::WriteStatus(_) => "write_status",
            Error::Finalizer(_) => "finalizer",
            Error::Unnamed | Error::Unidentified(_) => "unnamed",
            Error::WriteObjectStatus { .. } => "write_status",
            Error::InvalidDuration(_) => "invalid_duration",
            Error::InvalidSchedule { .. } => "invalid_schedule",
            Error::RotationOverwritten { .. } => "rotation_overwritten",
        }
    }
}
