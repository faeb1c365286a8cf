use std::net::SocketAddr;
use std::path::PathBuf;

/// What can go wrong in backup-runner, with what to do about it where that
/// is not obvious. [`Error::code`] maps each to a gRPC status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    #[error(
        "idempotency key {key:?} already names backup {existing} of service {existing_service}; \
         use a new key for another backup"
    )]
    KeyReused {
        key: String,
        existing: String,
        existing_service: String,
    },

    #[error(
        "backup {backup} of service {service} is already taken under idempotency key {other:?}; \
         a ServiceBackup name can hold one backup"
    )]
    BackupNameTaken {
        backup: String,
        service: String,
        other: String,
    },

    #[error(
        "unknown idempotency key {0:?}; RequestSnapshot (idempotent) starts it or finds it again after a restart"
    )]
    UnknownKey(String),

    #[error("invalid --store-url {url:?}: {reason}")]
    StoreUrl { url: String, reason: String },

    #[error("object store: cannot {action} {location}: {source}")]
    Store {
        action: &'static str,
        location: String,
        #[source]
        source: object_store::Error,
    },

    #[error("{0}")]
    PgTools(String),

    #[error("service not found: {name}")]
    ServiceNotFound { namespace: String, name: String },

    #[error(
        "service {namespace}/{name} has uid {actual}, not {expected}: it is another service of the same name"
    )]
    ServiceUidMismatch {
        namespace: String,
        name: String,
        expected: String,
        actual: String,
    },

    #[error("Secret {namespace}/{name} with the service's credentials does not exist")]
    SecretMissing { namespace: String, name: String },

    #[error("Secret {namespace}/{name}: {reason}")]
    SecretInvalid {
        namespace: String,
        name: String,
        reason: String,
    },

    #[error(
        "ServiceBackup {namespace}/{name} does not exist: a snapshot is taken only for a record \
         that describes it"
    )]
    RecordMissing { namespace: String, name: String },

    #[error("ServiceBackup {namespace}/{name} is not {expected}: {problem}")]
    RecordMismatch {
        namespace: String,
        name: String,
        expected: String,
        problem: String,
    },

    #[error(
        "ManagedService {namespace}/{name} does not ask for a restore of {backup}: its \
         spec.restoreFrom.backupName must name it"
    )]
    RestoreNotRequested {
        namespace: String,
        name: String,
        backup: String,
    },

    #[error(
        "ManagedService {namespace}/{name} holds data: {}",
        navique_api::messages::IN_PLACE_RESTORE_PROTECTED
    )]
    InPlaceRestoreProtected { namespace: String, name: String },

    #[error(transparent)]
    Catalogue(#[from] navique_provider_postgres::catalogue::Error),

    #[error(transparent)]
    Engine(Box<navique_provider_postgres::Error>),

    #[error("Kubernetes API: cannot {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },

    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{tool} {context} failed ({status}): {stderr}")]
    ToolFailed {
        tool: &'static str,
        context: String,
        status: String,
        stderr: String,
    },

    #[error("verification of {location} failed: {reason}")]
    Verification { location: String, reason: String },

    #[error("test restore of {location} failed: {reason}")]
    TestRestore { location: String, reason: String },

    #[error(
        "a test restore (verify: Restore) needs a ProviderShared service, whose server can hold a scratch database: {service} runs InProject"
    )]
    TestRestoreUnsupported { service: String },

    #[error(
        "archive {location} does not match its manifest: {reason}; it cannot be trusted, take a new backup"
    )]
    Corrupt { location: String, reason: String },

    #[error("no verified backup {backup} of service {service}: {manifest} does not exist")]
    BackupNotFound {
        backup: String,
        service: String,
        manifest: String,
    },

    #[error("invalid manifest {location}: {reason}")]
    Manifest { location: String, reason: String },

    #[error(
        "a backup can only be restored into a service of the same Project: the backup is of {source_namespace}/{source_name}, the target is in {target_namespace}"
    )]
    CrossNamespace {
        source_namespace: String,
        source_name: String,
        target_namespace: String,
    },

    #[error(
        "the archive exceeds the {max} bytes that 10,000 upload parts hold; this store cannot take it in one object"
    )]
    TooLarge { max: u64 },

    #[error(transparent)]
    GrpcTls(#[from] navique_runtime::grpc_tls::Error),

    #[error("cannot serve gRPC on {addr}: {reason}")]
    Serve { addr: SocketAddr, reason: String },

    #[error("backup-runner is shutting down; request the snapshot again once it is back")]
    ShuttingDown,

    #[error(transparent)]
    Runtime(#[from] navique_runtime::Error),
}

impl Error {
    /// The gRPC status code that tells a client what to do: retry
    /// (UNAVAILABLE), fix the request (INVALID_ARGUMENT...), or give up.
    pub fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            Self::InvalidRequest(_) => Code::InvalidArgument,
            Self::KeyReused { .. } | Self::BackupNameTaken { .. } => Code::AlreadyExists,
            Self::UnknownKey(_)
            | Self::ServiceNotFound { .. }
            | Self::SecretMissing { .. }
            | Self::BackupNotFound { .. } => Code::NotFound,
            Self::Engine(e) if e.is_transient() => Code::Unavailable,
            Self::Catalogue(navique_provider_postgres::catalogue::Error::Read { .. }) => {
                Code::Unavailable
            }
            Self::RecordMissing { .. } => Code::NotFound,
            Self::ServiceUidMismatch { .. }
            | Self::RecordMismatch { .. }
            | Self::RestoreNotRequested { .. }
            | Self::InPlaceRestoreProtected { .. }
            | Self::Catalogue(_)
            | Self::Engine(_)
            | Self::SecretInvalid { .. }
            | Self::CrossNamespace { .. }
            | Self::TestRestoreUnsupported { .. }
            | Self::TooLarge { .. } => Code::FailedPrecondition,
            Self::Corrupt { .. } | Self::Manifest { .. } => Code::DataLoss,
            Self::Store { .. } | Self::Kube { .. } | Self::ShuttingDown => Code::Unavailable,
            Self::StoreUrl { .. }
            | Self::PgTools(_)
            | Self::Spawn { .. }
            | Self::Io { .. }
            | Self::ToolFailed { .. }
            | Self::Verification { .. }
            | Self::TestRestore { .. }
            | Self::GrpcTls(_)
            | Self::Serve { .. }
            | Self::Runtime(_) => Code::Internal,
        }
    }

    /// The `reason` label of `snapshot_failures_total`: what failed, in
    /// few enough values to alert on.
    pub fn failure_reason(&self) -> &'static str {
        match self {
            Self::ServiceNotFound { .. } | Self::ServiceUidMismatch { .. } => "service_not_found",
            Self::SecretMissing { .. } | Self::SecretInvalid { .. } => "credentials",
            Self::Store { .. } | Self::StoreUrl { .. } => "object_store",
            Self::PgTools(_) | Self::Spawn { .. } | Self::Io { .. } | Self::ToolFailed { .. } => {
                "dump"
            }
            Self::Verification { .. }
            | Self::Corrupt { .. }
            | Self::Manifest { .. }
            | Self::TestRestore { .. }
            | Self::TestRestoreUnsupported { .. } => "verification",
            Self::TooLarge { .. } => "too_large",
            Self::Engine(_) | Self::Catalogue(_) => "engine",
            Self::Kube { .. } => "kubernetes",
            Self::ShuttingDown => "shutting_down",
            Self::InvalidRequest(_)
            | Self::KeyReused { .. }
            | Self::BackupNameTaken { .. }
            | Self::UnknownKey(_)
            | Self::RecordMissing { .. }
            | Self::RecordMismatch { .. }
            | Self::RestoreNotRequested { .. }
            | Self::InPlaceRestoreProtected { .. }
            | Self::BackupNotFound { .. }
            | Self::CrossNamespace { .. }
            | Self::GrpcTls(_)
            | Self::Serve { .. }
            | Self::Runtime(_) => "other",
        }
    }
}

/// A manual backup's reconcile errors are counted by what failed.
impl navique_runtime::controller::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        self.failure_reason()
    }
}

impl Error {
    pub(crate) fn store(
        action: &'static str,
        location: impl Into<String>,
    ) -> impl FnOnce(object_store::Error) -> Self {
        let location = location.into();
        move |source| Self::Store {
            action,
            location,
            source,
        }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    pub(crate) fn engine(error: navique_provider_postgres::Error) -> Self {
        Self::Engine(Box::new(error))
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        tonic::Status::new(error.code(), navique_runtime::one_line(&error))
    }
}
