//! The Lock guard, for clusters without ValidatingAdmissionPolicy
//! (`lockGuard.mode: webhook`). It enforces exactly what the Lock guard
//! policies enforce, with the same messages, so that what a user sees does
//! not depend on the mode:
//!
//! - a delete of an object whose `core.navique.com/locked` annotation is
//!   non-empty is denied, naming the Locks and their reasons; a Namespace's
//!   and a CustomResourceDefinition's annotation lists the Locks they hold,
//!   and their deletes are denied with messages of their own;
//! - the lock markers (the `core.navique.com/locked` annotation and label and
//!   the `core.navique.com/lock-reasons` annotation) are written by the
//!   lock-controller only: anyone else adding, editing or removing one is
//!   denied, or a user could unlock an object without deleting its Lock;
//!   so are the namespace-wide markers (`core.navique.com/namespace-locked`
//!   and `core.navique.com/namespace-lock-reasons`, on Namespaces), whose
//!   deletes [`crate::namespace_locks`] enforces.
//!
//! Everything else is allowed, updates of locked objects included: a Lock
//! prevents deletion, not change. Which kinds are sent here is the webhook
//! configuration's business (the enforceable groups, namespaces, CRDs).

use kube::core::DynamicObject;
use kube::core::admission::Operation;
use navique_api::constants::{annotations, labels};
use navique_api::messages;

use crate::review::{self, Decision, Request, Validator};

/// The path the Lock guard is served on.
pub const PATH: &str = "/validate/locks";

/// The Lock guard's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGuard {
    /// Deny deletes of namespaces that hold Locks.
    pub protect_namespaces: bool,
    /// Deny changes of the lock markers by anyone but the lock-controller.
    pub protect_marker: bool,
    /// The lock-controller's user name, the only one allowed to change the
    /// markers.
    pub lock_controller_username: String,
}

impl Validator for LockGuard {
    fn validate(&self, request: &Request) -> Decision {
        match request.operation {
            Operation::Delete => self.delete(request),
            Operation::Create | Operation::Update => self.write(request),
            Operation::Connect => Decision::Allow,
        }
    }
}

impl LockGuard {
    fn delete(&self, request: &Request) -> Decision {
        // The API server sends the object being deleted as oldObject; without
        // it there is no marker to go by, so nothing can be allowed.
        let Some(old) = &request.old_object else {
            return review::delete_without_old_object();
        };
        let Some(locked) = annotation(old, annotations::LOCKED).filter(|l| !l.is_empty()) else {
            return Decision::Allow;
        };
        let name = if request.name.is_empty() {
            old.metadata.name.as_deref().unwrap_or_default()
        } else {
            request.name.as_str()
        };
        let kind = &request.kind;
        if kind.group.is_empty() && kind.kind == "Namespace" {
            if self.protect_namespaces {
                Decision::Deny(messages::namespace_locked(name, locked))
            } else {
                Decision::Allow
            }
        } else if kind.group == "apiextensions.k8s.io" && kind.kind == "CustomResourceDefinition" {
            Decision::Deny(messages::crd_locked(name, locked))
        } else {
            Decision::Deny(messages::lock_denied_by_markers(
                locked,
                annotation(old, annotations::LOCK_REASONS),
            ))
        }
    }

    fn write(&self, request: &Request) -> Decision {
        if !self.protect_marker
            || request.user_info.username.as_deref() == Some(&self.lock_controller_username)
        {
            return Decision::Allow;
        }
        let Some(object) = &request.object else {
            return Decision::Allow;
        };
        // A marker set to "" counts as present: adding an empty marker is a
        // change too.
        if markers(Some(object)) != markers(request.old_object.as_ref()) {
            Decision::Deny(messages::LOCK_MARKER_PROTECTED.to_owned())
        } else if namespace_markers(Some(object)) != namespace_markers(request.old_object.as_ref())
        {
            Decision::Deny(messages::NAMESPACE_LOCK_MARKER_PROTECTED.to_owned())
        } else {
            Decision::Allow
        }
    }
}

/// The namespace-wide lock markers (meaningful on Namespaces only, and
/// guarded wherever they appear).
fn namespace_markers(object: Option<&DynamicObject>) -> [Option<&str>; 2] {
    let Some(object) = object else {
        return [None; 2];
    };
    [
        annotation(object, annotations::NAMESPACE_LOCKED),
        annotation(object, annotations::NAMESPACE_LOCK_REASONS),
    ]
}

/// The lock markers of an object (all absent for no object, as on create).
fn markers(object: Option<&DynamicObject>) -> [Option<&str>; 3] {
    let Some(object) = object else {
        return [None; 3];
    };
    [
        annotation(object, annotations::LOCKED),
        annotation(object, annotations::LOCK_REASONS),
        object
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::LOCKED))
            .map(String::as_str),
    ]
}

fn annotation<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review;
    use serde_json::{Value, json};

    const LOCK_CONTROLLER: &str = "system:serviceaccount:navique-system:navique-lock-controller";

    fn guard() -> LockGuard {
        LockGuard {
            protect_namespaces: true,
            protect_marker: true,
            lock_controller_username: LOCK_CONTROLLER.to_owned(),
        }
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Validates a review fixture, changed by `edit` first.
    fn decide_with(guard: &LockGuard, name: &str, edit: impl FnOnce(&mut Value)) -> Decision {
        let mut review = fixture(name);
        edit(&mut review);
        let request = review::parse(review.to_string().as_bytes()).unwrap();
        guard.validate(&request)
    }

    fn decide(name: &str) -> Decision {
        decide_with(&guard(), name, |_| {})
    }

    fn denied(message: &str) -> Decision {
        Decision::Deny(message.to_owned())
    }

    #[test]
    fn deleting_a_stack_held_by_two_locks_names_both_and_their_reasons() {
        assert_eq!(
            decide("delete-locked-stack"),
            denied(
                "resource is protected by Lock(s) [protect-forge-stack, audit-hold]; delete the Lock(s) before deleting this resource (reasons: protect-forge-stack: Production environment — remove this Lock deliberately before deleting.; audit-hold: audit in progress)"
            )
        );
    }

    #[test]
    fn deleting_a_locked_stack_without_reasons_is_the_seed_message() {
        assert_eq!(
            decide("delete-locked-stack-without-reasons"),
            denied(
                "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource"
            )
        );
    }

    #[test]
    fn empty_reasons_are_not_printed() {
        let decision = decide_with(&guard(), "delete-locked-stack-without-reasons", |r| {
            r["request"]["oldObject"]["metadata"]["annotations"]["core.navique.com/lock-reasons"] =
                json!("");
        });
        assert_eq!(
            decision,
            denied(
                "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource"
            )
        );
    }

    #[test]
    fn deleting_an_unlocked_stack_is_allowed() {
        assert_eq!(decide("delete-unlocked-stack"), Decision::Allow);
    }

    #[test]
    fn an_empty_locked_annotation_or_only_the_label_does_not_lock() {
        let decision = decide_with(&guard(), "delete-locked-stack", |r| {
            r["request"]["oldObject"]["metadata"]["annotations"]["core.navique.com/locked"] =
                json!("");
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide_with(&guard(), "delete-locked-stack", |r| {
            r["request"]["oldObject"]["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("annotations");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn the_lock_controller_cannot_delete_a_locked_object_either() {
        let decision = decide_with(&guard(), "delete-locked-stack-without-reasons", |r| {
            r["request"]["userInfo"]["username"] = json!(LOCK_CONTROLLER);
        });
        assert!(!decision.is_allowed());
    }

    #[test]
    fn a_delete_without_the_old_object_is_denied() {
        // Fail open: without the object there is no marker to go by, and
        // the delete was allowed.
        let decision = decide_with(&guard(), "delete-locked-stack", |r| {
            r["request"]["oldObject"] = Value::Null;
        });
        assert_eq!(
            decision,
            denied(
                "malformed admission request: a DELETE without oldObject; the request is refused"
            )
        );
    }

    proptest::proptest! {
        /// Fuzzing: a DELETE of a locked Stack with any part of its review
        /// replaced by arbitrary text is never allowed while the review
        /// still reads as that delete with the marker.
        #[test]
        fn a_locked_delete_is_never_allowed_whatever_the_junk(
            pointer in proptest::sample::select(vec![
                "/request/oldObject/spec", "/request/oldObject/metadata/labels",
                "/request/object", "/request/userInfo", "/request/name",
                "/request/options", "/request/oldObject/status",
            ]),
            junk in "[ -~]{0,16}",
            number in proptest::prelude::any::<i64>(),
        ) {
            for junk in [json!(junk), json!(number), json!([junk]), json!({"x": junk})] {
                let mut review = fixture("delete-locked-stack");
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                review.pointer_mut(parent).unwrap()[key] = junk;
                let Ok(request) = review::parse(review.to_string().as_bytes()) else {
                    continue;
                };
                let decision = review::decide(&guard(), &request);
                proptest::prop_assert!(!decision.is_allowed(), "{pointer}: {decision:?}");
            }
        }
    }

    #[test]
    fn deleting_a_namespace_that_holds_locks_is_denied() {
        assert_eq!(
            decide("delete-locked-namespace"),
            denied(
                "namespace forge holds Lock(s) [protect-forge-stack, second]; delete the Lock(s) before deleting this namespace"
            )
        );
    }

    #[test]
    fn namespaces_are_not_protected_when_turned_off() {
        let guard = LockGuard {
            protect_namespaces: false,
            ..guard()
        };
        assert_eq!(
            decide_with(&guard, "delete-locked-namespace", |_| {}),
            Decision::Allow
        );
        // The other rules stay.
        assert!(!decide_with(&guard, "delete-locked-crd", |_| {}).is_allowed());
        assert!(!decide_with(&guard, "delete-locked-stack", |_| {}).is_allowed());
    }

    #[test]
    fn deleting_a_crd_with_locked_objects_is_denied() {
        assert_eq!(
            decide("delete-locked-crd"),
            denied(
                "stacks.core.navique.com has locked objects (Lock(s) [forge/protect-forge-stack]); delete the Lock(s) before deleting this CustomResourceDefinition"
            )
        );
    }

    #[test]
    fn a_user_removing_the_markers_is_denied() {
        assert_eq!(
            decide("update-unlock-stack"),
            denied(messages::LOCK_MARKER_PROTECTED)
        );
        assert_eq!(
            messages::LOCK_MARKER_PROTECTED,
            "the core.navique.com/locked annotation and label and the core.navique.com/lock-reasons annotation are managed by the lock-controller; create or delete Locks instead"
        );
    }

    #[test]
    fn a_user_changing_any_one_marker_is_denied() {
        let edits: [(&str, Value); 5] = [
            (
                "/metadata/annotations/core.navique.com~1locked",
                json!("other"),
            ),
            (
                "/metadata/annotations/core.navique.com~1locked",
                Value::Null,
            ),
            (
                "/metadata/annotations/core.navique.com~1lock-reasons",
                json!("x: y"),
            ),
            (
                "/metadata/annotations/core.navique.com~1lock-reasons",
                Value::Null,
            ),
            ("/metadata/labels/core.navique.com~1locked", json!("false")),
        ];
        for (pointer, value) in edits {
            let shown = format!("{pointer} = {value}");
            let decision = decide_with(&guard(), "update-locked-stack-spec", |r| {
                let object = &mut r["request"]["object"];
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                let parent = object.pointer_mut(parent).unwrap().as_object_mut().unwrap();
                let key = key.replace("~1", "/");
                match value {
                    Value::Null => parent.remove(&key),
                    value => parent.insert(key, value),
                };
            });
            assert_eq!(decision, denied(messages::LOCK_MARKER_PROTECTED), "{shown}");
        }
    }

    #[test]
    fn a_user_changing_a_namespace_wide_marker_is_denied() {
        for key in [
            "core.navique.com/namespace-locked",
            "core.navique.com/namespace-lock-reasons",
        ] {
            // Adding one (faking a namespace-wide Lock) and removing one
            // (lifting it without deleting the Lock).
            let added = decide_with(&guard(), "update-locked-stack-spec", |r| {
                r["request"]["object"]["metadata"]["annotations"][key] = json!("fake");
            });
            assert_eq!(
                added,
                denied(messages::NAMESPACE_LOCK_MARKER_PROTECTED),
                "{key}"
            );
            let removed = decide_with(&guard(), "update-locked-stack-spec", |r| {
                r["request"]["oldObject"]["metadata"]["annotations"][key] = json!("freeze");
            });
            assert_eq!(
                removed,
                denied(messages::NAMESPACE_LOCK_MARKER_PROTECTED),
                "{key}"
            );
        }
        assert_eq!(
            messages::NAMESPACE_LOCK_MARKER_PROTECTED,
            "the core.navique.com/namespace-locked and core.navique.com/namespace-lock-reasons annotations are managed by the lock-controller; create or delete namespace-wide Locks instead"
        );
        // The lock-controller may.
        let decision = decide_with(&guard(), "update-locked-stack-spec", |r| {
            r["request"]["userInfo"]["username"] = json!(LOCK_CONTROLLER);
            r["request"]["object"]["metadata"]["annotations"]["core.navique.com/namespace-locked"] =
                json!("freeze");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn a_user_creating_an_object_with_a_marker_is_denied() {
        assert_eq!(
            decide("create-stack-with-locked-label"),
            denied(messages::LOCK_MARKER_PROTECTED)
        );
        // Even an empty one: the key's presence is the change.
        let decision = decide_with(&guard(), "create-stack-with-locked-label", |r| {
            let metadata = &mut r["request"]["object"]["metadata"];
            metadata.as_object_mut().unwrap().remove("labels");
            metadata["annotations"] = json!({"core.navique.com/locked": ""});
        });
        assert_eq!(decision, denied(messages::LOCK_MARKER_PROTECTED));
    }

    #[test]
    fn a_user_creating_an_object_without_markers_is_allowed() {
        let decision = decide_with(&guard(), "create-stack-with-locked-label", |r| {
            r["request"]["object"]["metadata"]["labels"] = json!({"app": "forge"});
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn the_lock_controller_may_change_the_markers() {
        for fixture in ["update-unlock-stack", "create-stack-with-locked-label"] {
            let decision = decide_with(&guard(), fixture, |r| {
                r["request"]["userInfo"]["username"] = json!(LOCK_CONTROLLER);
            });
            assert_eq!(decision, Decision::Allow, "{fixture}");
        }
    }

    #[test]
    fn another_identity_configured_as_the_lock_controller_is_the_only_one_allowed() {
        let guard = LockGuard {
            lock_controller_username: "system:serviceaccount:ops:locks".to_owned(),
            ..guard()
        };
        let as_user = |user: &'static str| {
            decide_with(&guard, "update-unlock-stack", |r| {
                r["request"]["userInfo"]["username"] = json!(user);
            })
        };
        assert_eq!(as_user("system:serviceaccount:ops:locks"), Decision::Allow);
        assert!(!as_user(LOCK_CONTROLLER).is_allowed());
    }

    #[test]
    fn updating_a_locked_object_without_touching_the_markers_is_allowed() {
        assert_eq!(decide("update-locked-stack-spec"), Decision::Allow);
    }

    #[test]
    fn markers_are_not_protected_when_turned_off() {
        let guard = LockGuard {
            protect_marker: false,
            ..guard()
        };
        for fixture in ["update-unlock-stack", "create-stack-with-locked-label"] {
            assert_eq!(
                decide_with(&guard, fixture, |_| {}),
                Decision::Allow,
                "{fixture}"
            );
        }
        // Deletes stay denied.
        assert!(!decide_with(&guard, "delete-locked-stack", |_| {}).is_allowed());
    }

    #[test]
    fn connect_is_allowed() {
        let decision = decide_with(&guard(), "delete-locked-stack", |r| {
            r["request"]["operation"] = json!("CONNECT");
        });
        assert_eq!(decision, Decision::Allow);
    }
}
