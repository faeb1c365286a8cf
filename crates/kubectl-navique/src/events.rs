//! Approval events from the `ApprovalEvents` gRPC service, as
//! `approvals --watch` prints them.

use navique_api::grpc::approvals::v1 as pb;
use serde::Serialize;

use crate::approvals::{Operation, PendingApproval, ResourceRef, StackRef};

/// One event, in the shape `-o json` and `-o yaml` print.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// `APPROVAL_REQUIRED`, `APPROVED` or `DELETED`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// When it happened (RFC 3339, whole seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<PendingApproval>,
}

impl From<&pb::ApprovalEvent> for WatchEvent {
    fn from(event: &pb::ApprovalEvent) -> Self {
        let event_type = pb::EventType::try_from(event.r#type)
            .map(|t| t.as_str_name().trim_start_matches("EVENT_TYPE_").to_owned())
            .unwrap_or_else(|_| format!("UNKNOWN({})", event.r#type));
        Self {
            event_type,
            time: event.time.map(rfc3339),
            approval: event.approval.as_ref().map(pending),
        }
    }
}

fn rfc3339(mut time: prost_types::Timestamp) -> String {
    time.nanos = 0;
    time.to_string()
}

fn pending(approval: &pb::PendingApproval) -> PendingApproval {
    let stack = approval.stack.clone().unwrap_or_default();
    let resource = approval.resource.clone().unwrap_or_default();
    PendingApproval {
        stack: StackRef {
            namespace: stack.namespace,
            name: stack.name,
        },
        operation: match pb::Operation::try_from(approval.operation) {
            Ok(pb::Operation::Delete) => Operation::Delete,
            _ => Operation::Prune,
        },
        resource: ResourceRef {
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
            namespace: Some(resource.namespace).filter(|n| !n.is_empty()),
            name: resource.name,
        },
        parents: Vec::new(),
        wave: None,
        message: None,
        since: approval.since.map(rfc3339),
        approved_by: approval
            .approved_by
            .iter()
            .map(|a| navique_api::core::Approver {
                user: a.user.clone(),
                time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    a.time
                        .and_then(|t| k8s_openapi::jiff::Timestamp::new(t.seconds, t.nanos).ok())
                        .unwrap_or_default(),
                ),
            })
            .collect(),
        approvals_required: Some(approval.approvals_required).filter(|n| *n > 0),
    }
}

/// The line `approvals --watch` prints for `event`: time, type, Stack,
/// operation and resource.
///
/// `2026-05-01T12:00:00Z  APPROVAL_REQUIRED  forge/app  Prune ConfigMap/old-config`;
/// an `APPROVED` one ends with ` by alice, bob`.
pub fn line(event: &WatchEvent) -> String {
    let time = event.time.as_deref().unwrap_or("-");
    match &event.approval {
        Some(a) => format!(
            "{time}  {:<17}  {}/{}  {} {}/{}{}",
            event.event_type,
            a.stack.namespace,
            a.stack.name,
            a.operation,
            a.resource.kind,
            a.resource.name,
            if event.event_type == "APPROVED" && !a.approved_by.is_empty() {
                let names: Vec<&str> = a.approved_by.iter().map(|a| a.user.as_str()).collect();
                format!(" by {}", names.join(", "))
            } else {
                String::new()
            }
        ),
        None => format!("{time}  {}", event.event_type),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: pb::EventType, operation: pb::Operation) -> pb::ApprovalEvent {
        pb::ApprovalEvent {
            r#type: event_type as i32,
            approval: Some(pb::PendingApproval {
                stack: Some(pb::StackRef {
                    namespace: "forge".into(),
                    name: "app".into(),
                }),
                resource: Some(pb::ResourceRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: "forge".into(),
                    name: "old-config".into(),
                    uid: "u-1".into(),
                }),
                operation: operation as i32,
                since: Some(prost_types::Timestamp {
                    seconds: 1_777_636_800,
                    nanos: 0,
                }),
                approved_by: vec![pb::Approver {
                    user: "alice".into(),
                    time: Some(prost_types::Timestamp {
                        seconds: 1_777_636_803,
                        nanos: 0,
                    }),
                }],
                approvals_required: 1,
            }),
            time: Some(prost_types::Timestamp {
                seconds: 1_777_636_805,
                nanos: 250_000_000,
            }),
        }
    }

    #[test]
    fn each_event_is_one_aligned_line() {
        let lines: Vec<String> = [
            event(pb::EventType::ApprovalRequired, pb::Operation::Prune),
            event(pb::EventType::Approved, pb::Operation::Prune),
            event(pb::EventType::Deleted, pb::Operation::Delete),
        ]
        .iter()
        .map(|e| line(&WatchEvent::from(e)))
        .collect();
        assert_eq!(
            lines,
            [
                "2026-05-01T12:00:05Z  APPROVAL_REQUIRED  forge/app  Prune ConfigMap/old-config",
                "2026-05-01T12:00:05Z  APPROVED           forge/app  Prune ConfigMap/old-config by alice",
                "2026-05-01T12:00:05Z  DELETED            forge/app  Delete ConfigMap/old-config",
            ]
        );
    }

    #[test]
    fn an_event_without_an_approval_or_time_still_prints() {
        let bare = pb::ApprovalEvent {
            r#type: 42,
            approval: None,
            time: None,
        };
        assert_eq!(line(&WatchEvent::from(&bare)), "-  UNKNOWN(42)");
    }

    #[test]
    fn the_json_shape_is_the_listing_s_with_type_and_time() {
        let event = WatchEvent::from(&event(pb::EventType::Approved, pb::Operation::Delete));
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({
                "type": "APPROVED",
                "time": "2026-05-01T12:00:05Z",
                "approval": {
                    "stack": {"namespace": "forge", "name": "app"},
                    "operation": "Delete",
                    "resource": {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": "old-config"},
                    "since": "2026-05-01T12:00:00Z",
                    "approvedBy": [{"user": "alice", "time": "2026-05-01T12:00:03Z"}],
                    "approvalsRequired": 1
                }
            })
        );
    }
}
