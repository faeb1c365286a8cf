//! The Namespaces and CRDs this process has marked and not cleared since.
//! The watches may not show such a write yet, so a clear they show as done
//! is written all the same ([`decision::SharedStamp::Confirm`]). An entry
//! per marked object, not per Lock.
//!
//! [`decision::SharedStamp::Confirm`]: crate::decision::SharedStamp::Confirm

use std::collections::HashSet;
use std::sync::Mutex;

/// Keyed as [`Coalesced`](crate::coalesced::Coalesced) keys the writes,
/// whose line for an object also orders the updates of its entry.
#[derive(Default)]
pub struct MarkedHere(Mutex<HashSet<String>>);

impl MarkedHere {
    pub fn contains(&self, key: &str) -> bool {
        self.keys().contains(key)
    }

    /// Records that the object may carry a marker written here (before
    /// the write is sent), or that a clear of it is done.
    pub fn record(&self, key: &str, marked: bool) {
        let mut keys = self.keys();
        if !marked {
            keys.remove(key);
        } else if !keys.contains(key) {
            keys.insert(key.to_owned());
        }
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_marked_here_from_a_marking_write_to_a_clear() {
        let marked = MarkedHere::default();
        assert!(!marked.contains("namespace forge"));
        marked.record("namespace forge", true);
        marked.record("namespace forge", true);
        marked.record("stacks.core.navique.com", true);
        assert!(marked.contains("namespace forge"));
        marked.record("namespace forge", false);
        assert!(!marked.contains("namespace forge"));
        assert!(marked.contains("stacks.core.navique.com"));
        assert_eq!(marked.keys().len(), 1, "a clear forgets the object");
    }
}
