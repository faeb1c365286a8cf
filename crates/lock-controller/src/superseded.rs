//! The versions of each Lock this controller has itself written over. A
//! reconcile of such a version runs on a copy older than the controller's
//! own write (the store has not seen the write's watch event yet): it would
//! only repeat the status and its Event, so it waits for the newer version.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use navique_api::core::Lock;

/// How long a written-over version stays known. Past it, a version is
/// reconciled anyway, in case the write's watch event never comes.
pub const REMEMBERED: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Superseded {
    by_lock: Mutex<HashMap<ObjectRef<Lock>, Entry>>,
}

struct Entry {
    versions: Vec<String>,
    since: Instant,
}

impl Superseded {
    /// Notes that the controller wrote a newer version over `lock`.
    pub fn wrote_over(&self, lock: &Lock, now: Instant) {
        let Some(version) = lock.resource_version() else {
            return;
        };
        let mut by_lock = self.by_lock.lock().unwrap_or_else(|e| e.into_inner());
        let entry = by_lock.entry(ObjectRef::from_obj(lock)).or_insert(Entry {
            versions: Vec::new(),
            since: now,
        });
        entry.versions.push(version);
        entry.since = now;
    }

    /// Whether `lock` is a version the controller already wrote over. A
    /// version it did not write over means the store caught up: the Lock
    /// is forgotten.
    pub fn is_stale(&self, lock: &Lock, now: Instant) -> bool {
        let mut by_lock = self.by_lock.lock().unwrap_or_else(|e| e.into_inner());
        let key = ObjectRef::from_obj(lock);
        let Some(entry) = by_lock.get(&key) else {
            return false;
        };
        let stale = now.duration_since(entry.since) < REMEMBERED
            && lock
                .resource_version()
                .is_some_and(|version| entry.versions.contains(&version));
        if !stale {
            by_lock.remove(&key);
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(version: &str) -> Lock {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
            "metadata": {"name": "l", "namespace": "forge", "resourceVersion": version},
            "spec": {"targetRef": {"kind": "Stack", "name": "web"}},
        }))
        .expect("lock")
    }

    #[test]
    fn a_version_written_over_is_stale_until_a_newer_one_is_seen() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        assert!(!superseded.is_stale(&lock("1"), now));
        // The finalizer (over 1), then the status (over 2).
        superseded.wrote_over(&lock("1"), now);
        superseded.wrote_over(&lock("2"), now);
        assert!(superseded.is_stale(&lock("1"), now));
        assert!(superseded.is_stale(&lock("2"), now));
        // The status write's version: current, and the Lock is forgotten.
        assert!(!superseded.is_stale(&lock("3"), now));
        assert!(!superseded.is_stale(&lock("2"), now));
    }

    #[test]
    fn a_version_written_over_long_ago_is_reconciled() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        superseded.wrote_over(&lock("1"), now);
        assert!(!superseded.is_stale(&lock("1"), now + REMEMBERED));
    }
}
