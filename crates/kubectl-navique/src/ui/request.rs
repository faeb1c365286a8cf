//! The page's approvals: the exact list the user confirmed, checked against
//! what the Stacks wait for now. Only a resource still pending in the
//! Stack (or one nested under it) is approved, and only the object the
//! user saw (the uid the Stack recorded then): a resource that started to
//! wait after the confirmation is never swept in, and one replaced by
//! another object of its name is refused.

use kube::ResourceExt;
use navique_api::core::Stack;
use serde::Deserialize;

use crate::Error;
use crate::approvals::{ApproveOutcome, PendingApproval, of_stack, pending_approvals};

/// The most resources one request approves.
pub const MAX_ITEMS: usize = 500;

/// `POST <page>/api/approve`.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveRequest {
    pub stack: StackKey,
    pub items: Vec<ItemKey>,
}

/// The Stack the items are pending in.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StackKey {
    pub namespace: String,
    pub name: String,
}

/// One resource, as the page showed it.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ItemKey {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
    /// The uid the Stack recorded when the page showed it.
    #[serde(default)]
    pub uid: Option<String>,
}

impl ItemKey {
    fn target(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}.{}/{}", self.kind, self.group, self.name)
        }
    }
}

impl ApproveRequest {
    /// Reads the body; an empty list or more than [`MAX_ITEMS`] is refused.
    pub fn parse(body: &[u8]) -> Result<Self, Error> {
        let request: Self =
            serde_json::from_slice(body).map_err(|e| Error::UiRequest(e.to_string()))?;
        if request.items.is_empty() {
            return Err(Error::UiRequest("items: nothing to approve".into()));
        }
        if request.items.len() > MAX_ITEMS {
            return Err(Error::UiRequest(format!(
                "items: at most {MAX_ITEMS} resources at once"
            )));
        }
        Ok(request)
    }
}

/// The uid Stack `pending.stack` recorded for the resource.
fn recorded_uid<'a>(stacks: &'a [Stack], pending: &PendingApproval) -> Option<&'a str> {
    stacks
        .iter()
        .find(|s| {
            s.namespace().as_deref() == Some(pending.stack.namespace.as_str())
                && s.name_any() == pending.stack.name
        })?
        .status
        .as_ref()?
        .resources
        .iter()
        .find(|r| {
            r.requires_deletion_approval
                && r.group == pending.resource.group
                && r.kind == pending.resource.kind
                && r.name == pending.resource.name
                && r.namespace == pending.resource.namespace
        })?
        .uid
        .as_deref()
}

/// What becomes of one confirmed item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Still pending, the same object: approve it.
    Approve(PendingApproval),
    /// Not approved, and why.
    Refused(ApproveOutcome),
}

/// For each item the user confirmed, once and in order: the pending
/// approval to carry out, or why not. `stacks` are the Stacks of the
/// request's namespace, read just now with the user's credentials.
pub fn select(stacks: &[Stack], request: &ApproveRequest) -> Vec<Selection> {
    let namespace = &request.stack.namespace;
    let in_namespace: Vec<Stack> = stacks
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace.as_str()))
        .cloned()
        .collect();
    let candidates = of_stack(&pending_approvals(&in_namespace), &request.stack.name);
    let mut seen: Vec<&ItemKey> = Vec::new();
    let mut out = Vec::new();
    for item in &request.items {
        if seen.contains(&item) {
            continue;
        }
        seen.push(item);
        let item_namespace = item.namespace.as_deref().unwrap_or(namespace);
        let found = candidates.iter().find(|p| {
            p.resource.group == item.group
                && p.resource.kind == item.kind
                && p.resource.name == item.name
                && p.resource
                    .namespace
                    .as_deref()
                    .unwrap_or(&p.stack.namespace)
                    == item_namespace
        });
        let refused = |error: Error| {
            Selection::Refused(ApproveOutcome::failed(
                item.target(),
                Some(item_namespace),
                found,
                format!("error: {error}"),
            ))
        };
        out.push(match found {
            None => refused(Error::NotPending(item.target())),
            Some(p) => match (&item.uid, recorded_uid(&in_namespace, p)) {
                (Some(seen), now) if now != Some(seen.as_str()) => {
                    refused(Error::Replaced(item.target()))
                }
                _ => Selection::Approve(p.clone()),
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::tests::stack;
    use serde_json::json;

    fn waiting(name: &str, uid: &str) -> serde_json::Value {
        json!({"version": "v1", "kind": "ConfigMap", "name": name, "status": "OutOfSync",
            "requiresPruning": true, "requiresDeletionApproval": true, "uid": uid})
    }

    fn request(stack: &str, items: serde_json::Value) -> ApproveRequest {
        ApproveRequest::parse(
            json!({"stack": {"namespace": "forge", "name": stack}, "items": items})
                .to_string()
                .as_bytes(),
        )
        .unwrap()
    }

    fn stacks() -> Vec<Stack> {
        vec![
            stack(
                "forge",
                "app",
                json!([
                    waiting("a", "u-a"),
                    waiting("b", "u-b"),
                    waiting("late", "u-late")
                ]),
            ),
            stack("forge", "other", json!([waiting("c", "u-c")])),
            stack("shop", "app", json!([waiting("x", "u-x")])),
        ]
    }

    fn summary(results: &[Selection]) -> Vec<String> {
        results
            .iter()
            .map(|r| match r {
                Selection::Approve(p) => format!("approve {}/{}", p.stack.name, p.resource.name),
                Selection::Refused(o) => o.error.clone().unwrap(),
            })
            .collect()
    }

    /// Approve all: exactly the confirmed list, never what started to wait
    /// after the user looked ("stale authorisation").
    #[test]
    fn only_the_confirmed_items_are_approved_not_what_waits_since() {
        let request = request(
            "app",
            json!([{"kind": "ConfigMap", "name": "a", "uid": "u-a"},
                   {"kind": "ConfigMap", "name": "b", "uid": "u-b"}]),
        );
        assert_eq!(
            summary(&select(&stacks(), &request)),
            ["approve app/a", "approve app/b"]
        );
    }

    #[test]
    fn an_item_no_longer_pending_or_of_another_stack_is_refused() {
        let request = request(
            "app",
            json!([{"kind": "ConfigMap", "name": "gone"},
                   {"kind": "ConfigMap", "name": "c"},
                   {"kind": "ConfigMap", "name": "x", "namespace": "shop"},
                   {"group": "apps", "kind": "ConfigMap", "name": "a"}]),
        );
        assert_eq!(
            summary(&select(&stacks(), &request)),
            [
                "error: ConfigMap/gone is not waiting for a deletion approval",
                "error: ConfigMap/c is not waiting for a deletion approval",
                "error: ConfigMap/x is not waiting for a deletion approval",
                "error: ConfigMap.apps/a is not waiting for a deletion approval",
            ]
        );
    }

    /// "Identity by name": the object the user confirmed was deleted and
    /// another of its name now waits.
    #[test]
    fn a_replaced_object_is_refused() {
        let request = request(
            "app",
            json!([{"kind": "ConfigMap", "name": "a", "uid": "u-old"}]),
        );
        let results = select(&stacks(), &request);
        assert_eq!(
            summary(&results),
            [
                "error: ConfigMap/a was replaced by another object since you confirmed; confirm again"
            ]
        );
        let Selection::Refused(outcome) = &results[0] else {
            panic!("approved")
        };
        assert_eq!(outcome.namespace.as_deref(), Some("forge"));
        assert!(!outcome.approved);
    }

    #[test]
    fn each_item_is_approved_once() {
        let a = json!({"kind": "ConfigMap", "name": "a"});
        let request = request("app", json!([a, a]));
        assert_eq!(summary(&select(&stacks(), &request)), ["approve app/a"]);
    }

    #[test]
    fn a_nested_stacks_item_is_approved_through_its_parent() {
        let nested = json!({"group": "core.navique.com", "version": "v1alpha1", "kind": "Stack",
            "name": "inner", "status": "Synced"});
        let stacks = vec![
            stack("forge", "outer", json!([nested])),
            stack("forge", "inner", json!([waiting("deep", "u-d")])),
        ];
        let request = request("outer", json!([{"kind": "ConfigMap", "name": "deep"}]));
        assert_eq!(summary(&select(&stacks, &request)), ["approve inner/deep"]);
    }

    #[test]
    fn malformed_empty_or_huge_requests_are_refused_naming_the_field() {
        for (body, expected) in [
            (
                json!({"stack": {"namespace": "forge", "name": "app"}, "items": []}).to_string(),
                "items: nothing to approve",
            ),
            (
                json!({"stack": {"namespace": "forge"}, "items": []}).to_string(),
                "missing field `name`",
            ),
            (
                json!({"stack": {"namespace": "forge", "name": "app"}, "items": [], "all": true})
                    .to_string(),
                "unknown field `all`",
            ),
            ("not json".to_owned(), "expected ident"),
        ] {
            let err = ApproveRequest::parse(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("invalid approval request: "), "{err}");
            assert!(err.contains(expected), "{err}");
        }
        let many: Vec<_> = (0..=MAX_ITEMS)
            .map(|i| json!({"kind": "ConfigMap", "name": format!("c{i}")}))
            .collect();
        let body =
            json!({"stack": {"namespace": "forge", "name": "app"}, "items": many}).to_string();
        assert_eq!(
            ApproveRequest::parse(body.as_bytes())
                .unwrap_err()
                .to_string(),
            "invalid approval request: items: at most 500 resources at once"
        );
    }
}
