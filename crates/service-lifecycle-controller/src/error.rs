//! The crate's error: what a reconcile could not do, with the object and
//! the cause a provider can act on.

use navique_api::services::PlacementMode;

use crate::postgres;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("placement {0:?} is not supported yet; use ProviderShared")]
    UnsupportedPlacement(PlacementMode),
    #[error("ServiceClass {0} not found")]
    ClassMissing(String),
    #[error("ServiceClass {0} has no providerShared.adminSecretRef")]
    NoProviderShared(String),
    #[error("admin Secret {namespace}/{name} not found")]
    AdminSecretMissing { namespace: String, name: String },
    #[error("admin Secret {namespace}/{name} is not usable")]
    AdminSecret {
        namespace: String,
        name: String,
        #[source]
        source: postgres::Error,
    },
    #[error("admin Secret {namespace}/{name}: key {key} is not UTF-8")]
    AdminSecretEncoding {
        namespace: String,
        name: String,
        key: String,
    },
    #[error(transparent)]
    Engine(#[from] postgres::Error),
    #[error("cannot read {kind} {name}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write Secret {name}")]
    WriteSecret {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the ManagedService's status")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot add or remove the ManagedService's finalizer")]
    Finalizer(#[source] kube::Error),
    #[error("the ManagedService has no name, namespace or uid")]
    Unnamed,
}

impl Error {
    /// The `error` label of `reconcile_errors`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::UnsupportedPlacement(_) => "unsupported_placement",
            Error::ClassMissing(_) | Error::NoProviderShared(_) => "class",
            Error::AdminSecretMissing { .. }
            | Error::AdminSecret { .. }
            | Error::AdminSecretEncoding { .. } => "admin_secret",
            Error::Engine(_) => "engine",
            Error::Read { .. } => "read",
            Error::WriteSecret { .. } => "write_secret",
            Error::WriteStatus(_) => "write_status",
            Error::Finalizer(_) => "finalizer",
            Error::Unnamed => "unnamed",
        }
    }
}
