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

#[derive(Default)]
struct Inner {
    rv: u64,
    objects: BTreeMap<StorageKey, BTreeMap<ObjectKey, Value>>,
    history: VecDeque<Arc<Change>>,
    /// Changes at or before this resourceVersion are no longer in `history`.
    compacted: u64,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            changes: broadcast::channel(16_384).0,
        }
    }
}

/// A consistent view for one request, holding the store's lock.
pub struct Txn<'a> {
    inner: MutexGuard<'a, Inner>,
    store: &'a Store,
}

impl Store {
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
        self.inner.history.push_back(change.clone());
        if self.inner.history.len() > HISTORY
            && let Some(oldest) = self.inner.history.pop_front()
        {
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
        self.inner.rv += 1;
        self.inner.compacted = self.inner.rv;
    }
}
