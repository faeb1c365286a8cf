//! Per-object retry delays for a controller's error policy.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Consecutive failures per object: the delay before the next try doubles
/// from 0.5 s with each failure of the same object, up to 5 min, so that a
/// lasting failure (a missing permission) does not spin; a success resets it.
/// With [`FailureBackoff::waiting`] the delay also holds against wake-ups
/// that come early (a watch event), until the object's intent changes.
pub struct FailureBackoff<K> {
    failures: Mutex<HashMap<K, Failures>>,
}

struct Failures {
    count: u32,
    retry_at: Instant,
    /// What the object asked for when it failed (a hash of its spec and
    /// metadata); another intent starts afresh.
    intent: Option<u64>,
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
        self.failed_at(key, None, Instant::now())
    }

    /// Records a failure of `key` while it asked for `intent`.
    pub fn failed_with(&self, key: K, intent: u64) -> Duration {
        self.failed_at(key, Some(intent), Instant::now())
    }

    fn failed_at(&self, key: K, intent: Option<u64>, now: Instant) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let entry = failures.entry(key).or_insert(Failures {
            count: 0,
            retry_at: now,
            intent,
        });
        if entry.intent != intent {
            entry.count = 0;
            entry.intent = intent;
        }
        entry.count = entry.count.saturating_add(1);
        let delay = FIRST
            .saturating_mul(1 << (entry.count - 1).min(10))
            .min(MAX);
        entry.retry_at = now + delay;
        delay
    }

    /// How long `key`, still asking for `intent`, must wait before its next
    /// try; `None` when it may go now (no failure, the wait is over, or its
    /// intent changed, which also forgets the failures).
    pub fn waiting(&self, key: &K, intent: u64) -> Option<Duration> {
        self.waiting_at(key, intent, Instant::now())
    }

    fn waiting_at(&self, key: &K, intent: u64, now: Instant) -> Option<Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let entry = failures.get(key)?;
        if entry.intent != Some(intent) {
            failures.remove(key);
            return None;
        }
        (entry.retry_at > now).then(|| entry.retry_at - now)
    }

    /// Forgets `key`'s failures after a success.
    pub fn succeeded(&self, key: &K) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

/// What an object asks for, as a hash: its spec (generation), labels,
/// annotations (a confirmation, an approval), finalizers and deletion; not
/// its status, so that the echo of a status write is not a new intent.
pub fn intent<K: kube::Resource>(object: &K) -> u64 {
    use std::hash::Hasher;
    let meta = object.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut hasher);
    hasher.finish()
}

/// Attempts of a long step that fails asynchronously (a final backup,
/// reported failed by another component): after each failure the next
/// attempt waits, from 1 s doubling to 5 min, however often the object is
/// reconciled meanwhile. Only [`Attempts::completed`] forgets the failures.
pub struct Attempts<K> {
    state: Mutex<HashMap<K, AttemptState>>,
}

#[derive(Clone, Debug)]
struct AttemptState {
    failures: u32,
    /// Set while the last failure's wait runs; `None` once a new attempt
    /// started.
    retry_at: Option<Instant>,
    /// What the last failure said.
    cause: String,
}

/// What to do about a step whose last attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// This failure is new: it was just counted; try again after the delay.
    /// `new_cause` when its cause differs from the previous failure's.
    Counted { delay: Duration, new_cause: bool },
    /// Its wait still runs: try again after the remaining delay.
    Wait(Duration),
    /// Its wait is over: start the next attempt now.
    Now,
}

const ATTEMPT_FIRST: Duration = Duration::from_secs(1);

impl<K: Hash + Eq> Default for Attempts<K> {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq> Attempts<K> {
    /// The last attempt of `key` failed with `cause`: counts the failure
    /// once, then tells whether the next attempt may start.
    pub fn failed(&self, key: K, cause: &str) -> Retry {
        self.failed_at(key, cause, Instant::now())
    }

    fn failed_at(&self, key: K, cause: &str, now: Instant) -> Retry {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let entry = state.entry(key).or_insert(AttemptState {
            failures: 0,
            retry_at: None,
            cause: String::new(),
        });
        match entry.retry_at {
            None => {
                entry.failures = entry.failures.saturating_add(1);
                let delay = ATTEMPT_FIRST
                    .saturating_mul(1 << (entry.failures - 1).min(10))
                    .min(MAX);
                entry.retry_at = Some(now + delay);
                let new_cause = entry.cause != cause;
                entry.cause = cause.to_owned();
                Retry::Counted { delay, new_cause }
            }
            Some(at) if at > now => Retry::Wait(at - now),
            Some(_) => {
                entry.retry_at = None;
                Retry::Now
            }
        }
    }

    /// The failures so far and the last one's cause, while the step has
    /// not completed.
    pub fn last_failure(&self, key: &K) -> Option<(u32, String)> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|s| (s.failures, s.cause.clone()))
    }

    /// The step completed: its failures are forgotten.
    pub fn completed(&self, key: &K) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_attempt_waits_longer_each_time_however_often_it_is_looked_at() {
        let attempts = Attempts::default();
        let start = Instant::now();
        let counted = |secs, new_cause| Retry::Counted {
            delay: Duration::from_secs(secs),
            new_cause,
        };
        assert_eq!(
            attempts.failed_at("a", "disk full", start),
            counted(1, true)
        );
        // Looked at again and again during the wait: not counted again.
        let half = start + Duration::from_millis(500);
        for _ in 0..3 {
            assert_eq!(
                attempts.failed_at("a", "disk full", half),
                Retry::Wait(Duration::from_millis(500))
            );
        }
        let later = start + Duration::from_secs(1);
        assert_eq!(attempts.failed_at("a", "disk full", later), Retry::Now);
        // The next attempt failed the same way: twice as long, no new cause.
        assert_eq!(
            attempts.failed_at("a", "disk full", later),
            counted(2, false)
        );
        assert_eq!(
            attempts.last_failure(&"a"),
            Some((2, "disk full".to_owned()))
        );
        assert_eq!(attempts.failed_at("b", "other", later), counted(1, true));
        let far = later + Duration::from_secs(3600);
        assert_eq!(attempts.failed_at("a", "disk full", far), Retry::Now);
        assert_eq!(attempts.failed_at("a", "no route", far), counted(4, true));
        attempts.completed(&"a");
        assert_eq!(attempts.last_failure(&"a"), None);
        assert_eq!(attempts.failed_at("a", "no route", far), counted(1, true));
    }

    // hot loop: an early wake-up (the echo of a status write) waits too.
    #[test]
    fn a_failed_object_waits_out_its_delay_unless_its_intent_changes() {
        let backoff = FailureBackoff::default();
        let start = Instant::now();
        assert_eq!(backoff.failed_at("a", Some(7), start), FIRST);
        let early = start + Duration::from_millis(100);
        assert_eq!(
            backoff.waiting_at(&"a", 7, early),
            Some(Duration::from_millis(400))
        );
        assert_eq!(backoff.waiting_at(&"a", 7, start + FIRST), None);
        assert_eq!(backoff.failed_at("a", Some(7), start), FIRST * 2);
        // A changed spec or annotation goes at once, and starts afresh.
        assert_eq!(backoff.waiting_at(&"a", 8, early), None);
        assert_eq!(backoff.failed_at("a", Some(8), start), FIRST);
        assert_eq!(backoff.waiting_at(&"b", 7, early), None);
    }

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
