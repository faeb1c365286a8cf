//! The owner-reference tree as the garbage collector walks it, and a
//! namespace's deletion as the namespace controller carries it out.
//!
//! The garbage collector's rules (Kubernetes' "Garbage collection"):
//! - `orphan`: only the object goes; its dependents lose the owner
//!   reference and stay.
//! - `background`: the object goes at once; a dependent goes once none of
//!   its owners is left, and so on down. A dependent whose delete is
//!   refused (a Lock) stays, and so do its own dependents.
//! - `foreground`: the object is marked, its dependents go first, and it
//!   goes once no dependent with `blockOwnerDeletion: true` is left: a
//!   dependent that stays keeps such an owner (and its owners) there too.

use std::collections::{BTreeSet, VecDeque};

use kube::api::ObjectMeta;

use super::{Cascade, Cause, Object, Plan, lock_stop};

/// One live object, as far as deletion goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub object: Object,
    pub uid: String,
    /// Owners' uids, each with `blockOwnerDeletion`.
    pub owners: Vec<(String, bool)>,
    pub meta: ObjectMeta,
}

impl Node {
    pub fn of(api_version: &str, kind: &str, meta: &ObjectMeta) -> Self {
        Self {
            object: Object::new(
                api_version,
                kind,
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or_default(),
            ),
            uid: meta.uid.clone().unwrap_or_default(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| (o.uid.clone(), o.block_owner_deletion == Some(true)))
                .collect(),
            meta: meta.clone(),
        }
    }
}

/// Finalizers the preview expects their controllers to finish: the garbage
/// collector's, Kubernetes' own and Navique's.
fn expected_finalizer(finalizer: &str) -> bool {
    matches!(finalizer, "kubernetes" | "foregroundDeletion" | "orphan")
        || finalizer.starts_with("kubernetes.io/")
        || finalizer.contains(".kubernetes.io/")
        || finalizer.starts_with(navique_api::constants::CORE_GROUP)
        || finalizer.starts_with(navique_api::constants::SERVICES_GROUP)
}

/// The first finalizer of `meta` that no known controller runs.
fn foreign_finalizer(meta: &ObjectMeta) -> Option<&str> {
    meta.finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .find(|f| !expected_finalizer(f))
}

/// What else stops `node` from going, once its delete is sent.
fn stays(plan: &mut Plan, node: &Node) -> bool {
    if let Some((summary, message)) = lock_stop(&node.meta) {
        plan.stop(node.object.clone(), None, Cause::Locked, summary, message);
        return true;
    }
    if let Some(finalizer) = foreign_finalizer(&node.meta) {
        plan.stop(
            node.object.clone(),
            None,
            Cause::Finalizer,
            format!("finalizer {finalizer}"),
            format!("it stays until the controller that set finalizer {finalizer} removes it"),
        );
        return true;
    }
    false
}

/// The delete of `target` with `cascade`, among `objects` (everything that
/// may own or depend on it: its namespace's objects, or every object for a
/// cluster-scoped target).
pub fn cascade(target: &Node, objects: &[Node], cascade: Cascade) -> Plan {
    let mut plan = Plan::default();
    if target.meta.deletion_timestamp.is_some() {
        plan.notes.push(format!(
            "{} is already being deleted",
            target.object.display()
        ));
    }
    if stays(&mut plan, target) {
        return plan;
    }
    let dependents = |uid: &str| {
        objects
            .iter()
            .filter(|n| n.owners.iter().any(|(owner, _)| owner == uid))
            .collect::<Vec<_>>()
    };
    if cascade == Cascade::Orphan {
        plan.remove(target.object.clone(), None, "deleted");
        for dependent in dependents(&target.uid) {
            plan.keep(
                dependent.object.clone(),
                None,
                format!(
                    "orphaned: its owner reference to {} is removed",
                    target.object.display()
                ),
            );
        }
        plan.allowed = format!(
            "{} is deleted; its dependents stay",
            target.object.display()
        );
        return plan;
    }
    // Breadth first from the target: what goes, in the order it is reached.
    let mut going: Vec<&Node> = vec![target];
    let mut gone: BTreeSet<&str> = BTreeSet::from([target.uid.as_str()]);
    let mut stopped: BTreeSet<&str> = BTreeSet::new();
    let mut queue = VecDeque::from([target]);
    while let Some(owner) = queue.pop_front() {
        for dependent in dependents(&owner.uid) {
            if gone.contains(dependent.uid.as_str()) || stopped.contains(dependent.uid.as_str()) {
                continue;
            }
            if let Some((other, _)) = dependent
                .owners
                .iter()
                .find(|(o, _)| !gone.contains(o.as_str()) && objects.iter().any(|n| n.uid == *o))
            {
                let name = objects
                    .iter()
                    .find(|n| n.uid == *other)
                    .map(|n| n.object.display())
                    .unwrap_or_default();
                plan.keep(
                    dependent.object.clone(),
                    None,
                    format!("still owned by {name}"),
                );
                continue;
            }
            if stays(&mut plan, dependent) {
                stopped.insert(&dependent.uid);
                continue;
            }
            gone.insert(&dependent.uid);
            going.push(dependent);
            queue.push_back(dependent);
        }
    }
    // Foreground: an owner waits for every dependent that stays and blocks it.
    let mut waiting: BTreeSet<&str> = BTreeSet::new();
    if cascade == Cascade::Foreground {
        loop {
            let blocked = going.iter().find(|owner| {
                !waiting.contains(owner.uid.as_str())
                    && objects.iter().any(|d| {
                        (stopped.contains(d.uid.as_str()) || waiting.contains(d.uid.as_str()))
                            && d.owners.iter().any(|(o, block)| *o == owner.uid && *block)
                    })
            });
            let Some(owner) = blocked else { break };
            waiting.insert(&owner.uid);
        }
    }
    let order: Vec<&Node> = if cascade == Cascade::Foreground {
        going.iter().rev().copied().collect()
    } else {
        going.clone()
    };
    for node in order {
        if waiting.contains(node.uid.as_str()) {
            plan.keep(
                node.object.clone(),
                None,
                "marked for deletion: waits for a dependent that stays (blockOwnerDeletion)",
            );
        } else if node.uid == target.uid {
            plan.remove(node.object.clone(), None, "deleted");
        } else {
            plan.remove(node.object.clone(), None, "garbage-collected");
        }
    }
    let dependents = plan.removed.len().saturating_sub(1);
    plan.allowed = format!(
        "{} and {dependents} dependent(s) are deleted",
        target.object.display()
    );
    plan
}

/// The delete of namespace `namespace` holding `objects`: refused while it
/// holds active Locks (its `core.navique.com/locked` marker, which the
/// guard reads); else everything in it goes, whatever Stacks, policies or
/// approvals say.
pub fn namespace(namespace: &Node, objects: &[Node]) -> Plan {
    let mut plan = Plan::default();
    let name = &namespace.object.name;
    let marker = namespace
        .meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(navique_api::constants::annotations::LOCKED))
        .filter(|v| !v.trim().is_empty());
    if let Some(locked) = marker {
        let message = navique_api::messages::namespace_locked(name, locked);
        let summary = format!(
            "namespace {name} holds Lock(s) [{}]",
            locked.replace(',', ", ")
        );
        plan.stop(
            namespace.object.clone(),
            None,
            Cause::NamespaceLocked,
            summary,
            message,
        );
        return plan;
    }
    if let Some(finalizer) = foreign_finalizer(&namespace.meta) {
        plan.stop(
            namespace.object.clone(),
            None,
            Cause::Finalizer,
            format!("finalizer {finalizer}"),
            format!("it stays until the controller that set finalizer {finalizer} removes it"),
        );
    }
    for node in objects {
        if stays(&mut plan, node) {
            continue;
        }
        plan.remove(node.object.clone(), None, "deleted with the namespace");
    }
    plan.remove(namespace.object.clone(), None, "deleted");
    let kinds: BTreeSet<&str> = objects.iter().map(|n| n.object.kind.as_str()).collect();
    if kinds.contains("Stack") {
        plan.notes.push(
            "Stacks end their teardown at once: the namespace controller deletes their resources whatever they wait for".to_owned(),
        );
    }
    if kinds.contains("ManagedService") {
        plan.notes.push(
            "every ManagedService is deleted with its data whatever its deletionPolicy, deletionProtection or confirmation (ProjectDeleted); no final backup is taken".to_owned(),
        );
    }
    plan.allowed = format!(
        "namespace {name} and the {} object(s) in it are deleted",
        objects.len()
    );
    plan
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::preview::outcome::decide;
    use crate::preview::tests::meta;

    fn node(name: &str, owners: &[(&str, bool)], annotations: &[(&str, &str)]) -> Node {
        let mut meta = meta(name, annotations);
        meta.owner_references = Some(
            owners
                .iter()
                .map(|(owner, block)| OwnerReference {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: (*owner).into(),
                    uid: format!("uid-{owner}"),
                    block_owner_deletion: Some(*block),
                    controller: None,
                })
                .collect(),
        );
        Node::of("v1", "ConfigMap", &meta)
    }

    fn names<'a>(objects: impl IntoIterator<Item = &'a Object>) -> Vec<&'a str> {
        objects.into_iter().map(|o| o.name.as_str()).collect()
    }

    const LOCKED: (&str, &str) = ("core.navique.com/locked", "keep");

    /// root <- child <- grandchild, root <- locked (blocks), shared owned by root and other.
    fn tree() -> (Node, Vec<Node>) {
        let root = node("root", &[], &[]);
        let objects = vec![
            root.clone(),
            node("child", &[("root", true)], &[]),
            node("grandchild", &[("child", false)], &[]),
            node("locked", &[("root", true)], &[LOCKED]),
            node("under-locked", &[("locked", false)], &[]),
            node("shared", &[("root", false), ("other", false)], &[]),
            node("other", &[], &[]),
        ];
        (root, objects)
    }

    #[test]
    fn background_deletes_the_owner_first_and_stops_at_a_locked_dependent() {
        let (root, objects) = tree();
        let plan = cascade(&root, &objects, Cascade::Background);
        assert_eq!(
            names(plan.removed.iter().map(|r| &r.object)),
            ["root", "child", "grandchild"]
        );
        assert_eq!(names(plan.stops.iter().map(|s| &s.object)), ["locked"]);
        assert_eq!(plan.stops[0].summary, "locked by keep");
        assert_eq!(names(plan.kept.iter().map(|k| &k.object)), ["shared"]);
        assert_eq!(plan.kept[0].why, "still owned by ConfigMap other");
        assert_eq!(
            decide(&root.object, &plan).line,
            "partial: ConfigMap root stops at ConfigMap locked (locked by keep)"
        );
    }

    #[test]
    fn foreground_deletes_dependents_first_and_a_blocking_one_that_stays_keeps_the_owner() {
        let (root, objects) = tree();
        let plan = cascade(&root, &objects, Cascade::Foreground);
        assert_eq!(
            names(plan.removed.iter().map(|r| &r.object)),
            ["grandchild", "child"]
        );
        assert_eq!(
            names(plan.kept.iter().map(|k| &k.object)),
            ["shared", "root"]
        );
        assert!(plan.kept[1].why.contains("blockOwnerDeletion"));
    }

    #[test]
    fn foreground_without_blocking_dependents_deletes_the_owner_last() {
        let root = node("root", &[], &[]);
        let objects = vec![
            root.clone(),
            node("child", &[("root", true)], &[]),
            node("locked", &[("root", false)], &[LOCKED]),
        ];
        let plan = cascade(&root, &objects, Cascade::Foreground);
        assert_eq!(
            names(plan.removed.iter().map(|r| &r.object)),
            ["child", "root"]
        );
    }

    #[test]
    fn orphan_deletes_only_the_object() {
        let (root, objects) = tree();
        let plan = cascade(&root, &objects, Cascade::Orphan);
        assert_eq!(names(plan.removed.iter().map(|r| &r.object)), ["root"]);
        assert_eq!(
            names(plan.kept.iter().map(|k| &k.object)),
            ["child", "locked", "shared"]
        );
        assert!(plan.stops.is_empty());
        assert_eq!(
            decide(&root.object, &plan).line,
            "allowed: ConfigMap root is deleted; its dependents stay"
        );
    }

    #[test]
    fn a_locked_object_is_refused_and_nothing_goes() {
        let root = node("root", &[], &[LOCKED]);
        let plan = cascade(&root, std::slice::from_ref(&root), Cascade::Background);
        assert!(plan.removed.is_empty());
        assert_eq!(decide(&root.object, &plan).line, "refused: locked by keep");
    }

    #[test]
    fn a_foreign_finalizer_stops_but_kubernetes_and_navique_ones_do_not() {
        let root = node("root", &[], &[]);
        let mut held = node("held", &[("root", false)], &[]);
        held.meta.finalizers = Some(vec!["example.com/cleanup".into()]);
        let mut pvc = node("pvc", &[("root", false)], &[]);
        pvc.meta.finalizers = Some(vec![
            "kubernetes.io/pvc-protection".into(),
            "core.navique.com/lock".into(),
        ]);
        let plan = cascade(
            &root,
            &[root.clone(), Node::of("v1", "ConfigMap", &held.meta), pvc],
            Cascade::Background,
        );
        assert_eq!(
            names(plan.removed.iter().map(|r| &r.object)),
            ["root", "pvc"]
        );
        assert_eq!(plan.stops[0].summary, "finalizer example.com/cleanup");
    }

    #[test]
    fn a_namespace_holding_locks_is_refused_with_the_guards_message() {
        let mut ns = meta("shop", &[("core.navique.com/locked", "a,b")]);
        ns.namespace = None;
        let ns = Node::of("v1", "Namespace", &ns);
        let plan = namespace(&ns, &[node("x", &[], &[])]);
        assert!(plan.removed.is_empty());
        assert_eq!(
            plan.stops[0].message,
            "namespace shop holds Lock(s) [a, b]; delete the Lock(s) before deleting this namespace"
        );
        assert_eq!(
            decide(&ns.object, &plan).line,
            "refused: namespace shop holds Lock(s) [a, b]"
        );
    }

    #[test]
    fn a_namespace_without_locks_takes_everything_with_it() {
        let mut ns = meta("shop", &[]);
        ns.namespace = None;
        let ns = Node::of("v1", "Namespace", &ns);
        let plan = namespace(&ns, &[node("x", &[], &[]), node("y", &[], &[])]);
        assert_eq!(
            names(plan.removed.iter().map(|r| &r.object)),
            ["x", "y", "shop"]
        );
        assert_eq!(
            decide(&ns.object, &plan).line,
            "allowed: namespace shop and the 2 object(s) in it are deleted"
        );
    }
}
