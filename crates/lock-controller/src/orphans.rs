//! Markers that no Lock's reconcile would clear: a target or a Namespace
//! naming Locks when the controller knows of none that would rewrite its
//! markers. The guard keeps refusing its deletion in their name, and only
//! the controller may change markers, so without this it stays so. Such a
//! marker comes from a write of a previous leader that landed after this
//! one listed (a request held past the lease handover), or from a version
//! before the confirmed clears (docs/locks.md).
//!
//! The watches report them ([`Found`]); [`Repairs`] clears each in the
//! object's line of writes, where the Locks' reconciles stamp it, once the
//! API server confirms it: the object still carries markers, and no Lock of
//! its namespace that would rewrite them exists. The clear carries the
//! object's resourceVersion, so a write meanwhile wins (a conflict, tried
//! again), and the next reconcile in the line takes the object for
//! unmarked whatever its watch still shows. Anything it cannot confirm, it
//! leaves, and logs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use navique_api::constants::{annotations, labels};
use navique_api::core::Lock;
use navique_runtime::one_line;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::coalesced::Coalesced;
use crate::decision::{self, Catalog, GroupKind, Markers, Target};
use crate::index::LockIndex;
use crate::marked_here::MarkedHere;
use crate::namespace_wide;
use crate::watches::Views;

/// The first wait after a failed or kept repair, doubling to the last.
const QUIET_FIRST: Duration = Duration::from_secs(1);
const QUIET_MAX: Duration = Duration::from_secs(30);
/// How often to look whether the Locks are listed, at the start.
const LISTED_POLL: Duration = Duration::from_millis(200);
/// Locks read per request when confirming.
const PAGE: u32 = 500;

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

/// The key of a target's line of writes (see [`Coalesced`]), kept apart
/// from Namespaces' and CRDs'.
pub fn target_line(kind: &GroupKind, namespace: &str, name: &str) -> String {
    format!("target {}/{} {namespace}/{name}", kind.group, kind.kind)
}

/// The key of Namespace `name`'s line of `core.navique.com/locked` writes
/// (CRDs' names hold a dot, Namespaces' cannot).
pub fn namespace_line(name: &str) -> String {
    format!("namespace {name}")
}

/// The key of Namespace `name`'s line of namespace-wide marker writes.
pub fn namespace_wide_line(name: &str) -> String {
    format!("namespace-wide {name}")
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

fn keeps_target(lock: &Lock, target: Target<'_>, catalog: &Catalog) -> bool {
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

/// The orphans among `marked` targets (kind, namespace, name, markers).
pub fn among(
    marked: Vec<(GroupKind, String, String, Markers)>,
    index: &LockIndex,
    catalog: &Catalog,
) -> Vec<Orphan> {
    marked
        .into_iter()
        .filter_map(|(kind, namespace, name, markers)| {
            let target = Target {
                kind: &kind,
                namespace: &namespace,
                name: &name,
            };
            let locks = index.pointing_at(&namespace, &name);
            target_orphaned(target, !markers.is_empty(), &locks, catalog).then_some(
                Orphan::Target {
                    kind,
                    namespace,
                    name,
                },
            )
        })
        .collect()
}

/// Whether a field manager of this controller set one of the object's
/// Lock markers (its managedFields, as the API server keeps them): it
/// clears only what it wrote. With the marker guard off
/// (`lockGuard.protectMarker=false`) anyone may set one.
fn written_here(meta: &ObjectMeta) -> bool {
    // kube-apiserver folds the oldest of many updaters' entries into one
    // of this name; with the marker guard on, a marker there is this
    // controller's.
    let ours = meta.managed_fields.iter().flatten().filter(|entry| {
        matches!(
            entry.manager.as_deref(),
            Some(manager) if manager == crate::NAME || manager == "ancient-changes"
        )
    });
    ours.filter_map(|entry| entry.fields_v1.as_ref())
        .any(|fields| {
            let metadata = &fields.0["f:metadata"];
            let owns = |map: &str, key: &str| metadata[map].get(format!("f:{key}")).is_some();
            [
                annotations::LOCKED,
                annotations::LOCK_REASONS,
                annotations::NAMESPACE_LOCKED,
                annotations::NAMESPACE_LOCK_REASONS,
            ]
            .iter()
            .any(|key| owns("f:annotations", key))
                || owns("f:labels", labels::LOCKED)
        })
}

/// Whether a Lock the API server lists keeps `orphan`'s markers: one that
/// would rewrite them (for a target, one that validly targets it: the
/// controller has not seen it yet).
fn keeps(orphan: &Orphan, lock: &Lock, catalog: &Catalog) -> bool {
    match orphan {
        Orphan::Namespace(_) => decision::restamps(lock),
        Orphan::Target {
            kind,
            namespace,
            name,
        } => {
            let target = Target {
                kind,
                namespace,
                name,
            };
            keeps_target(lock, target, catalog)
        }
    }
}

/// The JSON merge patch clearing `orphan`'s markers, if the object is still
/// at `resource_version`.
fn clear_patch(orphan: &Orphan, resource_version: &str) -> Value {
    let mut patch = match orphan {
        Orphan::Target { .. } => decision::remove_markers(),
        Orphan::Namespace(_) => json!({"metadata": {"annotations": {
            annotations::LOCKED: null,
            annotations::NAMESPACE_LOCKED: null,
            annotations::NAMESPACE_LOCK_REASONS: null,
        }}}),
    };
    patch["metadata"]["resourceVersion"] = resource_version.into();
    patch
}

/// Orphans reported and not repaired yet, in the order reported: reported
/// by the watches without waiting, taken by [`Repairs::run`]. Each object
/// at most once.
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

    async fn next(&self) -> Orphan {
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

/// What a repair did.
#[derive(Debug, PartialEq, Eq)]
enum Repaired {
    /// Nothing to do: gone, unmarked, or a Lock the controller knows will
    /// rewrite the markers.
    Nothing,
    /// A Lock exists that the controller has not seen yet: left to it.
    Kept(String),
    /// Markers this controller did not write: not its to clear.
    NotOurs,
    Cleared,
}

/// Objects whose last repair failed or was kept, and until when their
/// reports are let go (a failed one is tried again then; a kept one waits
/// for its Lock, or its next report after that).
#[derive(Default)]
struct Quiet(HashMap<Orphan, (Duration, Instant)>);

impl Quiet {
    fn holds(&self, orphan: &Orphan, now: Instant) -> bool {
        self.0.get(orphan).is_some_and(|(_, until)| *until > now)
    }

    /// Quiets `orphan` for twice as long as last time; for how long.
    fn quiet(&mut self, orphan: &Orphan, now: Instant) -> Duration {
        let delay = self
            .0
            .get(orphan)
            .map_or(QUIET_FIRST, |(last, _)| (*last * 2).min(QUIET_MAX));
        self.0.insert(orphan.clone(), (delay, now + delay));
        delay
    }

    fn forget(&mut self, orphan: &Orphan, now: Instant) {
        self.0.remove(orphan);
        // Entries long past start again from the first wait.
        self.0.retain(|_, (_, until)| *until + QUIET_MAX > now);
    }
}

/// Clears orphaned markers, one object at a time, in the objects' lines
/// of writes.
pub struct Repairs {
    pub client: Client,
    pub index: LockIndex,
    pub views: Views,
    /// The reconciles' lines of writes.
    pub lines: Arc<Coalesced>,
    /// The lines whose object a repair cleared (or tried to) and whose
    /// watch may not show it yet.
    pub cleared: Arc<MarkedHere>,
}

impl Repairs {
    /// Once the Locks are listed, looks through what the watches hold for
    /// orphans reported before (judged against no Locks, they were not),
    /// then repairs what is reported, until `token` is cancelled.
    /// Stopped then (a repair cut short in its line is safe: see
    /// [`Repairs::clear_unless_kept`]), it does not end, so that the
    /// reconciles in flight keep their grace.
    pub async fn run(self, found: Found, token: CancellationToken) {
        token.run_until_cancelled(self.repair_reported(found)).await;
        std::future::pending::<()>().await;
    }

    async fn repair_reported(self, found: Found) {
        while !self.index.listed() {
            tokio::time::sleep(LISTED_POLL).await;
        }
        for orphan in self.sweep() {
            found.report(orphan);
        }
        let mut quiet = Quiet::default();
        let mut retries = JoinSet::new();
        loop {
            while retries.try_join_next().is_some() {}
            let orphan = found.next().await;
            if quiet.holds(&orphan, Instant::now()) {
                continue;
            }
            let repaired = self.repair(&orphan).await;
            let now = Instant::now();
            match repaired {
                Ok(Repaired::Nothing) => quiet.forget(&orphan, now),
                Ok(Repaired::Cleared) => {
                    quiet.forget(&orphan, now);
                    tracing::info!(
                        object = %describe(&orphan),
                        "cleared markers naming only Locks that no longer exist"
                    );
                }
                Ok(Repaired::NotOurs) => {
                    quiet.quiet(&orphan, now);
                    tracing::info!(
                        object = %describe(&orphan),
                        "left markers naming no Lock the controller knows: the lock-controller did not write them"
                    );
                }
                Ok(Repaired::Kept(lock)) => {
                    // Looked at again: that Lock may go before the
                    // controller sees it.
                    let delay = quiet.quiet(&orphan, now);
                    tracing::info!(
                        object = %describe(&orphan), lock,
                        "left markers the controller's Locks do not explain: Lock {lock} exists"
                    );
                    retry(&mut retries, &found, orphan, delay);
                }
                Err(e) => {
                    let delay = quiet.quiet(&orphan, now);
                    tracing::warn!(
                        object = %describe(&orphan), error = %one_line(&e), retry_in = ?delay,
                        "cannot clear markers naming only Locks that no longer exist"
                    );
                    retry(&mut retries, &found, orphan, delay);
                }
            }
        }
    }

    /// The orphans among the Namespaces and targets the watches hold.
    fn sweep(&self) -> Vec<Orphan> {
        let catalog = self.views.catalog();
        let namespaces = self.views.namespaces.state().into_iter().filter_map(|ns| {
            let name = ns.name_any();
            namespace_orphaned(&ns.metadata, &self.index.in_namespace(&name))
                .then_some(Orphan::Namespace(name))
        });
        let mut orphans: Vec<Orphan> = namespaces.collect();
        orphans.extend(among(self.views.targets.marked(), &self.index, &catalog));
        orphans
    }

    async fn repair(&self, orphan: &Orphan) -> Result<Repaired, kube::Error> {
        match orphan {
            Orphan::Namespace(name) => {
                // Both of its lines: the repair clears both markers.
                let line = namespace_line(name);
                let wide = namespace_wide_line(name);
                self.lines
                    .alone(&line, || {
                        self.lines
                            .alone(&wide, || self.repair_namespace(orphan, &line, name))
                    })
                    .await
            }
            Orphan::Target {
                kind,
                namespace,
                name,
            } => {
                let line = target_line(kind, namespace, name);
                self.lines
                    .alone(&line, || {
                        self.repair_target(orphan, &line, kind, namespace, name)
                    })
                    .await
            }
        }
    }

    async fn repair_namespace(
        &self,
        orphan: &Orphan,
        line: &str,
        name: &str,
    ) -> Result<Repaired, kube::Error> {
        let api = Api::<Namespace>::all(self.client.clone());
        let Some(live) = api.get_metadata_opt(name).await? else {
            return Ok(Repaired::Nothing);
        };
        if !namespace_orphaned(&live.metadata, &self.index.in_namespace(name)) {
            return Ok(Repaired::Nothing);
        }
        if !written_here(&live.metadata) {
            return Ok(Repaired::NotOurs);
        }
        self.clear_unless_kept(orphan, line, &api, name, &live.metadata)
            .await
    }

    async fn repair_target(
        &self,
        orphan: &Orphan,
        line: &str,
        kind: &GroupKind,
        namespace: &str,
        name: &str,
    ) -> Result<Repaired, kube::Error> {
        let catalog = self.views.catalog();
        let Some(served) = catalog.watched_kinds().find(|k| k.group_kind() == *kind) else {
            return Ok(Repaired::Nothing);
        };
        let target = Target {
            kind,
            namespace,
            name,
        };
        let locks = self.index.pointing_at(namespace, name);
        // Known to a Lock by now: no read needed.
        if decision::all(&locks).any(|lock| keeps_target(lock, target, &catalog)) {
            return Ok(Repaired::Nothing);
        }
        let api = Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            namespace,
            &served.api_resource(),
        );
        let Some(live) = api.get_metadata_opt(name).await? else {
            return Ok(Repaired::Nothing);
        };
        if !target_orphaned(target, target_marked(&live.metadata), &locks, &catalog) {
            return Ok(Repaired::Nothing);
        }
        if !written_here(&live.metadata) {
            return Ok(Repaired::NotOurs);
        }
        self.clear_unless_kept(orphan, line, &api, name, &live.metadata)
            .await
    }

    /// Lists the Locks of the object's namespace from the API server and
    /// clears the markers unless one of them [`keeps`] them. The object is
    /// read before the Locks are listed: a Lock created after the list
    /// that marked the object (another process's) changed the
    /// resourceVersion the clear is conditional on.
    async fn clear_unless_kept<K>(
        &self,
        orphan: &Orphan,
        line: &str,
        api: &Api<K>,
        name: &str,
        live: &ObjectMeta,
    ) -> Result<Repaired, kube::Error>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let namespace = match orphan {
            Orphan::Namespace(namespace) | Orphan::Target { namespace, .. } => namespace,
        };
        let catalog = self.views.catalog();
        let locks = Api::<Lock>::namespaced(self.client.clone(), namespace);
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = locks.list(&params).await?;
            if let Some(lock) = page.items.iter().find(|lock| keeps(orphan, lock, &catalog)) {
                return Ok(Repaired::Kept(lock.name_any()));
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        let Some(resource_version) = live.resource_version.as_deref() else {
            return Ok(Repaired::Nothing);
        };
        let patch = clear_patch(orphan, resource_version);
        // Noted before the clear is sent: should it land unseen (its
        // answer lost, this cut short), the next stamp in the line still
        // reads the object afresh.
        self.cleared.record(line, true);
        match api
            .patch_metadata(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(Repaired::Cleared),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(Repaired::Nothing),
            Err(e) => Err(e),
        }
    }
}

/// Reports `orphan` again after `delay`.
fn retry(retries: &mut JoinSet<()>, found: &Found, orphan: Orphan, delay: Duration) {
    let found = found.clone();
    retries.spawn(async move {
        tokio::time::sleep(delay).await;
        found.report(orphan);
    });
}

fn describe(orphan: &Orphan) -> String {
    match orphan {
        Orphan::Target {
            kind,
            namespace,
            name,
        } => format!("{}/{namespace}/{name}", kind.kind),
        Orphan::Namespace(name) => format!("Namespace/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use navique_api::constants::finalizers;

    use super::*;
    use crate::decision::tests::{arcs, catalog, deleting, lock_on_stack, stack, stack_kind};

    fn annotated(name: &str, pairs: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("7".into()),
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn with_finalizer(mut lock: Lock, finalizer: &str) -> Lock {
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

    #[test]
    fn a_listed_lock_that_would_rewrite_the_markers_keeps_them() {
        let catalog = catalog();
        let orphan = Orphan::Target {
            kind: stack_kind(),
            namespace: "forge".into(),
            name: "web".into(),
        };
        // On the target (the controller has not seen it).
        assert!(keeps(
            &orphan,
            &lock_on_stack("forge", "new", "web"),
            &catalog
        ));
        // On another object, whatever the marker names.
        assert!(!keeps(
            &orphan,
            &lock_on_stack("forge", "gone", "db"),
            &catalog
        ));
        // On the target but invalid (its kind's version not served): its
        // reconcile does not touch the target.
        let mut unserved = lock_on_stack("forge", "new", "web");
        unserved.spec.target_ref.api_version = "core.navique.com/v9".into();
        assert!(!keeps(&orphan, &unserved, &catalog));
        // Going, and only another party's finalizer keeps it.
        let theirs = with_finalizer(
            deleting(lock_on_stack("forge", "new", "web")),
            "example.com/keep",
        );
        assert!(!keeps(&orphan, &theirs, &catalog));
        // In a namespace, any Lock that restamps keeps them.
        let namespace = Orphan::Namespace("forge".into());
        assert!(keeps(
            &namespace,
            &lock_on_stack("forge", "c", "db"),
            &catalog
        ));
        assert!(!keeps(&namespace, &theirs, &catalog));
    }

    #[test]
    fn a_failed_or_kept_repair_lets_reports_go_for_longer_each_time() {
        let orphan = Orphan::Namespace("forge".into());
        let other = Orphan::Namespace("other".into());
        let mut quiet = Quiet::default();
        let start = Instant::now();
        assert!(!quiet.holds(&orphan, start));
        assert_eq!(quiet.quiet(&orphan, start), QUIET_FIRST);
        assert!(quiet.holds(&orphan, start));
        assert!(!quiet.holds(&other, start));
        assert!(!quiet.holds(&orphan, start + QUIET_FIRST));
        let later = start + QUIET_FIRST;
        assert_eq!(quiet.quiet(&orphan, later), QUIET_FIRST * 2);
        for _ in 0..10 {
            quiet.quiet(&orphan, later);
        }
        assert_eq!(quiet.quiet(&orphan, later), QUIET_MAX);
        // Repaired: reports count again, from the first wait.
        quiet.forget(&orphan, later);
        assert!(!quiet.holds(&orphan, later));
        assert_eq!(quiet.quiet(&orphan, later), QUIET_FIRST);
        // Entries long past are dropped when another is forgotten.
        quiet.quiet(&other, later);
        quiet.forget(&orphan, later + QUIET_MAX * 3);
        assert!(quiet.0.is_empty());
    }

    #[test]
    fn only_markers_a_manager_of_this_controller_set_are_its_own() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry = |manager: &str, fields: Value| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        };
        let with = |entries: Vec<ManagedFieldsEntry>| ObjectMeta {
            managed_fields: Some(entries),
            ..annotated("web", &[(annotations::LOCKED, "gone")])
        };
        let locked = json!({"f:metadata": {"f:annotations": {"f:core.navique.com/locked": {}}}});
        let label = json!({"f:metadata": {"f:labels": {"f:core.navique.com/locked": {}}}});
        let wide =
            json!({"f:metadata": {"f:annotations": {"f:core.navique.com/namespace-locked": {}}}});
        let other = json!({"f:metadata": {"f:annotations": {"f:team": {}}}});
        assert!(written_here(&with(vec![entry(
            crate::NAME,
            locked.clone()
        )])));
        assert!(written_here(&with(vec![entry(crate::NAME, label)])));
        assert!(written_here(&with(vec![entry(crate::NAME, wide)])));
        // Set by another manager (kubectl, with the marker guard off).
        assert!(!written_here(&with(vec![entry("kubectl-patch", locked)])));
        // This controller's entry, but for other fields.
        assert!(!written_here(&with(vec![entry(crate::NAME, other)])));
        assert!(!written_here(&with(Vec::new())));
        assert!(!written_here(&annotated(
            "web",
            &[(annotations::LOCKED, "gone")]
        )));
    }

    #[test]
    fn the_clear_removes_every_marker_only_at_the_read_version() {
        let target = Orphan::Target {
            kind: stack_kind(),
            namespace: "forge".into(),
            name: "web".into(),
        };
        assert_eq!(
            clear_patch(&target, "41"),
            json!({"metadata": {
                "resourceVersion": "41",
                "annotations": {annotations::LOCKED: null, annotations::LOCK_REASONS: null},
                "labels": {navique_api::constants::labels::LOCKED: null},
            }})
        );
        assert_eq!(
            clear_patch(&Orphan::Namespace("forge".into()), "42"),
            json!({"metadata": {
                "resourceVersion": "42",
                "annotations": {
                    annotations::LOCKED: null,
                    annotations::NAMESPACE_LOCKED: null,
                    annotations::NAMESPACE_LOCK_REASONS: null,
                },
            }})
        );
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
