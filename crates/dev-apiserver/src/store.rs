//! The in-memory object store: every object as JSON, one global monotonic
//! resourceVersion, and a bounded history of changes that watches replay
//! from. Compaction drops history, as etcd's does, so a watch from before it
//! gets 410 Gone.

use std::collections::{BTreeMap, VecDeque};
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
    /// deletion's resourceVersion).
    pub object: Value,
    /// The object before the change, so a watch with a selector can tell
    /// when an object leaves it.
    pub previous: Option<Value>,
    pub rv: u64,
}

impl Change {
    /// The memory the change's objects take, estimated.
    fn footprint(&self) -> usize {
        footprint(&self.object) + self.previous.as_ref().map_or(0, footprint)
    }
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
    objects: BTreeMap<StorageKey, BTreeMap<ObjectKey, Value>>,
    history: VecDeque<Arc<Change>>,
    /// The footprint of the changes in `history`.
    history_bytes: usize,
    /// Changes at or before this resourceVersion are no longer in `history`.
    compacted: u64,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
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
        self.inner.objects.get(storage)?.get(key)
    }

    /// Objects of a storage, in key order, optionally in one namespace,
    /// starting after `after`.
    pub fn list<'s>(
        &'s self,
        storage: &StorageKey,
        namespace: Option<&'s str>,
        after: Option<&'s ObjectKey>,
    ) -> impl Iterator<Item = (&'s ObjectKey, &'s Value)> + 's {
        self.inner
            .objects
            .get(storage)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(move |(key, _)| namespace.is_none_or(|ns| key.0 == ns))
            .filter(move |(key, _)| after.is_none_or(|after| *key > after))
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
    pub fn put(&mut self, storage: StorageKey, key: ObjectKey, object: Value) {
        let previous = self
            .inner
            .objects
            .entry(storage.clone())
            .or_default()
            .insert(key.clone(), object.clone());
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(kind, storage, key, object, previous);
    }

    /// Removes an object; `object` is the final state watchers see.
    pub fn remove(&mut self, storage: StorageKey, key: ObjectKey, object: Value) {
        let previous = self
            .inner
            .objects
            .get_mut(&storage)
            .and_then(|objects| objects.remove(&key));
        self.record(EventType::Deleted, storage, key, object, previous);
    }

    fn record(
        &mut self,
        kind: EventType,
        storage: StorageKey,
        key: ObjectKey,
        object: Value,
        previous: Option<Value>,
    ) {
        self.inner.rv += 1;
        let change = Arc::new(Change {
            kind,
            storage,
            namespace: key.0,
            object,
            previous,
            rv: self.inner.rv,
        });
        self.inner.history_bytes += change.footprint();
        self.inner.history.push_back(change.clone());
        let (changes, bytes) = self.store.history_limit;
        while self.inner.history.len() > changes || self.inner.history_bytes > bytes {
            let Some(oldest) = self.inner.history.pop_front() else {
                break;
            };
            self.inner.history_bytes -= oldest.footprint();
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
        let footprints: usize = kept.iter().map(|c| c.footprint()).sum();
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
}
