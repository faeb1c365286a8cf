use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{NameRef, PostgresParameters};

/// Desired state of a ManagedService.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ManagedService",
    doc = "A database service in a Project, and what deleting it does to the data.",
    namespaced,
    status = "ManagedServiceStatus",
    shortname = "msvc",
    category = "navique",
    printcolumn(name = "Class", type_ = "string", json_path = ".spec.classRef.name"),
    printcolumn(name = "Plan", type_ = "string", json_path = ".spec.planRef.name"),
    printcolumn(name = "Policy", type_ = "string", json_path = ".spec.deletionPolicy"),
    printcolumn(
        name = "Protected",
        type_ = "boolean",
        json_path = ".spec.deletionProtection"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
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
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceSpec {
    /// The ServiceClass (engine) of the service. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("classRef is immutable"))]
    pub class_ref: NameRef,
    /// The ServicePlan: size, allowed deletion policies, backups.
    pub plan_ref: NameRef,
    /// Where the engine runs. Immutable.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("placement is immutable"))]
    pub placement: Placement,
    /// How applications reach the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<Connectivity>,
    /// Engine parameters of the PostgreSQL class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<PostgresParameters>,
    /// What deleting the service does to the engine and its data. Must be
    /// one of the plan's `allowedDeletionPolicies`.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// While true, a delete of this ManagedService is refused. Turning it off
    /// must be its own update before the delete. When left out, the webhook
    /// sets the plan's `defaultDeletionProtection` (false when the plan says
    /// nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_protection: Option<bool>,
    /// Start from the data of a ServiceBackup of the same Project. Set on a
    /// new service, it restores before the service is Ready; set or changed
    /// on an existing one, it restores in place (which needs
    /// `deletionProtection: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_from: Option<RestoreFrom>,
    /// The final backup a `SnapshotAndDelete` deletion takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_backup: Option<FinalBackup>,
}

impl ManagedService {
    /// The name of the service's final ServiceBackup (`SnapshotAndDelete`):
    /// `spec.finalBackup.name`, else `<service>-final-<first 8 characters
    /// of its uid>`.
    pub fn final_backup_name(&self) -> String {
        let configured = self.spec.final_backup.as_ref().and_then(|f| f.name.clone());
        configured.unwrap_or_else(|| {
            let uid = self.metadata.uid.as_deref().unwrap_or_default();
            let name = self.metadata.name.as_deref().unwrap_or_default();
            format!("{name}-final-{}", &uid[..uid.len().min(8)])
        })
    }
}

/// The backup a service starts from.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreFrom {
    /// Name of the ServiceBackup.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub backup_name: String,
    /// Namespace of the ServiceBackup; only the service's own is accepted
    /// (a restore works within one Project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::names::NAMESPACE_NAME_PATTERN))]
    pub namespace: Option<String>,
}

/// The final backup of a `SnapshotAndDelete` deletion, like a final
/// snapshot identifier on a managed cloud database.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalBackup {
    /// Name of its ServiceBackup record; defaults to
    /// `<service>-final-<first 8 characters of the service's uid>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub name: Option<String>,
    /// How long the final backup is kept once the service is gone, as a
    /// duration such as `30d` or `720h`; recorded as the ServiceBackup's
    /// `spec.retention`. Unset: kept until the Project goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::duration::PATTERN))]
    pub retention: Option<String>,
    /// How the final backup is proven before anything is dropped: `Archive`
    /// (read back and listed; the default) or `Restore` (also restored into
    /// a scratch database whose row counts must match the source's). The
    /// plan's `backup.finalBackupVerify` is a floor this cannot lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<BackupVerification>,
}

/// How a final backup is proven before the deletion goes on.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum BackupVerification {
    /// Read back whole: size, sha256 and `pg_restore --list`.
    #[default]
    Archive,
    /// `Archive`, then a test restore into a scratch database on the
    /// provider's server, compared table by table with the row counts read
    /// inside the dump's snapshot (`ProviderShared` only).
    Restore,
}

impl BackupVerification {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Archive => "Archive",
            Self::Restore => "Restore",
        }
    }

    /// The stronger of the plan's floor and the service's own setting: a
    /// Project can ask for more proof than its plan, never for less.
    pub fn effective(plan: Option<Self>, service: Option<Self>) -> Self {
        plan.unwrap_or_default().max(service.unwrap_or_default())
    }
}

/// Where a service's engine runs.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// `InProject` runs the engine in the Project namespace; `ProviderShared`
    /// is a database and role on the provider's PostgreSQL server.
    #[serde(default)]
    pub mode: PlacementMode,
}

/// The port of an `InProject` engine's client Service.
pub const IN_PROJECT_PORT: u16 = 5432;

/// The host an `InProject` engine is reached at: its client Service's
/// cluster DNS name.
pub fn in_project_host(service: &str, namespace: &str) -> String {
    format!("{service}.{namespace}.svc")
}

/// Placement modes.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlacementMode {
    #[default]
    InProject,
    ProviderShared,
}

/// How applications reach a service.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Connectivity {
    /// The provider's connectivity class, e.g. `tenant-native`.
    pub class_ref: NameRef,
}

/// What deleting a ManagedService does to its engine and data. The variants
/// are ordered from least to most destructive.
///
/// There is deliberately no catch-all variant: a component that meets a
/// policy it does not know fails to read the object and so deletes nothing.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum DeletionPolicy {
    /// Stop managing the service; engine, volumes, Secrets and Services stay.
    #[default]
    Retain,
    /// Take a final backup, then remove engine and data.
    SnapshotAndDelete,
    /// Remove engine and data; needs the confirmation annotation.
    Delete,
}

impl DeletionPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retain => "Retain",
            Self::SnapshotAndDelete => "SnapshotAndDelete",
            Self::Delete => "Delete",
        }
    }

    /// The less destructive of two policies: what a deletion falls back to
    /// when the requested policy cannot be applied.
    pub fn least_destructive(self, other: Self) -> Self {
        self.min(other)
    }
}

impl fmt::Display for DeletionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the service-lifecycle-controller observed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ServicePhase>,
    /// The namespace the engine runs in; the Project namespace for the
    /// `InProject` placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_namespace: Option<String>,
    /// The generation this status describes: the result is current when it
    /// equals `metadata.generation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The ServiceBackup last restored into this service
    /// (`spec.restoreFrom.backupName`); a restore runs when they differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
    /// The schedule tick of the last `Scheduled` ServiceBackup recorded for
    /// this service (the plan's `backup.schedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_backup_time: Option<Time>,
    /// The deletion policy last applied: the one in force if a later change
    /// cannot be applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_deletion_policy: Option<DeletionPolicy>,
    /// `Ready`, with the deletion reasons while `phase` is `Deleting`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// Lifecycle phase of a ManagedService.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServicePhase {
    Provisioning,
    Ready,
    Deleting,
    Failed,
}

impl ServicePhase {
    pub const ALL: [ServicePhase; 4] = [
        ServicePhase::Provisioning,
        ServicePhase::Ready,
        ServicePhase::Deleting,
        ServicePhase::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "Provisioning",
            Self::Ready => "Ready",
            Self::Deleting => "Deleting",
            Self::Failed => "Failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeletionPolicy::*;

    #[test]
    fn retain_is_less_destructive_than_anything() {
        assert_eq!(Delete.least_destructive(Retain), Retain);
        assert_eq!(Retain.least_destructive(SnapshotAndDelete), Retain);
    }

    #[test]
    fn snapshot_is_less_destructive_than_delete() {
        assert_eq!(
            Delete.least_destructive(SnapshotAndDelete),
            SnapshotAndDelete
        );
        assert_eq!(
            SnapshotAndDelete.least_destructive(Delete),
            SnapshotAndDelete
        );
    }

    #[test]
    fn policy_defaults_to_retain() {
        assert_eq!(super::DeletionPolicy::default(), Retain);
    }
}
