use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ServiceRef;

/// Desired state of a ServiceCredentialPolicy.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ServiceCredentialPolicy",
    doc = "Rotates a ManagedService's credentials on a schedule.",
    namespaced,
    status = "ServiceCredentialPolicyStatus",
    shortname = "scp",
    category = "navique",
    printcolumn(
        name = "Service",
        type_ = "string",
        json_path = ".spec.serviceRef.name"
    ),
    printcolumn(
        name = "Interval",
        type_ = "string",
        json_path = ".spec.rotationInterval"
    ),
    printcolumn(
        name = "Last Rotation",
        type_ = "date",
        json_path = ".status.lastRotationTime"
    ),
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
pub struct ServiceCredentialPolicySpec {
    /// The service whose credentials are rotated.
    pub service_ref: ServiceRef,
    /// Time between rotations, as a duration such as `30d`, `720h` or `90m`.
    #[schemars(regex(pattern = crate::duration::PATTERN))]
    pub rotation_interval: String,
}

/// Rotation state of a credential policy.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceCredentialPolicyStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rotation_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_rotation_time: Option<Time>,
    /// `Ready`; False with `ServiceDeleting` while the service is being
    /// deleted, when no rotations are submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}
