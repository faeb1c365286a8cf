//! What is locked, by which Locks, and why, from the Locks alone: a Lock
//! protects its target while the lock-controller reports `status.active`
//! (the target carries the `core.navique.com/locked` marker the guard
//! enforces).

use std::collections::BTreeMap;

use kube::ResourceExt;
use navique_api::constants::condition_types;
use navique_api::core::Lock;
use serde::Serialize;

/// A Lock's target, as its `spec.targetRef` names it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct TargetSummary {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// A Lock's `Ready` condition.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ReadySummary {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `Protecting`, `MissingReference`, `InvalidTarget`.
    pub reason: String,
    pub message: String,
}

/// One Lock.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct LockSummary {
    pub namespace: String,
    pub name: String,
    pub target: TargetSummary,
    /// The target carries the marker: its deletes are refused.
    pub active: bool,
    /// The Lock's free-text reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Absent until the lock-controller has reconciled the Lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<ReadySummary>,
}

/// A Lock protecting an object, and why.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    pub lock: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An object that active Locks protect.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LockedObject {
    pub namespace: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// By Lock name.
    pub locks: Vec<Protection>,
}

impl LockedObject {
    /// `<lock>: <reason>` for the Locks with a reason, joined by `; `: the
    /// lock-controller's `core.navique.com/lock-reasons` format, which the
    /// guard prints in its denials.
    pub fn reasons(&self) -> String {
        self.locks
            .iter()
            .filter_map(|p| {
                p.reason
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .map(|r| format!("{}: {r}", p.lock))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The Locks and the objects they protect.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocksReport {
    /// By namespace and name.
    pub locks: Vec<LockSummary>,
    /// By namespace, kind and name; only objects with an active Lock.
    pub locked_objects: Vec<LockedObject>,
}

/// Summarizes `locks`.
pub fn report(locks: &[Lock]) -> LocksReport {
    let mut summaries: Vec<LockSummary> = locks.iter().map(summarize).collect();
    summaries.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));

    let mut objects: BTreeMap<(String, String, String, String), Vec<Protection>> = BTreeMap::new();
    for lock in summaries.iter().filter(|l| l.active) {
        objects
            .entry((
                lock.namespace.clone(),
                lock.target.kind.clone(),
                lock.target.name.clone(),
                lock.target.api_version.clone(),
            ))
            .or_default()
            .push(Protection {
                lock: lock.name.clone(),
                reason: lock.reason.clone(),
            });
    }
    let locked_objects = objects
        .into_iter()
        .map(
            |((namespace, kind, name, api_version), locks)| LockedObject {
                namespace,
                api_version,
                kind,
                name,
                locks,
            },
        )
        .collect();
    LocksReport {
        locks: summaries,
        locked_objects,
    }
}

fn summarize(lock: &Lock) -> LockSummary {
    let status = lock.status.as_ref();
    let ready = status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == condition_types::READY)
        })
        .map(|c| ReadySummary {
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        });
    LockSummary {
        namespace: lock.namespace().unwrap_or_default(),
        name: lock.name_any(),
        target: TargetSummary {
            api_version: lock.spec.target_ref.api_version.clone(),
            kind: lock.spec.target_ref.kind.clone(),
            name: lock.spec.target_ref.name.clone(),
        },
        active: status.is_some_and(|s| s.active),
        reason: lock
            .spec
            .reason
            .clone()
            .or_else(|| status.and_then(|s| s.reason.clone()))
            .filter(|r| !r.is_empty()),
        ready,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Lock as the lock-controller leaves it.
    pub(crate) fn lock(
        ns: &str,
        name: &str,
        target: (&str, &str),
        reason: Option<&str>,
        status: Option<(bool, &str, &str, &str)>,
    ) -> Lock {
        let mut value = serde_json::json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Lock",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"targetRef": {"kind": target.0, "name": target.1}}
        });
        if let Some(reason) = reason {
            value["spec"]["reason"] = reason.into();
        }
        if let Some((active, ready, why, message)) = status {
            value["status"] = serde_json::json!({
                "active": active,
                "reason": reason,
                "conditions": [{"type": "Ready", "status": ready, "reason": why, "message": message,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            });
        }
        serde_json::from_value(value).unwrap()
    }

    pub(crate) fn locks() -> Vec<Lock> {
        vec![
            lock(
                "forge",
                "protect-forge-stack",
                ("Stack", "forge"),
                Some("Production environment"),
                Some((true, "True", "Protecting", "protecting Stack forge")),
            ),
            lock(
                "forge",
                "audit",
                ("Stack", "forge"),
                None,
                Some((true, "True", "Protecting", "protecting Stack forge")),
            ),
            lock(
                "forge",
                "later",
                ("Stack", "next"),
                Some("not yet"),
                Some((
                    false,
                    "False",
                    "MissingReference",
                    "Stack next not found in namespace forge",
                )),
            ),
            lock("apps", "fresh", ("ManagedService", "db"), None, None),
        ]
    }

    #[test]
    fn locks_are_sorted_and_summarized() {
        let report = report(&locks());
        let names: Vec<_> = report
            .locks
            .iter()
            .map(|l| format!("{}/{}", l.namespace, l.name))
            .collect();
        assert_eq!(
            names,
            [
                "apps/fresh",
                "forge/audit",
                "forge/later",
                "forge/protect-forge-stack"
            ]
        );
        let later = &report.locks[2];
        assert!(!later.active);
        assert_eq!(later.reason.as_deref(), Some("not yet"));
        assert_eq!(
            later.ready,
            Some(ReadySummary {
                status: "False".into(),
                reason: "MissingReference".into(),
                message: "Stack next not found in namespace forge".into()
            })
        );
        assert_eq!(report.locks[0].ready, None);
        assert_eq!(
            report.locks[0].target.api_version,
            "core.navique.com/v1alpha1"
        );
    }

    #[test]
    fn only_active_locks_protect_and_each_object_lists_its_locks() {
        let report = report(&locks());
        assert_eq!(report.locked_objects.len(), 1);
        let forge = &report.locked_objects[0];
        assert_eq!(
            (forge.kind.as_str(), forge.name.as_str()),
            ("Stack", "forge")
        );
        let locks: Vec<_> = forge.locks.iter().map(|p| p.lock.as_str()).collect();
        assert_eq!(locks, ["audit", "protect-forge-stack"]);
        assert_eq!(
            forge.reasons(),
            "protect-forge-stack: Production environment"
        );
    }

    #[test]
    fn the_json_shape() {
        let report = report(&locks()[..1]);
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({
                "locks": [{
                    "namespace": "forge",
                    "name": "protect-forge-stack",
                    "target": {"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack", "name": "forge"},
                    "active": true,
                    "reason": "Production environment",
                    "ready": {"status": "True", "reason": "Protecting", "message": "protecting Stack forge"}
                }],
                "lockedObjects": [{
                    "namespace": "forge",
                    "apiVersion": "core.navique.com/v1alpha1",
                    "kind": "Stack",
                    "name": "forge",
                    "locks": [{"lock": "protect-forge-stack", "reason": "Production environment"}]
                }]
            })
        );
    }
}
