//! Pending deletion approvals, read from the Stacks' status: every
//! `status.resources[]` entry with `requiresDeletionApproval: true` waits
//! for `cd.hanzo.ai/deletion-approved: "true"` on the resource; it is a
//! prune when the entry also says `requiresPruning`, else a delete (the
//! Stack is being deleted).

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt};
use navique_api::core::{Approver, Stack};
use serde::Serialize;

use crate::Error;
use crate::resources::{ResourceIndex, ResourceType, Target};

/// The Stack a pending approval belongs to.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StackRef {
    pub namespace: String,
    pub name: String,
}

/// The resource whose prune or delete waits.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceRef {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Absent when the Stack's status does not name one: the Stack's own
    /// namespace for a namespaced kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ResourceRef {
    /// `Kind`, or `Kind.group` outside the core group: a name `approve`
    /// takes for this resource's type.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// What waits for the approval.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// The resource left the Stack's `spec.resources` (`Prune=confirm`).
    Prune,
    /// The Stack is being deleted (`Delete=confirm`).
    Delete,
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Prune => "Prune",
            Self::Delete => "Delete",
        })
    }
}

/// One prune or delete waiting for a person. The same shape as the
/// `ApprovalEvents` service's `PendingApproval`, plus what the Stack's
/// status adds.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub stack: StackRef,
    /// The Stacks that list `stack` (a nested Stack), outermost first, in
    /// its namespace; empty for a Stack no other Stack lists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    pub operation: Operation,
    pub resource: ResourceRef,
    /// The resource's sync wave, when the Stack reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i32>,
    /// What the Stack says about the resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the operator started waiting (RFC 3339): the status item's
    /// `waitingSince`, or ApprovalEvents' `since`; none from a Stack whose
    /// controller records no time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Who approved so far, as the Stack's status records them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<Approver>,
    /// Distinct approvers the removal needs, when the Stack reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_required: Option<u32>,
}

impl PendingApproval {
    /// The namespace the resource lives in, if `resource_type` is namespaced.
    pub fn resource_namespace(&self, resource_type: &ResourceType) -> Option<&str> {
        resource_type.namespaced.then(|| {
            self.resource
                .namespace
                .as_deref()
                .unwrap_or(&self.stack.namespace)
        })
    }

    /// The resource as one object of the cluster: the same resource may be
    /// pending in several Stacks.
    fn object_key(&self) -> (&str, &str, &str, &str) {
        (
            &self.resource.group,
            &self.resource.kind,
            self.resource
                .namespace
                .as_deref()
                .unwrap_or(&self.stack.namespace),
            &self.resource.name,
        )
    }

    fn same_resource(&self, other: &Self) -> bool {
        self.object_key() == other.object_key()
    }
}

/// `approvals -o json|yaml`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ApprovalList {
    pub approvals: Vec<PendingApproval>,
}

/// What `approve` did with one resource.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApproveOutcome {
    /// `configmap/old-config` (kubectl's name for it) once resolved; else
    /// the argument as given.
    pub target: String,
    /// The resource's namespace, for a namespaced kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub approved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    /// Whom the approval was recorded for: the user name the API server
    /// authenticated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// `core.navique.com/approved-by` after the approval: every approver so
    /// far, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<String>,
    /// Distinct approvers the removal needs, when the Stack reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_required: Option<u32>,
    /// The line printed on stderr: `Error from server (Forbidden): ...` or
    /// `error: cm/x is not waiting for a deletion approval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ApproveOutcome {
    /// `target` was approved by `user`; `approved_by`: the
    /// `core.navique.com/approved-by` value now.
    pub fn approved(
        target: String,
        namespace: Option<&str>,
        pending: &PendingApproval,
        user: &str,
        approved_by: Option<&str>,
    ) -> Self {
        Self {
            target,
            namespace: namespace.map(str::to_owned),
            approved: true,
            stack: Some(pending.stack.clone()),
            operation: Some(pending.operation),
            approver: Some(user.to_owned()),
            approved_by: approved_by
                .unwrap_or_default()
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect(),
            approvals_required: pending.approvals_required,
            error: None,
        }
    }

    /// `target` was not approved: `error` is the line to print.
    pub fn failed(
        target: String,
        namespace: Option<&str>,
        pending: Option<&PendingApproval>,
        error: String,
    ) -> Self {
        Self {
            target,
            namespace: namespace.map(str::to_owned),
            approved: false,
            stack: pending.map(|p| p.stack.clone()),
            operation: pending.map(|p| p.operation),
            approver: None,
            approved_by: Vec::new(),
            approvals_required: None,
            error: Some(error),
        }
    }
}

/// `approve -o json|yaml`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ApproveReport {
    pub results: Vec<ApproveOutcome>,
}

/// Whether a `status.resources[]` entry is a nested Stack.
fn is_stack(resource: &navique_api::core::ResourceStatus) -> bool {
    resource.group == Stack::group(&()) && resource.kind == Stack::kind(&())
}

/// Every pending approval of `stacks`, by namespace, as a tree: a Stack's
/// own, then those of the Stacks it lists (its status rows of kind Stack),
/// each Stack's resources in the order its status lists them.
pub fn pending_approvals(stacks: &[Stack]) -> Vec<PendingApproval> {
    let mut stacks: Vec<&Stack> = stacks.iter().collect();
    stacks.sort_by_key(|s| (s.namespace(), s.name_any()));
    let id = |s: &Stack| (s.namespace().unwrap_or_default(), s.name_any());
    // A nested Stack's parent: the Stack whose status lists it.
    let mut parent: BTreeMap<(String, String), String> = BTreeMap::new();
    for stack in &stacks {
        let (namespace, name) = id(stack);
        for child in stack.status.iter().flat_map(|s| &s.resources) {
            if is_stack(child) && child.name != name {
                let child_namespace = child.namespace.clone().unwrap_or(namespace.clone());
                parent.insert((child_namespace, child.name.clone()), name.clone());
            }
        }
    }
    let parents_of = |(namespace, name): &(String, String)| {
        let mut chain: Vec<String> = Vec::new();
        let mut at = name.clone();
        while let Some(up) = parent.get(&(namespace.clone(), at.clone())) {
            if chain.contains(up) || up == name {
                break;
            }
            chain.insert(0, up.clone());
            at = up.clone();
        }
        chain
    };
    // Tree order: by namespace, then by the path of Stack names.
    let mut ordered: Vec<(Vec<String>, &Stack)> =
        stacks.iter().map(|s| (parents_of(&id(s)), *s)).collect();
    ordered.sort_by_key(|(parents, s)| {
        let mut path = parents.clone();
        path.push(s.name_any());
        (s.namespace(), path)
    });
    let mut pending = Vec::new();
    for (parents, stack) in ordered {
        let Some(status) = &stack.status else {
            continue;
        };
        let stack_ref = StackRef {
            namespace: stack.namespace().unwrap_or_default(),
            name: stack.name_any(),
        };
        for resource in status
            .resources
            .iter()
            .filter(|r| r.requires_deletion_approval)
        {
            pending.push(PendingApproval {
                stack: stack_ref.clone(),
                parents: parents.clone(),
                operation: if resource.requires_pruning {
                    Operation::Prune
                } else {
                    Operation::Delete
                },
                resource: ResourceRef {
                    group: resource.group.clone(),
                    version: resource.version.clone(),
                    kind: resource.kind.clone(),
                    namespace: resource.namespace.clone(),
                    name: resource.name.clone(),
                },
                wave: resource.sync_wave,
                message: resource.message.clone(),
                since: resource.waiting_since.as_ref().map(|t| t.0.to_string()),
                approved_by: resource.approved_by.clone(),
                approvals_required: resource.approvals_required,
            });
        }
    }
    pending
}

/// The pending approval `target` names: a resource of one of `types` (what
/// the target's kind resolved to) with the target's name. `None` when
/// nothing pending matches; an error when resources of several groups do.
/// A resource pending in several Stacks is one resource: its first Stack
/// is reported.
pub fn find_pending<'a>(
    pending: &'a [PendingApproval],
    types: &[&ResourceType],
    target: &Target,
) -> Result<Option<&'a PendingApproval>, Error> {
    let mut matches: Vec<&PendingApproval> = Vec::new();
    for p in pending.iter().filter(|p| {
        p.resource.name == target.name
            && types
                .iter()
                .any(|t| t.group == p.resource.group && t.kind == p.resource.kind)
    }) {
        if !matches.iter().any(|m| m.same_resource(p)) {
            matches.push(p);
        }
    }
    match matches.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        several => Err(Error::Ambiguous {
            target: target.to_string(),
            candidates: several
                .iter()
                .map(|p| format!("{}/{}", p.resource.qualified_kind(), p.resource.name))
                .collect::<Vec<_>>()
                .join(", "),
            example: format!("{}/{}", several[0].resource.qualified_kind(), target.name),
        }),
    }
}

/// What `approve <target>` patches: the resource pending in one of
/// `pending` that `target` names, and its type. Refused when `target`'s
/// type is unknown, when nothing pending matches, or when several do.
pub fn resolve_target<'a>(
    index: &'a ResourceIndex,
    pending: &'a [PendingApproval],
    target: &Target,
) -> Result<(&'a PendingApproval, &'a ResourceType), Error> {
    let types = index.resolve(&target.resource)?;
    find_pending(pending, &types, target)?
        .and_then(|p| {
            types
                .iter()
                .find(|t| t.group == p.resource.group && t.kind == p.resource.kind)
                .map(|t| (p, *t))
        })
        .ok_or_else(|| Error::NotPending(target.to_string()))
}

/// A Stack's pending approvals and those of the Stacks nested under it
/// (what its status counts), each resource once.
pub fn of_stack(pending: &[PendingApproval], stack: &str) -> Vec<PendingApproval> {
    let mut out: Vec<PendingApproval> = Vec::new();
    let under =
        |p: &&PendingApproval| p.stack.name == stack || p.parents.iter().any(|s| s == stack);
    for p in pending.iter().filter(under) {
        if !out.iter().any(|o| o.same_resource(p)) {
            out.push(p.clone());
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::resources::tests::index;

    /// A Stack with `status.resources` as the controller writes it.
    pub(crate) fn stack(ns: &str, name: &str, resources: serde_json::Value) -> Stack {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Stack",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"resources": []},
            "status": {"resources": resources}
        }))
        .unwrap()
    }

    pub(crate) fn stacks() -> Vec<Stack> {
        vec![
            stack(
                "shop",
                "web",
                serde_json::json!([
                    {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "shop", "name": "web",
                     "status": "Synced", "requiresDeletionApproval": true, "syncWave": 2},
                    {"version": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "settings",
                     "status": "Synced"}
                ]),
            ),
            stack(
                "forge",
                "app",
                serde_json::json!([
                    {"version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": "old-config",
                     "status": "OutOfSync", "requiresPruning": true, "requiresDeletionApproval": true,
                     "syncWave": 1, "message": "waiting for cd.hanzo.ai/deletion-approved",
                     "waitingSince": "2026-12-01T10:00:00Z"},
                    {"version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": "kept",
                     "status": "Synced"},
                    {"version": "v1", "kind": "ConfigMap", "name": "removed",
                     "status": "OutOfSync", "requiresPruning": true}
                ]),
            ),
            stack("forge", "empty", serde_json::json!([])),
        ]
    }

    fn summary(pending: &[PendingApproval]) -> Vec<String> {
        pending
            .iter()
            .map(|p| {
                format!(
                    "{}/{} {} {}/{}",
                    p.stack.namespace, p.stack.name, p.operation, p.resource.kind, p.resource.name
                )
            })
            .collect()
    }

    #[test]
    fn only_resources_requiring_approval_are_pending_prune_or_delete() {
        let pending = pending_approvals(&stacks());
        assert_eq!(
            summary(&pending),
            [
                "forge/app Prune ConfigMap/old-config",
                "shop/web Delete Deployment/web"
            ]
        );
        assert_eq!(pending[0].wave, Some(1));
        assert_eq!(
            pending[0].message.as_deref(),
            Some("waiting for cd.hanzo.ai/deletion-approved")
        );
        assert_eq!(pending[1].resource.group, "apps");
        // Since when each waits, as its row records it (a controller that
        // records none: unknown).
        assert_eq!(pending[0].since.as_deref(), Some("2026-12-01T10:00:00Z"));
        assert_eq!(pending[1].since, None);
    }

    /// A nested Stack's approvals come right after its parent's, naming
    /// the Stacks above it.
    #[test]
    fn nested_stacks_approvals_are_listed_under_their_parent() {
        let waiting = |name: &str| {
            serde_json::json!({"version": "v1", "kind": "ConfigMap", "name": name, "status": "OutOfSync",
                "requiresPruning": true, "requiresDeletionApproval": true})
        };
        let child = |name: &str| {
            serde_json::json!({"group": "core.navique.com", "version": "v1alpha1", "kind": "Stack",
                "name": name, "status": "Synced", "pendingApprovals": 1})
        };
        let stacks = [
            stack("ns", "b-inner", serde_json::json!([waiting("deep")])),
            stack("ns", "a-leaf", serde_json::json!([waiting("leaf")])),
            stack("ns", "z-outer", serde_json::json!([child("m-middle")])),
            stack(
                "ns",
                "m-middle",
                serde_json::json!([child("b-inner"), waiting("mid")]),
            ),
        ];
        let pending = pending_approvals(&stacks);
        assert_eq!(
            summary(&pending),
            [
                "ns/a-leaf Prune ConfigMap/leaf",
                "ns/m-middle Prune ConfigMap/mid",
                "ns/b-inner Prune ConfigMap/deep",
            ]
        );
        assert!(pending[0].parents.is_empty());
        assert_eq!(pending[1].parents, ["z-outer"]);
        assert_eq!(pending[2].parents, ["z-outer", "m-middle"]);
        assert_eq!(
            summary(&of_stack(&pending, "z-outer")),
            [
                "ns/m-middle Prune ConfigMap/mid",
                "ns/b-inner Prune ConfigMap/deep",
            ]
        );
        assert_eq!(
            summary(&of_stack(&pending, "b-inner")),
            ["ns/b-inner Prune ConfigMap/deep"]
        );
        assert_eq!(
            serde_json::to_value(&pending[2]).unwrap()["parents"],
            serde_json::json!(["z-outer", "m-middle"])
        );
    }

    #[test]
    fn a_stack_without_status_has_nothing_pending() {
        let mut stack = stack("a", "b", serde_json::json!([]));
        stack.status = None;
        assert!(pending_approvals(&[stack]).is_empty());
    }

    #[test]
    fn the_json_shape_follows_the_approval_events_service() {
        let pending = pending_approvals(&stacks());
        assert_eq!(
            serde_json::to_value(&pending[0]).unwrap(),
            serde_json::json!({
                "stack": {"namespace": "forge", "name": "app"},
                "operation": "Prune",
                "resource": {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": "old-config"},
                "wave": 1,
                "message": "waiting for cd.hanzo.ai/deletion-approved",
                "since": "2026-12-01T10:00:00Z"
            })
        );
    }

    #[test]
    fn a_target_finds_its_pending_resource_by_any_of_its_names() {
        let pending = pending_approvals(&stacks());
        let index = index();
        let find = |arg: &str| {
            let target = Target::parse(arg).unwrap();
            let types = index.resolve(&target.resource).unwrap();
            find_pending(&pending, &types, &target)
                .unwrap()
                .map(|p| p.resource.name.clone())
        };
        assert_eq!(find("cm/old-config").as_deref(), Some("old-config"));
        assert_eq!(find("ConfigMap/old-config").as_deref(), Some("old-config"));
        assert_eq!(find("deploy/web").as_deref(), Some("web"));
        assert_eq!(find("deployments.apps/web").as_deref(), Some("web"));
        assert_eq!(find("configmap/kept"), None);
        assert_eq!(find("configmap/web"), None);
        assert_eq!(find("configmap/removed"), None);
    }

    #[test]
    fn resolve_target_names_the_pending_resource_and_its_type_or_refuses() {
        let pending = pending_approvals(&stacks());
        let index = index();
        let resolve = |arg: &str| {
            resolve_target(&index, &pending, &Target::parse(arg).unwrap())
                .map(|(p, t)| format!("{} {}/{}", p.stack.name, t.display_name(), p.resource.name))
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            resolve("deploy/web").as_deref(),
            Ok("web deployment.apps/web")
        );
        assert_eq!(
            resolve("Deployment.apps/web").as_deref(),
            Ok("web deployment.apps/web")
        );
        assert_eq!(
            resolve("cm/kept").unwrap_err(),
            "cm/kept is not waiting for a deletion approval"
        );
        assert_eq!(
            resolve("gadgets/x").unwrap_err(),
            "the server doesn't have a resource type \"gadgets\""
        );
    }

    #[test]
    fn qualified_kinds_name_the_group_outside_the_core() {
        let pending = pending_approvals(&stacks());
        assert_eq!(pending[0].resource.qualified_kind(), "ConfigMap");
        assert_eq!(pending[1].resource.qualified_kind(), "Deployment.apps");
    }

    #[test]
    fn the_same_name_pending_in_two_groups_asks_for_the_group() {
        let stacks = [stack(
            "ops",
            "audit",
            serde_json::json!([
                {"version": "v1", "kind": "Event", "name": "e", "status": "Synced", "requiresDeletionApproval": true},
                {"group": "events.k8s.io", "version": "v1", "kind": "Event", "name": "e", "status": "Synced", "requiresDeletionApproval": true}
            ]),
        )];
        let pending = pending_approvals(&stacks);
        let index = index();
        let target = Target::parse("events/e").unwrap();
        let err = find_pending(&pending, &index.resolve("events").unwrap(), &target).unwrap_err();
        assert_eq!(
            err.to_string(),
            "events/e names several pending resources (Event/e, Event.events.k8s.io/e); add the API group, e.g. Event/e"
        );
        let target = Target::parse("events.events.k8s.io/e").unwrap();
        let found = find_pending(
            &pending,
            &index.resolve("events.events.k8s.io").unwrap(),
            &target,
        )
        .unwrap()
        .unwrap();
        assert_eq!(found.resource.group, "events.k8s.io");
    }

    #[test]
    fn a_resource_pending_in_two_stacks_is_one_resource() {
        let entry = serde_json::json!([{"version": "v1", "kind": "ConfigMap", "name": "shared",
            "status": "Synced", "requiresDeletionApproval": true}]);
        let stacks = [stack("x", "b", entry.clone()), stack("x", "a", entry)];
        let pending = pending_approvals(&stacks);
        assert_eq!(pending.len(), 2);
        let target = Target::parse("cm/shared").unwrap();
        let found = find_pending(&pending, &index().resolve("cm").unwrap(), &target)
            .unwrap()
            .unwrap();
        assert_eq!(found.stack.name, "a");
        assert_eq!(of_stack(&pending, "b").len(), 1);
    }

    #[test]
    fn of_stack_keeps_one_stacks_resources() {
        let pending = pending_approvals(&stacks());
        assert_eq!(
            summary(&of_stack(&pending, "app")),
            ["forge/app Prune ConfigMap/old-config"]
        );
        assert!(of_stack(&pending, "empty").is_empty());
    }

    #[test]
    fn the_resource_namespace_defaults_to_the_stacks_for_namespaced_kinds() {
        let pending = pending_approvals(&[stack(
            "forge",
            "app",
            serde_json::json!([{"version": "v1", "kind": "ConfigMap", "name": "c",
                "status": "Synced", "requiresDeletionApproval": true}]),
        )]);
        let index = index();
        assert_eq!(
            pending[0].resource_namespace(index.find("", "ConfigMap").unwrap()),
            Some("forge")
        );
        assert_eq!(
            pending[0].resource_namespace(index.find("", "Namespace").unwrap()),
            None
        );
    }
}
