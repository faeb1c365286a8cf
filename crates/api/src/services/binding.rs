use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ServiceRef;

/// Desired state of a ServiceBinding.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ServiceBinding",
    doc = "Delivers a ManagedService's credentials into a Secret in the Project.",
    namespaced,
    status = "ServiceBindingStatus",
    shortname = "sbd",
    category = "navique",
    printcolumn(
        name = "Service",
        type_ = "string",
        json_path = ".spec.serviceRef.name"
    ),
    printcolumn(name = "Secret", type_ = "string", json_path = ".status.secretName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
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
pub struct ServiceBindingSpec {
    /// The service whose credentials are delivered.
    pub service_ref: ServiceRef,
    /// The Secret to write; defaults to the binding's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub secret_name: Option<String>,
}

/// Delivery state of a binding.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBindingStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The Secret holding the delivered credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// `Ready`; False with `CredentialPending` while the service is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}
