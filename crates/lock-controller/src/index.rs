//! Which Locks point at an object and which live in a namespace, and the
//! active ones by namespace and by kind (what the Namespace and CRD markers
//! name), kept from the Lock watch beside kube's store. Without it, every
//! reconcile and every target event scans every Lock: O(n²) work for n Locks
//! created at once.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use navique_api::core::Lock;

use crate::decision::{self, GroupKind};

/// A name shared by every map that holds it: a Lock's name is kept once,
/// and a namespace's and a kind's once for all their Locks (a String in
/// each map cost about 300 bytes a Lock).
type Name = Arc<str>;

/// `(namespace, name)`.
type Key = (Name, Name);

/// What a Lock is indexed under.
#[derive(Clone, PartialEq, Eq)]
struct Entry {
    /// Its target's name (in the Lock's namespace).
    target: Name,
    /// Its target's kind, while it is active.
    active: Option<Arc<GroupKind>>,
}

#[derive(Default)]
struct Maps {
    /// Each Lock's entry, to unindex it.
    of_lock: HashMap<Key, Entry>,
    /// By the namespace and name of the target, whatever its kind: Lock
    /// names, sorted. A Vec, since a target has one Lock or a few, and a
    /// BTreeSet's node takes the room of eleven names.
    by_target: HashMap<Key, Vec<Name>>,
    /// Lock names by namespace.
    by_namespace: HashMap<Name, BTreeSet<Name>>,
    /// Active Lock names by namespace, in order.
    active_in_namespace: HashMap<Name, BTreeSet<Name>>,
    /// Active Locks by their target's kind, in order.
    active_of_kind: HashMap<Arc<GroupKind>, BTreeSet<Key>>,
}

impl Maps {
    fn insert(&mut self, lock: &Lock) {
        let Some(namespace) = lock.metadata.namespace.as_deref() else {
            return;
        };
        let namespace = self.namespace(namespace);
        let lookup = (namespace.clone(), Name::from(lock.name_any()));
        let (key, old) = match self.of_lock.get_key_value(&lookup) {
            Some((key, old)) => (key.clone(), Some(old.clone())),
            None => (lookup, None),
        };
        let entry = Entry {
            target: Name::from(lock.spec.target_ref.name.as_str()),
            active: decision::is_active(lock)
                .then(|| self.kind(GroupKind::of(&lock.spec.target_ref))),
        };
        match old {
            Some(old) if old == entry => return,
            Some(old) => self.unindex(&key, &old),
            None => {}
        }
        self.of_lock.insert(key.clone(), entry.clone());
        let name = &key.1;
        let on_target = self
            .by_target
            .entry((namespace.clone(), entry.target))
            .or_default();
        if let Err(at) = on_target.binary_search(name) {
            on_target.insert(at, name.clone());
        }
        if let Some(kind) = entry.active {
            self.active_of_kind
                .entry(kind)
                .or_default()
                .insert(key.clone());
            self.active_in_namespace
                .entry(namespace.clone())
                .or_default()
                .insert(name.clone());
        }
        self.by_namespace
            .entry(namespace)
            .or_default()
            .insert(name.clone());
    }

    /// `namespace`, shared with the Locks already indexed in it.
    fn namespace(&self, namespace: &str) -> Name {
        self.by_namespace
            .get_key_value(namespace)
            .map_or_else(|| Name::from(namespace), |(shared, _)| shared.clone())
    }

    /// `kind`, shared with the active Locks already indexed on it.
    fn kind(&self, kind: GroupKind) -> Arc<GroupKind> {
        match self.active_of_kind.get_key_value(&kind) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(kind),
        }
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let Some((key, entry)) = self
            .of_lock
            .remove_entry(&(Name::from(namespace), Name::from(name)))
        else {
            return;
        };
        self.unindex(&key, &entry);
        unindex(&mut self.by_namespace, &*key.0, &key.1);
    }

    /// Takes the Lock out of what `entry` put it in, but for its namespace.
    fn unindex(&mut self, key: &Key, entry: &Entry) {
        let (namespace, name) = key;
        let target = (namespace.clone(), entry.target.clone());
        if let Some(names) = self.by_target.get_mut(&target) {
            if let Ok(at) = names.binary_search(name) {
                names.remove(at);
            }
            if names.is_empty() {
                self.by_target.remove(&target);
            }
        }
        if let Some(kind) = &entry.active {
            unindex(&mut self.active_in_namespace, &**namespace, name);
            unindex(&mut self.active_of_kind, &**kind, key);
        }
    }
}

/// Removes `item` from `key`'s set, and the set once empty.
fn unindex<K, Q, T>(sets: &mut HashMap<K, BTreeSet<T>>, key: &Q, item: &T)
where
    K: Borrow<Q> + Hash + Eq,
    Q: Hash + Eq + ?Sized,
    T: Ord,
{
    if let Some(items) = sets.get_mut(key) {
        items.remove(item);
        if items.is_empty() {
            sets.remove(key);
        }
    }
}

/// Lock names by target and by namespace; the Locks themselves are read from
/// the store, so that a lookup sees what the store holds.
#[derive(Clone)]
pub struct LockIndex {
    store: Store<Lock>,
    maps: Arc<RwLock<Maps>>,
    /// The index a relist is building, swapped in when it ends.
    relisting: Arc<RwLock<Option<Maps>>>,
    /// Whether a list has ended: until then, the index knows no Lock.
    listed: Arc<AtomicBool>,
}

impl LockIndex {
    pub fn new(store: Store<Lock>) -> Self {
        Self {
            store,
            maps: Arc::default(),
            relisting: Arc::default(),
            listed: Arc::default(),
        }
    }

    /// Whether the Locks have been listed (the store's own readiness
    /// wakes only one waiter, the controller, and polling it takes that).
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::SeqCst)
    }

    /// Follows the Lock watch, after the store has applied `event`.
    pub fn apply(&self, event: &Event<Lock>) {
        match event {
            Event::Apply(lock) => write(&self.maps).insert(lock),
            Event::Delete(lock) => {
                if let Some(namespace) = lock.namespace() {
                    write(&self.maps).remove(&namespace, &lock.name_any());
                }
            }
            Event::Init => *write(&self.relisting) = Some(Maps::default()),
            Event::InitApply(lock) => {
                if let Some(maps) = write(&self.relisting).as_mut() {
                    maps.insert(lock);
                }
            }
            Event::InitDone => {
                if let Some(maps) = write(&self.relisting).take() {
                    *write(&self.maps) = maps;
                }
                self.listed.store(true, Ordering::SeqCst);
            }
        }
    }

    pub fn len(&self) -> usize {
        read(&self.maps).of_lock.len()
    }

    /// Whether the Lock `(namespace, name)` is indexed.
    pub fn contains(&self, (namespace, name): &(String, String)) -> bool {
        let key = (Name::from(namespace.as_str()), Name::from(name.as_str()));
        read(&self.maps).of_lock.contains_key(&key)
    }

    /// The Locks in `namespace` whose target is named `name`, of any kind.
    pub fn pointing_at(&self, namespace: &str, name: &str) -> Vec<Arc<Lock>> {
        let maps = read(&self.maps);
        let names = maps
            .by_target
            .get(&(Name::from(namespace), Name::from(name)));
        self.locks(namespace, names.into_iter().flatten())
    }

    /// What the marker of Namespace `namespace` should say: its active
    /// Locks.
    pub fn namespace_marker(&self, namespace: &str) -> Option<String> {
        let maps = read(&self.maps);
        let active = maps.active_in_namespace.get(namespace);
        decision::namespace_marker(
            active.into_iter().flatten().map(|name| &**name),
            active.map_or(0, BTreeSet::len),
        )
    }

    /// What the marker of `kind`'s CRD should say: the active Locks on
    /// objects of that kind, cluster-wide.
    pub fn crd_marker(&self, kind: &GroupKind) -> Option<String> {
        let maps = read(&self.maps);
        let active = maps.active_of_kind.get(kind);
        decision::crd_marker(
            active
                .into_iter()
                .flatten()
                .map(|(namespace, name)| (&**namespace, &**name)),
            active.map_or(0, BTreeSet::len),
        )
    }

    /// The Locks in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Lock>> {
        let maps = read(&self.maps);
        self.locks(
            namespace,
            maps.by_namespace.get(namespace).into_iter().flatten(),
        )
    }

    fn locks<'a>(&self, namespace: &str, names: impl Iterator<Item = &'a Name>) -> Vec<Arc<Lock>> {
        names
            .filter_map(|name| self.store.get(&ObjectRef::new(name).within(namespace)))
            .collect()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    fn lock(namespace: &str, name: &str, target: &str) -> Lock {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"targetRef": {"kind": "Stack", "name": target}},
        }))
        .expect("lock")
    }

    fn active(mut lock: Lock) -> Lock {
        lock.status = Some(navique_api::core::LockStatus {
            active: true,
            ..Default::default()
        });
        lock
    }

    fn stack() -> GroupKind {
        GroupKind {
            group: navique_api::constants::CORE_GROUP.into(),
            kind: "Stack".into(),
        }
    }

    /// Applies `events` to a store and an index, as the Lock watch does.
    fn indexed(events: Vec<Event<Lock>>) -> (LockIndex, reflector::store::Writer<Lock>) {
        let (store, mut writer) = reflector::store();
        let index = LockIndex::new(store);
        for event in events {
            writer.apply_watcher_event(&event);
            index.apply(&event);
        }
        (index, writer)
    }

    fn names(locks: Vec<Arc<Lock>>) -> Vec<String> {
        let mut names: Vec<String> = locks.iter().map(|l| l.name_any()).collect();
        names.sort();
        names
    }

    #[test]
    fn finds_the_locks_of_a_target_and_of_a_namespace() {
        let (index, _) = indexed(vec![
            Event::Apply(lock("forge", "a", "web")),
            Event::Apply(lock("forge", "b", "web")),
            Event::Apply(lock("forge", "c", "db")),
            Event::Apply(lock("other", "d", "web")),
        ]);
        assert_eq!(names(index.pointing_at("forge", "web")), ["a", "b"]);
        assert_eq!(names(index.pointing_at("other", "web")), ["d"]);
        assert_eq!(names(index.in_namespace("forge")), ["a", "b", "c"]);
        assert!(index.pointing_at("forge", "nothing").is_empty());
    }

    #[test]
    fn a_deleted_lock_leaves_the_index() {
        let (index, _) = indexed(vec![
            Event::Apply(lock("forge", "a", "web")),
            Event::Apply(lock("forge", "b", "web")),
            Event::Delete(lock("forge", "a", "web")),
        ]);
        assert_eq!(names(index.pointing_at("forge", "web")), ["b"]);
        assert_eq!(names(index.in_namespace("forge")), ["b"]);
        assert_eq!(read(&index.maps).of_lock.len(), 1);
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_ends() {
        let (index, mut writer) = indexed(vec![
            Event::Apply(lock("forge", "gone", "web")),
            Event::Init,
            Event::InitApply(lock("forge", "kept", "web")),
        ]);
        // Until the relist ends, the index agrees with the store.
        assert_eq!(names(index.pointing_at("forge", "web")), ["gone"]);
        let done = Event::InitDone;
        writer.apply_watcher_event(&done);
        index.apply(&done);
        assert_eq!(names(index.pointing_at("forge", "web")), ["kept"]);
        assert_eq!(names(index.in_namespace("forge")), ["kept"]);
        assert_eq!(read(&index.maps).of_lock.len(), 1);
    }

    #[test]
    fn the_markers_name_the_active_locks_in_order() {
        let mut on_service = active(lock("forge", "db", "orders"));
        on_service.spec.target_ref.api_version = "services.kube-dc.com/v1alpha1".into();
        on_service.spec.target_ref.kind = "ManagedService".into();
        let mut leaving = active(lock("forge", "leaving", "x"));
        leaving.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let (index, _) = indexed(vec![
            Event::Apply(active(lock("forge", "zeta", "x"))),
            Event::Apply(active(lock("forge", "alpha", "y"))),
            Event::Apply(lock("forge", "missing", "z")),
            Event::Apply(leaving),
            Event::Apply(active(lock("elsewhere", "other", "x"))),
            Event::Apply(on_service),
        ]);
        assert_eq!(
            index.namespace_marker("forge").as_deref(),
            Some("alpha,db,zeta")
        );
        assert_eq!(index.namespace_marker("empty"), None);
        assert_eq!(
            index.crd_marker(&stack()).as_deref(),
            Some("elsewhere/other,forge/alpha,forge/zeta")
        );
    }

    #[test]
    fn a_lock_leaves_the_markers_when_it_stops_being_active_or_goes() {
        let (index, _) = indexed(vec![
            Event::Apply(active(lock("forge", "a", "x"))),
            Event::Apply(active(lock("forge", "b", "y"))),
            Event::Apply(active(lock("forge", "c", "z"))),
            // Its status stops saying active; another is deleted.
            Event::Apply(lock("forge", "a", "x")),
            Event::Delete(active(lock("forge", "b", "y"))),
        ]);
        assert_eq!(index.namespace_marker("forge").as_deref(), Some("c"));
        assert_eq!(index.crd_marker(&stack()).as_deref(), Some("forge/c"));
        // Active again, on another target: back in, once.
        let again = Event::Apply(active(lock("forge", "a", "w")));
        index.apply(&again);
        assert_eq!(index.namespace_marker("forge").as_deref(), Some("a,c"));
        assert_eq!(
            index.crd_marker(&stack()).as_deref(),
            Some("forge/a,forge/c")
        );
        let maps = read(&index.maps);
        assert_eq!(maps.by_target.len(), 2, "the old target is forgotten");
    }

    #[test]
    fn a_namespace_kind_and_lock_name_are_kept_once() {
        let (index, _) = indexed(vec![
            Event::Apply(active(lock("forge", "a", "x"))),
            Event::Apply(active(lock("forge", "b", "y"))),
            // A change of status re-indexes the Lock under the same names.
            Event::Apply(lock("forge", "b", "y")),
            Event::Apply(active(lock("forge", "b", "y"))),
        ]);
        let maps = read(&index.maps);
        let keys: Vec<&Key> = maps.of_lock.keys().collect();
        assert!(Arc::ptr_eq(&keys[0].0, &keys[1].0), "one namespace");
        let (namespace, names) = maps.by_namespace.iter().next().expect("forge");
        assert!(Arc::ptr_eq(namespace, &keys[0].0));
        for key in &keys {
            let name = names.get(&key.1).expect("indexed by namespace");
            assert!(Arc::ptr_eq(name, &key.1), "one name for {}", key.1);
        }
        let kinds: Vec<&Arc<GroupKind>> = maps.of_lock.values().flat_map(|e| &e.active).collect();
        assert_eq!(kinds.len(), 2);
        assert!(Arc::ptr_eq(kinds[0], kinds[1]), "one kind");
        assert!(Arc::ptr_eq(
            kinds[0],
            maps.active_of_kind.keys().next().expect("Stack")
        ));
    }
}
