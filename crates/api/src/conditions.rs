//! Helpers for `status.conditions`, following the Kubernetes convention that
//! `lastTransitionTime` changes only when `status` does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::constants::condition_types::READY;

/// The condition of the given type, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// A `Ready` condition observed at `now` for `generation`.
pub fn ready(
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: READY.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// Inserts or replaces the condition of `new.type_`, keeping the previous
/// `lastTransitionTime` when the status did not change. Returns whether
/// anything a reader would see changed.
pub fn upsert(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.last_transition_time = existing.last_transition_time.clone();
            }
            let changed = *existing != new;
            *existing = new;
            changed
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::reasons::{INVALID_TARGET, MISSING_REFERENCE, PROTECTING};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn new_condition_is_added() {
        let mut conditions = Vec::new();
        assert!(upsert(
            &mut conditions,
            ready(false, MISSING_REFERENCE, "m", Some(1), at(10))
        ));
        assert_eq!(find(&conditions, READY).unwrap().reason, MISSING_REFERENCE);
    }

    #[test]
    fn same_status_keeps_the_transition_time() {
        let mut conditions = vec![ready(false, MISSING_REFERENCE, "m", Some(1), at(10))];
        assert!(upsert(
            &mut conditions,
            ready(false, INVALID_TARGET, "n", Some(2), at(20))
        ));
        let ready = find(&conditions, READY).unwrap();
        assert_eq!(ready.last_transition_time, Time(at(10)));
        assert_eq!(ready.reason, INVALID_TARGET);
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn status_change_moves_the_transition_time() {
        let mut conditions = vec![ready(false, MISSING_REFERENCE, "m", Some(1), at(10))];
        upsert(
            &mut conditions,
            ready(true, PROTECTING, "p", Some(1), at(20)),
        );
        assert_eq!(
            find(&conditions, READY).unwrap().last_transition_time,
            Time(at(20))
        );
    }

    #[test]
    fn identical_condition_is_not_a_change() {
        let mut conditions = vec![ready(true, PROTECTING, "p", Some(1), at(10))];
        assert!(!upsert(
            &mut conditions,
            ready(true, PROTECTING, "p", Some(1), at(30))
        ));
    }
}
