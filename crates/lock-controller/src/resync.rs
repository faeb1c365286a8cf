//! The safety net: every Lock is reconciled once an hour even if no watch
//! event asks for it. Rather than a requeue per Lock (an entry per Lock in
//! the controller's delay queue and its map, both holding the Lock's
//! reference: about a kilobyte a Lock), the hour is cut into slots and each
//! Lock falls in one, by a hash of its uid; each slot's turn wakes its
//! Locks. So the reconciles spread over the hour as the requeues did, and
//! the net costs nothing per Lock between turns.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use kube::runtime::reflector::{ObjectRef, Store};
use navique_api::core::Lock;
use tokio::sync::mpsc;

/// How often each Lock is reconciled without being asked.
pub const PERIOD: Duration = Duration::from_secs(3600);
/// Turns per period.
const SLOTS: u64 = 60;

/// The slot of `lock`: stable for the Lock's life (its uid, or its
/// namespace and name before it has one).
fn slot(lock: &Lock) -> u64 {
    let mut hasher = DefaultHasher::new();
    match &lock.metadata.uid {
        Some(uid) => uid.hash(&mut hasher),
        None => (&lock.metadata.namespace, &lock.metadata.name).hash(&mut hasher),
    }
    hasher.finish() % SLOTS
}

/// The Locks of `locks` whose turn `turn` is.
fn due(locks: &[std::sync::Arc<Lock>], turn: u64) -> Vec<ObjectRef<Lock>> {
    locks
        .iter()
        .filter(|lock| slot(lock) == turn % SLOTS)
        .map(|lock| ObjectRef::from_obj(&**lock))
        .collect()
}

/// Wakes each Lock of `locks` once a [`PERIOD`], one slot's Locks every
/// `PERIOD / SLOTS`, until `wake`'s receiver is gone. The first turn comes
/// a slot after the start: the initial list reconciles every Lock.
pub async fn run(locks: Store<Lock>, wake: mpsc::Sender<ObjectRef<Lock>>) {
    let every = PERIOD / SLOTS as u32;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for turn in 0.. {
        ticks.tick().await;
        for lock in due(&locks.state(), turn) {
            if wake.send(lock).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn lock(name: &str, uid: Option<&str>) -> Arc<Lock> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
                "metadata": {"name": name, "namespace": "forge", "uid": uid},
                "spec": {"targetRef": {"kind": "Stack", "name": "web"}},
            }))
            .expect("lock"),
        )
    }

    #[test]
    fn every_lock_is_woken_once_a_period_and_the_turns_share_them() {
        let locks: Vec<_> = (0..600)
            .map(|i| {
                lock(
                    &format!("l{i}"),
                    Some(&format!("00000000-0000-4000-8000-{i:012}")),
                )
            })
            .collect();
        let mut woken = std::collections::HashMap::new();
        let mut largest = 0;
        // Two periods: each Lock once in each, in the same turn.
        for turn in 0..2 * SLOTS {
            let due = due(&locks, turn);
            largest = largest.max(due.len());
            for lock in due {
                woken.entry(lock).or_insert_with(Vec::new).push(turn);
            }
        }
        assert_eq!(woken.len(), 600);
        assert!(
            woken
                .values()
                .all(|turns| turns.len() == 2 && turns[1] == turns[0] + SLOTS)
        );
        // Spread: no turn takes a crowd (10 a turn on average).
        assert!(largest <= 30, "a turn woke {largest} of 600 Locks");
    }

    #[test]
    fn the_slot_follows_the_uid_and_a_lock_without_one_has_one_too() {
        // Its status changing, the Lock is the same object: same slot.
        let with_uid = lock("a", Some("7c1e2d3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f"));
        let mut changed = (*with_uid).clone();
        changed.metadata.resource_version = Some("42".to_owned());
        assert_eq!(slot(&with_uid), slot(&changed));
        let without = lock("a", None);
        let turn = slot(&without);
        assert_eq!(due(&[without], turn).len(), 1);
    }
}
