//! What a Stack's reconcile could not do, naming the resource and the cause.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("spec.resources[{index}]: {problem}")]
    InvalidManifest { index: usize, problem: String },
    #[error("{api_version} {kind} cannot be managed by a Stack: {problem}")]
    UnknownKind {
        api_version: String,
        kind: String,
        problem: String,
    },
    /// A Stack resource of a kind the API server does not serve (or no
    /// longer serves); `resource` as `Kind ns/name`.
    #[error("{}", navique_api::messages::stack_kind_not_served(resource, problem))]
    KindNotServed { resource: String, problem: String },
    #[error("cannot act as {user}")]
    Impersonation {
        user: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot {action} {resource}")]
    StackResource {
        action: &'static str,
        resource: String,
        #[source]
        source: kube::Error,
    },
    /// An object a Stack lists but may not change: why, naming who has it.
    #[error("{0}")]
    NotStackManaged(String),
    #[error("cannot read Namespace {0}")]
    ReadNamespace(String, #[source] kube::Error),
    #[error("cannot add or remove the Stack's finalizer")]
    Finalizer(#[source] kube::Error),
    #[error("not deleting: this replica cannot confirm it still leads")]
    NotLeader(#[source] navique_runtime::Error),
    #[error("the Stack has no namespace")]
    Unidentified,
    #[error("cannot write the status of Stack {0}")]
    WriteStatus(String, #[source] kube::Error),
}

impl navique_runtime::controller::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::InvalidManifest { .. } | Error::UnknownKind { .. } => "invalid_manifest",
            Error::KindNotServed { .. } => "kind_not_served",
            Error::StackResource { .. } => "stack_resource",
            Error::Impersonation { .. } => "impersonation",
            Error::NotStackManaged(_) => "name_in_use",
            Error::ReadNamespace(..) => "read",
            Error::Finalizer(_) => "finalizer",
            Error::NotLeader(_) => "not_leader",
            Error::Unidentified => "unnamed",
            Error::WriteStatus(..) => "write_status",
        }
    }
}
