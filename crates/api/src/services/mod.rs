//! `services.kube-dc.com/v1alpha1`: managed services, their backups, bindings
//! and credential policies, and the provider's catalogue.

mod backup;
mod binding;
mod catalogue;
mod credential_policy;
pub mod deletion;
mod managed_service;
mod parameters;

pub use backup::*;
pub use binding::*;
pub use catalogue::*;
pub use credential_policy::*;
pub use managed_service::*;
pub use parameters::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to a cluster-scoped object by name.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NameRef {
    /// Name of the referenced object.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// A reference to a ManagedService in the same namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ServiceRef {
    /// Name of the ManagedService.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub name: String,
    /// UID of the ManagedService, where the reference must not follow a
    /// new service of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}
