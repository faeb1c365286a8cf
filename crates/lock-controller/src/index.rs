//! Which Locks point at an object and which live in a namespace, kept from
//! the Lock watch beside kube's store. Without it, every reconcile and every
//! target event scans every Lock: O(n²) work for n Locks created at once.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use navique_api::core::Lock;

/// `(namespace, name)`.
type Key = (String, String);

#[derive(Default)]
struct Maps {
    /// Each Lock's namespace and target name, to unindex it.
    of_lock: HashMap<Key, Key>,
    /// By the namespace and name of the target, whatever its kind.
    by_target: HashMap<Key, BTreeSet<String>>,
    /// Lock names by namespace.
    by_namespace: HashMap<String, BTreeSet<String>>,
}

impl Maps {
    fn insert(&mut self, lock: &Lock) {
        let Some(namespace) = lock.namespace() else {
            return;
        };
        let name = lock.name_any();
        let target = (namespace.clone(), lock.spec.target_ref.name.clone());
        if let Some(old) = self
            .of_lock
            .insert((namespace.clone(), name.clone()), target.clone())
        {
            if old == target {
                return;
            }
            self.unindex_target(&old, &name);
        }
        self.by_target
            .entry(target)
            .or_default()
            .insert(name.clone());
        self.by_namespace.entry(namespace).or_default().insert(name);
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let Some(target) = self
            .of_lock
            .remove(&(namespace.to_owned(), name.to_owned()))
        else {
            return;
        };
        self.unindex_target(&target, name);
        if let Some(names) = self.by_namespace.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    fn unindex_target(&mut self, target: &Key, name: &str) {
        if let Some(names) = self.by_target.get_mut(target) {
            names.remove(name);
            if names.is_empty() {
                self.by_target.remove(target);
            }
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
}

impl LockIndex {
    pub fn new(store: Store<Lock>) -> Self {
        Self {
            store,
            maps: Arc::default(),
            relisting: Arc::default(),
        }
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
            }
        }
    }

    pub fn len(&self) -> usize {
        read(&self.maps).of_lock.len()
    }

    pub fn contains(&self, lock: &ObjectRef<Lock>) -> bool {
        let key = (
            lock.namespace.clone().unwrap_or_default(),
            lock.name.clone(),
        );
        read(&self.maps).of_lock.contains_key(&key)
    }

    /// The Locks in `namespace` whose target is named `name`, of any kind.
    pub fn pointing_at(&self, namespace: &str, name: &str) -> Vec<Arc<Lock>> {
        let maps = read(&self.maps);
        let names = maps.by_target.get(&(namespace.to_owned(), name.to_owned()));
        self.locks(namespace, names.into_iter().flatten())
    }

    /// The Locks in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Lock>> {
        let maps = read(&self.maps);
        self.locks(
            namespace,
            maps.by_namespace.get(namespace).into_iter().flatten(),
        )
    }

    fn locks<'a>(
        &self,
        namespace: &str,
        names: impl Iterator<Item = &'a String>,
    ) -> Vec<Arc<Lock>> {
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
}
