//! What the lock-controller decides, as pure functions of what it observed:
//! whether a Lock's target can be locked, the markers every object should
//! carry, a Lock's status, and which Locks an event must wake. No I/O here,
//! so that every rule is unit-tested.
//!
//! Every marker is a function of the whole state (all Locks), never an edit
//! of what an object carries: any reconcile can recompute it, so a crash,
//! a lost race or a tampered object is repaired by the next one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::core::ApiResource;
use navique_api::conditions;
use navique_api::constants::{
    CORE_GROUP, annotations, condition_types, events, finalizers, labels, reasons,
};
use navique_api::core::{Lock, LockStatus, TargetRef};
use navique_api::{messages, names};
use serde_json::{Map, Value, json};

use crate::namespace_wide;

/// The kind of a Lock, which no Lock may protect.
const LOCK_KIND: &str = "Lock";

/// A kind, across its versions: what a watch, a CRD and a stamp are about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl GroupKind {
    /// The kind `target` names.
    pub fn of(target: &TargetRef) -> Self {
        Self {
            group: target.group().to_owned(),
            kind: target.kind.clone(),
        }
    }

    /// Whether `target` names an object of this kind, in any version.
    pub fn is_kind_of(&self, target: &TargetRef) -> bool {
        target.kind == self.kind && target.group() == self.group
    }
}

/// One version of a kind served in an enforceable group, as discovery
/// reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServedKind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl ServedKind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.group.clone(),
            kind: self.kind.clone(),
        }
    }

    /// The name the kind's CustomResourceDefinition has, if it has one.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// What the flags make lockable: the enforceable groups and, for some of
/// them, only the resources listed (`--enforceable-resources`): the
/// lock-controller's RBAC covers no others, so it must not watch them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Enforceable {
    pub groups: Vec<String>,
    /// Group to plural resource names; a group absent here: all of its.
    pub resources: BTreeMap<String, BTreeSet<String>>,
    /// Whether a Lock on its own Namespace protects every enforceable
    /// object in it (`--namespace-locks`; see [`namespace_wide`]).
    pub namespace_locks: bool,
}

impl Enforceable {
    /// Every resource of `groups`.
    pub fn groups(groups: Vec<String>) -> Self {
        Self {
            groups,
            resources: BTreeMap::new(),
            namespace_locks: false,
        }
    }

    fn admits(&self, kind: &ServedKind) -> bool {
        self.resources
            .get(&kind.group)
            .is_none_or(|resources| resources.contains(&kind.plural))
    }
}

/// What may be locked: the enforceable groups and the kinds they serve.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    enforceable: Enforceable,
    /// By `(apiVersion, kind)`.
    served: BTreeMap<(String, String), ServedKind>,
    /// Served by an enforceable group, but not among its enforceable
    /// resources; by `(apiVersion, kind)`.
    excluded: BTreeSet<(String, String)>,
    /// One version per namespaced kind, preferably the group's preferred one.
    watched: BTreeMap<GroupKind, ServedKind>,
}

impl Catalog {
    pub fn new(enforceable: Enforceable) -> Self {
        Self {
            enforceable,
            ..Self::default()
        }
    }

    pub fn enforceable(&self) -> &Enforceable {
        &self.enforceable
    }

    /// Records a served kind; `preferred` when `kind.version` is its group's
    /// preferred version.
    pub fn add(&mut self, kind: ServedKind, preferred: bool) {
        if !self.enforceable.admits(&kind) {
            self.excluded.insert((kind.api_version(), kind.kind));
            return;
        }
        // A Lock is never a valid target, and Locks are watched anyway.
        let is_lock = kind.group == CORE_GROUP && kind.kind == LOCK_KIND;
        if kind.namespaced && !is_lock {
            let group_kind = kind.group_kind();
            if preferred || !self.watched.contains_key(&group_kind) {
                self.watched.insert(group_kind, kind.clone());
            }
        }
        self.served
            .insert((kind.api_version(), kind.kind.clone()), kind);
    }

    pub fn served(&self, api_version: &str, kind: &str) -> Option<&ServedKind> {
        self.served.get(&(api_version.to_owned(), kind.to_owned()))
    }

    /// The kinds whose objects are watched, one version each: a watch of
    /// one version sees the objects of all.
    pub fn watched_kinds(&self) -> impl Iterator<Item = &ServedKind> {
        self.watched.values()
    }

    /// The kinds served differently by `self` and `other` (added, removed,
    /// a version or the scope changed).
    pub fn changed_kinds(&self, other: &Catalog) -> BTreeSet<GroupKind> {
        let keys: BTreeSet<_> = self.served.keys().chain(other.served.keys()).collect();
        keys.into_iter()
            .filter(|key| self.served.get(key) != other.served.get(key))
            .filter_map(|key| self.served.get(key).or_else(|| other.served.get(key)))
            .map(ServedKind::group_kind)
            .collect()
    }

    /// The kind the CustomResourceDefinition `name` defines, if served.
    pub fn kind_of_crd(&self, name: &str) -> Option<GroupKind> {
        self.served
            .values()
            .find(|kind| kind.crd_name() == name)
            .map(ServedKind::group_kind)
    }

    /// Whether a CustomResourceDefinition of `name` could define a kind of
    /// an enforceable group (its name is `<plural>.<group>`).
    pub fn may_define_kinds(&self, crd_name: &str) -> bool {
        self.enforceable.groups.iter().any(|group| {
            crd_name
                .strip_suffix(group.as_str())
                .is_some_and(|plural| plural.ends_with('.'))
        })
    }
}

/// Whether a Lock's target can be locked.
#[derive(Debug, PartialEq)]
pub enum Classification<'a> {
    Valid(&'a ServedKind),
    /// The `InvalidTarget` message.
    Invalid(String),
}

pub fn classify<'a>(target: &TargetRef, catalog: &'a Catalog) -> Classification<'a> {
    // Before anything is looked up: the name goes into request URLs. The
    // CRD schema refuses both; a Lock stored before it did is caught here.
    if !names::is_kind(&target.kind) {
        return Classification::Invalid(messages::lock_target_kind_invalid(&target.kind));
    }
    if !names::is_object_name(&target.name) {
        return Classification::Invalid(messages::lock_target_name_invalid(&target.name));
    }
    let group = target.group();
    let enforceable = &catalog.enforceable;
    if !enforceable.groups.iter().any(|g| g == group) {
        return Classification::Invalid(messages::lock_target_not_enforceable(
            &target.api_version,
            &enforceable.groups,
        ));
    }
    if group == CORE_GROUP && target.kind == LOCK_KIND {
        return Classification::Invalid(messages::LOCK_ON_LOCK.to_owned());
    }
    let key = (target.api_version.clone(), target.kind.clone());
    if let Some(resources) = enforceable.resources.get(group)
        && catalog.excluded.contains(&key)
    {
        let resources: Vec<String> = resources.iter().cloned().collect();
        return Classification::Invalid(messages::lock_kind_not_enforceable(
            &target.kind,
            &target.api_version,
            &resources,
        ));
    }
    match catalog.served(&target.api_version, &target.kind) {
        None => Classification::Invalid(messages::lock_kind_not_served(
            &target.kind,
            &target.api_version,
        )),
        Some(kind) if !kind.namespaced => Classification::Invalid(
            messages::lock_kind_cluster_scoped(&target.kind, &target.api_version),
        ),
        Some(kind) => Classification::Valid(kind),
    }
}

/// The served kind of a Lock's target, if the Lock is valid.
pub fn valid_kind<'a>(lock: &Lock, catalog: &'a Catalog) -> Option<&'a ServedKind> {
    match classify(&lock.spec.target_ref, catalog) {
        Classification::Valid(kind) => Some(kind),
        Classification::Invalid(_) => None,
    }
}

pub fn is_deleting(lock: &Lock) -> bool {
    lock.metadata.deletion_timestamp.is_some()
}

/// Whether a Lock counts in the namespace and CRD markers: it reports
/// protecting its target and is not going away.
pub fn is_active(lock: &Lock) -> bool {
    !is_deleting(lock) && lock.status.as_ref().is_some_and(|s| s.active)
}

pub(crate) fn all(locks: &[Arc<Lock>]) -> impl Iterator<Item = &Lock> {
    locks.iter().map(|lock| &**lock)
}

pub(crate) fn name(lock: &Lock) -> &str {
    lock.metadata.name.as_deref().unwrap_or_default()
}

pub(crate) fn namespace(lock: &Lock) -> &str {
    lock.metadata.namespace.as_deref().unwrap_or_default()
}

/// An object a Lock may protect.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub kind: &'a GroupKind,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Whether `lock` names `target`, whether or not it is valid.
pub(crate) fn points_at(lock: &Lock, target: Target<'_>) -> bool {
    namespace(lock) == target.namespace
        && lock.spec.target_ref.name == target.name
        && target.kind.is_kind_of(&lock.spec.target_ref)
}

/// Whether `lock` validly targets `target`, deleting or not.
pub(crate) fn validly_targets(lock: &Lock, target: Target<'_>, catalog: &Catalog) -> bool {
    points_at(lock, target) && valid_kind(lock, catalog).is_some()
}

/// The markers a protected object carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetStamp {
    /// Names of the protecting Locks, sorted, joined by `,`.
    pub locked: String,
    /// [`messages::lock_reasons`] of those Locks, in the same order.
    pub reasons: Option<String>,
}

/// The stamp `target` should carry: every Lock that validly targets it and
/// is not being deleted. `None` when no Lock protects it.
pub fn target_stamp(
    target: Target<'_>,
    locks: &[Arc<Lock>],
    catalog: &Catalog,
) -> Option<TargetStamp> {
    let mut protecting: Vec<&Lock> = all(locks)
        .filter(|lock| !is_deleting(lock) && validly_targets(lock, target, catalog))
        .collect();
    if protecting.is_empty() {
        return None;
    }
    protecting.sort_by_key(|lock| name(lock));
    let names: Vec<&str> = protecting.iter().map(|lock| name(lock)).collect();
    Some(TargetStamp {
        locked: names.join(","),
        reasons: messages::lock_reasons(
            protecting
                .iter()
                .map(|lock| (name(lock), lock.spec.reason.as_deref().unwrap_or_default())),
        ),
    })
}

/// The lock markers an object carries or should carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Markers {
    pub locked: Option<String>,
    pub reasons: Option<String>,
    pub label: Option<String>,
}

impl Markers {
    pub fn of(meta: &ObjectMeta) -> Self {
        let annotation = |key: &str| meta.annotations.as_ref()?.get(key).cloned();
        Self {
            locked: annotation(annotations::LOCKED),
            reasons: annotation(annotations::LOCK_REASONS),
            label: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::LOCKED).cloned()),
        }
    }

    pub fn wanted(stamp: Option<&TargetStamp>) -> Self {
        stamp.map_or_else(Self::default, |stamp| Self {
            locked: Some(stamp.locked.clone()),
            reasons: stamp.reasons.clone(),
            label: Some("true".to_owned()),
        })
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The server-side apply body stamping a target: its identity and, when
/// locked, the markers. Applied without them, SSA removes the markers this
/// field manager set.
pub fn target_patch(
    kind: &ServedKind,
    namespace: &str,
    name: &str,
    stamp: Option<&TargetStamp>,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), name.into());
    metadata.insert("namespace".into(), namespace.into());
    if let Some(stamp) = stamp {
        let mut stamped = Map::new();
        stamped.insert(annotations::LOCKED.into(), stamp.locked.clone().into());
        if let Some(reasons) = &stamp.reasons {
            stamped.insert(annotations::LOCK_REASONS.into(), reasons.clone().into());
        }
        metadata.insert("annotations".into(), stamped.into());
        metadata.insert("labels".into(), json!({ labels::LOCKED: "true" }));
    }
    json!({"apiVersion": kind.api_version(), "kind": kind.kind, "metadata": metadata})
}

/// A JSON merge patch removing every marker. Server-side apply leaves a
/// field another manager also owns (one that set the same value), so
/// clearing falls back to this.
pub fn remove_markers() -> Value {
    json!({"metadata": {
        "annotations": {annotations::LOCKED: null, annotations::LOCK_REASONS: null},
        "labels": {labels::LOCKED: null},
    }})
}

fn locked_annotation(locked: Option<&str>) -> Map<String, Value> {
    let mut metadata = Map::new();
    if let Some(locked) = locked {
        metadata.insert("annotations".into(), json!({ annotations::LOCKED: locked }));
    }
    metadata
}

/// The server-side apply body stamping a Namespace.
pub fn namespace_patch(name: &str, locked: Option<&str>) -> Value {
    let mut metadata = locked_annotation(locked);
    metadata.insert("name".into(), name.into());
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
}

/// The server-side apply body stamping a CustomResourceDefinition.
pub fn crd_patch(name: &str, locked: Option<&str>) -> Value {
    let mut metadata = locked_annotation(locked);
    metadata.insert("name".into(), name.into());
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
    })
}

/// How many Locks a Namespace or CRD marker names. Bounded, so that each
/// Lock's change rewrites a value of constant size rather than one growing
/// with the number of Locks (O(n²) bytes written for n Locks).
pub const MARKER_NAMES: usize = 10;

/// The first [`MARKER_NAMES`] of `names` in order, then about how many
/// more ([`more`]), all joined by `,`: the denials show `[a, b, ..., and
/// 100+ more]`. Only those first few are sorted and formatted, whatever the
/// number of Locks.
/// A Namespace's or CRD's `core.navique.com/locked`: the first
/// [`MARKER_NAMES`] of `names`, which come in order, and how many more of
/// `count` there are.
fn marker(names: impl Iterator<Item = String>, count: usize) -> Option<String> {
    if count == 0 {
        return None;
    }
    let mut joined: Vec<String> = names.take(MARKER_NAMES).collect();
    let more = count.saturating_sub(MARKER_NAMES);
    if more > 0 {
        joined.push(self::more(more));
    }
    Some(joined.join(","))
}

/// `and 3 more` up to nine, then the power of ten reached: `and 10+ more`,
/// `and 1000+ more`. So a marker changes when its first names do, and only
/// at a few counts, rather than with every Lock that comes or goes (at
/// 10,000 Locks in one namespace, a handful of writes instead of 10,000).
fn more(more: usize) -> String {
    if more < 10 {
        return format!("and {more} more");
    }
    let mut decade = 10;
    while decade <= more / 10 {
        decade *= 10;
    }
    format!("and {decade}+ more")
}

/// The Namespace's `core.navique.com/locked`: the names of its active
/// Locks, in order, and their number.
pub fn namespace_marker<'a>(active: impl Iterator<Item = &'a str>, count: usize) -> Option<String> {
    marker(active.map(str::to_owned), count)
}

/// A CRD's `core.navique.com/locked`: `<namespace>/<lock>` of the active
/// Locks protecting an object of its kind, cluster-wide, ordered by
/// namespace then name, and their number.
pub fn crd_marker<'a>(
    active: impl Iterator<Item = (&'a str, &'a str)>,
    count: usize,
) -> Option<String> {
    marker(active.map(|(ns, name)| format!("{ns}/{name}")), count)
}

/// The `core.navique.com/locked` annotation of a Namespace or CRD.
pub fn locked_of(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(annotations::LOCKED)
        .map(String::as_str)
}

/// What a reconcile does about a Namespace's or CRD's marker, which every
/// Lock together wants as `wanted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedStamp {
    /// The watch shows what is wanted, or has not seen the object (its
    /// event will ask again; never apply blindly, which would create it).
    Keep,
    Write,
    /// Clear the marker with a patch that cannot create the object. None
    /// is wanted and the watch shows none, or has not seen the object, but
    /// this process marked it since it last cleared it (`marked_here`): the
    /// watch may not show that write yet. Trusting the watch here could
    /// leave the marker naming a Lock that is gone, with no Lock left whose
    /// reconcile would clear it, refusing the namespace's or CRD's deletion.
    Confirm,
}

/// See [`SharedStamp`]; `cached` is the marker the watch shows, `None`
/// when it has not seen the object. A stale watch showing a marker that is
/// wanted is harmless: a Lock that wants it is woken by the watch's event.
pub fn shared_stamp(
    cached: Option<Option<&str>>,
    wanted: Option<&str>,
    marked_here: bool,
) -> SharedStamp {
    match cached {
        Some(cached) if cached != wanted => SharedStamp::Write,
        _ if wanted.is_none() && marked_here => SharedStamp::Confirm,
        _ => SharedStamp::Keep,
    }
}

/// Whether a reconcile reads the target from the API server before taking
/// its markers for clear: none is wanted and the watch shows none, but the
/// watch may not show the Lock's own earlier stamp yet. None is wanted
/// only when the reconciled Lock is deleted or suspended: once deleted, no
/// target event would wake it to clear a stamp the watch showed late;
/// suspended, the break-glass would wait for the watch to catch up.
pub fn confirms_target_clear(wanted: Option<&TargetStamp>, cached: &Markers) -> bool {
    wanted.is_none() && cached.is_empty()
}

/// What a Lock's reconcile found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The target carries the Lock's name.
    Protecting,
    /// The target does not exist (yet).
    MissingReference,
    /// The `InvalidTarget` message.
    InvalidTarget(String),
}

impl Outcome {
    /// The state a Lock with this outcome is counted in by the `locks` gauge.
    pub fn state(&self) -> LockState {
        match self {
            Outcome::Protecting => LockState::Active,
            Outcome::MissingReference => LockState::Missing,
            Outcome::InvalidTarget(_) => LockState::Invalid,
        }
    }
}

/// The `state` label of the `locks` gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockState {
    Active,
    Invalid,
    Missing,
    /// A break-glass suspension is in effect (`crate::suspension`).
    Suspended,
}

impl LockState {
    pub const ALL: [LockState; 4] = [
        LockState::Active,
        LockState::Invalid,
        LockState::Missing,
        LockState::Suspended,
    ];

    pub fn label(self) -> &'static str {
        match self {
            LockState::Active => "active",
            LockState::Invalid => "invalid",
            LockState::Missing => "missing",
            LockState::Suspended => "suspended",
        }
    }
}

/// What each Lock's last reconcile reported, and how many report each state,
/// kept as they change: recounting all Locks on every reconcile would cost
/// O(n²) for n Locks.
#[derive(Debug)]
pub struct StateCounts<K> {
    by_lock: HashMap<K, LockState>,
    counts: BTreeMap<LockState, i64>,
}

impl<K: Hash + Eq> Default for StateCounts<K> {
    fn default() -> Self {
        Self {
            by_lock: HashMap::new(),
            counts: LockState::ALL.iter().map(|s| (*s, 0)).collect(),
        }
    }
}

impl<K: Hash + Eq> StateCounts<K> {
    /// Records what `lock` reported; `None` once it no longer counts.
    pub fn set(&mut self, lock: K, state: Option<LockState>) {
        let old = match state {
            Some(state) => self.by_lock.insert(lock, state),
            None => self.by_lock.remove(&lock),
        };
        if let Some(old) = old {
            *self.counts.entry(old).or_default() -= 1;
        }
        if let Some(state) = state {
            *self.counts.entry(state).or_default() += 1;
        }
    }

    /// Forgets the Locks `keep` refuses (gone without a last reconcile).
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        let gone: Vec<LockState> = self
            .by_lock
            .iter()
            .filter(|(lock, _)| !keep(lock))
            .map(|(_, state)| *state)
            .collect();
        self.by_lock.retain(|lock, _| keep(lock));
        for state in gone {
            *self.counts.entry(state).or_default() -= 1;
        }
    }

    pub fn len(&self) -> usize {
        self.by_lock.len()
    }

    /// How many Locks are in each state, every state listed.
    pub fn counts(&self) -> &BTreeMap<LockState, i64> {
        &self.counts
    }
}

/// The Ready condition `outcome` gives `lock`: (status, reason, message).
fn ready_of(lock: &Lock, outcome: &Outcome) -> (bool, &'static str, String) {
    let target = &lock.spec.target_ref;
    match outcome {
        Outcome::Protecting if namespace_wide::is_namespace_target(target) => (
            true,
            reasons::PROTECTING,
            messages::lock_protecting_namespace(namespace(lock)),
        ),
        Outcome::Protecting => (
            true,
            reasons::PROTECTING,
            messages::lock_protecting(&target.kind, &target.name),
        ),
        Outcome::MissingReference => (
            false,
            reasons::MISSING_REFERENCE,
            messages::lock_target_missing(&target.kind, &target.name, namespace(lock)),
        ),
        Outcome::InvalidTarget(message) => (false, reasons::INVALID_TARGET, message.clone()),
    }
}

/// An Event to record on a Lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// The Event `outcome` calls for on `lock`: one when its Ready reason or
/// message changes (not on every reconcile), Warning unless it protects.
pub fn outcome_event(lock: &Lock, outcome: &Outcome) -> Option<LockEvent> {
    let (active, reason, message) = ready_of(lock, outcome);
    let unchanged = lock
        .status
        .as_ref()
        .and_then(|status| conditions::find(&status.conditions, condition_types::READY))
        .is_some_and(|ready| ready.reason == reason && ready.message == message);
    if unchanged {
        return None;
    }
    let reason = match outcome {
        Outcome::Protecting => events::LOCK_PROTECTING,
        Outcome::MissingReference => events::LOCK_MISSING_REFERENCE,
        Outcome::InvalidTarget(_) => events::LOCK_INVALID_TARGET,
    };
    Some(LockEvent {
        warning: !active,
        reason,
        note: message,
    })
}

/// The Events a change of a target's `core.navique.com/locked` from
/// `before` to `after` calls for, by Lock name: `TargetStamped` on each
/// Lock whose name was added, `TargetCleared` on each whose name left.
pub fn stamp_events(
    kind: &str,
    name: &str,
    before: Option<&str>,
    after: Option<&str>,
) -> Vec<(String, LockEvent)> {
    marker_events(
        before,
        after,
        || messages::lock_target_stamped(kind, name),
        |remaining| messages::lock_target_cleared(kind, name, remaining),
    )
}

/// The Events a change of a marker listing Lock names from `before` to
/// `after` calls for: `TargetStamped` (note `stamped()`) on each name
/// added, `TargetCleared` (note `cleared(remaining names)`) on each that
/// left.
pub fn marker_events(
    before: Option<&str>,
    after: Option<&str>,
    stamped: impl Fn() -> String,
    cleared: impl Fn(&[&str]) -> String,
) -> Vec<(String, LockEvent)> {
    let split = |locked: Option<&str>| -> BTreeSet<String> {
        locked
            .unwrap_or_default()
            .split(',')
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (before, after) = (split(before), split(after));
    let remaining: Vec<&str> = after.iter().map(String::as_str).collect();
    let stamped = after.difference(&before).map(|lock| {
        let event = LockEvent {
            warning: false,
            reason: events::TARGET_STAMPED,
            note: stamped(),
        };
        (lock.clone(), event)
    });
    let cleared = before.difference(&after).map(|lock| {
        let event = LockEvent {
            warning: false,
            reason: events::TARGET_CLEARED,
            note: cleared(&remaining),
        };
        (lock.clone(), event)
    });
    stamped.chain(cleared).collect()
}

/// The status `lock` should have after `outcome`, or `None` when it has it
/// already. The Ready condition keeps its transition time while its status
/// holds.
pub fn lock_status(lock: &Lock, outcome: &Outcome, now: Timestamp) -> Option<LockStatus> {
    let (active, reason, message) = ready_of(lock, outcome);
    let current = lock.status.clone().unwrap_or_default();
    let generation = lock.metadata.generation;
    let mut next = LockStatus {
        active,
        reason: lock.spec.reason.clone(),
        observed_generation: generation,
        conditions: current.conditions.clone(),
        suspension: current.suspension.clone(),
    };
    conditions::upsert(
        &mut next.conditions,
        conditions::ready(active, reason, message, generation, now),
    );
    (next != current).then_some(next)
}

/// The Locks an event on `target` wakes; `meta` is `None` when it was
/// deleted. When the object is gone, or carries other markers than it
/// should, every Lock protecting it: any of them restamps it, and each must
/// report the change. Otherwise only the Locks that reported it missing (it
/// reappeared already stamped, from a backup say): waking the others on the
/// echo of their own stamp would only race their status write.
/// A Lock whose break-glass suspension is in effect (`suspended`) counts
/// in no stamp, as in the reconcile's, but is woken with the others when
/// the marker is wrong: it may name it still.
pub fn locks_woken_by_target<'a>(
    target: Target<'_>,
    meta: Option<&ObjectMeta>,
    locks: &'a [Arc<Lock>],
    catalog: &Catalog,
    suspended: impl Fn(&Lock) -> bool,
) -> Vec<&'a Lock> {
    let protecting =
        all(locks).filter(|lock| !is_deleting(lock) && validly_targets(lock, target, catalog));
    let Some(meta) = meta else {
        return protecting.collect();
    };
    let stamped: Vec<Arc<Lock>> = locks.iter().filter(|l| !suspended(l)).cloned().collect();
    let stamp = target_stamp(target, &stamped, catalog);
    if Markers::of(meta) != Markers::wanted(stamp.as_ref()) {
        return protecting.collect();
    }
    protecting.filter(|lock| reports_missing(lock)).collect()
}

fn reports_missing(lock: &Lock) -> bool {
    lock.status.as_ref().is_some_and(|status| {
        conditions::find(&status.conditions, condition_types::READY)
            .is_some_and(|ready| ready.reason == reasons::MISSING_REFERENCE)
    })
}

/// The Locks a relist of `kind` wakes: the active ones, whose target may
/// have been deleted while the watch was down (a relist reports no
/// deletions).
pub fn locks_woken_by_relist<'a>(kind: &GroupKind, locks: &'a [Arc<Lock>]) -> Vec<&'a Lock> {
    all(locks)
        .filter(|lock| is_active(lock) && kind.is_kind_of(&lock.spec.target_ref))
        .collect()
}

/// The Lock a Namespace event wakes: one Lock of the namespace when its
/// marker is not `wanted`, since any Lock's reconcile restamps it; none
/// otherwise, so that a stamp does not wake every Lock around.
pub fn lock_woken_by_namespace<'a>(
    meta: &ObjectMeta,
    wanted: Option<&str>,
    locks: &'a [Arc<Lock>],
) -> Option<&'a Lock> {
    let ns = meta.name.as_deref()?;
    if locked_of(meta) == wanted {
        return None;
    }
    all(locks)
        .filter(|lock| namespace(lock) == ns && restamps(lock))
        .min_by_key(|lock| name(lock))
}

/// Whether a reconcile of `lock` restamps what it shares with the others:
/// all but a Lock being deleted that no longer holds the controller's
/// finalizer (another's keeps it), whose reconcile does nothing.
pub(crate) fn restamps(lock: &Lock) -> bool {
    !is_deleting(lock)
        || lock
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == finalizers::LOCK)
}

/// The Lock a CustomResourceDefinition event wakes: like
/// [`lock_woken_by_namespace`], one valid Lock on an object of its `kind`
/// when its marker is not `wanted`.
pub fn lock_woken_by_crd<'a>(
    meta: &ObjectMeta,
    kind: &GroupKind,
    wanted: Option<&str>,
    locks: &'a [Arc<Lock>],
    catalog: &Catalog,
) -> Option<&'a Lock> {
    if locked_of(meta) == wanted {
        return None;
    }
    all(locks)
        .filter(|lock| {
            kind.is_kind_of(&lock.spec.target_ref)
                && valid_kind(lock, catalog).is_some()
                && restamps(lock)
        })
        .min_by_key(|lock| (namespace(lock), name(lock)))
}

/// The Locks whose target is of one of `kinds`: their validity may have
/// changed with discovery.
pub fn locks_of_kinds<'a>(kinds: &BTreeSet<GroupKind>, locks: &'a [Arc<Lock>]) -> Vec<&'a Lock> {
    all(locks)
        .filter(|lock| {
            kinds
                .iter()
                .any(|kind| kind.is_kind_of(&lock.spec.target_ref))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use navique_api::constants::{DEFAULT_ENFORCEABLE_GROUPS, SERVICES_GROUP};
    use navique_api::core::LockSpec;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn served(group: &str, version: &str, kind: &str, plural: &str) -> ServedKind {
        ServedKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        }
    }

    /// What the dev API server serves with the project's CRDs installed.
    pub(crate) fn catalog() -> Catalog {
        let mut catalog = Catalog::new(Enforceable::groups(
            DEFAULT_ENFORCEABLE_GROUPS.map(String::from).to_vec(),
        ));
        catalog.add(served(CORE_GROUP, "v1alpha1", "Lock", "locks"), true);
        catalog.add(served(CORE_GROUP, "v1alpha1", "Stack", "stacks"), true);
        catalog.add(
            served(
                SERVICES_GROUP,
                "v1alpha1",
                "ManagedService",
                "managedservices",
            ),
            true,
        );
        catalog.add(
            ServedKind {
                namespaced: false,
                ..served(SERVICES_GROUP, "v1alpha1", "ServiceClass", "serviceclasses")
            },
            true,
        );
        catalog
    }

    pub(crate) fn stack_kind() -> GroupKind {
        GroupKind {
            group: CORE_GROUP.into(),
            kind: "Stack".into(),
        }
    }

    fn target_ref(api_version: &str, kind: &str, name: &str) -> TargetRef {
        TargetRef {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn lock_on(ns: &str, name: &str, target: TargetRef, reason: Option<&str>) -> Lock {
        let mut lock = Lock::new(
            name,
            LockSpec {
                target_ref: target,
                reason: reason.map(String::from),
            },
        );
        lock.metadata.namespace = Some(ns.into());
        lock.metadata.generation = Some(1);
        lock
    }

    pub(crate) fn lock_on_stack(ns: &str, name: &str, stack: &str) -> Lock {
        lock_on(
            ns,
            name,
            target_ref("core.navique.com/v1alpha1", "Stack", stack),
            None,
        )
    }

    fn active(mut lock: Lock) -> Lock {
        lock.status = Some(LockStatus {
            active: true,
            ..LockStatus::default()
        });
        lock
    }

    pub(crate) fn deleting(mut lock: Lock) -> Lock {
        lock.metadata.deletion_timestamp = Some(Time(at(5)));
        lock
    }

    pub(crate) fn arcs(locks: Vec<Lock>) -> Vec<Arc<Lock>> {
        locks.into_iter().map(Arc::new).collect()
    }

    pub(crate) fn stack<'a>(kind: &'a GroupKind, ns: &'a str, name: &'a str) -> Target<'a> {
        Target {
            kind,
            namespace: ns,
            name,
        }
    }

    fn meta_with(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        ObjectMeta {
            name: Some("forge".into()),
            annotations: map(annotations),
            labels: map(labels),
            ..ObjectMeta::default()
        }
    }

    fn invalid(message: &str) -> Classification<'static> {
        Classification::Invalid(message.to_owned())
    }

    #[test]
    fn a_stack_of_the_core_group_is_a_valid_target() {
        let catalog = catalog();
        let target = target_ref("core.navique.com/v1alpha1", "Stack", "forge");
        assert_eq!(
            classify(&target, &catalog),
            Classification::Valid(
                catalog
                    .served("core.navique.com/v1alpha1", "Stack")
                    .unwrap()
            )
        );
    }

    #[test]
    fn a_target_of_another_group_names_the_enforceable_groups() {
        let catalog = catalog();
        assert_eq!(
            classify(&target_ref("apps/v1", "Deployment", "web"), &catalog),
            invalid(
                "targetRef.apiVersion apps/v1 is not enforceable: only objects of core.navique.com, services.kube-dc.com can be locked; to lock objects of apps, add it to the lock-controller's --enforceable-groups and the guard's groups (Helm value lockGuard.groups)"
            )
        );
        assert_eq!(
            classify(&target_ref("v1", "ConfigMap", "settings"), &catalog),
            invalid(
                "targetRef.apiVersion v1 is not enforceable: only objects of core.navique.com, services.kube-dc.com can be locked; to lock objects of the core group (v1), add core to the lock-controller's --enforceable-groups and the guard's groups (Helm values lockGuard.groups and lockGuard.resources.core)"
            )
        );
    }

    #[test]
    fn the_message_lists_the_configured_groups() {
        let catalog = Catalog::new(Enforceable::groups(vec!["core.navique.com".into()]));
        assert_eq!(
            classify(
                &target_ref("services.kube-dc.com/v1alpha1", "ManagedService", "db"),
                &catalog
            ),
            invalid(
                "targetRef.apiVersion services.kube-dc.com/v1alpha1 is not enforceable: only objects of core.navique.com can be locked; to lock objects of services.kube-dc.com, add it to the lock-controller's --enforceable-groups and the guard's groups (Helm value lockGuard.groups)"
            )
        );
    }

    #[test]
    fn the_core_group_is_enforceable_when_configured() {
        let mut catalog = Catalog::new(Enforceable {
            groups: vec![String::new(), CORE_GROUP.into()],
            resources: BTreeMap::from([(
                String::new(),
                BTreeSet::from(["persistentvolumeclaims".to_owned(), "secrets".to_owned()]),
            )]),
            namespace_locks: false,
        });
        catalog.add(
            served("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            true,
        );
        catalog.add(served("", "v1", "ConfigMap", "configmaps"), true);
        catalog.add(served(CORE_GROUP, "v1alpha1", "Stack", "stacks"), true);
        // Only the listed core resources are watched; the operator's group
        // is not restricted.
        assert_eq!(
            catalog
                .watched_kinds()
                .map(|k| k.kind.as_str())
                .collect::<Vec<_>>(),
            ["PersistentVolumeClaim", "Stack"]
        );
        assert_eq!(
            classify(&target_ref("v1", "ConfigMap", "settings"), &catalog),
            invalid(
                "kind ConfigMap of v1 is not enforceable: only persistentvolumeclaims, secrets can be locked in its group; add its resource to the lock-controller's --enforceable-resources (Helm value lockGuard.resources)"
            )
        );
        let target = target_ref("v1", "PersistentVolumeClaim", "data");
        assert_eq!(
            classify(&target, &catalog),
            Classification::Valid(catalog.served("v1", "PersistentVolumeClaim").unwrap())
        );
        // A core kind not served (or not discovered) is still refused.
        assert_eq!(
            classify(&target_ref("v1", "Secrt", "creds"), &catalog),
            invalid("kind Secrt is not served by v1")
        );
        // Another group is refused, the message naming core as flags do.
        assert_eq!(
            classify(&target_ref("apps/v1", "Deployment", "web"), &catalog),
            invalid(
                "targetRef.apiVersion apps/v1 is not enforceable: only objects of core, core.navique.com can be locked; to lock objects of apps, add it to the lock-controller's --enforceable-groups and the guard's groups (Helm value lockGuard.groups)"
            )
        );
    }

    #[test]
    fn a_target_name_or_kind_that_cannot_go_into_a_url_is_invalid() {
        // Fail open: such a Lock got no status, its log saying only
        // "Failed to build request".
        assert_eq!(
            classify(
                &target_ref("core.navique.com/v1alpha1", "Stack", "Forge Ü"),
                &catalog()
            ),
            invalid(
                "spec.targetRef.name: \"Forge Ü\" is not an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
            )
        );
        assert_eq!(
            classify(
                &target_ref("core.navique.com/v1alpha1", "Stack/../x", "forge"),
                &catalog()
            ),
            invalid(
                "spec.targetRef.kind: \"Stack/../x\" is not a kind: a letter, then letters and digits, such as Stack"
            )
        );
    }

    #[test]
    fn a_lock_cannot_protect_a_lock() {
        assert_eq!(
            classify(
                &target_ref("core.navique.com/v1alpha1", "Lock", "other"),
                &catalog()
            ),
            invalid("a Lock cannot protect another Lock")
        );
    }

    #[test]
    fn a_kind_discovery_does_not_list_is_not_served() {
        assert_eq!(
            classify(
                &target_ref("core.navique.com/v1alpha1", "Widget", "w"),
                &catalog()
            ),
            invalid("kind Widget is not served by core.navique.com/v1alpha1")
        );
    }

    #[test]
    fn a_known_kind_in_an_unserved_version_is_not_served() {
        assert_eq!(
            classify(
                &target_ref("core.navique.com/v1beta1", "Stack", "forge"),
                &catalog()
            ),
            invalid("kind Stack is not served by core.navique.com/v1beta1")
        );
    }

    #[test]
    fn a_cluster_scoped_kind_cannot_be_locked_from_a_namespace() {
        assert_eq!(
            classify(
                &target_ref(
                    "services.kube-dc.com/v1alpha1",
                    "ServiceClass",
                    "postgresql"
                ),
                &catalog()
            ),
            invalid(
                "kind ServiceClass of services.kube-dc.com/v1alpha1 is cluster-scoped: a Lock protects objects in its own namespace"
            )
        );
    }

    #[test]
    fn locks_and_cluster_scoped_kinds_are_not_watched() {
        let watched: Vec<String> = catalog().watched_kinds().map(|k| k.kind.clone()).collect();
        assert_eq!(watched, ["Stack", "ManagedService"]);
    }

    #[test]
    fn the_preferred_version_of_a_kind_is_watched() {
        let mut catalog = Catalog::new(Enforceable::groups(vec![CORE_GROUP.into()]));
        catalog.add(served(CORE_GROUP, "v1beta1", "Stack", "stacks"), true);
        catalog.add(served(CORE_GROUP, "v1alpha1", "Stack", "stacks"), false);
        let versions: Vec<&str> = catalog
            .watched_kinds()
            .map(|k| k.version.as_str())
            .collect();
        assert_eq!(versions, ["v1beta1"]);
    }

    #[test]
    fn a_kind_installed_later_is_a_changed_kind() {
        let before = catalog();
        let mut after = catalog();
        after.add(served(CORE_GROUP, "v1alpha1", "Widget", "widgets"), true);
        assert_eq!(
            before.changed_kinds(&after),
            BTreeSet::from([GroupKind {
                group: CORE_GROUP.into(),
                kind: "Widget".into()
            }])
        );
        assert_eq!(after.changed_kinds(&before).len(), 1);
        assert!(before.changed_kinds(&catalog()).is_empty());
    }

    #[test]
    fn a_crd_is_found_by_plural_and_group() {
        let catalog = catalog();
        assert_eq!(
            catalog.kind_of_crd("stacks.core.navique.com"),
            Some(stack_kind())
        );
        assert_eq!(catalog.kind_of_crd("widgets.core.navique.com"), None);
        assert!(catalog.may_define_kinds("widgets.core.navique.com"));
        assert!(catalog.may_define_kinds("managedservices.services.kube-dc.com"));
        assert!(!catalog.may_define_kinds("certificates.cert-manager.io"));
        assert!(!catalog.may_define_kinds("xcore.navique.com"));
    }

    #[test]
    fn one_lock_stamps_its_name_and_reason() {
        let lock = lock_on(
            "forge",
            "protect-forge-stack",
            target_ref("core.navique.com/v1alpha1", "Stack", "forge"),
            Some("Production environment"),
        );
        let kind = stack_kind();
        assert_eq!(
            target_stamp(
                stack(&kind, "forge", "forge"),
                &arcs(vec![lock]),
                &catalog()
            ),
            Some(TargetStamp {
                locked: "protect-forge-stack".into(),
                reasons: Some("protect-forge-stack: Production environment".into()),
            })
        );
    }

    #[test]
    fn several_locks_are_sorted_and_only_reasons_given_are_listed() {
        let b = lock_on_stack("forge", "lock-b", "forge");
        let a = lock_on(
            "forge",
            "lock-a",
            target_ref("core.navique.com/v1alpha1", "Stack", "forge"),
            Some("audit"),
        );
        let kind = stack_kind();
        assert_eq!(
            target_stamp(
                stack(&kind, "forge", "forge"),
                &arcs(vec![b, a]),
                &catalog()
            ),
            Some(TargetStamp {
                locked: "lock-a,lock-b".into(),
                reasons: Some("lock-a: audit".into()),
            })
        );
    }

    #[test]
    fn no_reason_means_no_reasons_annotation() {
        let lock = lock_on_stack("forge", "keep", "forge");
        let kind = stack_kind();
        let stamp = target_stamp(
            stack(&kind, "forge", "forge"),
            &arcs(vec![lock]),
            &catalog(),
        )
        .unwrap();
        assert_eq!(stamp.reasons, None);
    }

    #[test]
    fn a_deleted_lock_leaves_the_stamp() {
        let leaving = deleting(lock_on_stack("forge", "lock-a", "forge"));
        let staying = lock_on_stack("forge", "lock-b", "forge");
        let kind = stack_kind();
        let target = stack(&kind, "forge", "forge");
        assert_eq!(
            target_stamp(target, &arcs(vec![leaving.clone(), staying]), &catalog())
                .unwrap()
                .locked,
            "lock-b"
        );
        assert_eq!(target_stamp(target, &arcs(vec![leaving]), &catalog()), None);
    }

    #[test]
    fn locks_on_other_objects_namespaces_or_kinds_do_not_stamp() {
        let other_name = lock_on_stack("forge", "a", "other");
        let other_namespace = lock_on_stack("elsewhere", "b", "forge");
        let other_kind = lock_on(
            "forge",
            "c",
            target_ref("services.kube-dc.com/v1alpha1", "ManagedService", "forge"),
            None,
        );
        let kind = stack_kind();
        assert_eq!(
            target_stamp(
                stack(&kind, "forge", "forge"),
                &arcs(vec![other_name, other_namespace, other_kind]),
                &catalog()
            ),
            None
        );
    }

    #[test]
    fn an_invalid_lock_stamps_nothing() {
        let unserved_version = lock_on(
            "forge",
            "v1beta1",
            target_ref("core.navique.com/v1beta1", "Stack", "forge"),
            None,
        );
        let kind = stack_kind();
        assert_eq!(
            target_stamp(
                stack(&kind, "forge", "forge"),
                &arcs(vec![unserved_version]),
                &catalog()
            ),
            None
        );
    }

    #[test]
    fn the_patch_carries_both_annotations_and_the_label() {
        let catalog = catalog();
        let kind = catalog
            .served("core.navique.com/v1alpha1", "Stack")
            .unwrap();
        let stamp = TargetStamp {
            locked: "a,b".into(),
            reasons: Some("a: audit".into()),
        };
        assert_eq!(
            target_patch(kind, "forge", "forge", Some(&stamp)),
            json!({
                "apiVersion": "core.navique.com/v1alpha1",
                "kind": "Stack",
                "metadata": {
                    "name": "forge",
                    "namespace": "forge",
                    "annotations": {
                        "core.navique.com/locked": "a,b",
                        "core.navique.com/lock-reasons": "a: audit",
                    },
                    "labels": {"core.navique.com/locked": "true"},
                },
            })
        );
    }

    #[test]
    fn the_clearing_patch_names_the_object_only() {
        let catalog = catalog();
        let kind = catalog
            .served("core.navique.com/v1alpha1", "Stack")
            .unwrap();
        assert_eq!(
            target_patch(kind, "forge", "forge", None),
            json!({
                "apiVersion": "core.navique.com/v1alpha1",
                "kind": "Stack",
                "metadata": {"name": "forge", "namespace": "forge"},
            })
        );
        assert_eq!(
            namespace_patch("forge", None),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "forge"}})
        );
    }

    #[test]
    fn namespace_and_crd_patches_carry_the_locked_annotation() {
        assert_eq!(
            namespace_patch("forge", Some("a,b")),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "forge", "annotations": {"core.navique.com/locked": "a,b"}},
            })
        );
        assert_eq!(
            crd_patch("stacks.core.navique.com", Some("forge/a")),
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": "stacks.core.navique.com",
                    "annotations": {"core.navique.com/locked": "forge/a"},
                },
            })
        );
    }

    #[test]
    fn markers_are_read_from_annotations_and_label() {
        let meta = meta_with(
            &[
                (annotations::LOCKED, "a"),
                (annotations::LOCK_REASONS, "a: x"),
            ],
            &[(labels::LOCKED, "true")],
        );
        let stamp = TargetStamp {
            locked: "a".into(),
            reasons: Some("a: x".into()),
        };
        assert_eq!(Markers::of(&meta), Markers::wanted(Some(&stamp)));
        assert!(Markers::of(&meta_with(&[], &[])).is_empty());
        assert_ne!(Markers::of(&meta), Markers::wanted(None));
    }

    #[test]
    fn a_removed_label_is_a_marker_difference() {
        let meta = meta_with(&[(annotations::LOCKED, "a")], &[]);
        let stamp = TargetStamp {
            locked: "a".into(),
            reasons: None,
        };
        assert_ne!(Markers::of(&meta), Markers::wanted(Some(&stamp)));
    }

    #[test]
    fn markers_name_a_bounded_number_of_locks() {
        let names: Vec<String> = (0..MARKER_NAMES + 3)
            .map(|i| format!("lock-{i:02}"))
            .collect();
        let stamp = namespace_marker(names.iter().map(String::as_str), names.len()).unwrap();
        assert!(stamp.starts_with("lock-00,lock-01,"), "{stamp}");
        assert!(stamp.ends_with(",lock-09,and 3 more"), "{stamp}");
        assert_eq!(
            namespace_marker(names[..2].iter().map(String::as_str), 2).as_deref(),
            Some("lock-00,lock-01")
        );
        assert_eq!(namespace_marker(std::iter::empty(), 0), None);
        let qualified = [("apps", "a"), ("forge", "b")];
        assert_eq!(
            crd_marker(qualified.into_iter(), 2).as_deref(),
            Some("apps/a,forge/b")
        );
    }

    #[test]
    fn how_many_more_changes_only_at_a_few_counts() {
        let said: Vec<String> = [1, 9, 10, 11, 99, 100, 990, 999, 1000, 9990, 10_000, 123_456]
            .into_iter()
            .map(more)
            .collect();
        assert_eq!(
            said,
            [
                "and 1 more",
                "and 9 more",
                "and 10+ more",
                "and 10+ more",
                "and 10+ more",
                "and 100+ more",
                "and 100+ more",
                "and 100+ more",
                "and 1000+ more",
                "and 1000+ more",
                "and 10000+ more",
                "and 100000+ more"
            ]
        );
        // From 1 to 10,000 more, the text changes 12 times.
        let changes = (1..=10_000)
            .map(more)
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0] != w[1])
            .count();
        assert_eq!(changes, 12);
    }

    #[test]
    fn a_protecting_lock_is_active_and_ready() {
        let lock = lock_on(
            "forge",
            "keep",
            target_ref("core.navique.com/v1alpha1", "Stack", "forge"),
            Some("production"),
        );
        let status = lock_status(&lock, &Outcome::Protecting, at(10)).unwrap();
        assert!(status.active);
        assert_eq!(status.reason.as_deref(), Some("production"));
        assert_eq!(status.observed_generation, Some(1));
        let ready = conditions::find(&status.conditions, condition_types::READY).unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            ("True", "Protecting", "protecting Stack forge")
        );
        assert_eq!(ready.observed_generation, Some(1));
    }

    #[test]
    fn a_missing_target_names_kind_name_and_namespace() {
        let lock = lock_on_stack("forge", "early", "later");
        let status = lock_status(&lock, &Outcome::MissingReference, at(10)).unwrap();
        assert!(!status.active);
        let ready = conditions::find(&status.conditions, condition_types::READY).unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            (
                "False",
                "MissingReference",
                "Stack later not found in namespace forge"
            )
        );
    }

    #[test]
    fn an_invalid_target_reports_its_message() {
        let lock = lock_on(
            "forge",
            "on-lock",
            target_ref("core.navique.com/v1alpha1", "Lock", "x"),
            None,
        );
        let outcome = Outcome::InvalidTarget(messages::LOCK_ON_LOCK.into());
        let status = lock_status(&lock, &outcome, at(10)).unwrap();
        let ready = conditions::find(&status.conditions, condition_types::READY).unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            (
                "False",
                "InvalidTarget",
                "a Lock cannot protect another Lock"
            )
        );
    }

    #[test]
    fn an_unchanged_status_is_not_written_again() {
        let mut lock = lock_on_stack("forge", "keep", "forge");
        lock.status = lock_status(&lock, &Outcome::Protecting, at(10));
        assert_eq!(lock_status(&lock, &Outcome::Protecting, at(99)), None);
    }

    #[test]
    fn a_new_generation_is_a_status_change() {
        let mut lock = lock_on_stack("forge", "keep", "forge");
        lock.status = lock_status(&lock, &Outcome::Protecting, at(10));
        lock.metadata.generation = Some(2);
        let status = lock_status(&lock, &Outcome::Protecting, at(20)).unwrap();
        assert_eq!(status.observed_generation, Some(2));
        let ready = conditions::find(&status.conditions, condition_types::READY).unwrap();
        assert_eq!(
            ready.last_transition_time,
            Time(at(10)),
            "still True: time kept"
        );
    }

    #[test]
    fn activation_moves_the_transition_time() {
        let mut lock = lock_on_stack("forge", "early", "later");
        lock.status = lock_status(&lock, &Outcome::MissingReference, at(10));
        let status = lock_status(&lock, &Outcome::Protecting, at(20)).unwrap();
        let ready = conditions::find(&status.conditions, condition_types::READY).unwrap();
        assert_eq!(ready.last_transition_time, Time(at(20)));
    }

    #[test]
    fn a_changed_reason_is_surfaced() {
        let mut lock = lock_on_stack("forge", "keep", "forge");
        lock.status = lock_status(&lock, &Outcome::Protecting, at(10));
        lock.spec.reason = Some("audit".into());
        assert_eq!(
            lock_status(&lock, &Outcome::Protecting, at(20))
                .unwrap()
                .reason
                .as_deref(),
            Some("audit")
        );
    }

    #[test]
    fn a_new_target_wakes_the_locks_waiting_for_it() {
        let locks = arcs(vec![
            lock_on_stack("forge", "early", "later"),
            lock_on_stack("forge", "other", "else"),
        ]);
        let kind = stack_kind();
        let woken = locks_woken_by_target(
            stack(&kind, "forge", "later"),
            Some(&meta_with(&[], &[])),
            &locks,
            &catalog(),
            |_| false,
        );
        assert_eq!(woken.iter().map(|l| name(l)).collect::<Vec<_>>(), ["early"]);
    }

    #[test]
    fn a_target_reappearing_stamped_wakes_the_lock_that_reported_it_missing() {
        let mut waiting = lock_on_stack("forge", "a", "forge");
        waiting.status = lock_status(&waiting, &Outcome::MissingReference, at(1));
        let new = lock_on_stack("forge", "b", "forge");
        let locks = arcs(vec![waiting, new]);
        let kind = stack_kind();
        let stamped = meta_with(&[(annotations::LOCKED, "a,b")], &[(labels::LOCKED, "true")]);
        let woken = locks_woken_by_target(
            stack(&kind, "forge", "forge"),
            Some(&stamped),
            &locks,
            &catalog(),
            |_| false,
        );
        assert_eq!(woken.iter().map(|l| name(l)).collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn a_tampered_target_wakes_every_lock_on_it() {
        let locks = arcs(vec![
            active(lock_on_stack("forge", "a", "forge")),
            active(lock_on_stack("forge", "b", "forge")),
        ]);
        let kind = stack_kind();
        let tampered = meta_with(&[(annotations::LOCKED, "a")], &[(labels::LOCKED, "true")]);
        let woken = locks_woken_by_target(
            stack(&kind, "forge", "forge"),
            Some(&tampered),
            &locks,
            &catalog(),
            |_| false,
        );
        assert_eq!(woken.len(), 2);
    }

    #[test]
    fn a_correctly_stamped_target_wakes_no_active_lock() {
        let locks = arcs(vec![active(lock_on_stack("forge", "a", "forge"))]);
        let kind = stack_kind();
        let stamped = meta_with(&[(annotations::LOCKED, "a")], &[(labels::LOCKED, "true")]);
        assert!(
            locks_woken_by_target(
                stack(&kind, "forge", "forge"),
                Some(&stamped),
                &locks,
                &catalog(),
                |_| false
            )
            .is_empty()
        );
    }

    #[test]
    fn a_suspended_lock_counts_in_no_stamp_and_is_woken_while_the_target_names_it() {
        let locks = arcs(vec![
            active(lock_on_stack("forge", "a", "forge")),
            active(lock_on_stack("forge", "pause", "forge")),
        ]);
        let kind = stack_kind();
        let target = stack(&kind, "forge", "forge");
        let suspended = |lock: &Lock| name(lock) == "pause";
        let woken = |markers: &[(&str, &str)]| {
            let meta = meta_with(markers, &[(labels::LOCKED, "true")]);
            locks_woken_by_target(target, Some(&meta), &locks, &catalog(), suspended)
                .iter()
                .map(|l| name(l).to_owned())
                .collect::<Vec<_>>()
        };
        // Its stamp left: nothing to do.
        assert!(woken(&[(annotations::LOCKED, "a")]).is_empty());
        // Still named (a stamp written late): both are woken, and restamp.
        assert_eq!(woken(&[(annotations::LOCKED, "a,pause")]), ["a", "pause"]);
    }

    #[test]
    fn a_deleted_target_wakes_its_locks() {
        let locks = arcs(vec![active(lock_on_stack("forge", "a", "forge"))]);
        let kind = stack_kind();
        assert_eq!(
            locks_woken_by_target(
                stack(&kind, "forge", "forge"),
                None,
                &locks,
                &catalog(),
                |_| false
            )
            .len(),
            1
        );
    }

    #[test]
    fn an_unlocked_object_wakes_nothing() {
        let locks = arcs(vec![lock_on_stack("forge", "a", "other")]);
        let kind = stack_kind();
        assert!(
            locks_woken_by_target(
                stack(&kind, "forge", "forge"),
                Some(&meta_with(&[], &[])),
                &locks,
                &catalog(),
                |_| false
            )
            .is_empty()
        );
    }

    #[test]
    fn a_relist_wakes_the_active_locks_of_the_kind() {
        let locks = arcs(vec![
            active(lock_on_stack("forge", "a", "x")),
            lock_on_stack("forge", "waiting", "y"),
        ]);
        let woken = locks_woken_by_relist(&stack_kind(), &locks);
        assert_eq!(woken.iter().map(|l| name(l)).collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn a_namespace_with_the_right_marker_wakes_nothing() {
        let locks = arcs(vec![active(lock_on_stack("forge", "a", "x"))]);
        assert!(
            lock_woken_by_namespace(
                &meta_with(&[(annotations::LOCKED, "a")], &[]),
                Some("a"),
                &locks
            )
            .is_none()
        );
    }

    #[test]
    fn a_namespace_with_a_wrong_marker_wakes_one_of_its_locks() {
        let mut finalized_elsewhere = deleting(lock_on_stack("forge", "0", "x"));
        finalized_elsewhere.metadata.finalizers = Some(vec!["example.com/keep".into()]);
        let mut leaving = deleting(lock_on_stack("forge", "1", "x"));
        leaving.metadata.finalizers = Some(vec![finalizers::LOCK.into()]);
        let mut locks = arcs(vec![
            active(lock_on_stack("forge", "b", "x")),
            active(lock_on_stack("forge", "a", "y")),
            active(lock_on_stack("elsewhere", "0", "y")),
            // Its reconcile would do nothing: not this one.
            finalized_elsewhere,
        ]);
        let woken = lock_woken_by_namespace(&meta_with(&[], &[]), Some("a,b"), &locks).unwrap();
        assert_eq!((namespace(woken), name(woken)), ("forge", "a"));
        // A Lock being deleted still restamps, before its finalizer goes.
        locks.push(Arc::new(leaving));
        let woken = lock_woken_by_namespace(&meta_with(&[], &[]), Some("a,b"), &locks).unwrap();
        assert_eq!(name(woken), "1");
    }

    #[test]
    fn a_shared_marker_is_written_when_the_watch_shows_another_value() {
        let write = SharedStamp::Write;
        assert_eq!(shared_stamp(Some(None), Some("a"), false), write);
        assert_eq!(shared_stamp(Some(Some("a")), Some("a,b"), true), write);
        assert_eq!(shared_stamp(Some(Some("a")), None, true), write);
        assert_eq!(
            shared_stamp(Some(Some("a")), Some("a"), true),
            SharedStamp::Keep
        );
        assert_eq!(shared_stamp(Some(None), None, false), SharedStamp::Keep);
        // Not seen yet: its watch event asks again.
        assert_eq!(shared_stamp(None, Some("a"), true), SharedStamp::Keep);
    }

    #[test]
    fn a_clear_the_watch_shows_is_confirmed_only_after_a_marker_written_here() {
        // Marked here since its last clear: the watch may lag the write.
        assert_eq!(shared_stamp(Some(None), None, true), SharedStamp::Confirm);
        // Or the watch lost sight of it (deleted and created again).
        assert_eq!(shared_stamp(None, None, true), SharedStamp::Confirm);
        // Never marked here: the watch listed it after any earlier write.
        assert_eq!(shared_stamp(Some(None), None, false), SharedStamp::Keep);
        assert_eq!(shared_stamp(None, None, false), SharedStamp::Keep);
    }

    #[test]
    fn a_targets_clear_is_confirmed_when_it_looks_done_already() {
        let unmarked = Markers::default();
        assert!(confirms_target_clear(None, &unmarked));
        // The watch shows a marker: the clear is written anyway.
        let marked = Markers {
            locked: Some("a".into()),
            ..Markers::default()
        };
        assert!(!confirms_target_clear(None, &marked));
        // Another Lock still protects it, and is woken by its event.
        let wanted = TargetStamp {
            locked: "b".into(),
            reasons: None,
        };
        assert!(!confirms_target_clear(Some(&wanted), &unmarked));
    }

    #[test]
    fn a_crd_with_a_wrong_marker_wakes_one_valid_lock_of_its_kind() {
        let locks = arcs(vec![
            active(lock_on_stack("forge", "b", "x")),
            lock_on(
                "apps",
                "a",
                target_ref("core.navique.com/v1beta1", "Stack", "y"),
                None,
            ),
        ]);
        let mut crd = meta_with(&[], &[]);
        crd.name = Some("stacks.core.navique.com".into());
        let wanted = Some("forge/b");
        let woken = lock_woken_by_crd(&crd, &stack_kind(), wanted, &locks, &catalog()).unwrap();
        assert_eq!(name(woken), "b");

        crd.annotations = Some(BTreeMap::from([(
            annotations::LOCKED.into(),
            "forge/b".into(),
        )]));
        assert!(lock_woken_by_crd(&crd, &stack_kind(), wanted, &locks, &catalog()).is_none());
    }

    #[test]
    fn a_changed_kind_wakes_its_locks() {
        let locks = arcs(vec![
            lock_on(
                "forge",
                "w",
                target_ref("core.navique.com/v1alpha1", "Widget", "x"),
                None,
            ),
            lock_on_stack("forge", "s", "x"),
        ]);
        let kinds = BTreeSet::from([GroupKind {
            group: CORE_GROUP.into(),
            kind: "Widget".into(),
        }]);
        let woken = locks_of_kinds(&kinds, &locks);
        assert_eq!(woken.iter().map(|l| name(l)).collect::<Vec<_>>(), ["w"]);
    }

    #[test]
    fn a_lock_starting_to_protect_records_protecting_once() {
        let mut lock = lock_on_stack("forge", "keep", "forge");
        assert_eq!(
            outcome_event(&lock, &Outcome::Protecting),
            Some(LockEvent {
                warning: false,
                reason: "Protecting",
                note: "protecting Stack forge".into(),
            })
        );
        lock.status = lock_status(&lock, &Outcome::Protecting, at(10));
        assert_eq!(outcome_event(&lock, &Outcome::Protecting), None);
    }

    #[test]
    fn missing_and_invalid_targets_are_warnings_with_the_status_message() {
        let mut lock = lock_on_stack("forge", "early", "later");
        assert_eq!(
            outcome_event(&lock, &Outcome::MissingReference),
            Some(LockEvent {
                warning: true,
                reason: "MissingReference",
                note: "Stack later not found in namespace forge".into(),
            })
        );
        lock.status = lock_status(&lock, &Outcome::MissingReference, at(10));
        assert_eq!(outcome_event(&lock, &Outcome::MissingReference), None);
        let invalid = Outcome::InvalidTarget(messages::LOCK_ON_LOCK.into());
        assert_eq!(
            outcome_event(&lock, &invalid),
            Some(LockEvent {
                warning: true,
                reason: "InvalidTarget",
                note: "a Lock cannot protect another Lock".into(),
            })
        );
        lock.status = lock_status(&lock, &invalid, at(20));
        assert_eq!(outcome_event(&lock, &invalid), None);
        let other =
            Outcome::InvalidTarget("kind Widget is not served by core.navique.com/v1alpha1".into());
        assert_eq!(
            outcome_event(&lock, &other).map(|e| e.note),
            Some("kind Widget is not served by core.navique.com/v1alpha1".into()),
            "a new message is a new event"
        );
    }

    #[test]
    fn a_stamp_records_on_each_lock_whose_name_it_adds_or_removes() {
        assert_eq!(
            stamp_events("Stack", "forge", None, Some("a")),
            vec![(
                "a".to_owned(),
                LockEvent {
                    warning: false,
                    reason: "TargetStamped",
                    note: "stamped Stack forge with core.navique.com/locked: deleting it is denied"
                        .into(),
                }
            )]
        );
        assert_eq!(
            stamp_events("Stack", "forge", Some("a"), Some("a,b")),
            vec![(
                "b".to_owned(),
                LockEvent {
                    warning: false,
                    reason: "TargetStamped",
                    note: "stamped Stack forge with core.navique.com/locked: deleting it is denied"
                        .into(),
                }
            )]
        );
        assert_eq!(
            stamp_events("Stack", "forge", Some("a,b"), Some("b")),
            vec![(
                "a".to_owned(),
                LockEvent {
                    warning: false,
                    reason: "TargetCleared",
                    note: "took this Lock off core.navique.com/locked of Stack forge: Lock(s) [b] still protect it"
                        .into(),
                }
            )]
        );
        assert_eq!(
            stamp_events("Stack", "forge", Some("b"), None),
            vec![(
                "b".to_owned(),
                LockEvent {
                    warning: false,
                    reason: "TargetCleared",
                    note:
                        "cleared core.navique.com/locked from Stack forge: no Lock protects it now"
                            .into(),
                }
            )]
        );
        assert_eq!(stamp_events("Stack", "forge", Some("a"), Some("a")), vec![]);
    }

    #[test]
    fn every_state_is_counted_even_when_empty() {
        let mut counts = StateCounts::default();
        counts.set("a", Some(Outcome::InvalidTarget("x".into()).state()));
        counts.set("b", Some(Outcome::InvalidTarget("y".into()).state()));
        counts.set("c", Some(Outcome::MissingReference.state()));
        counts.set("c", Some(Outcome::Protecting.state()));
        counts.set("d", Some(Outcome::Protecting.state()));
        counts.set("d", None);
        counts.set("never", None);
        let labelled = |counts: &StateCounts<&str>| -> Vec<(&str, i64)> {
            counts
                .counts()
                .iter()
                .map(|(s, n)| (s.label(), *n))
                .collect()
        };
        assert_eq!(
            labelled(&counts),
            vec![
                ("active", 1),
                ("invalid", 2),
                ("missing", 0),
                ("suspended", 0)
            ]
        );
        counts.retain(|lock| *lock != "a");
        assert_eq!(counts.len(), 2);
        assert_eq!(
            labelled(&counts),
            vec![
                ("active", 1),
                ("invalid", 1),
                ("missing", 0),
                ("suspended", 0)
            ]
        );
    }
}
