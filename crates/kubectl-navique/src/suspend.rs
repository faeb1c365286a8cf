//! `suspend` and `resume`: break-glass on a Lock (docs/locks.md,
//! "Break-glass"). Suspending writes the three suspension annotations in
//! one merge patch with the user's own credentials: the deadline computed
//! from `--for`, the reason, and the name the API server says the user is
//! ([`crate::approve::whoami`]), the only one the lock-suspension rule
//! accepts. Resuming removes them. Admission checks the `suspend` verb and
//! the fields; the lock-controller applies the limit and the deadline.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use navique_api::constants::annotations::{SUSPEND_REASON, SUSPENDED_BY, SUSPENDED_UNTIL};
use serde_json::{Value, json};

/// `suspended-until` for a suspension of `length` from `now`: UTC, to the
/// second (rounded down, so never longer than asked).
pub fn until(now: Timestamp, length: Duration) -> String {
    let seconds = i64::try_from(length.as_secs()).unwrap_or(i64::MAX);
    Timestamp::from_second(now.as_second().saturating_add(seconds))
        .unwrap_or(Timestamp::MAX)
        .to_string()
}

/// The merge patch that suspends a Lock.
pub fn suspend_patch(until: &str, reason: &str, user: &str) -> Value {
    json!({"metadata": {"annotations": {
        SUSPENDED_UNTIL: until,
        SUSPEND_REASON: reason,
        SUSPENDED_BY: user,
    }}})
}

/// The merge patch that ends a suspension early.
pub fn resume_patch() -> Value {
    json!({"metadata": {"annotations": {
        SUSPENDED_UNTIL: null,
        SUSPEND_REASON: null,
        SUSPENDED_BY: null,
    }}})
}

/// What `suspend` prints.
pub fn suspended(namespace: &str, lock: &str, until: &str, user: &str, reason: &str) -> String {
    format!(
        "lock.core.navique.com/{lock} suspended by {user} until {until} ({reason}); `kubectl get lock {lock} -n {namespace}` shows when it takes effect\n"
    )
}

/// What `resume` prints.
pub fn resumed(namespace: &str, lock: &str) -> String {
    format!(
        "lock.core.navique.com/{lock} resumed; `kubectl get lock {lock} -n {namespace}` shows when it protects again\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_is_utc_to_the_second_and_never_longer_than_asked() {
        let now: Timestamp = "2026-12-01T19:00:00.900Z".parse().unwrap();
        assert_eq!(
            until(now, Duration::from_secs(1800)),
            "2026-12-01T19:30:00Z"
        );
        assert!(navique_api::core::suspension::is_utc_time(&until(
            now,
            Duration::from_secs(3600)
        )));
    }

    #[test]
    fn the_patches_set_and_remove_the_three_annotations() {
        assert_eq!(
            suspend_patch("2026-12-01T19:30:00Z", "restore drill", "oncall"),
            json!({"metadata": {"annotations": {
                "core.navique.com/suspended-until": "2026-12-01T19:30:00Z",
                "core.navique.com/suspend-reason": "restore drill",
                "core.navique.com/suspended-by": "oncall",
            }}})
        );
        let annotations = &resume_patch()["metadata"]["annotations"];
        assert_eq!(annotations.as_object().unwrap().len(), 3);
        assert!(
            annotations
                .as_object()
                .unwrap()
                .values()
                .all(Value::is_null)
        );
    }
}
