//! The in-memory object store: every object as JSON, one global monotonic
//! resourceVersion, and a bounded history of changes that watches replay
//! from. Compaction drops history, as etcd's does, so a watch from before it
//! gets 410 Gone.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

/// Where a kind's objects live: (group, plural).
pub type StorageKey = (String, String);
/// An object's place in its storage: (namespace or "", name).
pub type ObjectKey = (String, String);

/// How many changes the history keeps before compacting the oldest.
const HISTORY: usize = 50_000;
/// And how much memory its objects may take, estimated: a hot loop
/// rewriting big objects would otherwise hold gigabytes.
const HISTORY_BYTES: usize = 256 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug)]
pub struct Change {
    pub kind: EventType,
    pub storage: StorageKey,
    pub namespace: String,
    /// The object after the change (before it, for a delete, with the
    /// deletion's resourceVersion), shared with the store.
    pub object: Arc<Value>,
    /// The object before the change, so a watch with a selector can tell
    /// when an object leaves it.
    pub previous: Option<Arc<Value>>,
    pub rv: u64,
    /// The memory its objects take, estimated once: the history adds it
    /// when the change comes in and takes it away when it leaves.
    bytes: usize,
}

/// Whether the garbage collector acts on `object`: it has owners, or is
/// held by the finalizer of an orphan or foreground delete.
fn collectable(object: &Value) -> bool {
    let meta = &object["metadata"];
    let owned = meta["ownerReferences"]
        .as_array()
        .is_some_and(|o| !o.is_empty());
    owned
        || meta["finalizers"].as_array().is_some_and(|f| {
            f.iter()
                .any(|f| f == crate::write::ORPHAN || f == crate::write::FOREGROUND)
        })
}

/// The heap memory a JSON value takes, estimated: its strings and
/// containers, and a constant per node for serde_json's own layout.
fn footprint(value: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    NODE + match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(footprint).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| key.len() + NODE + footprint(value))
            .sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[derive(Default)]
struct Inner {
    rv: u64,
    /// Shared with the history's changes and the writes that made them:
    /// a copy of each object per write was a tenth of a burst's CPU.
    objects: BTreeMap<StorageKey, BTreeMap<ObjectKey, Arc<Value>>>,
    /// The resourceVersion of each storage's latest change, so that what is
    /// derived from a storage (RBAC rules, admission configuration) is
    /// rebuilt only when it changed.
    changed_at: HashMap<StorageKey, u64>,
    /// The objects the garbage collector acts on (see [`collectable`]), so
    /// that a sweep does not read every object.
    collectable: BTreeSet<(StorageKey, ObjectKey)>,
    /// The uid of every object, to tell a dependent's owners alive.
    uids: HashMap<String, usize>,
    history: VecDeque<Arc<Change>>,
    /// The footprint of the changes in `history`.
    history_bytes: usize,
    /// Changes at or before this resourceVersion are no longer in `history`.
    compacted: u64,
}

/// A storage's objects, and the version of the storage they were copied at.
type Copied = (u64, Arc<Vec<Value>>);

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    /// [`Txn::all`]'s copies, with the storage's version they were taken at.
    copies: Mutex<HashMap<StorageKey, Copied>>,
    changes: broadcast::Sender<Arc<Change>>,
    /// The history's bounds: changes, and their estimated bytes.
    history_limit: (usize, usize),
}

impl Default for Store {
    fn default() -> Self {
        Self::with_history_limit(HISTORY, HISTORY_BYTES)
    }
}

/// A consistent view for one request, holding the store's lock.
pub struct Txn<'a> {
    inner: MutexGuard<'a, Inner>,
    store: &'a Store,
}

impl Store {
    fn with_history_limit(changes: usize, bytes: usize) -> Self {
        Self {
            inner: Mutex::default(),
            copies: Mutex::default(),
            changes: broadcast::channel(16_384).0,
            history_limit: (changes, bytes),
        }
    }

    pub fn lock(&self) -> Txn<'_> {
        Txn {
            inner: self.inner.lock().unwrap_or_else(|p| p.into_inner()),
            store: self,
        }
    }
}

impl Txn<'_> {
    /// Subscribes to changes after this view: none is missed or repeated.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.store.changes.subscribe()
    }

    /// The resourceVersion of the latest change.
    pub fn current_rv(&self) -> u64 {
        self.inner.rv
    }

    /// The next resourceVersion a write will get.
    pub fn next_rv(&self) -> u64 {
        self.inner.rv + 1
    }

    pub fn get(&self, storage: &StorageKey, key: &ObjectKey) -> Option<&Value> {
        self.get_shared(storage, key).map(|object| &**object)
    }

    /// [`Txn::get`], as the store shares it: a write that keeps the stored
    /// object beside its change takes it without a copy.
    pub fn get_shared(&self, storage: &StorageKey, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.inner.objects.get(storage)?.get(key)
    }

    /// Objects of a storage, in key order, optionally in one namespace,
    /// starting after `after`. Keys sort by namespace first, so this seeks
    /// to where it starts rather than reading every object before it (a
    /// list in pages would read the storage once per page).
    pub fn list<'s>(
        &'s self,
        storage: &StorageKey,
        namespace: Option<&'s str>,
        after: Option<&'s ObjectKey>,
    ) -> impl Iterator<Item = (&'s ObjectKey, &'s Value)> + 's {
        let start = match (after, namespace) {
            (Some(after), Some(ns)) if after.0.as_str() < ns => {
                Bound::Included((ns.to_owned(), String::new()))
            }
            (Some(after), _) => Bound::Excluded(after.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_owned(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        self.inner
            .objects
            .get(storage)
            .into_iter()
            .flat_map(move |objects| objects.range((start.clone(), Bound::Unbounded)))
            .take_while(move |(key, _)| namespace.is_none_or(|ns| key.0 == ns))
            .map(|(key, object)| (key, &**object))
    }

    /// Every object of a storage, copied once per change of it: RBAC and
    /// admission read their few objects on every request.
    pub fn all(&self, storage: &StorageKey) -> Arc<Vec<Value>> {
        let version = self.changed_at(storage);
        let mut copies = self.store.copies.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, objects)) = copies.get(storage)
            && *at == version
        {
            return objects.clone();
        }
        let objects: Arc<Vec<Value>> = Arc::new(
            self.list(storage, None, None)
                .map(|(_, object)| object.clone())
                .collect(),
        );
        copies.insert(storage.clone(), (version, objects.clone()));
        objects
    }

    /// Whether any object of a storage exists in a namespace.
    pub fn any_in_namespace(&self, namespace: &str) -> Vec<StorageKey> {
        self.inner
            .objects
            .iter()
            .filter(|(_, objects)| objects.keys().any(|(ns, _)| ns == namespace))
            .map(|(storage, _)| storage.clone())
            .collect()
    }

    /// Stores `object` (whose metadata.resourceVersion the caller set to
    /// `next_rv()`) and records the change.
    pub fn put(&mut self, storage: StorageKey, key: ObjectKey, object: impl Into<Arc<Value>>) {
        let object = object.into();
        let previous = self
            .inner
            .objects
            .entry(storage.clone())
            .or_default()
            .insert(key.clone(), object.clone());
        self.unindex(&storage, &key, previous.as_deref());
        self.index(&storage, &key, &object);
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(kind, storage, key, object, previous);
    }

    /// Removes an object; `object` is the final state watchers see.
    pub fn remove(&mut self, storage: StorageKey, key: ObjectKey, object: impl Into<Arc<Value>>) {
        let previous = self
            .inner
            .objects
            .get_mut(&storage)
            .and_then(|objects| objects.remove(&key));
        self.unindex(&storage, &key, previous.as_deref());
        self.record(EventType::Deleted, storage, key, object.into(), previous);
    }

    fn index(&mut self, storage: &StorageKey, key: &ObjectKey, object: &Value) {
        if collectable(object) {
            self.inner
                .collectable
                .insert((storage.clone(), key.clone()));
        }
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            *self.inner.uids.entry(uid.to_owned()).or_default() += 1;
        }
    }

    fn unindex(&mut self, storage: &StorageKey, key: &ObjectKey, previous: Option<&Value>) {
        let Some(previous) = previous else {
            return;
        };
        if collectable(previous) {
            self.inner
                .collectable
                .remove(&(storage.clone(), key.clone()));
        }
        if let Some(uid) = previous["metadata"]["uid"].as_str()
            && let Some(count) = self.inner.uids.get_mut(uid)
        {
            *count -= 1;
            if *count == 0 {
                self.inner.uids.remove(uid);
            }
        }
    }

    /// The resourceVersion of the latest change to `storage`'s objects (0
    /// if none since the server started).
    pub fn changed_at(&self, storage: &StorageKey) -> u64 {
        self.inner.changed_at.get(storage).copied().unwrap_or(0)
    }

    /// The objects the garbage collector acts on, with their storage.
    pub fn collectable(&self) -> impl Iterator<Item = (&StorageKey, &ObjectKey, &Value)> {
        self.inner
            .collectable
            .iter()
            .filter_map(|(storage, key)| Some((storage, key, self.get(storage, key)?)))
    }

    /// Whether an object with this uid exists.
    pub fn has_uid(&self, uid: &str) -> bool {
        self.inner.uids.contains_key(uid)
    }

    fn record(
        &mut self,
        kind: EventType,
        storage: StorageKey,
        key: ObjectKey,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        self.inner.rv += 1;
        let rv = self.inner.rv;
        self.inner.changed_at.insert(storage.clone(), rv);
        let bytes = footprint(&object) + previous.as_deref().map_or(0, footprint);
        let change = Arc::new(Change {
            kind,
            storage,
            namespace: key.0,
            object,
            previous,
            rv: self.inner.rv,
            bytes,
        });
        self.inner.history_bytes += change.bytes;
        self.inner.history.push_back(change.clone());
        let (changes, bytes) = self.store.history_limit;
        while self.inner.history.len() > changes || self.inner.history_bytes > bytes {
            let Some(oldest) = self.inner.history.pop_front() else {
                break;
            };
            self.inner.history_bytes -= oldest.bytes;
            self.inner.compacted = oldest.rv;
        }
        // No receivers is fine: nobody watches.
        let _ = self.store.changes.send(change);
    }

    /// The changes after `rv`, or `Err(oldest)` when `rv` was compacted.
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Arc<Change>>, u64> {
        if rv < self.inner.compacted {
            return Err(self.inner.compacted + 1);
        }
        Ok(self
            .inner
            .history
            .iter()
            .filter(|c| c.rv > rv)
            .cloned()
            .collect())
    }

    /// Simulates a compaction that watchers slept through: the history is
    /// dropped and the resourceVersion moves past every version a client
    /// holds, so that every watch resumed from one gets 410 Gone.
    pub fn compact(&mut self) {
        self.inner.history.clear();
        self.inner.history_bytes = 0;
        self.inner.rv += 1;
        self.inner.compacted = self.inner.rv;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config_map(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"x": data}})
    }

    #[test]
    fn a_list_reads_one_namespace_and_resumes_after_a_key() {
        let store = Store::default();
        let storage: StorageKey = (String::new(), "configmaps".into());
        let mut txn = store.lock();
        for (ns, name) in [
            ("a", "1"),
            ("a", "2"),
            ("b", "1"),
            ("b", "2"),
            ("b", "3"),
            ("c", "1"),
        ] {
            txn.put(
                storage.clone(),
                (ns.into(), name.into()),
                config_map(name, ns),
            );
        }
        let keys = |namespace: Option<&str>, after: Option<(&str, &str)>| {
            let after = after.map(|(ns, name)| (ns.to_owned(), name.to_owned()));
            txn.list(&storage, namespace, after.as_ref())
                .map(|((ns, name), _)| format!("{ns}/{name}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(Some("b"), None), ["b/1", "b/2", "b/3"]);
        assert_eq!(keys(Some("b"), Some(("b", "1"))), ["b/2", "b/3"]);
        assert_eq!(keys(Some("b"), Some(("b", "3"))), Vec::<String>::new());
        assert_eq!(keys(None, Some(("a", "2"))), ["b/1", "b/2", "b/3", "c/1"]);
        assert_eq!(keys(Some("c"), Some(("a", "1"))), ["c/1"]);
        assert_eq!(keys(Some("a"), Some(("b", "1"))), Vec::<String>::new());
        assert_eq!(keys(Some("d"), None), Vec::<String>::new());
        assert_eq!(keys(None, None).len(), 6);
        assert_eq!(
            txn.list(&(String::new(), "secrets".into()), None, None)
                .count(),
            0
        );
    }

    #[test]
    fn the_history_is_bounded_by_bytes_as_well_as_by_changes() {
        let store = Store::with_history_limit(1_000, 64 * 1024);
        let storage: StorageKey = (String::new(), "configmaps".into());
        let big = "x".repeat(8 * 1024);
        for _ in 0..100 {
            let mut txn = store.lock();
            txn.put(
                storage.clone(),
                ("ns".into(), "big".into()),
                config_map("big", &big),
            );
        }
        let txn = store.lock();
        assert!(
            txn.inner.history_bytes <= 64 * 1024,
            "{}",
            txn.inner.history_bytes
        );
        // Each change holds the object before and after: 16 KiB and more.
        let kept = txn
            .changes_since(txn.inner.compacted)
            .expect("kept changes");
        assert!((1..4).contains(&kept.len()), "{} changes kept", kept.len());
        assert_eq!(kept.last().map(|c| c.rv), Some(100));
        assert_eq!(txn.changes_since(0).err(), Some(txn.inner.compacted + 1));
        let footprints: usize = kept
            .iter()
            .map(|c| footprint(&c.object) + c.previous.as_deref().map_or(0, footprint))
            .sum();
        assert_eq!(footprints, txn.inner.history_bytes);
    }

    #[test]
    fn the_history_is_bounded_by_changes() {
        let store = Store::with_history_limit(10, usize::MAX);
        let storage: StorageKey = (String::new(), "configmaps".into());
        for i in 0..25 {
            let name = format!("cm-{i}");
            store.lock().put(
                storage.clone(),
                ("ns".into(), name.clone()),
                config_map(&name, "small"),
            );
        }
        let txn = store.lock();
        assert_eq!(txn.changes_since(15).map(|c| c.len()), Ok(10));
        assert!(txn.changes_since(10).is_err());
    }

    #[test]
    fn copies_of_a_storage_are_shared_until_it_changes() {
        let store = Store::default();
        let roles: StorageKey = ("rbac.authorization.k8s.io".into(), "roles".into());
        let other: StorageKey = (String::new(), "configmaps".into());
        store.lock().put(
            roles.clone(),
            ("ns".into(), "a".into()),
            config_map("a", "1"),
        );
        let first = store.lock().all(&roles);
        // Another storage's change keeps the copy.
        store
            .lock()
            .put(other, ("ns".into(), "x".into()), config_map("x", "1"));
        assert!(Arc::ptr_eq(&first, &store.lock().all(&roles)));
        store.lock().put(
            roles.clone(),
            ("ns".into(), "b".into()),
            config_map("b", "1"),
        );
        let second = store.lock().all(&roles);
        assert_eq!(second.len(), 2);
        let mut txn = store.lock();
        txn.remove(
            roles.clone(),
            ("ns".into(), "a".into()),
            config_map("a", "1"),
        );
        assert_eq!(txn.all(&roles).len(), 1);
    }

    #[test]
    fn the_collector_sees_owned_and_held_objects_only() {
        let store = Store::default();
        let storage: StorageKey = (String::new(), "configmaps".into());
        let with_meta = |name: &str, meta: Value| {
            let mut object = config_map(name, "1");
            for (key, value) in meta.as_object().unwrap() {
                object["metadata"][key] = value.clone();
            }
            object
        };
        let mut txn = store.lock();
        let put = |txn: &mut Txn<'_>, name: &str, meta: Value| {
            txn.put(
                storage.clone(),
                ("ns".into(), name.into()),
                with_meta(name, meta),
            );
        };
        put(
            &mut txn,
            "plain",
            json!({"uid": "u-plain", "finalizers": ["navique"]}),
        );
        put(
            &mut txn,
            "owned",
            json!({"uid": "u-owned", "ownerReferences": [{"uid": "u-plain"}]}),
        );
        put(
            &mut txn,
            "orphaning",
            json!({"uid": "u-orph", "finalizers": ["orphan"]}),
        );
        let names = |txn: &Txn<'_>| -> Vec<String> {
            txn.collectable().map(|(_, key, _)| key.1.clone()).collect()
        };
        assert_eq!(names(&txn), ["orphaning", "owned"]);
        assert!(txn.has_uid("u-plain") && txn.has_uid("u-owned"));
        // Owners taken off, and an object removed: out of the index.
        put(
            &mut txn,
            "owned",
            json!({"uid": "u-owned", "ownerReferences": []}),
        );
        txn.remove(
            storage.clone(),
            ("ns".into(), "orphaning".into()),
            config_map("orphaning", "1"),
        );
        assert!(names(&txn).is_empty());
        assert!(!txn.has_uid("u-orph"));
    }
}
