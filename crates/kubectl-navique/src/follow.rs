//! `approvals --watch` through the API server, for a user who cannot reach
//! the `ApprovalEvents` service (the usual case: it listens inside the
//! cluster). The same events, from what the user's kubeconfig may watch:
//!
//! - `APPROVAL_REQUIRED` when a resource starts to wait in a Stack's status
//!   (`requiresDeletionApproval`), and for each one waiting at the start;
//! - `APPROVED` then `DELETED` when the Stack controller records its
//!   `ApprovedRemoval` Event about the resource (the removal ran), with who
//!   approved as its note says.
//!
//! A resource that stops waiting without being removed (put back in the
//! manifest, its mark taken away) gets no event, as with the service.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use navique_api::constants::events::APPROVED_REMOVAL;
use navique_api::core::Stack;
use navique_api::messages;

use crate::approvals::{Operation, PendingApproval, ResourceRef, StackRef, pending_approvals};
use crate::events::WatchEvent;

/// A resource of a Stack, as the follower tells them apart.
type Key = (String, String, Option<String>, String);

fn key(resource: &ResourceRef) -> Key {
    (
        resource.group.clone(),
        resource.kind.clone(),
        resource.namespace.clone(),
        resource.name.clone(),
    )
}

/// What has been seen so far.
#[derive(Default)]
pub struct Follower {
    /// Per Stack (namespace, name), what waits.
    waiting: BTreeMap<(String, String), BTreeMap<Key, PendingApproval>>,
    /// Per `ApprovedRemoval` Event (uid), its count so far.
    removals: HashMap<String, i32>,
}

impl Follower {
    /// `stack` as it is now, at `now` (RFC 3339): an `APPROVAL_REQUIRED`
    /// for each resource that was not waiting before.
    pub fn stack(&mut self, stack: &Stack, now: &str) -> Vec<WatchEvent> {
        let id = (stack.namespace().unwrap_or_default(), stack.name_any());
        let mut before = self.waiting.remove(&id).unwrap_or_default();
        let mut now_waiting = BTreeMap::new();
        let mut events = Vec::new();
        for pending in pending_approvals(std::slice::from_ref(stack)) {
            let k = key(&pending.resource);
            let known = before
                .remove(&k)
                .is_some_and(|p| p.operation == pending.operation);
            if !known {
                events.push(WatchEvent {
                    event_type: "APPROVAL_REQUIRED".to_owned(),
                    time: Some(now.to_owned()),
                    approval: Some(pending.clone()),
                });
            }
            now_waiting.insert(k, pending);
        }
        if !now_waiting.is_empty() {
            self.waiting.insert(id, now_waiting);
        }
        events
    }

    /// The Stack is gone.
    pub fn stack_deleted(&mut self, stack: &Stack) {
        self.waiting
            .remove(&(stack.namespace().unwrap_or_default(), stack.name_any()));
    }

    /// An Event as the watch shows it; `initial` while listing what was
    /// there before the watch started (remembered, never announced).
    /// `APPROVED` and `DELETED` for a new `ApprovedRemoval` about a Stack,
    /// or a repeat of one.
    pub fn event(&mut self, event: &Event, initial: bool) -> Vec<WatchEvent> {
        let about_stack = event.involved_object.kind.as_deref() == Some("Stack")
            && event
                .involved_object
                .api_version
                .as_deref()
                .is_some_and(|v| v.starts_with(navique_api::constants::CORE_GROUP));
        if event.reason.as_deref() != Some(APPROVED_REMOVAL) || !about_stack {
            return Vec::new();
        }
        let Some(related) = &event.related else {
            return Vec::new();
        };
        let count = event
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(event.count)
            .unwrap_or(1);
        let uid = event.uid().unwrap_or_default();
        let seen = self.removals.insert(uid, count);
        if initial || seen.is_some_and(|c| c >= count) {
            return Vec::new();
        }
        let stack = StackRef {
            namespace: event.involved_object.namespace.clone().unwrap_or_default(),
            name: event.involved_object.name.clone().unwrap_or_default(),
        };
        let (group, version) = match related
            .api_version
            .as_deref()
            .unwrap_or("v1")
            .rsplit_once('/')
        {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (
                String::new(),
                related.api_version.clone().unwrap_or_default(),
            ),
        };
        let resource = ResourceRef {
            group,
            version,
            kind: related.kind.clone().unwrap_or_default(),
            namespace: related.namespace.clone(),
            name: related.name.clone().unwrap_or_default(),
        };
        // The note says which removal ran and who approved it; the Stack's
        // status said the rest while it waited.
        let (pruned, approved_by) = event
            .message
            .as_deref()
            .and_then(messages::parse_approved_removal)
            .unwrap_or_default();
        let id = (stack.namespace.clone(), stack.name.clone());
        let known = self
            .waiting
            .get_mut(&id)
            .and_then(|w| w.remove(&key(&resource)));
        let mut approval = known.unwrap_or_else(|| PendingApproval {
            stack,
            parents: Vec::new(),
            operation: if pruned {
                Operation::Prune
            } else {
                Operation::Delete
            },
            resource,
            wave: None,
            message: None,
            since: None,
            approved_by: Vec::new(),
            approvals_required: None,
        });
        if !approved_by.is_empty() {
            approval.approved_by = approved_by;
        }
        let time = event_time(event);
        ["APPROVED", "DELETED"]
            .into_iter()
            .map(|t| WatchEvent {
                event_type: t.to_owned(),
                time: time.clone(),
                approval: Some(approval.clone()),
            })
            .collect()
    }
}

/// When the Event last happened, in whole seconds.
fn event_time(event: &Event) -> Option<String> {
    let micro = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .or(event.event_time.as_ref())
        .map(|t| t.0);
    let time = micro.or(event.last_timestamp.as_ref().map(|t| t.0))?;
    Some(
        k8s_openapi::jiff::Timestamp::from_second(time.as_second())
            .ok()?
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{EventSeries, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use serde_json::json;

    use super::*;

    fn stack(resources: serde_json::Value) -> Stack {
        serde_json::from_value(json!({
            "apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
            "metadata": {"name": "app", "namespace": "forge"},
            "spec": {"resources": []},
            "status": {"resources": resources}
        }))
        .unwrap()
    }

    fn waiting(name: &str, approved_by: &[&str]) -> serde_json::Value {
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": name,
            "status": "Synced", "requiresDeletionApproval": true, "requiresPruning": true,
            "approvedBy": approved_by.iter().map(|u| json!({"user": u, "time": "2026-05-01T12:00:03Z"})).collect::<Vec<_>>()})
    }

    fn removal(uid: &str, name: &str, count: Option<i32>) -> Event {
        Event {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("core.navique.com/v1alpha1".into()),
                kind: Some("Stack".into()),
                namespace: Some("forge".into()),
                name: Some("app".into()),
                ..ObjectReference::default()
            },
            related: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some("forge".into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            }),
            reason: Some(APPROVED_REMOVAL.into()),
            message: Some(format!(
                "pruned ConfigMap/{name}, approved by alice at 2026-05-01T12:00:03Z"
            )),
            event_time: Some(MicroTime("2026-05-01T12:00:05.25Z".parse().unwrap())),
            series: count.map(|count| EventSeries {
                count: Some(count),
                last_observed_time: Some(MicroTime("2026-05-01T12:01:00Z".parse().unwrap())),
            }),
            ..Event::default()
        }
    }

    fn types(events: &[WatchEvent]) -> Vec<(&str, &str)> {
        events
            .iter()
            .map(|e| {
                (
                    e.event_type.as_str(),
                    e.approval.as_ref().unwrap().resource.name.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn a_resource_is_announced_once_while_it_waits() {
        let mut f = Follower::default();
        let now = "2026-05-01T12:00:00Z";
        let first = f.stack(&stack(json!([waiting("old", &[])])), now);
        assert_eq!(types(&first), [("APPROVAL_REQUIRED", "old")]);
        assert_eq!(first[0].time.as_deref(), Some(now));
        // A partial approval, then a second resource: only the new one.
        let again = f.stack(
            &stack(json!([waiting("old", &["alice"]), waiting("older", &[])])),
            now,
        );
        assert_eq!(types(&again), [("APPROVAL_REQUIRED", "older")]);
        // Gone from the status, then back: waiting again is announced again.
        assert!(f.stack(&stack(json!([])), now).is_empty());
        assert_eq!(
            types(&f.stack(&stack(json!([waiting("old", &[])])), now)),
            [("APPROVAL_REQUIRED", "old")]
        );
    }

    #[test]
    fn a_removal_is_approved_then_deleted_with_its_approvers() {
        let mut f = Follower::default();
        f.stack(&stack(json!([waiting("old", &[])])), "2026-05-01T12:00:00Z");
        let events = f.event(&removal("e1", "old", None), false);
        assert_eq!(types(&events), [("APPROVED", "old"), ("DELETED", "old")]);
        assert_eq!(
            crate::events::line(&events[0]),
            "2026-05-01T12:00:05Z  APPROVED           forge/app  Prune ConfigMap/old by alice"
        );
        // The same Event again (a resync) says nothing; its series' next does.
        assert!(f.event(&removal("e1", "old", None), false).is_empty());
        let repeat = f.event(&removal("e1", "old", Some(2)), false);
        assert_eq!(types(&repeat), [("APPROVED", "old"), ("DELETED", "old")]);
        assert_eq!(repeat[0].time.as_deref(), Some("2026-05-01T12:01:00Z"));
        let approval = repeat[0].approval.as_ref().unwrap();
        assert_eq!(approval.operation, Operation::Prune);
        assert_eq!(approval.approved_by[0].user, "alice");
    }

    #[test]
    fn earlier_and_unrelated_events_are_not_announced() {
        let mut f = Follower::default();
        assert!(f.event(&removal("e1", "old", None), true).is_empty());
        assert!(f.event(&removal("e1", "old", None), false).is_empty());
        let mut other = removal("e2", "old", None);
        other.reason = Some("DeletionApproved".into());
        assert!(f.event(&other, false).is_empty());
        let mut not_a_stack = removal("e3", "old", None);
        not_a_stack.involved_object.kind = Some("ConfigMap".into());
        assert!(f.event(&not_a_stack, false).is_empty());
    }
}
