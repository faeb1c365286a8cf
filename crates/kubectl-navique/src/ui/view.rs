//! What the page shows, computed from the objects the user's watches hold:
//! the pending approvals of each Stack (with any field of a status item
//! this version does not know, shown as it is, so newer controllers'
//! additions such as who approved show up), the Locks, and the
//! ManagedServices in `Deleting`.

use kube::ResourceExt;
use navique_api::constants::{annotations, condition_types, reasons};
use navique_api::core::{Lock, Stack};
use serde::Serialize;
use serde_json::Value;

use crate::approvals::{PendingApproval, StackRef, of_stack, pending_approvals};
use crate::locks::{self, LockSummary};

/// A panel's items, and how its watch is doing.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Panel<T> {
    /// The first list has arrived.
    pub synced: bool,
    /// The API server's refusal or the watch's failure, as kubectl words it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub items: Vec<T>,
}

/// What a watch holds: its objects as JSON, and its state.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    pub synced: bool,
    pub error: Option<String>,
    pub objects: Vec<Value>,
}

impl Watched {
    fn panel<T>(&self, items: Vec<T>) -> Panel<T> {
        Panel {
            synced: self.synced,
            error: self.error.clone(),
            items,
        }
    }
}

/// A field shown as a label and a value.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub label: String,
    pub value: String,
}

/// One pending removal, as a row of the page.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    #[serde(flatten)]
    pub approval: PendingApproval,
    /// The uid the Stack recorded for the object: an approval the user
    /// confirmed for this object is not applied to another of its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Fields of the status item the page does not know.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<Field>,
}

/// A Stack with pending removals.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackView {
    pub stack: StackRef,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    /// Its own pending removals.
    pub rows: Vec<Row>,
    /// What "Approve all" approves: its own and its nested Stacks'.
    pub all: Vec<Row>,
    /// `spec.approvals`, shown as it is (e.g. how many approvers it needs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<Field>,
}

/// A Lock, as the Locks panel shows it.
pub type LockView = LockSummary;

/// A ManagedService in `Deleting`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<String>,
    /// The `Ready` condition's reason and message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What to run to go on, when the reason says what is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Everything the page shows at one moment.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// `namespace forge` or `all namespaces`.
    pub scope: String,
    pub stacks: Panel<StackView>,
    /// Stacks whose status this version cannot read, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<Field>,
    pub locks: Panel<LockView>,
    pub services: Panel<ServiceView>,
    /// The Stacks and ManagedServices whose delete the page can preview.
    pub deletable: Vec<super::preview::Deletable>,
}

/// The fields of a Stack's status item that the page shows in columns or
/// uses itself; any other is shown as an extra field.
const KNOWN_ITEM_FIELDS: [&str; 14] = [
    "group",
    "version",
    "kind",
    "namespace",
    "name",
    "status",
    "health",
    "requiresPruning",
    "requiresDeletionApproval",
    "syncWave",
    "message",
    "uid",
    "creating",
    "waitingSince",
];

/// `approvedBy` → `approved by`.
fn label(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_uppercase() {
            out.push(' ');
            out.extend(c.to_lowercase());
        } else if c == '_' || c == '-' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value as one line of text: strings bare, lists joined, objects
/// as `key: value` pairs.
fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{}: {}", label(k), text(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// The fields of `object` not in `known`, by name.
fn extra_fields(object: &Value, known: &[&str]) -> Vec<Field> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !known.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| Field {
            label: label(k),
            value: text(v),
        })
        .collect()
}

/// The status item of `stack` that `pending` comes from.
fn item<'a>(stack: &'a Value, pending: &PendingApproval) -> Option<&'a Value> {
    fn field<'v>(v: &'v Value, k: &str) -> &'v str {
        v.get(k).and_then(Value::as_str).unwrap_or_default()
    }
    stack["status"]["resources"].as_array()?.iter().find(|i| {
        i.get("requiresDeletionApproval") == Some(&Value::Bool(true))
            && field(i, "group") == pending.resource.group
            && field(i, "kind") == pending.resource.kind
            && field(i, "name") == pending.resource.name
            && i.get("namespace").and_then(Value::as_str) == pending.resource.namespace.as_deref()
    })
}

/// The page's row for `pending`.
fn row(raw: &[(Value, Stack)], pending: &PendingApproval) -> Row {
    let item = raw
        .iter()
        .find(|(_, s)| {
            s.namespace().as_deref() == Some(pending.stack.namespace.as_str())
                && s.name_any() == pending.stack.name
        })
        .and_then(|(value, _)| item(value, pending));
    Row {
        approval: pending.clone(),
        uid: item
            .and_then(|i| i.get("uid"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        extra: item
            .map(|i| extra_fields(i, &KNOWN_ITEM_FIELDS))
            .unwrap_or_default(),
    }
}

/// The Stacks panel: each Stack with pending removals, in the plugin's
/// tree order, and the Stacks whose JSON is not a Stack this version reads.
fn stacks(watched: &Watched) -> (Panel<StackView>, Vec<Field>) {
    let mut raw: Vec<(Value, Stack)> = Vec::new();
    let mut unreadable = Vec::new();
    for value in &watched.objects {
        match serde_json::from_value::<Stack>(value.clone()) {
            Ok(stack) => raw.push((value.clone(), stack)),
            Err(e) => unreadable.push(Field {
                label: format!(
                    "{}/{}",
                    value["metadata"]["namespace"].as_str().unwrap_or_default(),
                    value["metadata"]["name"].as_str().unwrap_or_default()
                ),
                value: format!("cannot read its status: {e}"),
            }),
        }
    }
    let typed: Vec<Stack> = raw.iter().map(|(_, s)| s.clone()).collect();
    let pending = pending_approvals(&typed);
    let mut views: Vec<StackView> = Vec::new();
    for p in &pending {
        if views.last().is_some_and(|v| v.stack == p.stack) {
            continue;
        }
        let value = raw
            .iter()
            .find(|(_, s)| {
                s.namespace().as_deref() == Some(p.stack.namespace.as_str())
                    && s.name_any() == p.stack.name
            })
            .map(|(v, _)| v);
        let in_namespace: Vec<PendingApproval> = pending
            .iter()
            .filter(|o| o.stack.namespace == p.stack.namespace)
            .cloned()
            .collect();
        views.push(StackView {
            stack: p.stack.clone(),
            parents: p.parents.clone(),
            rows: pending
                .iter()
                .filter(|o| o.stack == p.stack)
                .map(|o| row(&raw, o))
                .collect(),
            all: of_stack(&in_namespace, &p.stack.name)
                .iter()
                .map(|o| row(&raw, o))
                .collect(),
            settings: value
                .and_then(|v| v["spec"].get("approvals"))
                .map(|a| extra_fields(a, &[]))
                .unwrap_or_default(),
        });
    }
    (watched.panel(views), unreadable)
}

fn locks_panel(watched: &Watched) -> Panel<LockView> {
    let locks: Vec<Lock> = watched
        .objects
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    watched.panel(locks::report(&locks).locks)
}

/// The `kubectl annotate` that confirms a `Delete` of service `name`.
pub fn confirm_delete_command(namespace: &str, name: &str) -> String {
    format!(
        "kubectl annotate managedservice {name} -n {namespace} {}={name}",
        annotations::CONFIRM_DELETE
    )
}

fn services_panel(watched: &Watched) -> Panel<ServiceView> {
    let mut items: Vec<ServiceView> = watched
        .objects
        .iter()
        .filter(|v| v["status"]["phase"] == "Deleting")
        .map(|v| {
            let namespace = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let ready = v["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == condition_types::READY);
            let field = |k: &str| {
                ready
                    .and_then(|c| c[k].as_str())
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            let reason = field("reason");
            let hint = (reason.as_deref() == Some(reasons::DELETION_CONFIRMATION_NEEDED))
                .then(|| confirm_delete_command(&namespace, &name));
            ServiceView {
                deletion_policy: v["spec"]["deletionPolicy"].as_str().map(str::to_owned),
                message: field("message"),
                reason,
                hint,
                namespace,
                name,
            }
        })
        .collect();
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    watched.panel(items)
}

/// The page's content from the three watches.
pub fn snapshot(
    scope: Option<&str>,
    stacks: &Watched,
    locks: &Watched,
    services: &Watched,
) -> Snapshot {
    let stacks_watched = stacks;
    let (stacks, unreadable) = self::stacks(stacks);
    Snapshot {
        scope: scope.map_or_else(
            || "all namespaces".to_owned(),
            |ns| format!("namespace {ns}"),
        ),
        stacks,
        unreadable,
        locks: locks_panel(locks),
        services: services_panel(services),
        deletable: super::preview::deletable(stacks_watched, services),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn watched(objects: Vec<Value>) -> Watched {
        Watched {
            synced: true,
            error: None,
            objects,
        }
    }

    fn stack(ns: &str, name: &str, resources: Value, operation: Option<Value>) -> Value {
        let mut status = json!({"resources": resources});
        if let Some(operation) = operation {
            status["operation"] = operation;
        }
        json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Stack",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"resources": []},
            "status": status
        })
    }

    fn waiting(name: &str, prune: bool) -> Value {
        json!({"version": "v1", "kind": "ConfigMap", "namespace": "forge", "name": name,
            "status": "OutOfSync", "requiresPruning": prune, "requiresDeletionApproval": true,
            "syncWave": 1, "uid": format!("uid-{name}"), "message": "waiting"})
    }

    #[test]
    fn labels_split_camel_case() {
        assert_eq!(label("approvedBy"), "approved by");
        assert_eq!(label("approvals_required"), "approvals required");
        assert_eq!(label("nOfM"), "n of m");
    }

    #[test]
    fn values_are_shown_as_one_line() {
        assert_eq!(text(&json!("alice")), "alice");
        assert_eq!(text(&json!(["alice", "bob"])), "alice, bob");
        assert_eq!(text(&json!(2)), "2");
        assert_eq!(
            text(&json!({"count": 1, "required": 2})),
            "count: 1, required: 2"
        );
        assert_eq!(
            text(&json!([{"user": "alice", "at": "2026-12-01T10:00:00Z"}])),
            "at: 2026-12-01T10:00:00Z, user: alice"
        );
    }

    #[test]
    fn pending_rows_carry_wave_message_uid_and_since() {
        // Since when the resource waits is its own, not its Stack's
        // operation's.
        let operation = json!({"phase": "Progressing", "startedAt": "2026-12-01T09:00:00Z"});
        let mut old = waiting("old", true);
        old["waitingSince"] = json!("2026-12-01T10:00:00Z");
        let app = stack(
            "forge",
            "app",
            json!([old, {"version": "v1", "kind": "ConfigMap", "name": "kept", "status": "Synced"}]),
            Some(operation),
        );
        let snap = snapshot(
            Some("forge"),
            &watched(vec![app]),
            &watched(vec![]),
            &watched(vec![]),
        );
        assert_eq!(snap.scope, "namespace forge");
        assert!(snap.stacks.synced);
        let view = &snap.stacks.items[0];
        assert_eq!(view.rows.len(), 1);
        let row = &view.rows[0];
        assert_eq!(row.approval.resource.name, "old");
        assert_eq!(row.approval.operation.to_string(), "Prune");
        assert_eq!(row.approval.wave, Some(1));
        assert_eq!(row.approval.since.as_deref(), Some("2026-12-01T10:00:00Z"));
        assert_eq!(row.uid.as_deref(), Some("uid-old"));
        assert!(row.extra.is_empty(), "waitingSince is a column");
        assert_eq!(view.all, view.rows);
        // The JSON the page reads.
        let value = serde_json::to_value(row).unwrap();
        assert_eq!(value["stack"], json!({"namespace": "forge", "name": "app"}));
        assert_eq!(value["resource"]["kind"], "ConfigMap");
        assert_eq!(value["operation"], "Prune");
        assert_eq!(value["uid"], "uid-old");
        assert_eq!(value["since"], "2026-12-01T10:00:00Z");
    }

    /// A row written by an older controller records no time: none is
    /// made up from the Stack's operation.
    #[test]
    fn a_row_without_its_time_gives_no_since() {
        let operation = json!({"phase": "Progressing", "startedAt": "2026-12-01T10:00:00Z"});
        let app = stack(
            "forge",
            "app",
            json!([waiting("old", false)]),
            Some(operation),
        );
        let snap = snapshot(
            None,
            &watched(vec![app]),
            &watched(vec![]),
            &watched(vec![]),
        );
        assert_eq!(snap.scope, "all namespaces");
        assert_eq!(snap.stacks.items[0].rows[0].approval.since, None);
        assert_eq!(
            snap.stacks.items[0].rows[0].approval.operation.to_string(),
            "Delete"
        );
    }

    /// A newer controller's fields (who approved, how many of how many)
    /// are shown as they are, and the Stack's `spec.approvals` too.
    #[test]
    fn unknown_status_fields_and_approval_settings_are_shown_as_they_are() {
        let mut item = waiting("old", true);
        // The controller's fields (docs/stacks.md, "Who approved, and when").
        item["approvedBy"] = json!([{"user": "alice", "time": "2026-12-01T15:00:00Z"}]);
        item["approvalsRequired"] = json!(2);
        let mut app = stack("forge", "app", json!([item]), None);
        app["spec"]["approvals"] = json!({"required": 2});
        let snap = snapshot(
            None,
            &watched(vec![app]),
            &watched(vec![]),
            &watched(vec![]),
        );
        let view = &snap.stacks.items[0];
        assert_eq!(
            view.rows[0].extra,
            [
                Field {
                    label: "approvals required".into(),
                    value: "2".into()
                },
                Field {
                    label: "approved by".into(),
                    value: "time: 2026-12-01T15:00:00Z, user: alice".into()
                }
            ]
        );
        assert_eq!(
            view.settings,
            [Field {
                label: "required".into(),
                value: "2".into()
            }]
        );
    }

    #[test]
    fn approve_all_of_a_parent_covers_its_nested_stacks() {
        let nested = json!({"group": "core.navique.com", "version": "v1alpha1", "kind": "Stack",
            "namespace": "forge", "name": "inner", "status": "Synced"});
        let outer = stack("forge", "outer", json!([waiting("a", true), nested]), None);
        let inner = stack("forge", "inner", json!([waiting("b", true)]), None);
        let other = stack("shop", "web", json!([waiting("c", true)]), None);
        let snap = snapshot(
            None,
            &watched(vec![inner, outer, other]),
            &watched(vec![]),
            &watched(vec![]),
        );
        let names = |rows: &[Row]| -> Vec<String> {
            rows.iter()
                .map(|r| r.approval.resource.name.clone())
                .collect()
        };
        let stacks: Vec<_> = snap
            .stacks
            .items
            .iter()
            .map(|v| v.stack.name.as_str())
            .collect();
        assert_eq!(stacks, ["outer", "inner", "web"]);
        assert_eq!(names(&snap.stacks.items[0].rows), ["a"]);
        assert_eq!(names(&snap.stacks.items[0].all), ["a", "b"]);
        assert_eq!(snap.stacks.items[1].parents, ["outer"]);
        assert_eq!(names(&snap.stacks.items[1].all), ["b"]);
        assert_eq!(names(&snap.stacks.items[2].all), ["c"]);
    }

    #[test]
    fn a_stack_this_version_cannot_read_is_named_with_why() {
        let mut bad = stack("forge", "bad", json!([waiting("a", true)]), None);
        bad["status"]["resources"][0]["status"] = json!("Sideways");
        let good = stack("forge", "good", json!([waiting("b", true)]), None);
        let snap = snapshot(
            None,
            &watched(vec![bad, good]),
            &watched(vec![]),
            &watched(vec![]),
        );
        assert_eq!(snap.stacks.items.len(), 1);
        assert_eq!(snap.unreadable[0].label, "forge/bad");
        assert!(
            snap.unreadable[0]
                .value
                .starts_with("cannot read its status: "),
            "{:?}",
            snap.unreadable
        );
    }

    #[test]
    fn a_watch_error_is_kept_with_the_panel() {
        let refused = Watched {
            synced: false,
            error: Some(
                "Error from server (Forbidden): stacks.core.navique.com is forbidden".into(),
            ),
            objects: vec![],
        };
        let snap = snapshot(Some("x"), &refused, &watched(vec![]), &watched(vec![]));
        assert!(!snap.stacks.synced);
        assert_eq!(snap.stacks.error, refused.error);
        assert_eq!(snap.locks.error, None);
    }

    #[test]
    fn services_in_deleting_show_reason_message_and_the_annotation_to_add() {
        let service = |name: &str, phase: &str, reason: &str, message: &str| {
            json!({"apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ManagedService",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"deletionPolicy": "Delete"},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False",
                    "reason": reason, "message": message, "lastTransitionTime": "2026-12-01T10:00:00Z"}]}})
        };
        let message = navique_api::messages::deletion_confirmation_needed("orders-db");
        let snap = snapshot(
            None,
            &watched(vec![]),
            &watched(vec![]),
            &watched(vec![
                service(
                    "orders-db",
                    "Deleting",
                    "DeletionConfirmationNeeded",
                    &message,
                ),
                service("live", "Ready", "Available", ""),
                service(
                    "archive",
                    "Deleting",
                    "DeletionBlocked",
                    "waiting for the final backup",
                ),
            ]),
        );
        let items = &snap.services.items;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].name, "archive");
        assert_eq!(items[0].hint, None);
        assert_eq!(
            items[1],
            ServiceView {
                namespace: "shop".into(),
                name: "orders-db".into(),
                deletion_policy: Some("Delete".into()),
                reason: Some("DeletionConfirmationNeeded".into()),
                message: Some(message),
                hint: Some(
                    "kubectl annotate managedservice orders-db -n shop services.kube-dc.com/confirm-delete=orders-db"
                        .into()
                ),
            }
        );
    }

    #[test]
    fn locks_are_summarized_as_the_locks_command_does() {
        let lock = json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
            "metadata": {"name": "protect", "namespace": "forge"},
            "spec": {"targetRef": {"kind": "Stack", "name": "forge"}, "reason": "Production"},
            "status": {"active": true}});
        let snap = snapshot(
            None,
            &watched(vec![]),
            &watched(vec![lock]),
            &watched(vec![]),
        );
        assert_eq!(snap.locks.items.len(), 1);
        assert_eq!(snap.locks.items[0].name, "protect");
        assert!(snap.locks.items[0].active);
        assert_eq!(snap.locks.items[0].reason.as_deref(), Some("Production"));
    }
}
