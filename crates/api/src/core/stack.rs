use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a Stack.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "core.navique.com",
    version = "v1alpha1",
    kind = "Stack",
    doc = "A Stack is a bundle of manifests the operator applies in sync-wave order, prunes when they leave the list, and deletes with the Stack. Resources marked `cd.hanzo.ai/sync-options: Prune=confirm` or `Delete=confirm` are pruned or deleted only after a person approves.",
    namespaced,
    status = "StackStatus",
    shortname = "stk",
    category = "navique",
    printcolumn(
        name = "Operation",
        type_ = "string",
        json_path = ".status.operation.phase"
    ),
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
pub struct StackSpec {
    /// Complete manifests to apply. Each may carry `cd.hanzo.ai/sync-wave`
    /// (lower waves first) and `cd.hanzo.ai/sync-options`.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::embedded_manifests")]
    pub resources: Vec<serde_json::Value>,
    /// The ServiceAccount of the Stack's namespace that the controller acts
    /// as (by impersonation) to read, apply, prune and delete the Stack's
    /// resources: its RBAC is all a Stack may do. Unset: the controller's
    /// default (`--stack-default-service-account`; the chart's
    /// `navique-stack`). Requests as an account that nothing grants are
    /// refused, and the refusal shows on the resource's row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub service_account_name: Option<String>,
    /// How the Stack's confirm-marked prunes and deletes are approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalsSpec>,
}

/// How many people approve a confirm-marked removal.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsSpec {
    /// Distinct approvers (names in `core.navique.com/approved-by`, each
    /// counted once) a prune or delete needs before it runs: 1 (the
    /// default) to 10. With 2 or more ("four eyes"), an approval declared in
    /// the Stack's own manifest counts for nobody.
    #[schemars(range(min = 1, max = 10))]
    pub required: u32,
}

impl StackSpec {
    /// Distinct approvers a confirm-marked removal needs (1 unless set).
    pub fn required_approvals(&self) -> u32 {
        self.approvals.as_ref().map_or(1, |a| a.required)
    }
}

/// The Stack's inventory and the state of its current operation.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The sync or deletion in progress, or the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<OperationState>,
    /// Every resource the Stack manages or still has to prune.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// `Ready`: True when every resource is synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// A sync or deletion operation.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// Stays `Progressing` while the operation waits, including for a
    /// deletion approval.
    pub phase: OperationPhase,
    /// What the operation is doing or waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the operation started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the operation finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// Phase of a Stack operation.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationPhase {
    Progressing,
    Succeeded,
    Failed,
}

/// One resource of a Stack's inventory.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Whether the live object matches the manifest.
    pub status: SyncStatus,
    /// Health, where the operator knows how to tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
    /// The resource left `spec.resources` and is to be pruned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_pruning: bool,
    /// The resource's prune or delete waits for
    /// `cd.hanzo.ai/deletion-approved: "true"`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_deletion_approval: bool,
    /// The resource's sync wave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_wave: Option<i32>,
    /// Why the resource is not where it should be, e.g. a denied delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The uid of the object the Stack created or adopted: the Stack
    /// changes, prunes and deletes only the object of this uid that also
    /// carries its label. Written only by the controller (status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The Stack is creating the object: recorded before the create, so
    /// that an object of this key created by the Stack whose uid was not
    /// recorded yet (the controller stopped in between) is known as its
    /// own. Replaced by `uid` once the object exists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub creating: bool,
    /// For a nested Stack: how many prunes and deletes wait for approval
    /// in it and in the Stacks it lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approvals: Option<u32>,
    /// Who approved the waiting prune or delete so far, in order: the user
    /// names the API server authenticated (`core.navique.com/approved-by`),
    /// each with when the controller first counted it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<Approver>,
    /// While the prune or delete waits: how many distinct approvers it
    /// needs (`spec.approvals.required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_required: Option<u32>,
    /// While the prune or delete waits for approval: when it started to
    /// wait. Set by the controller in the pass that first records the wait,
    /// and kept while it waits, across passes and restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Time>,
}

/// One person's approval of a waiting removal.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Approver {
    /// The approver's Kubernetes user name, as the API server authenticated
    /// it.
    pub user: String,
    /// When the controller first saw the approval.
    pub time: Time,
}

/// Whether a live object matches its manifest.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncStatus {
    Synced,
    OutOfSync,
}

/// Health of one resource.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    pub status: HealthState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Health states, as GitOps tools report them.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthState {
    Healthy,
    Progressing,
    Degraded,
    Missing,
    Unknown,
}

/// Why an object is not a Stack's own, so that the Stack neither changes,
/// prunes nor deletes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotOwn {
    /// Labelled `services.kube-dc.com/retained: "true"`.
    Retained,
    /// A ManagedService's (an owner reference to one, or its label): its name.
    OfService(String),
    /// Labelled as another Stack's: that Stack's name.
    OfOtherStack(String),
    /// Neither created by the Stack (the uid its status recorded, with its
    /// label) nor adopted.
    NotAdopted,
}

/// Whether `object` is Stack `stack`'s own, given the row its status
/// recorded for it and whether its manifest asks to adopt it: the rule
/// the Stack controller claims by, and the plugin's previews predict by.
///
/// Never a retained object, a ManagedService's or another Stack's (by
/// label; none of these can be adopted). Else the Stack's own is the
/// object labelled as its own whose uid the Stack recorded, or, labelled as
/// its own, created while the row records the create with no uid yet (the
/// controller stopped after the create, before recording the uid). The
/// label alone is never enough: a tenant can write it ("ownership by
/// label").
pub fn ownership(
    stack: &str,
    object: &ObjectMeta,
    recorded: Option<&ResourceStatus>,
    adopt: bool,
) -> Result<(), NotOwn> {
    use crate::constants::labels;
    let label = |name: &str| object.labels.as_ref().and_then(|l| l.get(name));
    if label(labels::RETAINED).is_some_and(|v| v == "true") {
        return Err(NotOwn::Retained);
    }
    let service_owner = object.owner_references.iter().flatten().find(|o| {
        o.kind == "ManagedService"
            && o.api_version.split('/').next() == Some(crate::constants::SERVICES_GROUP)
    });
    if let Some(service) = service_owner
        .map(|o| o.name.as_str())
        .or_else(|| label(labels::SERVICE).map(String::as_str))
    {
        return Err(NotOwn::OfService(service.to_owned()));
    }
    let labelled = match label(labels::STACK) {
        Some(other) if other != stack => return Err(NotOwn::OfOtherStack(other.clone())),
        labelled => labelled.is_some(),
    };
    let recorded_uid = recorded.and_then(|r| r.uid.as_deref());
    let own = match recorded_uid {
        Some(uid) => object.uid.as_deref() == Some(uid),
        None => recorded.is_some_and(|r| r.creating),
    };
    if (labelled && own) || adopt {
        Ok(())
    } else {
        Err(NotOwn::NotAdopted)
    }
}
