//! A Stack's teardown and prune, predicted as service-lifecycle-controller
//! carries them out (docs/stacks.md, "Delete" and "Prune"): only the
//! Stack's own objects (its label and the uid its status recorded); a
//! teardown deletes its inventory last wave first and finishes a wave
//! before starting the next lower one, so a resource that stays (locked,
//! waiting for approval, held) stops the lower waves and keeps the Stack;
//! `Delete=false` lets a resource go; a prune removes what left
//! `spec.resources`, each by its own `Prune` option.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::ObjectMeta;
use navique_api::approvals::{Approval, Marks, approval};
use navique_api::constants::{annotations, finalizers};
use navique_api::core::{NotOwn, ResourceStatus, Stack, ownership};
use navique_api::grpc::approvals::v1::Operation;
use navique_api::sync_options::{Gate, SyncOptions};
use serde_json::Value;

use super::{Cause, Object, Plan, lock_stop};

/// The ServiceAccount Stacks act as when they name none: the chart's
/// default (`serviceLifecycleController.stackServiceAccount`).
pub const DEFAULT_STACK_ACCOUNT: &str = "navique-stack";

/// What is live for one row of the Stack's inventory.
#[derive(Clone, Debug, PartialEq)]
pub enum Live {
    Gone,
    Present(Box<ObjectMeta>),
    /// The kind is not served: the Stack leaves it alone.
    NotServed,
    /// The user may not read it: what it would do is unknown.
    Unreadable(String),
}

/// An inventory row with what is live for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub row: ResourceStatus,
    pub live: Live,
    /// For a nested Stack: its own teardown, which runs once it is deleted
    /// (the parent waits for it to be gone).
    pub nested: Option<Box<Plan>>,
}

/// Records a removal of `member`: a nested Stack's own teardown comes
/// with it, and when that stops, the nested Stack stays and so does the
/// parent's wave. Returns whether it stops.
fn removed(plan: &mut Plan, member: &Member, object: Object, wave: Option<i32>, how: &str) -> bool {
    let Some(nested) = &member.nested else {
        plan.remove(object, wave, how);
        return false;
    };
    plan.removed.extend(nested.removed.iter().cloned());
    plan.kept.extend(nested.kept.iter().cloned());
    plan.stops.extend(nested.stops.iter().cloned());
    plan.notes.extend(nested.notes.iter().cloned());
    !nested.stops.is_empty()
}

fn object(stack: &Stack, row: &ResourceStatus) -> Object {
    let api_version = if row.group.is_empty() {
        row.version.clone()
    } else {
        format!("{}/{}", row.group, row.version)
    };
    let namespace = row.namespace.clone().or_else(|| stack.namespace());
    Object::new(&api_version, &row.kind, namespace.as_deref(), &row.name)
}

/// Why the Stack would leave `meta` alone, if it is not its own (the
/// Stack controller's rule, `navique_api::core::ownership`).
fn not_its_own(stack: &str, row: &ResourceStatus, meta: &ObjectMeta) -> Option<String> {
    let why = ownership(stack, meta, Some(row), false).err()?;
    Some(match why {
        NotOwn::Retained => "retained from a deleted ManagedService: left alone".to_owned(),
        NotOwn::OfService(service) => format!("belongs to ManagedService {service}: left alone"),
        NotOwn::OfOtherStack(other) => format!("belongs to Stack {other}: left alone"),
        NotOwn::NotAdopted => format!("not created by Stack {stack}: left alone"),
    })
}

/// The manifest keys (`kind`, `name`) whose manifest declares
/// `cd.hanzo.ai/deletion-approved: "true"`.
fn declared(stack: &Stack) -> Vec<(String, String)> {
    stack
        .spec
        .resources
        .iter()
        .filter(|m| m["metadata"]["annotations"][annotations::DELETION_APPROVED] == "true")
        .map(|m| (str_of(&m["kind"]), str_of(&m["metadata"]["name"])))
        .collect()
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// What one removal of a live object of the Stack does.
enum Fate {
    Removed(&'static str),
    LetGo(String),
    Stays(Cause, String, String),
}

fn fate(
    stack: &Stack,
    member: &Member,
    meta: &ObjectMeta,
    operation: Operation,
    declared: bool,
) -> Fate {
    if meta.deletion_timestamp.is_some() {
        return Fate::Stays(
            Cause::BeingDeleted,
            "already being deleted".to_owned(),
            "the Stack waits for it to be gone".to_owned(),
        );
    }
    if let Some((summary, message)) = lock_stop(meta) {
        return Fate::Stays(Cause::Locked, summary, message);
    }
    let annotations = meta.annotations.as_ref();
    let options = SyncOptions::of(annotations);
    let pruning = operation == Operation::Prune;
    match options.gate(operation) {
        None => {
            let value = navique_api::sync_options::value(annotations).unwrap_or_default();
            let why = options.problem(value).unwrap_or_default();
            Fate::Stays(
                Cause::SyncOptionsNotUnderstood,
                "sync options not understood: held".to_owned(),
                navique_api::messages::held(&why),
            )
        }
        Some(Gate::Allow) => Fate::Removed(if pruning { "pruned" } else { "deleted" }),
        Some(Gate::Never) if pruning => Fate::LetGo("not pruned: Prune=false".to_owned()),
        Some(Gate::Never) => Fate::LetGo("let go and kept: Delete=false".to_owned()),
        Some(Gate::Confirm) => {
            let account = stack
                .spec
                .service_account_name
                .as_deref()
                .unwrap_or(DEFAULT_STACK_ACCOUNT);
            let user = format!(
                "system:serviceaccount:{}:{account}",
                stack.namespace().unwrap_or_default()
            );
            let marks = Marks::of(annotations, &user);
            let waits =
                member.row.requires_deletion_approval && member.row.requires_pruning == pruning;
            let required = stack.spec.required_approvals();
            match approval(&marks, declared, waits, required) {
                Approval::Given => Fate::Removed(if pruning {
                    "pruned (approved)"
                } else {
                    "deleted (approved)"
                }),
                Approval::Missing | Approval::Stale => {
                    let option = if pruning { "Prune" } else { "Delete" };
                    Fate::Stays(
                        Cause::ApprovalRequired,
                        "waiting for deletion approval".to_owned(),
                        format!(
                            "{option}=confirm: waits for {required} approver(s): kubectl navique approve {}/{}",
                            member.row.kind.to_ascii_lowercase(),
                            member.row.name
                        ),
                    )
                }
            }
        }
    }
}

/// The teardown of `stack`, whose inventory rows come with what is live.
pub fn teardown(stack: &Stack, members: &[Member], namespace_deleting: bool) -> Plan {
    let mut plan = Plan::default();
    let name = stack.name_any();
    let target = Object::new(
        "core.navique.com/v1alpha1",
        "Stack",
        stack.namespace().as_deref(),
        &name,
    );
    if let Some((summary, message)) = lock_stop(&stack.metadata) {
        plan.stop(target, None, Cause::Locked, summary, message);
        return plan;
    }
    if stack.metadata.deletion_timestamp.is_some() {
        plan.notes
            .push(format!("Stack {name} is already being deleted"));
    }
    let tears_down = stack.finalizers().iter().any(|f| f == finalizers::STACK);
    if namespace_deleting || !tears_down {
        let why = if namespace_deleting {
            "its namespace is being deleted: the namespace controller removes it"
        } else {
            "the Stack has no teardown finalizer: it is not deleted with the Stack"
        };
        for member in members
            .iter()
            .filter(|m| matches!(m.live, Live::Present(_)))
        {
            plan.keep(object(stack, &member.row), member.row.sync_wave, why);
        }
        plan.remove(target.clone(), None, "deleted");
        plan.allowed = format!("Stack {name} is deleted");
        return plan;
    }
    let declared = declared(stack);
    // The Stack's own live objects, by wave, highest first.
    let mut waves: BTreeMap<std::cmp::Reverse<i32>, Vec<(&Member, &ObjectMeta)>> = BTreeMap::new();
    for member in members {
        let row = &member.row;
        match &member.live {
            Live::Gone => {}
            Live::NotServed => plan.keep(
                object(stack, row),
                row.sync_wave,
                "its kind is not served: left alone and dropped from the inventory",
            ),
            Live::Unreadable(why) => plan.stop(
                object(stack, row),
                row.sync_wave,
                Cause::Unreadable,
                format!("cannot read {} {}: {why}", row.kind, row.name),
                "the Stack acts as its own ServiceAccount; without reading the object the preview cannot tell what it does",
            ),
            Live::Present(meta) => match not_its_own(&name, row, meta) {
                Some(why) => plan.keep(object(stack, row), row.sync_wave, why),
                None => waves
                    .entry(std::cmp::Reverse(row.sync_wave.unwrap_or(0)))
                    .or_default()
                    .push((member, meta)),
            },
        }
    }
    let mut stopped_at: Option<i32> = None;
    let mut count = 0;
    for (std::cmp::Reverse(wave), items) in &waves {
        if let Some(stop) = stopped_at {
            for (member, _) in items {
                plan.keep(
                    object(stack, &member.row),
                    Some(*wave),
                    format!("not reached: waits for wave {stop} to be deleted"),
                );
            }
            continue;
        }
        for (member, meta) in items {
            let key = (member.row.kind.clone(), member.row.name.clone());
            let declares = declared.contains(&key);
            let obj = object(stack, &member.row);
            match fate(stack, member, meta, Operation::Delete, declares) {
                Fate::Removed(how) => {
                    count += 1;
                    if removed(&mut plan, member, obj, Some(*wave), how) {
                        stopped_at = Some(*wave);
                    }
                }
                Fate::LetGo(why) => plan.keep(obj, Some(*wave), why),
                Fate::Stays(cause, summary, message) => {
                    stopped_at = Some(*wave);
                    plan.stop(obj, Some(*wave), cause, summary, message);
                }
            }
        }
    }
    match stopped_at {
        Some(wave) => plan.keep(
            target,
            None,
            format!("marked for deletion: its teardown stops at wave {wave}"),
        ),
        None => plan.remove(target, None, "deleted (its finalizer goes)"),
    }
    plan.allowed = format!("Stack {name} and {count} resource(s) are deleted, last wave first");
    plan
}

/// The group and kind of a manifest's `apiVersion` and `kind`, and its name
/// and namespace: a resource's key (not its version).
fn key_of(manifest: &Value, namespace: &str) -> (String, String, String, String) {
    let api_version = str_of(&manifest["apiVersion"]);
    let group = api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
        .to_owned();
    let ns = manifest["metadata"]["namespace"]
        .as_str()
        .unwrap_or(namespace)
        .to_owned();
    (
        group,
        str_of(&manifest["kind"]),
        ns,
        str_of(&manifest["metadata"]["name"]),
    )
}

/// What applying `new` over the live `stack` would prune: the rows of its
/// inventory that `new.spec.resources` no longer lists, last wave first,
/// each by its live `Prune` option.
pub fn prune(stack: &Stack, new: &Stack, members: &[Member]) -> Plan {
    let mut plan = Plan::default();
    let name = stack.name_any();
    let namespace = stack.namespace().unwrap_or_default();
    let wanted: Vec<_> = new
        .spec
        .resources
        .iter()
        .map(|m| key_of(m, &namespace))
        .collect();
    let mut gone: Vec<&Member> = members
        .iter()
        .filter(|m| {
            let row = &m.row;
            let key = (
                row.group.clone(),
                row.kind.clone(),
                row.namespace.clone().unwrap_or_else(|| namespace.clone()),
                row.name.clone(),
            );
            !wanted.contains(&key)
        })
        .collect();
    gone.sort_by_key(|m| std::cmp::Reverse(m.row.sync_wave.unwrap_or(0)));
    let mut count = 0;
    for member in gone {
        let row = &member.row;
        let obj = object(stack, row);
        match &member.live {
            Live::Gone => {}
            Live::NotServed => plan.keep(obj, row.sync_wave, "its kind is not served: left alone"),
            Live::Unreadable(why) => plan.stop(
                obj,
                row.sync_wave,
                Cause::Unreadable,
                format!("cannot read {} {}: {why}", row.kind, row.name),
                "the Stack acts as its own ServiceAccount; without reading the object the preview cannot tell what it does",
            ),
            Live::Present(meta) => match not_its_own(&name, row, meta) {
                Some(why) => plan.keep(obj, row.sync_wave, why),
                None => match fate(stack, member, meta, Operation::Prune, false) {
                    Fate::Removed(how) => {
                        count += 1;
                        removed(&mut plan, member, obj, row.sync_wave, how);
                    }
                    Fate::LetGo(why) => plan.keep(obj, row.sync_wave, why),
                    Fate::Stays(cause, summary, message) => {
                        plan.stop(obj, row.sync_wave, cause, summary, message);
                    }
                },
            },
        }
    }
    plan.allowed = if count == 0 && plan.kept.is_empty() {
        format!("Stack {name} prunes nothing")
    } else {
        format!("Stack {name} prunes {count} resource(s)")
    };
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use navique_api::constants::labels;
    use navique_api::core::{StackSpec, StackStatus, SyncStatus};
    use serde_json::json;

    use super::*;
    use crate::preview::Verdict;
    use crate::preview::outcome::decide;
    use crate::preview::tests::meta;

    fn row(kind: &str, name: &str, wave: i32) -> ResourceStatus {
        ResourceStatus {
            group: if kind == "Stack" {
                "core.navique.com".into()
            } else {
                String::new()
            },
            version: if kind == "Stack" {
                "v1alpha1".into()
            } else {
                "v1".into()
            },
            kind: kind.into(),
            namespace: Some("shop".into()),
            name: name.into(),
            status: SyncStatus::Synced,
            health: None,
            requires_pruning: false,
            requires_deletion_approval: false,
            sync_wave: Some(wave),
            message: None,
            uid: Some(format!("uid-{name}")),
            creating: false,
            pending_approvals: None,
            approved_by: Vec::new(),
            approvals_required: None,
            waiting_since: None,
        }
    }

    fn live(name: &str, annotations: &[(&str, &str)]) -> Live {
        let mut meta = meta(name, annotations);
        meta.labels = Some(BTreeMap::from([(
            labels::STACK.to_owned(),
            "app".to_owned(),
        )]));
        Live::Present(Box::new(meta))
    }

    fn member(kind: &str, name: &str, wave: i32, annotations: &[(&str, &str)]) -> Member {
        Member {
            row: row(kind, name, wave),
            live: live(name, annotations),
            nested: None,
        }
    }

    fn stack(resources: Vec<Value>) -> Stack {
        let mut stack = Stack::new(
            "app",
            StackSpec {
                resources,
                service_account_name: None,
                approvals: None,
            },
        );
        stack.metadata.namespace = Some("shop".into());
        stack.metadata.finalizers = Some(vec![finalizers::STACK.into()]);
        stack.status = Some(StackStatus::default());
        stack
    }

    fn names(plan: &Plan) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            plan.removed
                .iter()
                .map(|r| r.object.name.as_str())
                .collect(),
            plan.stops.iter().map(|s| s.object.name.as_str()).collect(),
            plan.kept.iter().map(|k| k.object.name.as_str()).collect(),
        )
    }

    const LOCKED: (&str, &str) = ("core.navique.com/locked", "keep-inner");

    #[test]
    fn a_locked_resource_stops_its_wave_and_keeps_the_lower_waves_and_the_stack() {
        let stack = stack(vec![]);
        let members = [
            member("ConfigMap", "base", 0, &[]),
            member("Stack", "inner", 1, &[LOCKED]),
            member("ConfigMap", "beside", 1, &[]),
            member("ConfigMap", "front", 2, &[]),
        ];
        let plan = teardown(&stack, &members, false);
        assert_eq!(
            names(&plan),
            (vec!["front", "beside"], vec!["inner"], vec!["base", "app"])
        );
        assert_eq!(
            plan.kept[0].why,
            "not reached: waits for wave 1 to be deleted"
        );
        let outcome = decide(
            &Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), "app"),
            &plan,
        );
        assert_eq!(outcome.verdict, Verdict::Partial);
        assert_eq!(
            outcome.line,
            "partial: Stack app stops at Stack inner (locked by keep-inner)"
        );
    }

    #[test]
    fn nothing_in_the_way_deletes_every_wave_and_then_the_stack() {
        let stack = stack(vec![]);
        let members = [
            member("ConfigMap", "base", 0, &[]),
            member("ConfigMap", "front", 2, &[]),
            Member {
                row: row("ConfigMap", "gone", 1),
                live: Live::Gone,
                nested: None,
            },
        ];
        let plan = teardown(&stack, &members, false);
        assert_eq!(names(&plan), (vec!["front", "base", "app"], vec![], vec![]));
        assert_eq!(
            decide(
                &Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), "app"),
                &plan
            )
            .line,
            "allowed: Stack app and 2 resource(s) are deleted, last wave first"
        );
    }

    #[test]
    fn a_nested_stacks_own_teardown_goes_with_it_and_its_stop_stops_the_parent() {
        let stack = stack(vec![]);
        let mut inner = Stack::new(
            "inner",
            StackSpec {
                resources: vec![],
                service_account_name: None,
                approvals: None,
            },
        );
        inner.metadata.namespace = Some("shop".into());
        inner.metadata.finalizers = Some(vec![finalizers::STACK.into()]);
        let mut inner_members = [
            member("ConfigMap", "deep", 0, &[LOCKED]),
            member("ConfigMap", "top", 1, &[]),
        ];
        for m in &mut inner_members {
            if let Live::Present(meta) = &mut m.live {
                meta.labels = Some(BTreeMap::from([(
                    labels::STACK.to_owned(),
                    "inner".to_owned(),
                )]));
            }
        }
        let mut nested = member("Stack", "inner", 1, &[]);
        nested.nested = Some(Box::new(teardown(&inner, &inner_members, false)));
        let plan = teardown(
            &stack,
            &[member("ConfigMap", "base", 0, &[]), nested.clone()],
            false,
        );
        assert_eq!(
            names(&plan),
            (vec!["top"], vec!["deep"], vec!["inner", "base", "app"])
        );
        assert_eq!(
            decide(
                &Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), "app"),
                &plan
            )
            .line,
            "partial: Stack app stops at ConfigMap deep (locked by keep-inner)"
        );
        // Without the Lock the nested teardown finishes and the parent goes on.
        inner_members[0] = member("ConfigMap", "deep", 0, &[]);
        if let Live::Present(meta) = &mut inner_members[0].live {
            meta.labels = Some(BTreeMap::from([(
                labels::STACK.to_owned(),
                "inner".to_owned(),
            )]));
        }
        nested.nested = Some(Box::new(teardown(&inner, &inner_members, false)));
        let plan = teardown(
            &stack,
            &[member("ConfigMap", "base", 0, &[]), nested],
            false,
        );
        assert_eq!(
            names(&plan),
            (vec!["top", "deep", "inner", "base", "app"], vec![], vec![])
        );
    }

    #[test]
    fn a_locked_stack_is_refused() {
        let mut stack = stack(vec![]);
        stack.metadata.annotations = Some(BTreeMap::from([(
            LOCKED.0.to_owned(),
            "protect-app".to_owned(),
        )]));
        let plan = teardown(&stack, &[member("ConfigMap", "a", 0, &[])], false);
        let outcome = decide(
            &Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), "app"),
            &plan,
        );
        assert_eq!(outcome.line, "refused: locked by protect-app");
        assert!(plan.removed.is_empty());
    }

    #[test]
    fn delete_confirm_waits_unless_the_manifest_declares_the_approval_and_delete_false_lets_go() {
        let stack = stack(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "declared", "annotations": {"cd.hanzo.ai/deletion-approved": "true"}}}),
        ]);
        let confirm = ("cd.hanzo.ai/sync-options", "Delete=confirm");
        let members = [
            member("ConfigMap", "gated", 0, &[confirm]),
            member(
                "ConfigMap",
                "declared",
                0,
                &[confirm, ("cd.hanzo.ai/deletion-approved", "true")],
            ),
            member(
                "ConfigMap",
                "kept",
                0,
                &[("cd.hanzo.ai/sync-options", "Delete=false")],
            ),
        ];
        let plan = teardown(&stack, &members, false);
        assert_eq!(
            names(&plan),
            (vec!["declared"], vec!["gated"], vec!["kept", "app"])
        );
        assert_eq!(plan.stops[0].cause, Cause::ApprovalRequired);
        assert_eq!(plan.kept[0].why, "let go and kept: Delete=false");
    }

    // stale authorisation: an approval set before the delete waited is
    // taken away by the Stack, so it does not count in the preview either.
    #[test]
    fn an_approval_given_before_the_wait_does_not_count_one_given_while_waiting_does() {
        let stack = stack(vec![]);
        let marks = [
            ("cd.hanzo.ai/sync-options", "Delete=confirm"),
            ("cd.hanzo.ai/deletion-approved", "true"),
            ("core.navique.com/approved-by", "alice"),
        ];
        let early = member("ConfigMap", "early", 0, &marks);
        let mut waiting = member("ConfigMap", "waiting", 0, &marks);
        waiting.row.requires_deletion_approval = true;
        let plan = teardown(&stack, &[early, waiting], false);
        assert_eq!(names(&plan).0, ["waiting"]);
        assert_eq!(names(&plan).1, ["early"]);
    }

    // fail open: options not understood hold the resource.
    #[test]
    fn sync_options_not_understood_hold_the_wave() {
        let stack = stack(vec![]);
        let plan = teardown(
            &stack,
            &[member(
                "ConfigMap",
                "odd",
                0,
                &[("cd.hanzo.ai/sync-options", "Delete=Confirm")],
            )],
            false,
        );
        assert_eq!(plan.stops[0].cause, Cause::SyncOptionsNotUnderstood);
        assert!(
            plan.stops[0]
                .message
                .starts_with("held, neither pruned nor deleted: "),
            "{}",
            plan.stops[0].message
        );
    }

    // ownership by label: a labelled object whose uid the Stack did not
    // record is left alone, and holds nothing.
    #[test]
    fn an_object_that_is_not_the_stacks_own_is_left_alone() {
        let stack = stack(vec![]);
        let mut other = member("ConfigMap", "planted", 0, &[]);
        other.row.uid = Some("another-uid".into());
        let plan = teardown(&stack, &[other], false);
        assert_eq!(names(&plan), (vec!["app"], vec![], vec!["planted"]));
        assert_eq!(plan.kept[0].why, "not created by Stack app: left alone");
    }

    #[test]
    fn a_sync_prunes_what_left_the_stack_and_a_confirm_marked_one_waits() {
        let live_stack = stack(vec![]);
        let new = stack(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}}),
        ]);
        let members = [
            member("ConfigMap", "kept", 0, &[]),
            member("ConfigMap", "plain", 0, &[]),
            member(
                "ConfigMap",
                "gated",
                1,
                &[("cd.hanzo.ai/sync-options", "Prune=confirm")],
            ),
            member(
                "ConfigMap",
                "never",
                0,
                &[("cd.hanzo.ai/sync-options", "Prune=false")],
            ),
        ];
        let plan = prune(&live_stack, &new, &members);
        assert_eq!(names(&plan), (vec!["plain"], vec!["gated"], vec!["never"]));
        assert_eq!(
            decide(
                &Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), "app"),
                &plan
            )
            .line,
            "partial: Stack app stops at ConfigMap gated (waiting for deletion approval)"
        );
    }
}
