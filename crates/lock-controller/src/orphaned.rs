//! What counts as an orphaned marker: a target or a Namespace marked for
//! Locks none of which the controller knows would rewrite its markers;
//! and the queue of those the watches found, which
//! [`orphans`](crate::orphans) repairs.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use navique_api::constants::{annotations, labels};
use navique_api::core::Lock;
use tokio::sync::Notify;

use crate::decision::{self, Catalog, GroupKind, Target};
use crate::index::LockIndex;
use crate::namespace_wide;

/// An object whose markers may name only Locks that are gone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Orphan {
    Target {
        kind: GroupKind,
        namespace: String,
        name: String,
    },
    Namespace(String),
}

/// Whether `target`, `marked` (carrying any Lock marker), has markers
/// that none of `locks` (those pointing at it) would rewrite: none validly
/// targets it and restamps (a Lock being deleted keeps doing so while it
/// holds the controller's finalizer).
pub fn target_orphaned(
    target: Target<'_>,
    marked: bool,
    locks: &[Arc<Lock>],
    catalog: &Catalog,
) -> bool {
    marked && !decision::all(locks).any(|lock| keeps_target(lock, target, catalog))
}

/// Whether `meta` carries any of a target's Lock markers (read on every
/// event of every target: without copying them).
pub fn target_marked(meta: &ObjectMeta) -> bool {
    let annotated = meta.annotations.as_ref().is_some_and(|a| {
        a.contains_key(annotations::LOCKED) || a.contains_key(annotations::LOCK_REASONS)
    });
    annotated
        || meta
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(labels::LOCKED))
}

pub(crate) fn keeps_target(lock: &Lock, target: Target<'_>, catalog: &Catalog) -> bool {
    decision::validly_targets(lock, target, catalog) && decision::restamps(lock)
}

/// Whether Namespace `meta` has a Lock marker (its own, or the
/// namespace-wide one) that none of `locks`, the namespace's, would
/// rewrite: every Lock's reconcile rewrites both.
pub fn namespace_orphaned(meta: &ObjectMeta, locks: &[Arc<Lock>]) -> bool {
    namespace_marked(meta) && !decision::all(locks).any(decision::restamps)
}

fn namespace_marked(meta: &ObjectMeta) -> bool {
    decision::locked_of(meta).is_some()
        || namespace_wide::Markers::of(meta) != namespace_wide::Markers::default()
}

/// The orphans among `marked` targets (kind, namespace, name), those
/// carrying any Lock marker.
pub fn targets_among(
    marked: Vec<(GroupKind, String, String)>,
    index: &LockIndex,
    catalog: &Catalog,
) -> Vec<Orphan> {
    marked
        .into_iter()
        .filter_map(|(kind, namespace, name)| {
            let target = Target {
                kind: &kind,
                namespace: &namespace,
                name: &name,
            };
            let locks = index.pointing_at(&namespace, &name);
            target_orphaned(target, true, &locks, catalog).then_some(Orphan::Target {
                kind,
                namespace,
                name,
            })
        })
        .collect()
}

/// The orphans among Namespaces.
pub fn namespaces_among<'a>(
    namespaces: impl IntoIterator<Item = &'a ObjectMeta>,
    index: &LockIndex,
) -> Vec<Orphan> {
    namespaces
        .into_iter()
        .filter_map(|meta| {
            let name = meta.name.as_deref()?;
            namespace_orphaned(meta, &index.in_namespace(name))
                .then(|| Orphan::Namespace(name.to_owned()))
        })
        .collect()
}

/// Orphans reported and not repaired yet, in the order reported: reported
/// by the watches without waiting, taken by
/// [`Repairs::run`](crate::orphans::Repairs::run). Each object at most once.
#[derive(Clone, Default)]
pub struct Found(Arc<(Mutex<Pending>, Notify)>);

#[derive(Default)]
struct Pending {
    order: VecDeque<Orphan>,
    queued: HashSet<Orphan>,
}

impl Found {
    pub fn report(&self, orphan: Orphan) {
        let (pending, notify) = &*self.0;
        let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.queued.insert(orphan.clone()) {
            pending.order.push_back(orphan);
            notify.notify_one();
        }
    }

    pub(crate) async fn next(&self) -> Orphan {
        let (pending, notify) = &*self.0;
        loop {
            {
                let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(orphan) = pending.order.pop_front() {
                    pending.queued.remove(&orphan);
                    if pending.order.is_empty() {
                        pending.order.shrink_to_fit();
                        pending.queued.shrink_to_fit();
                    }
                    return orphan;
                }
            }
            notify.notified().await;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use navique_api::constants::finalizers;

    use super::*;
    use crate::decision::tests::{arcs, catalog, deleting, lock_on_stack, stack, stack_kind};
    use crate::namespace_wide::tests::namespace_meta as annotated;

    pub(crate) fn with_finalizer(mut lock: Lock, finalizer: &str) -> Lock {
        lock.metadata.finalizers = Some(vec![finalizer.into()]);
        lock
    }

    #[test]
    fn a_target_marked_for_locks_none_of_which_would_rewrite_it_is_orphaned() {
        let kind = stack_kind();
        let web = stack(&kind, "forge", "web");
        let catalog = catalog();
        // No Lock at all points at it.
        let gone = annotated("web", &[(annotations::LOCKED, "gone")]);
        assert!(target_marked(&gone));
        assert!(target_orphaned(web, true, &[], &catalog));
        // A label or the reasons left alone count too.
        let label_only = ObjectMeta {
            labels: Some(BTreeMap::from([(labels::LOCKED.into(), "true".into())])),
            ..ObjectMeta::default()
        };
        assert!(target_marked(&label_only));
        assert!(target_marked(&annotated(
            "web",
            &[(annotations::LOCK_REASONS, "x")]
        )));
        // Unmarked: nothing to repair.
        assert!(!target_marked(&annotated("web", &[("team", "a")])));
        assert!(!target_orphaned(web, false, &[], &catalog));
        // A Lock on it rewrites it, whatever its marker says.
        let on_web = arcs(vec![lock_on_stack("forge", "keep", "web")]);
        assert!(!target_orphaned(web, true, &on_web, &catalog));
        // So does one being deleted while it holds the controller's
        // finalizer; not one only another party's finalizer keeps.
        let mine = arcs(vec![with_finalizer(
            deleting(lock_on_stack("forge", "keep", "web")),
            finalizers::LOCK,
        )]);
        assert!(!target_orphaned(web, true, &mine, &catalog));
        let theirs = arcs(vec![with_finalizer(
            deleting(lock_on_stack("forge", "keep", "web")),
            "example.com/keep",
        )]);
        assert!(target_orphaned(web, true, &theirs, &catalog));
        // A Lock on another object of that name (another kind) does not.
        let mut on_other_kind = lock_on_stack("forge", "keep", "web");
        on_other_kind.spec.target_ref.kind = "ManagedService".into();
        on_other_kind.spec.target_ref.api_version = "services.kube-dc.com/v1alpha1".into();
        assert!(target_orphaned(
            web,
            true,
            &arcs(vec![on_other_kind]),
            &catalog
        ));
    }

    #[test]
    fn a_namespace_marked_with_no_lock_left_in_it_is_orphaned() {
        let marked = annotated("forge", &[(annotations::LOCKED, "gone")]);
        let wide = annotated("forge", &[(annotations::NAMESPACE_LOCKED, "freeze")]);
        let plain = annotated("forge", &[("team", "a")]);
        assert!(namespace_orphaned(&marked, &[]));
        assert!(namespace_orphaned(&wide, &[]));
        assert!(!namespace_orphaned(&plain, &[]));
        // Any Lock of the namespace rewrites both markers.
        let any = arcs(vec![lock_on_stack("forge", "other", "db")]);
        assert!(!namespace_orphaned(&marked, &any));
        assert!(!namespace_orphaned(&wide, &any));
        let theirs = arcs(vec![with_finalizer(
            deleting(lock_on_stack("forge", "other", "db")),
            "example.com/keep",
        )]);
        assert!(namespace_orphaned(&marked, &theirs));
    }

    #[tokio::test]
    async fn found_orphans_are_taken_once_each_in_the_order_reported() {
        let found = Found::default();
        found.report(Orphan::Namespace("b".into()));
        found.report(Orphan::Namespace("a".into()));
        found.report(Orphan::Namespace("b".into()));
        let taken = vec![found.next().await, found.next().await];
        assert_eq!(
            taken,
            [Orphan::Namespace("b".into()), Orphan::Namespace("a".into())]
        );
        // Nothing left: the next waits for a report.
        let waiting = tokio::time::timeout(Duration::from_millis(50), found.next()).await;
        assert!(waiting.is_err());
        found.report(Orphan::Namespace("c".into()));
        assert_eq!(found.next().await, Orphan::Namespace("c".into()));
    }
}
