use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
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
    printcolumn(name = "Size", type_ = "integer", json_path = ".status.sizeBytes"),
    printcolumn(
        name = "Completed",
        type_ = "date",
        json_path = ".status.completionTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
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
    /// `sha256:<hex>` of the stored archive, verified by reading it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Why the backup failed, or what it is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// Phase of a backup. Only `Completed` backups were verified after upload.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupPhase {
    Pending,
    Running,
    Completed,
    Failed,
}
