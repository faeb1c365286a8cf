//! Markers that no Lock's reconcile would clear: a target or a Namespace
//! naming Locks when the controller knows of none that would rewrite its
//! markers. The guard keeps refusing its deletion in their name, and only
//! the controller may change markers, so without this it stays so. Such a
//! marker comes from a write of a previous leader that landed after this
//! one listed (a request held past the lease handover), or from a version
//! before the confirmed clears (docs/locks.md).
//!
//! The watches report them ([`Found`], with what counts as an orphan in
//! [`orphaned`](crate::orphaned)); [`Repairs`] clears each in the
//! object's line of writes, where the Locks' reconciles stamp it, once the
//! API server confirms it: the object still carries markers, and no Lock of
//! its namespace that would rewrite them exists. The clear carries the
//! object's resourceVersion, so a write meanwhile wins (a conflict, tried
//! again), and the next stamp in the line reads the object from the API
//! server rather than its watch. Anything it cannot confirm, it leaves,
//! and logs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use navique_api::constants::{annotations, labels};
use navique_api::core::Lock;
use navique_runtime::one_line;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::coalesced::{Coalesced, namespace_line, namespace_wide_line, target_line};
use crate::decision::{self, Catalog, GroupKind, Target};
use crate::index::LockIndex;
use crate::marked_here::MarkedHere;
use crate::orphaned::{
    Found, Orphan, keeps_target, namespace_orphaned, namespaces_among, target_marked, targets_among,
};
use crate::watches::Views;

/// The first wait after a failed or kept repair, doubling to the last.
const QUIET_FIRST: Duration = Duration::from_secs(1);
const QUIET_MAX: Duration = Duration::from_secs(30);
/// How often to look whether the Locks are listed, at the start.
const LISTED_POLL: Duration = Duration::from_millis(200);
/// Locks read per request when confirming.
const PAGE: u32 = 500;

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

/// Objects whose last repair failed, was kept or was not the
/// controller's to do, and until when their reports are let go (a failed
/// or kept one is tried again then).
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
        let namespaces = self.views.namespaces.state();
        let mut orphans = namespaces_among(namespaces.iter().map(|ns| &ns.metadata), &self.index);
        let catalog = self.views.catalog();
        orphans.extend(targets_among(
            self.views.targets.marked(),
            &self.index,
            &catalog,
        ));
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
        if !target_marked(&live.metadata) {
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
    use super::*;
    use crate::decision::tests::{catalog, deleting, lock_on_stack, stack_kind};
    use crate::namespace_wide::tests::namespace_meta as annotated;
    use crate::orphaned::tests::with_finalizer;

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
}
