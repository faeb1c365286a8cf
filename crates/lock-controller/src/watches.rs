//! What wakes a Lock besides its own changes: the objects Locks target,
//! their namespaces and the CRDs of their kinds, each watched for metadata
//! only. Which Locks an event wakes is [`decision`]'s call: only those whose
//! reconcile would change something, so that stamping one object does not
//! wake every Lock around it. Also API discovery of what can be locked,
//! redone when CRDs change so that a kind installed later is watched.

use std::collections::{BTreeMap, HashMap};
use std::pin::pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::{Discovery, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use navique_api::core::Lock;
use navique_runtime::one_line;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::coalesced;
use crate::decision::{self, Catalog, Enforceable, GroupKind, Markers, ServedKind, Target};
use crate::index::LockIndex;
use crate::marked_here::MarkedHere;
use crate::namespace_wide;
use crate::orphaned::{self, Found, Orphan};
use crate::suspension::{self, Limit};

type Wake = mpsc::Sender<ObjectRef<Lock>>;
type NamespaceMeta = PartialObjectMeta<Namespace>;
type CrdMeta = PartialObjectMeta<CustomResourceDefinition>;
pub type TargetMeta = PartialObjectMeta<DynamicObject>;

const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Lists the kinds the enforceable groups serve.
pub async fn discover(client: &Client, enforceable: Enforceable) -> Result<Catalog, kube::Error> {
    let names: Vec<&str> = enforceable.groups.iter().map(String::as_str).collect();
    let discovery = Discovery::new(client.clone()).filter(&names).run().await?;
    let mut catalog = Catalog::new(enforceable);
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest();
        for version in group.versions() {
            for (resource, capabilities) in group.versioned_resources(version) {
                let kind = ServedKind {
                    group: resource.group,
                    version: resource.version,
                    kind: resource.kind,
                    plural: resource.plural,
                    namespaced: capabilities.scope == Scope::Namespaced,
                };
                catalog.add(kind, version == preferred);
            }
        }
    }
    Ok(catalog)
}

/// [`discover`], retried with backoff until it succeeds; `None` if `token`
/// is cancelled first. Without it every Lock would look invalid.
pub async fn discover_until_ok(
    client: &Client,
    enforceable: Enforceable,
    token: &CancellationToken,
) -> Option<Catalog> {
    let mut delay = RETRY_FIRST;
    loop {
        match discover(client, enforceable.clone()).await {
            Ok(catalog) => return Some(catalog),
            Err(e) => tracing::warn!(error = %one_line(&e), retry_in = ?delay, "discovery failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => delay = (delay * 2).min(RETRY_MAX),
            () = token.cancelled() => return None,
        }
    }
}

/// What the reconciler reads of the watches: the current catalog and the
/// namespaces', CRDs' and targets' metadata.
#[derive(Clone)]
pub struct Views {
    catalog: watch::Receiver<Arc<Catalog>>,
    pub namespaces: Store<NamespaceMeta>,
    pub crds: Store<CrdMeta>,
    pub targets: TargetCache,
}

impl Views {
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// Resolves once the namespace and CRD watches have listed once.
    pub async fn ready(&self) {
        let _ = tokio::join!(
            self.namespaces.wait_until_ready(),
            self.crds.wait_until_ready()
        );
    }
}

/// The targets' markers, per kind, as their watches last saw them: a
/// reconcile reads its target here rather than from the API server. Only
/// the markers are kept (no reconcile reads more of a target), so that a
/// cluster's thousands of objects of a kind cost a few dozen bytes each,
/// not a whole ObjectMeta and a store key naming their kind.
#[derive(Clone, Default)]
pub struct TargetCache(Arc<RwLock<HashMap<GroupKind, Arc<RwLock<KindTargets>>>>>);

/// One kind's objects by namespace and name, and the list being read.
#[derive(Default)]
struct KindTargets {
    /// Whether the watch has listed once: until then nothing is known.
    listed: bool,
    markers: Targets,
    /// What a (re)list returned so far; it replaces `markers` when done,
    /// so that reads meanwhile see the previous list, as a reflector's do.
    relisting: Option<Targets>,
}

/// Objects' markers by namespace, then name. Most objects of a kind carry
/// none and then hold no allocation for them; the nesting keeps one
/// namespace string per namespace and lets a lookup borrow its names.
#[derive(Default)]
struct Targets(HashMap<String, HashMap<String, Option<Box<Markers>>>>);

impl Targets {
    fn insert(&mut self, object: &TargetMeta) {
        let markers = Markers::of(&object.metadata);
        let markers = (!markers.is_empty()).then(|| Box::new(markers));
        let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
        let names = match self.0.get_mut(namespace) {
            Some(names) => names,
            None => self.0.entry(namespace.to_owned()).or_default(),
        };
        names.insert(object.name_any(), markers);
    }

    fn remove(&mut self, object: &TargetMeta) {
        let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(names) = self.0.get_mut(namespace) {
            names.remove(&object.name_any());
            if names.is_empty() {
                self.0.remove(namespace);
            }
        }
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Markers> {
        let markers = self.0.get(namespace)?.get(name)?;
        Some(markers.as_deref().cloned().unwrap_or_default())
    }
}

impl KindTargets {
    /// Applies a watch event, as a reflector applies it to its store.
    fn apply(&mut self, event: &Event<TargetMeta>) {
        match event {
            Event::Init => self.relisting = Some(Targets::default()),
            Event::InitApply(object) => {
                if let Some(relisting) = &mut self.relisting {
                    relisting.insert(object);
                }
            }
            Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    self.markers = listed;
                }
                self.listed = true;
            }
            Event::Apply(object) => {
                self.markers.insert(object);
            }
            Event::Delete(object) => {
                self.markers.remove(object);
            }
        }
    }
}

impl TargetCache {
    /// The objects carrying any Lock marker (kind, namespace, name), of
    /// every kind listed.
    pub fn marked(&self) -> Vec<(GroupKind, String, String)> {
        let kinds: Vec<GroupKind> = {
            let kinds = self.0.read().unwrap_or_else(|e| e.into_inner());
            kinds.keys().cloned().collect()
        };
        kinds.iter().flat_map(|kind| self.marked_of(kind)).collect()
    }

    /// [`TargetCache::marked`], of one kind.
    pub fn marked_of(&self, kind: &GroupKind) -> Vec<(GroupKind, String, String)> {
        let targets = {
            let kinds = self.0.read().unwrap_or_else(|e| e.into_inner());
            kinds.get(kind).cloned()
        };
        let Some(targets) = targets else {
            return Vec::new();
        };
        let targets = targets.read().unwrap_or_else(|e| e.into_inner());
        let mut marked = Vec::new();
        // An object without markers holds `None` (Targets::insert).
        for (namespace, names) in &targets.markers.0 {
            for (name, markers) in names {
                if markers.is_some() {
                    marked.push((kind.clone(), namespace.clone(), name.clone()));
                }
            }
        }
        marked
    }

    /// The target's markers, if its kind's watch has listed and seen it.
    pub fn get(&self, kind: &GroupKind, namespace: &str, name: &str) -> Option<Markers> {
        let targets = {
            let kinds = self.0.read().unwrap_or_else(|e| e.into_inner());
            kinds.get(kind)?.clone()
        };
        let targets = targets.read().unwrap_or_else(|e| e.into_inner());
        if !targets.listed {
            return None;
        }
        targets.markers.get(namespace, name)
    }

    /// A new, empty cache of `kind`'s objects.
    fn insert(&self, kind: GroupKind) -> Arc<RwLock<KindTargets>> {
        let targets = Arc::default();
        let mut kinds = self.0.write().unwrap_or_else(|e| e.into_inner());
        kinds.insert(kind, Arc::clone(&targets));
        targets
    }

    fn remove(&self, kind: &GroupKind) {
        let mut kinds = self.0.write().unwrap_or_else(|e| e.into_inner());
        kinds.remove(kind);
    }
}

/// The watches, not yet running.
pub struct Triggers {
    client: Client,
    locks: Store<Lock>,
    index: LockIndex,
    limit: Limit,
    found: Found,
    cleared: Arc<MarkedHere>,
    targets: TargetCache,
    catalog: watch::Sender<Arc<Catalog>>,
    namespaces: Writer<NamespaceMeta>,
    namespace_view: Store<NamespaceMeta>,
    crds: Writer<CrdMeta>,
}

impl Triggers {
    pub fn new(
        client: Client,
        locks: Store<Lock>,
        index: LockIndex,
        catalog: Catalog,
        limit: Limit,
        found: Found,
        cleared: Arc<MarkedHere>,
    ) -> (Self, Views) {
        let (catalog, catalog_view) = watch::channel(Arc::new(catalog));
        let (namespaces_view, namespaces) = reflector::store();
        let (crds_view, crds) = reflector::store();
        let views = Views {
            catalog: catalog_view,
            namespaces: namespaces_view,
            crds: crds_view,
            targets: TargetCache::default(),
        };
        let triggers = Self {
            client,
            locks,
            index,
            limit,
            found,
            cleared,
            targets: views.targets.clone(),
            catalog,
            namespaces,
            namespace_view: views.namespaces.clone(),
            crds,
        };
        (triggers, views)
    }

    /// Watches and sends the Locks to wake to `wake`, until dropped.
    pub async fn run(self, wake: Wake) {
        let namespaces = watcher(
            Api::<NamespaceMeta>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(trim)
        .reflect(self.namespaces);
        let crds = watcher(
            Api::<CrdMeta>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(trim)
        .reflect(self.crds);
        let mut watches = Watches {
            client: self.client,
            locks: self.locks,
            index: self.index,
            limit: self.limit,
            found: self.found,
            cleared: self.cleared,
            namespace_view: self.namespace_view,
            cache: self.targets,
            catalog: self.catalog,
            wake,
            targets: JoinSet::new(),
            target_watches: HashMap::new(),
            crd_generations: HashMap::new(),
            unsettled: BTreeMap::new(),
            retry_delay: RETRY_FIRST,
            retry_at: None,
        };
        watches.watch_target_kinds();
        watches.run(namespaces, crds).await;
    }
}

struct Watches {
    client: Client,
    locks: Store<Lock>,
    index: LockIndex,
    /// The longest break-glass suspension, to tell one in effect.
    limit: Limit,
    found: Found,
    /// The lines an orphan repair noted (reconcile.rs reads them): an
    /// object's goes with it, as no stamp in its line may come to drop it.
    cleared: Arc<MarkedHere>,
    namespace_view: Store<NamespaceMeta>,
    cache: TargetCache,
    catalog: watch::Sender<Arc<Catalog>>,
    wake: Wake,
    /// One metadata watch per kind of target; dropping the set stops them.
    targets: JoinSet<()>,
    target_watches: HashMap<ServedKind, AbortHandle>,
    /// The generation of each CRD of the enforceable groups, to tell a spec
    /// change from a stamp.
    crd_generations: HashMap<String, Option<i64>>,
    /// CRDs of enforceable groups whose latest event discovery does not
    /// reflect yet: name → whether it should be served. Discovery may lag
    /// a CRD's establishment, so it is retried until they agree.
    unsettled: BTreeMap<String, bool>,
    retry_delay: Duration,
    retry_at: Option<Instant>,
}

impl Watches {
    async fn run(
        &mut self,
        namespaces: impl Stream<Item = Result<Event<NamespaceMeta>, watcher::Error>>,
        crds: impl Stream<Item = Result<Event<CrdMeta>, watcher::Error>>,
    ) {
        let (mut namespaces, mut crds) = (pin!(namespaces), pin!(crds));
        loop {
            let retry_at = self.retry_at;
            tokio::select! {
                Some(event) = namespaces.next() => self.on_namespace(event).await,
                Some(event) = crds.next() => self.on_crd(event).await,
                () = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    self.rediscover().await;
                }
                else => return,
            }
        }
    }

    async fn on_namespace(&mut self, event: Result<Event<NamespaceMeta>, watcher::Error>) {
        match event {
            Ok(Event::Apply(namespace) | Event::InitApply(namespace)) => {
                let name = namespace.name_any();
                let locks = self.index.in_namespace(&name);
                let wanted = self.index.namespace_marker(&name);
                let woken = decision::lock_woken_by_namespace(
                    &namespace.metadata,
                    wanted.as_deref(),
                    &locks,
                );
                self.send(woken).await;
                let enabled = self.catalog.borrow().enforceable().namespace_locks;
                let now = Timestamp::now();
                let suspended = |lock: &Lock| suspension::in_effect(lock, now, &self.limit);
                let woken =
                    namespace_wide::lock_woken(&namespace.metadata, &locks, enabled, suspended);
                self.send(woken).await;
                // Until the Locks are listed, the index knows none.
                if self.index.listed() && orphaned::namespace_orphaned(&namespace.metadata, &locks)
                {
                    self.found.report(Orphan::Namespace(name));
                }
            }
            // What was listed before the Locks were is looked through
            // once they are (orphans::Repairs::run); what is listed after,
            // here.
            Ok(Event::InitDone) if self.index.listed() => {
                let namespaces = self.namespace_view.state();
                let metas = namespaces.iter().map(|ns| &ns.metadata);
                for orphan in orphaned::namespaces_among(metas, &self.index) {
                    self.found.report(orphan);
                }
            }
            Ok(Event::Delete(namespace)) => {
                self.cleared
                    .record(&coalesced::namespace_line(&namespace.name_any()), false);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %one_line(&e), "namespace watch failed"),
        }
    }

    async fn on_crd(&mut self, event: Result<Event<CrdMeta>, watcher::Error>) {
        let catalog = self.catalog.borrow().clone();
        match event {
            Ok(Event::Apply(crd)) if catalog.may_define_kinds(&crd.name_any()) => {
                let name = crd.name_any();
                let seen = self
                    .crd_generations
                    .insert(name.clone(), crd.metadata.generation);
                // Its spec changed, or it is not served yet (its status is
                // about to say Established). Not on a mere stamp.
                if seen != Some(crd.metadata.generation) || catalog.kind_of_crd(&name).is_none() {
                    self.unsettled.insert(name, true);
                    self.rediscover().await;
                }
                self.wake_for_crd(&crd).await;
            }
            Ok(Event::InitApply(crd)) if catalog.may_define_kinds(&crd.name_any()) => {
                self.crd_generations
                    .insert(crd.name_any(), crd.metadata.generation);
                self.wake_for_crd(&crd).await;
            }
            Ok(Event::Delete(crd)) if catalog.may_define_kinds(&crd.name_any()) => {
                self.crd_generations.remove(&crd.name_any());
                self.unsettled.insert(crd.name_any(), false);
                self.rediscover().await;
            }
            // Once per (re)list: CRDs may have changed while not watched.
            Ok(Event::InitDone) => self.rediscover().await,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %one_line(&e), "CRD watch failed"),
        }
    }

    async fn wake_for_crd(&self, crd: &CrdMeta) {
        let catalog = self.catalog.borrow().clone();
        let Some(kind) = catalog.kind_of_crd(&crd.name_any()) else {
            return;
        };
        let wanted = self.index.crd_marker(&kind);
        let locks = self.locks.state();
        self.send(decision::lock_woken_by_crd(
            &crd.metadata,
            &kind,
            wanted.as_deref(),
            &locks,
            &catalog,
        ))
        .await;
    }

    /// Rediscovers the served kinds, watches the new ones, stops watching
    /// the gone ones, and wakes the Locks on kinds whose serving changed.
    async fn rediscover(&mut self) {
        self.retry_at = None;
        let old = self.catalog.borrow().clone();
        let new = match discover(&self.client, old.enforceable().clone()).await {
            Ok(new) => new,
            Err(e) => {
                tracing::warn!(error = %one_line(&e), "rediscovery failed");
                self.retry_later();
                return;
            }
        };
        self.unsettled
            .retain(|crd, served| new.kind_of_crd(crd).is_some() != *served);
        let changed = old.changed_kinds(&new);
        // Published before waking, so that the woken Locks see it.
        self.catalog.send_replace(Arc::new(new));
        if !changed.is_empty() {
            tracing::info!(kinds = ?changed, "served kinds changed");
            self.watch_target_kinds();
            let locks = self.locks.state();
            self.send(decision::locks_of_kinds(&changed, &locks)).await;
        }
        if self.unsettled.is_empty() {
            self.retry_delay = RETRY_FIRST;
        } else {
            self.retry_later();
        }
    }

    fn retry_later(&mut self) {
        self.retry_at = Some(Instant::now() + self.retry_delay);
        self.retry_delay = (self.retry_delay * 2).min(RETRY_MAX);
    }

    /// Starts a metadata watch for each kind of target the catalog lists and
    /// stops those it no longer lists.
    fn watch_target_kinds(&mut self) {
        while self.targets.try_join_next().is_some() {}
        let catalog = self.catalog.borrow().clone();
        let wanted: Vec<&ServedKind> = catalog.watched_kinds().collect();
        self.target_watches.retain(|kind, watch| {
            let keep = wanted.contains(&kind);
            if !keep {
                watch.abort();
                self.cache.remove(&kind.group_kind());
            }
            keep
        });
        for kind in wanted {
            if !self.target_watches.contains_key(kind) {
                let watch = self.targets.spawn(watch_targets(
                    self.client.clone(),
                    kind.clone(),
                    Known {
                        locks: self.locks.clone(),
                        index: self.index.clone(),
                        cache: self.cache.clone(),
                        catalog: self.catalog.subscribe(),
                        limit: self.limit.clone(),
                        found: self.found.clone(),
                        cleared: self.cleared.clone(),
                    },
                    self.wake.clone(),
                ));
                self.target_watches.insert(kind.clone(), watch);
            }
        }
    }

    async fn send<'a>(&self, locks: impl IntoIterator<Item = &'a Lock>) {
        let woken: Vec<ObjectRef<Lock>> = locks.into_iter().map(ObjectRef::from_obj).collect();
        for lock in woken {
            // Closed only when the controller stops, which ends this task.
            let _ = self.wake.send(lock).await;
        }
    }
}

/// kubectl's copy of the last applied object, never read here.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Removes from a cached object what no reconcile reads: at thousands of
/// objects, managedFields and kubectl's last applied copy are most of each.
/// The field is dropped, not cleared: a cleared Vec keeps its allocation.
pub fn trim<K: ResourceExt>(object: &mut K) {
    object.meta_mut().managed_fields = None;
    object.annotations_mut().remove(LAST_APPLIED);
}

/// What a target watch reads and fills.
struct Known {
    locks: Store<Lock>,
    index: LockIndex,
    cache: TargetCache,
    catalog: watch::Receiver<Arc<Catalog>>,
    limit: Limit,
    found: Found,
    cleared: Arc<MarkedHere>,
}

/// Watches the metadata of one kind's objects, caches it without what
/// reconciles never read, and wakes the Locks whose target appeared, went,
/// or carries the wrong markers.
async fn watch_targets(client: Client, kind: ServedKind, known: Known, wake: Wake) {
    let resource = kind.api_resource();
    let api = Api::<TargetMeta>::all_with(client, &resource);
    let group_kind = kind.group_kind();
    let targets = known.cache.insert(group_kind.clone());
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .inspect(move |event| {
            if let Ok(event) = event {
                targets
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .apply(event);
            }
        });
    let mut events = pin!(events);
    while let Some(event) = events.next().await {
        let woken: Vec<ObjectRef<Lock>> = {
            let catalog = known.catalog.borrow().clone();
            let on_target = |object: &TargetMeta, gone: bool| {
                let (namespace, name) = (object.namespace().unwrap_or_default(), object.name_any());
                let target = Target {
                    kind: &group_kind,
                    namespace: &namespace,
                    name: &name,
                };
                let meta = (!gone).then_some(&object.metadata);
                let locks = known.index.pointing_at(&namespace, &name);
                if let Some(meta) = meta
                    && known.index.listed()
                    && orphaned::target_orphaned(
                        target,
                        orphaned::target_marked(meta),
                        &locks,
                        &catalog,
                    )
                {
                    known.found.report(Orphan::Target {
                        kind: group_kind.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                    });
                }
                let now = Timestamp::now();
                let suspended = |lock: &Lock| suspension::in_effect(lock, now, &known.limit);
                decision::locks_woken_by_target(target, meta, &locks, &catalog, suspended)
                    .into_iter()
                    .map(ObjectRef::from_obj)
                    .collect()
            };
            match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => on_target(&object, false),
                Ok(Event::Delete(object)) => {
                    let (namespace, name) =
                        (object.namespace().unwrap_or_default(), object.name_any());
                    known.cleared.record(
                        &coalesced::target_line(&group_kind, &namespace, &name),
                        false,
                    );
                    on_target(&object, true)
                }
                Ok(Event::InitDone) => {
                    if known.index.listed() {
                        report_orphans(&known, &group_kind, &catalog);
                    }
                    decision::locks_woken_by_relist(&group_kind, &known.locks.state())
                        .into_iter()
                        .map(ObjectRef::from_obj)
                        .collect()
                }
                Ok(Event::Init) => continue,
                Err(e) => {
                    tracing::warn!(kind = %kind.kind, error = %one_line(&e), "target watch failed");
                    continue;
                }
            }
        };
        for lock in woken {
            if wake.send(lock).await.is_err() {
                return;
            }
        }
    }
}

/// Reports the orphans among `kind`'s objects, once listed: those its
/// list showed before the Locks were listed were judged against none.
fn report_orphans(known: &Known, kind: &GroupKind, catalog: &Catalog) {
    for orphan in orphaned::targets_among(known.cache.marked_of(kind), &known.index, catalog) {
        known.found.report(orphan);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::ObjectMeta;
    use navique_api::constants::annotations;

    use super::*;

    fn object(name: &str, locked: Option<&str>) -> TargetMeta {
        let mut object = TargetMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("forge".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            _phantom: Default::default(),
        };
        if let Some(locked) = locked {
            object.metadata.annotations = Some(BTreeMap::from([(
                annotations::LOCKED.into(),
                locked.into(),
            )]));
        }
        object
    }

    #[test]
    fn the_cache_keeps_markers_and_reads_a_relist_only_once_it_is_done() {
        let cache = TargetCache::default();
        let kind = GroupKind {
            group: "core.navique.com".into(),
            kind: "Stack".into(),
        };
        let targets = cache.insert(kind.clone());
        let apply = |event: Event<TargetMeta>| targets.write().unwrap().apply(&event);
        let locked = |name: &str| cache.get(&kind, "forge", name).and_then(|m| m.locked);

        apply(Event::Init);
        apply(Event::InitApply(object("a", Some("keep"))));
        assert_eq!(cache.get(&kind, "forge", "a"), None, "not listed yet");
        apply(Event::InitDone);
        assert_eq!(locked("a").as_deref(), Some("keep"));

        apply(Event::Apply(object("b", None)));
        assert_eq!(cache.get(&kind, "forge", "b"), Some(Markers::default()));
        apply(Event::Apply(object("a", Some("keep,other"))));
        assert_eq!(locked("a").as_deref(), Some("keep,other"));

        // A relist: the previous list answers until it is done, then only
        // what it listed is known.
        apply(Event::Init);
        apply(Event::InitApply(object("c", Some("c-lock"))));
        assert_eq!(locked("a").as_deref(), Some("keep,other"));
        assert_eq!(cache.get(&kind, "forge", "c"), None);
        apply(Event::InitDone);
        assert_eq!(cache.get(&kind, "forge", "a"), None);
        assert_eq!(cache.get(&kind, "forge", "b"), None);
        assert_eq!(locked("c").as_deref(), Some("c-lock"));

        apply(Event::Delete(object("c", None)));
        assert_eq!(cache.get(&kind, "forge", "c"), None);
        assert_eq!(cache.get(&kind, "other", "c"), None);
    }

    #[test]
    fn trim_drops_managed_fields_and_the_last_applied_copy_and_keeps_the_rest() {
        let mut object = object("a", Some("keep"));
        object.metadata.managed_fields = Some(vec![Default::default(); 3]);
        object
            .annotations_mut()
            .insert(LAST_APPLIED.into(), "{}".into());
        trim(&mut object);
        // None, not an empty Vec, whose allocation would stay with the
        // cached object.
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(
            object.annotations(),
            &BTreeMap::from([(annotations::LOCKED.into(), "keep".into())])
        );
    }
}
