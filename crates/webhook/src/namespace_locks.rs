//! Namespace-wide Locks in webhook mode (`--namespace-locks`): a delete of an
//! object of the guarded kinds is denied while its Namespace carries
//! `core.navique.com/namespace-locked`, which the lock-controller writes for
//! the Locks on that Namespace, exactly as the policy mode's
//! `<release>-lock-guard-namespace-wide` reads it from `namespaceObject`.
//! The Namespace is read from the webhook's cache; a delete it cannot
//! decide (cache not synced, Namespace not in it yet) is refused.

use std::sync::Arc;

use kube::core::admission::Operation;
use navique_api::constants::{CORE_GROUP, annotations};
use navique_api::messages;

use crate::cluster::ClusterCache;
use crate::locks::LockGuard;
use crate::review::{Decision, Request, Validator};
use crate::services::Unavailable;

/// A Namespace's namespace-wide markers: the Lock names and their reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMarkers {
    pub locked: Option<String>,
    pub reasons: Option<String>,
}

/// Where the Namespaces are read, from memory.
pub trait Namespaces: Send + Sync + 'static {
    /// The markers of `namespace`; `None` when it is not known.
    fn markers(&self, namespace: &str) -> Result<Option<NamespaceMarkers>, Unavailable>;
}

impl Namespaces for ClusterCache {
    fn markers(&self, namespace: &str) -> Result<Option<NamespaceMarkers>, Unavailable> {
        Ok(self.namespace_annotations(namespace)?.map(|annotations| {
            let get = |key: &str| annotations.get(key).cloned();
            NamespaceMarkers {
                locked: get(annotations::NAMESPACE_LOCKED),
                reasons: get(annotations::NAMESPACE_LOCK_REASONS),
            }
        }))
    }
}

/// The Lock guard, plus the namespace-wide Locks.
pub struct NamespaceLockGuard {
    pub guard: LockGuard,
    pub namespaces: Arc<dyn Namespaces>,
}

impl Validator for NamespaceLockGuard {
    fn validate(&self, request: &Request) -> Decision {
        // The object's own Locks first: their denial names them, as the
        // policy mode's lock-guard policy does.
        let decision = self.guard.validate(request);
        if !decision.is_allowed() || request.operation != Operation::Delete {
            return decision;
        }
        match in_locked_namespace(request, self.namespaces.as_ref()) {
            Decision::Allow => decision,
            denied => denied,
        }
    }
}

/// The decision on a DELETE by the namespace-wide Locks of its namespace.
/// Cluster-scoped objects (Namespaces, CRDs) and Locks are not theirs to
/// hold: removing the Lock must lift it.
fn in_locked_namespace(request: &Request, namespaces: &dyn Namespaces) -> Decision {
    let Some(namespace) = request.namespace.as_deref().filter(|ns| !ns.is_empty()) else {
        return Decision::Allow;
    };
    if request.kind.group == CORE_GROUP && request.kind.kind == "Lock" {
        return Decision::Allow;
    }
    match namespaces.markers(namespace) {
        Err(reason) => {
            Decision::Error(messages::namespace_lock_lookup_failed(namespace, &reason.0))
        }
        Ok(None) => Decision::Error(messages::namespace_lock_lookup_failed(
            namespace,
            "it is not in the webhook's Namespace cache yet",
        )),
        Ok(Some(markers)) => match markers.locked.filter(|l| !l.is_empty()) {
            Some(locked) => Decision::Deny(messages::lock_denied_by_markers(
                &locked,
                markers.reasons.as_deref(),
            )),
            None => Decision::Allow,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::review;

    const LOCK_CONTROLLER: &str = "system:serviceaccount:navique-system:navique-lock-controller";

    /// Namespaces in memory; `None`: the cache is not synced.
    struct Fake(Option<HashMap<String, NamespaceMarkers>>);

    impl Namespaces for Fake {
        fn markers(&self, namespace: &str) -> Result<Option<NamespaceMarkers>, Unavailable> {
            let known = self.0.as_ref().ok_or_else(|| {
                Unavailable(
                    "the webhook's caches of Namespaces and ServicePlans are not synced yet".into(),
                )
            })?;
            Ok(known.get(namespace).cloned())
        }
    }

    fn guard(namespaces: Fake) -> NamespaceLockGuard {
        NamespaceLockGuard {
            guard: LockGuard {
                protect_namespaces: true,
                protect_marker: true,
                lock_controller_username: LOCK_CONTROLLER.to_owned(),
            },
            namespaces: Arc::new(namespaces),
        }
    }

    fn forge(locked: Option<&str>, reasons: Option<&str>) -> Fake {
        Fake(Some(HashMap::from([(
            "forge".to_owned(),
            NamespaceMarkers {
                locked: locked.map(String::from),
                reasons: reasons.map(String::from),
            },
        )])))
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn decide(guard: &NamespaceLockGuard, name: &str, edit: impl FnOnce(&mut Value)) -> Decision {
        let mut review = fixture(name);
        edit(&mut review);
        let request = review::parse(review.to_string().as_bytes()).unwrap();
        review::decide(guard, &request)
    }

    #[test]
    fn deleting_an_object_in_a_locked_namespace_names_the_namespace_lock_and_its_reason() {
        let guard = guard(forge(Some("freeze"), Some("freeze: release week")));
        assert_eq!(
            decide(&guard, "delete-unlocked-stack", |_| {}),
            Decision::Deny(
                "resource is protected by Lock(s) [freeze]; delete the Lock(s) before deleting this resource (reasons: freeze: release week)".into()
            )
        );
        // The seed's shape without a reason.
        let guard = super::tests::guard(forge(Some("a,b"), None));
        assert_eq!(
            decide(&guard, "delete-unlocked-stack", |_| {}),
            Decision::Deny(
                "resource is protected by Lock(s) [a, b]; delete the Lock(s) before deleting this resource".into()
            )
        );
    }

    #[test]
    fn an_object_with_locks_of_its_own_is_denied_with_theirs() {
        let guard = guard(forge(Some("freeze"), None));
        assert_eq!(
            decide(&guard, "delete-locked-stack-without-reasons", |_| {}),
            Decision::Deny(
                "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource".into()
            )
        );
    }

    #[test]
    fn deletes_pass_in_a_namespace_without_namespace_wide_locks() {
        for fake in [forge(None, None), forge(Some(""), None)] {
            assert_eq!(
                decide(&guard(fake), "delete-unlocked-stack", |_| {}),
                Decision::Allow
            );
        }
    }

    #[test]
    fn locks_themselves_stay_deletable_so_that_removing_the_lock_lifts_it() {
        let guard = guard(forge(Some("freeze"), None));
        let decision = decide(&guard, "delete-unlocked-stack", |r| {
            r["request"]["kind"]["kind"] = json!("Lock");
            r["request"]["oldObject"]["kind"] = json!("Lock");
        });
        assert_eq!(decision, Decision::Allow);
        // A kind named Lock in another group is no Lock.
        let decision = decide(&guard, "delete-unlocked-stack", |r| {
            r["request"]["kind"]["group"] = json!("services.kube-dc.com");
            r["request"]["kind"]["kind"] = json!("Lock");
        });
        assert!(!decision.is_allowed());
    }

    #[test]
    fn an_undecidable_delete_is_refused() {
        // Fail open: without the Namespace there is no telling, and the
        // delete must not pass.
        let decision = decide(&guard(Fake(None)), "delete-unlocked-stack", |_| {});
        assert_eq!(
            decision,
            Decision::Error(
                "cannot tell whether namespace forge holds namespace-wide Locks: the webhook's caches of Namespaces and ServicePlans are not synced yet; the delete is refused until it can be checked".into()
            )
        );
        let decision = decide(
            &guard(Fake(Some(HashMap::new()))),
            "delete-unlocked-stack",
            |_| {},
        );
        assert_eq!(
            decision,
            Decision::Error(
                "cannot tell whether namespace forge holds namespace-wide Locks: it is not in the webhook's Namespace cache yet; the delete is refused until it can be checked".into()
            )
        );
    }

    #[test]
    fn cluster_scoped_deletes_and_writes_do_not_read_namespaces() {
        // The Namespace itself: its own rule (holds Locks) decides.
        let guard = guard(Fake(None));
        let decision = decide(&guard, "delete-locked-namespace", |r| {
            r["request"]["oldObject"]["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("annotations");
        });
        assert_eq!(decision, Decision::Allow);
        assert_eq!(
            decide(&guard, "update-locked-stack-spec", |_| {}),
            Decision::Allow
        );
    }
}
