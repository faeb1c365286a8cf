//! Per-object retry delays for a controller's error policy.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Consecutive failures per object: the delay before the next try doubles
/// from 0.5 s with each failure of the same object, up to 5 min, so that a
/// lasting failure (a missing permission) does not spin; a success resets it.
pub struct FailureBackoff<K> {
    failures: Mutex<HashMap<K, u32>>,
}

const FIRST: Duration = Duration::from_millis(500);
const MAX: Duration = Duration::from_secs(300);

impl<K: Hash + Eq> Default for FailureBackoff<K> {
    fn default() -> Self {
        Self {
            failures: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq> FailureBackoff<K> {
    /// Records a failure of `key`; the delay before retrying it.
    pub fn failed(&self, key: K) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let count = failures.entry(key).or_default();
        *count = count.saturating_add(1);
        FIRST.saturating_mul(1 << (*count - 1).min(10)).min(MAX)
    }

    /// Forgets `key`'s failures after a success.
    pub fn succeeded(&self, key: &K) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_per_object_up_to_the_cap_and_reset_on_success() {
        let backoff = FailureBackoff::default();
        let delays: Vec<u128> = (0..4).map(|_| backoff.failed("a").as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000]);
        assert_eq!(backoff.failed("b"), FIRST, "another object starts afresh");
        for _ in 0..20 {
            backoff.failed("a");
        }
        assert_eq!(backoff.failed("a"), MAX);
        backoff.succeeded(&"a");
        assert_eq!(backoff.failed("a"), FIRST);
    }
}
