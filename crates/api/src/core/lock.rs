use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::constants::DEFAULT_LOCK_TARGET_API_VERSION;

/// Desired state of a Lock.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "core.navique.com",
    version = "v1alpha1",
    kind = "Lock",
    doc = "A Lock makes every delete of its target fail at admission until the Lock itself is deleted. It protects one object of an enforceable API group in the Lock's own namespace; several Locks may protect the same object.",
    namespaced,
    status = "LockStatus",
    shortname = "lck",
    category = "navique",
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.targetRef.kind"),
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.targetRef.name"),
    printcolumn(name = "Active", type_ = "boolean", json_path = ".status.active"),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Reason", type_ = "string", json_path = ".spec.reason"),
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
pub struct LockSpec {
    /// The protected object: same namespace as the Lock, an API group the
    /// operator enforces. Immutable: to protect another object, create
    /// another Lock.
    #[x_kube(validation = Rule::new("self == oldSelf").message("targetRef is immutable; create a new Lock to protect another object"))]
    pub target_ref: TargetRef,
    /// Free-text note, surfaced in status and in the denied-delete message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub reason: Option<String>,
}

/// Names the object a Lock protects.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// API version of the protected object, e.g. `core.navique.com/v1alpha1`.
    /// Only the operator's API groups are enforceable.
    #[serde(default = "default_target_api_version")]
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// Kind of the protected object, e.g. `Stack` or `ManagedService`.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::names::KIND_PATTERN))]
    pub kind: String,
    /// Name of the protected object, in the Lock's namespace. A Lock on
    /// its own Namespace (`apiVersion: v1`, `kind: Namespace`, this name the
    /// Lock's namespace) protects every enforceable object in it, where the
    /// platform team enabled namespace-wide Locks.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub name: String,
}

fn default_target_api_version() -> String {
    DEFAULT_LOCK_TARGET_API_VERSION.to_owned()
}

impl TargetRef {
    /// The API group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

/// What the lock-controller observed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LockStatus {
    /// True once the target carries the lock annotation: its deletion is
    /// being rejected.
    #[serde(default)]
    pub active: bool,
    /// The Lock's `spec.reason`, as surfaced in denials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: True while protecting; False with `MissingReference` (target
    /// not found yet) or `InvalidTarget`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// The Lock's break-glass suspension (annotations
    /// `core.navique.com/suspended-until`, `suspend-reason`, `suspended-by`)
    /// as the lock-controller judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<LockSuspension>,
}

/// A break-glass suspension of a Lock, as the lock-controller recorded it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LockSuspension {
    /// `Suspended` (in effect: the target may be deleted), `Ended` (the
    /// deadline passed or the annotations were removed) or `Refused` (the
    /// Lock stayed active; `message` says why).
    pub state: SuspensionState,
    /// `core.navique.com/suspended-until`, as written.
    pub until: String,
    /// `core.navique.com/suspended-by`: the user admission authenticated.
    pub suspended_by: String,
    /// `core.navique.com/suspend-reason`.
    pub reason: String,
    /// When the lock-controller first saw this suspension (RFC 3339); the
    /// limit (`lockGuard.maxSuspension`) counts from here.
    pub since: String,
    /// What the suspension does, or why it was refused.
    pub message: String,
}

/// Where a Lock's suspension stands.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuspensionState {
    Suspended,
    Ended,
    Refused,
    /// Written by a newer lock-controller: judged afresh, as a new
    /// suspension would be.
    #[serde(other)]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(api_version: &str) -> TargetRef {
        TargetRef {
            api_version: api_version.into(),
            kind: "Stack".into(),
            name: "forge".into(),
        }
    }

    #[test]
    fn target_group_is_the_part_before_the_version() {
        assert_eq!(
            target("core.navique.com/v1alpha1").group(),
            "core.navique.com"
        );
        assert_eq!(target("apps/v1").group(), "apps");
    }

    #[test]
    fn core_group_target_has_an_empty_group() {
        assert_eq!(target("v1").group(), "");
    }

    #[test]
    fn omitted_target_api_version_defaults_to_the_core_group() {
        let spec: LockSpec = serde_json::from_value(
            serde_json::json!({"targetRef": {"kind": "Stack", "name": "forge"}}),
        )
        .unwrap();
        assert_eq!(spec.target_ref.api_version, "core.navique.com/v1alpha1");
    }
}
