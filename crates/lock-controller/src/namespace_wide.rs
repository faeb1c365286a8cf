//! Namespace-wide Locks, by opt-in (`--namespace-locks`, Helm value
//! `lockGuard.namespaceLocks`): a Lock whose target is its own Namespace
//! (`apiVersion: v1`, `kind: Namespace`, `name:` the Lock's namespace)
//! protects every object of the enforceable kinds in that namespace, like an
//! Azure lock on a resource group. The objects are not stamped one by one:
//! the Namespace carries `core.navique.com/namespace-locked` (and the
//! reasons), which the guard reads from `namespaceObject` (policy mode) or
//! its Namespace cache (webhook mode).
//!
//! The rules, as pure functions of the Locks and the Namespace's metadata.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use navique_api::constants::annotations;
use navique_api::core::{Lock, TargetRef};
use navique_api::{messages, names};
use serde_json::{Value, json};

use crate::decision::{self, LockEvent, TargetStamp};

const NAMESPACE_API_VERSION: &str = "v1";
const NAMESPACE_KIND: &str = "Namespace";

/// Whether `target` names a Namespace: the only target of a namespace-wide
/// Lock.
pub fn is_namespace_target(target: &TargetRef) -> bool {
    target.api_version == NAMESPACE_API_VERSION && target.kind == NAMESPACE_KIND
}

/// What a Lock on a Namespace is.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its target is not a Namespace: the ordinary rules apply.
    NotNamespaceWide,
    /// It protects its own namespace.
    Valid,
    /// The `InvalidTarget` message.
    Invalid(String),
}

/// Whether `lock` is a namespace-wide Lock, and a valid one; `enabled` is
/// `--namespace-locks`.
pub fn classify(lock: &Lock, enabled: bool) -> Verdict {
    let target = &lock.spec.target_ref;
    if !is_namespace_target(target) {
        return Verdict::NotNamespaceWide;
    }
    let namespace = decision::namespace(lock);
    // Before it is compared or shown: the CRD schema refuses such names.
    if !names::is_object_name(&target.name) {
        return Verdict::Invalid(messages::lock_target_name_invalid(&target.name));
    }
    if target.name != namespace {
        return Verdict::Invalid(messages::namespace_lock_other_namespace(
            &target.name,
            namespace,
        ));
    }
    if !enabled {
        return Verdict::Invalid(messages::namespace_locks_disabled(namespace));
    }
    Verdict::Valid
}

/// The namespace-wide stamp Namespace `ns` should carry: every valid
/// namespace-wide Lock of `ns` that is not being deleted (as for a target's
/// stamp, before their status says so). `None` when there is none.
pub fn stamp(ns: &str, locks: &[Arc<Lock>], enabled: bool) -> Option<TargetStamp> {
    let mut protecting: Vec<&Lock> = decision::all(locks)
        .filter(|lock| {
            decision::namespace(lock) == ns
                && !decision::is_deleting(lock)
                && classify(lock, enabled) == Verdict::Valid
        })
        .collect();
    if protecting.is_empty() {
        return None;
    }
    protecting.sort_by_key(|lock| decision::name(lock));
    let names: Vec<&str> = protecting.iter().map(|lock| decision::name(lock)).collect();
    Some(TargetStamp {
        locked: names.join(","),
        reasons: messages::lock_reasons(protecting.iter().map(|lock| {
            (
                decision::name(lock),
                lock.spec.reason.as_deref().unwrap_or_default(),
            )
        })),
    })
}

/// The namespace-wide markers a Namespace carries or should carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Markers {
    pub locked: Option<String>,
    pub reasons: Option<String>,
}

impl Markers {
    pub fn of(meta: &ObjectMeta) -> Self {
        let annotation = |key: &str| meta.annotations.as_ref()?.get(key).cloned();
        Self {
            locked: annotation(annotations::NAMESPACE_LOCKED),
            reasons: annotation(annotations::NAMESPACE_LOCK_REASONS),
        }
    }

    pub fn wanted(stamp: Option<&TargetStamp>) -> Self {
        stamp.map_or_else(Self::default, |stamp| Self {
            locked: Some(stamp.locked.clone()),
            reasons: stamp.reasons.clone(),
        })
    }
}

/// The JSON merge patch that gives a Namespace the `wanted` markers. A
/// merge patch, not server-side apply: it never creates a Namespace that
/// went meanwhile, and it leaves the apply-owned `core.navique.com/locked`
/// alone.
pub fn patch(wanted: &Markers) -> Value {
    json!({"metadata": {"annotations": {
        annotations::NAMESPACE_LOCKED: wanted.locked,
        annotations::NAMESPACE_LOCK_REASONS: wanted.reasons,
    }}})
}

/// The Events a change of Namespace `ns`'s namespace-wide marker calls for,
/// by Lock name: `TargetStamped` on each Lock added, `TargetCleared` on
/// each that left.
pub fn stamp_events(
    ns: &str,
    before: Option<&str>,
    after: Option<&str>,
) -> Vec<(String, LockEvent)> {
    decision::marker_events(
        before,
        after,
        || messages::namespace_lock_stamped(ns),
        |remaining| messages::namespace_lock_cleared(ns, remaining),
    )
}

/// The Lock a Namespace event wakes when its namespace-wide marker is not
/// what it should be (tampered with, or left from a Lock gone while the
/// controller was down): one Lock of the namespace, since every Lock's
/// reconcile repairs it. `locks` are the namespace's Locks; one whose
/// break-glass suspension is in effect (`suspended`) counts in no stamp, as
/// in the reconcile's, so that its Namespace's every event does not wake it.
pub fn lock_woken<'a>(
    meta: &ObjectMeta,
    locks: &'a [Arc<Lock>],
    enabled: bool,
    suspended: impl Fn(&Lock) -> bool,
) -> Option<&'a Lock> {
    let ns = meta.name.as_deref()?;
    let stamped: Vec<Arc<Lock>> = locks.iter().filter(|l| !suspended(l)).cloned().collect();
    if Markers::of(meta) == Markers::wanted(stamp(ns, &stamped, enabled).as_ref()) {
        return None;
    }
    decision::all(locks)
        .filter(|lock| decision::namespace(lock) == ns && decision::restamps(lock))
        .min_by_key(|lock| decision::name(lock))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use navique_api::constants::{events, reasons};
    use navique_api::core::{LockSpec, LockStatus};

    use super::*;
    use crate::decision::Outcome;

    fn lock_on(ns: &str, name: &str, api_version: &str, kind: &str, target: &str) -> Lock {
        let mut lock = Lock::new(
            name,
            LockSpec {
                target_ref: TargetRef {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: target.into(),
                },
                reason: None,
            },
        );
        lock.metadata.namespace = Some(ns.into());
        lock.metadata.generation = Some(1);
        lock
    }

    fn on_namespace(ns: &str, name: &str, target: &str, reason: Option<&str>) -> Lock {
        let mut lock = lock_on(ns, name, "v1", "Namespace", target);
        lock.spec.reason = reason.map(String::from);
        lock
    }

    fn arcs(locks: Vec<Lock>) -> Vec<Arc<Lock>> {
        locks.into_iter().map(Arc::new).collect()
    }

    pub(crate) fn namespace_meta(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            annotations: (!annotations.is_empty()).then(|| {
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_lock_on_its_own_namespace_is_namespace_wide_when_enabled() {
        let lock = on_namespace("forge", "freeze", "forge", None);
        assert_eq!(classify(&lock, true), Verdict::Valid);
        assert_eq!(
            classify(&lock, false),
            Verdict::Invalid(
                "namespace-wide Locks are not enabled: a Lock on Namespace forge would protect every enforceable object in it; to allow it, start the lock-controller with --namespace-locks and install the guard's namespace rules (Helm value lockGuard.namespaceLocks=true)"
                    .into()
            )
        );
    }

    #[test]
    fn a_lock_on_another_namespace_is_invalid_enabled_or_not() {
        // Identity by name: a tenant naming someone else's namespace must
        // not lock it.
        let lock = on_namespace("forge", "grab", "billing", None);
        let message = "a Lock on a Namespace protects its own namespace only: targetRef.name is billing, the Lock is in namespace forge";
        assert_eq!(classify(&lock, true), Verdict::Invalid(message.into()));
        assert_eq!(classify(&lock, false), Verdict::Invalid(message.into()));
        assert_eq!(stamp("billing", &arcs(vec![lock.clone()]), true), None);
        assert_eq!(stamp("forge", &arcs(vec![lock]), true), None);
    }

    #[test]
    fn only_v1_namespace_is_namespace_wide() {
        // Fail open: a near miss in case or version must not be read as a
        // namespace-wide Lock, nor silently as one on nothing.
        for (api_version, kind) in [
            ("v1", "namespace"),
            ("core/v1", "Namespace"),
            ("v1beta1", "Namespace"),
            ("core.navique.com/v1alpha1", "Stack"),
        ] {
            let lock = lock_on("forge", "x", api_version, kind, "forge");
            assert_eq!(
                classify(&lock, true),
                Verdict::NotNamespaceWide,
                "{api_version} {kind}"
            );
        }
    }

    #[test]
    fn the_stamp_names_the_valid_namespace_wide_locks_of_the_namespace_with_reasons() {
        let mut going = on_namespace("forge", "going", "forge", Some("x"));
        going.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(5).unwrap()));
        let locks = arcs(vec![
            on_namespace("forge", "b-freeze", "forge", Some("release week")),
            on_namespace("forge", "a-audit", "forge", None),
            on_namespace("forge", "wrong", "billing", Some("no")),
            on_namespace("billing", "theirs", "billing", Some("no")),
            lock_on(
                "forge",
                "stack",
                "core.navique.com/v1alpha1",
                "Stack",
                "forge",
            ),
            going,
        ]);
        assert_eq!(
            stamp("forge", &locks, true),
            Some(TargetStamp {
                locked: "a-audit,b-freeze".into(),
                reasons: Some("b-freeze: release week".into()),
            })
        );
        assert_eq!(stamp("forge", &locks, false), None);
    }

    #[test]
    fn the_patch_sets_or_removes_both_markers() {
        let stamp = TargetStamp {
            locked: "freeze".into(),
            reasons: None,
        };
        assert_eq!(
            patch(&Markers::wanted(Some(&stamp))),
            json!({"metadata": {"annotations": {
                "core.navique.com/namespace-locked": "freeze",
                "core.navique.com/namespace-lock-reasons": null,
            }}})
        );
        assert_eq!(
            patch(&Markers::wanted(None)),
            json!({"metadata": {"annotations": {
                "core.navique.com/namespace-locked": null,
                "core.navique.com/namespace-lock-reasons": null,
            }}})
        );
    }

    #[test]
    fn stamping_and_clearing_the_namespace_record_events_on_the_locks_concerned() {
        let events_of = |before, after| stamp_events("forge", before, after);
        assert_eq!(
            events_of(None, Some("freeze")),
            vec![(
                "freeze".to_owned(),
                LockEvent {
                    warning: false,
                    reason: events::TARGET_STAMPED,
                    note: "stamped Namespace forge with core.navique.com/namespace-locked: deleting its enforceable objects is denied".into(),
                }
            )]
        );
        assert_eq!(
            events_of(Some("audit,freeze"), Some("audit")),
            vec![(
                "freeze".to_owned(),
                LockEvent {
                    warning: false,
                    reason: events::TARGET_CLEARED,
                    note: "took this Lock off core.navique.com/namespace-locked of Namespace forge: Lock(s) [audit] still protect its objects".into(),
                }
            )]
        );
        assert_eq!(
            events_of(Some("freeze"), None)[0].1.note,
            "cleared core.navique.com/namespace-locked from Namespace forge: no namespace-wide Lock protects its objects now"
        );
        assert!(events_of(Some("freeze"), Some("freeze")).is_empty());
    }

    #[test]
    fn a_tampered_or_stale_namespace_marker_wakes_one_lock_of_the_namespace() {
        let none = |_: &Lock| false;
        let locks = arcs(vec![
            lock_on(
                "forge",
                "z-stack",
                "core.navique.com/v1alpha1",
                "Stack",
                "a",
            ),
            on_namespace("forge", "freeze", "forge", None),
        ]);
        let right = namespace_meta("forge", &[(annotations::NAMESPACE_LOCKED, "freeze")]);
        assert!(lock_woken(&right, &locks, true, none).is_none());
        let removed = namespace_meta("forge", &[]);
        assert_eq!(
            lock_woken(&removed, &locks, true, none).and_then(|l| l.metadata.name.as_deref()),
            Some("freeze")
        );
        // Forged by hand (or left over), with no namespace-wide Lock.
        let forged = namespace_meta("forge", &[(annotations::NAMESPACE_LOCKED, "fake")]);
        let plain = arcs(vec![lock_on(
            "forge",
            "z-stack",
            "core.navique.com/v1alpha1",
            "Stack",
            "a",
        )]);
        assert_eq!(
            lock_woken(&forged, &plain, true, none).and_then(|l| l.metadata.name.as_deref()),
            Some("z-stack")
        );
        // Not a Lock being deleted that only another's finalizer keeps:
        // its reconcile would do nothing.
        let mut kept = lock_on("forge", "a-kept", "core.navique.com/v1alpha1", "Stack", "a");
        kept.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        kept.metadata.finalizers = Some(vec!["example.com/keep".into()]);
        let mut with_kept = plain.clone();
        with_kept.push(Arc::new(kept));
        assert_eq!(
            lock_woken(&forged, &with_kept, true, none).and_then(|l| l.metadata.name.as_deref()),
            Some("z-stack")
        );
        // Turned off: the marker should go.
        assert!(lock_woken(&right, &locks, false, none).is_some());
    }

    #[test]
    fn a_suspended_namespace_wide_lock_counts_in_no_stamp() {
        let locks = arcs(vec![on_namespace("forge", "freeze", "forge", None)]);
        let suspended = |lock: &Lock| lock.metadata.name.as_deref() == Some("freeze");
        // Its marker cleared for the break-glass: nothing to repair.
        let cleared = namespace_meta("forge", &[]);
        assert!(lock_woken(&cleared, &locks, true, suspended).is_none());
        // Still naming it (the clear not written yet): it is woken to clear it.
        let named = namespace_meta("forge", &[(annotations::NAMESPACE_LOCKED, "freeze")]);
        assert_eq!(
            lock_woken(&named, &locks, true, suspended).and_then(|l| l.metadata.name.as_deref()),
            Some("freeze")
        );
    }

    #[test]
    fn a_protecting_namespace_wide_lock_says_what_it_protects() {
        let lock = on_namespace("forge", "freeze", "forge", Some("release week"));
        let status = decision::lock_status(
            &lock,
            &Outcome::Protecting,
            Timestamp::from_second(10).unwrap(),
        )
        .unwrap();
        assert!(status.active);
        let ready = &status.conditions[0];
        assert_eq!(ready.reason, reasons::PROTECTING);
        assert_eq!(
            ready.message,
            "protecting every enforceable object in namespace forge"
        );
        assert_eq!(
            decision::outcome_event(&lock, &Outcome::Protecting)
                .unwrap()
                .note,
            "protecting every enforceable object in namespace forge"
        );
        // An ordinary Lock keeps its message.
        let stack = lock_on("forge", "s", "core.navique.com/v1alpha1", "Stack", "forge");
        let status: LockStatus = decision::lock_status(
            &stack,
            &Outcome::Protecting,
            Timestamp::from_second(10).unwrap(),
        )
        .unwrap();
        assert_eq!(status.conditions[0].message, "protecting Stack forge");
    }
}
