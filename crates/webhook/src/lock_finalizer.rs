//! The Lock finalizer (`POST /mutate/locks`): a Lock is stored with the
//! lock-controller's finalizer (`core.navique.com/lock`) from its first
//! write, so that the controller need not write it before it marks the
//! target: one write of the four a new Lock cost until it was active.
//!
//! Nothing depends on this rule. Its configuration fails open, and the
//! lock-controller still adds the finalizer to a Lock stored without it
//! (the webhook was down, or the Lock predates the rule) before it marks
//! anything. It is applied on updates too, so that a GitOps tool applying
//! a manifest without the finalizer does not take it off a live Lock. A Lock
//! being deleted (by the request's object or the stored one) is left alone:
//! no finalizer may be added to it, the controller takes its own off once
//! the markers are gone, and an admin may clear a stuck one by hand.

use kube::core::DynamicObject;
use kube::core::admission::Operation;
use navique_api::constants::{CORE_GROUP, finalizers};

use crate::review::{Decision, Request, Validator};

/// The path the rule is served on.
pub const PATH: &str = "/mutate/locks";

/// Adds the Lock finalizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockFinalizer;

impl Validator for LockFinalizer {
    fn validate(&self, request: &Request) -> Decision {
        let is_lock = request.kind.group == CORE_GROUP && request.kind.kind == "Lock";
        if !is_lock || !matches!(request.operation, Operation::Create | Operation::Update) {
            return Decision::Allow;
        }
        match &request.object {
            Some(lock) => finalize(lock, request.old_object.as_ref()),
            None => Decision::Allow,
        }
    }
}

/// The patch that adds the finalizer to `lock`, unless it has it or is
/// being deleted. Whether it is being deleted is read from the stored
/// Lock (`stored`) too: a replace's body carries no `deletionTimestamp`,
/// which the API server puts back only after mutating admission, so an
/// admin clearing the finalizers of a deleting Lock by `kubectl replace`
/// would otherwise get ours back (or a 422 for a new finalizer).
fn finalize(lock: &DynamicObject, stored: Option<&DynamicObject>) -> Decision {
    let meta = &lock.metadata;
    let deleting = meta.deletion_timestamp.is_some()
        || stored.is_some_and(|s| s.metadata.deletion_timestamp.is_some());
    let present = meta.finalizers.as_deref().unwrap_or_default();
    if deleting || present.iter().any(|f| f == finalizers::LOCK) {
        return Decision::Allow;
    }
    let operation = if meta.finalizers.is_some() {
        serde_json::json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizers::LOCK})
    } else {
        serde_json::json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizers::LOCK]})
    };
    Decision::Patch(vec![operation])
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn request(operation: &str, kind: &str, object: Option<Value>) -> Request {
        let old = (operation == "UPDATE").then(|| lock(json!({})));
        request_with_old(operation, kind, object, old)
    }

    fn request_with_old(
        operation: &str,
        kind: &str,
        object: Option<Value>,
        old: Option<Value>,
    ) -> Request {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "kind": {"group": "core.navique.com", "version": "v1alpha1", "kind": kind},
                "resource": {"group": "core.navique.com", "version": "v1alpha1", "resource": "locks"},
                "name": "keep",
                "namespace": "shop",
                "operation": operation,
                "userInfo": {"username": "argocd", "groups": ["system:authenticated"]},
                "object": object,
                "oldObject": old,
            }
        });
        crate::review::parse(review.to_string().as_bytes()).unwrap()
    }

    fn lock(metadata: Value) -> Value {
        let mut lock = json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Lock",
            "metadata": {"name": "keep", "namespace": "shop"},
            "spec": {"targetRef": {"kind": "Stack", "name": "forge"}},
        });
        if let (Some(meta), Some(extra)) = (lock["metadata"].as_object_mut(), metadata.as_object())
        {
            meta.extend(extra.clone());
        }
        lock
    }

    fn decide(operation: &str, object: Value) -> Decision {
        LockFinalizer.validate(&request(operation, "Lock", Some(object)))
    }

    #[test]
    fn a_new_lock_gets_the_finalizer_beside_the_ones_it_has() {
        assert_eq!(
            decide("CREATE", lock(json!({}))),
            Decision::Patch(vec![json!({
                "op": "add", "path": "/metadata/finalizers", "value": ["core.navique.com/lock"],
            })])
        );
        assert_eq!(
            decide("UPDATE", lock(json!({"finalizers": ["example.com/keep"]}))),
            Decision::Patch(vec![json!({
                "op": "add", "path": "/metadata/finalizers/-", "value": "core.navique.com/lock",
            })])
        );
    }

    #[test]
    fn a_lock_that_has_it_or_is_being_deleted_is_left_alone() {
        let finalized = lock(json!({"finalizers": ["core.navique.com/lock"]}));
        assert_eq!(decide("UPDATE", finalized), Decision::Allow);
        let deleting = lock(json!({"deletionTimestamp": "2026-12-06T03:00:00Z"}));
        assert_eq!(decide("UPDATE", deleting.clone()), Decision::Allow);
        // A replace's body lacks the deletionTimestamp the stored Lock has:
        // an admin clearing the finalizers of a deleting Lock.
        let replace = request_with_old("UPDATE", "Lock", Some(lock(json!({}))), Some(deleting));
        assert_eq!(LockFinalizer.validate(&replace), Decision::Allow);
    }

    #[test]
    fn other_kinds_and_operations_are_not_changed() {
        let stack = LockFinalizer.validate(&request("CREATE", "Stack", Some(lock(json!({})))));
        assert_eq!(stack, Decision::Allow);
        let delete = LockFinalizer.validate(&request("DELETE", "Lock", None));
        assert_eq!(delete, Decision::Allow);
    }
}
