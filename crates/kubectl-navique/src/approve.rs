//! Approving one pending prune or delete as the kubeconfig's user: the one
//! function every front end (`approve`, `approve --all`, the page) goes
//! through.
//!
//! An approval is one merge patch, sent with the user's own credentials,
//! that sets `cd.hanzo.ai/deletion-approved: "true"` and appends the user's
//! name to `core.navique.com/approved-by`. The name is what the API server
//! says the user is (a SelfSubjectReview, [`whoami`]); the
//! approval-identity ValidatingAdmissionPolicy refuses any other value, so
//! the name can be trusted by whoever reads it. The patch carries the
//! resourceVersion read, so two approvers at once never overwrite each
//! other: a conflict reads the object again and appends again.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use navique_api::constants::annotations::{APPROVED_BY, DELETION_APPROVED};

use crate::approvals::{ApproveOutcome, PendingApproval};
use crate::render;
use crate::resources::ResourceType;

/// The field manager the approval is written under.
pub const FIELD_MANAGER: &str = "kubectl-navique";

/// How often a patch that lost a race with another approver is tried again.
const CONFLICT_ATTEMPTS: usize = 3;

/// The user name the API server authenticates the client as (a
/// SelfSubjectReview, `authentication.k8s.io/v1`: `kubectl auth whoami`).
pub async fn whoami(client: &Client) -> Result<String, kube::Error> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default())
}

/// What `user` writes into `core.navique.com/approved-by`, given its
/// current value: `None` when `user` is already named there (each approver
/// counts once; nothing to write).
pub fn approved_by_after(current: Option<&str>, user: &str) -> Option<String> {
    let current = current.unwrap_or_default();
    if current.split(',').any(|name| name == user) {
        return None;
    }
    Some(if current.is_empty() {
        user.to_owned()
    } else {
        format!("{current},{user}")
    })
}

/// Why `user` cannot approve at all, before anything is sent.
pub fn refusal(user: &str) -> Option<String> {
    if user.is_empty() {
        return Some(
            "error: the API server did not say who you are (SelfSubjectReview): cannot record the approver"
                .to_owned(),
        );
    }
    user.contains(',').then(|| {
        format!("error: the user name {user:?} contains a comma, which separates the names in {APPROVED_BY}: it cannot approve")
    })
}

/// Approves `pending` (a resource of `resource_type`) as `user`, the name
/// [`whoami`] returned for `client`'s credentials.
pub async fn approve(
    client: &Client,
    user: &str,
    pending: &PendingApproval,
    resource_type: &ResourceType,
) -> ApproveOutcome {
    let target = format!("{}/{}", resource_type.display_name(), pending.resource.name);
    let namespace = pending.resource_namespace(resource_type);
    if let Some(error) = refusal(user) {
        return ApproveOutcome::failed(target, namespace, Some(pending), error);
    }
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource_type.api_resource()),
        None => Api::all_with(client.clone(), &resource_type.api_resource()),
    };
    let failed = |e: &kube::Error| {
        ApproveOutcome::failed(
            target.clone(),
            namespace,
            Some(pending),
            render::kube_error(e),
        )
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let object = match api.get(&pending.resource.name).await {
            Ok(object) => object,
            Err(e) => return failed(&e),
        };
        let current = object.annotations().get(APPROVED_BY).map(String::as_str);
        let already = object
            .annotations()
            .get(DELETION_APPROVED)
            .map(String::as_str);
        let Some(approved_by) = approved_by_after(current, user) else {
            if already == Some("true") {
                return ApproveOutcome::approved(target, namespace, pending, user, current);
            }
            // Named, but the approval itself is missing: set it.
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": object.resource_version(),
                "annotations": {DELETION_APPROVED: "true"},
            }});
            match merge(&api, &pending.resource.name, &patch).await {
                Ok(()) => {
                    return ApproveOutcome::approved(target, namespace, pending, user, current);
                }
                Err(e) if conflict(&e) && attempt < CONFLICT_ATTEMPTS => continue,
                Err(e) => return failed(&e),
            }
        };
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": object.resource_version(),
            "annotations": {DELETION_APPROVED: "true", APPROVED_BY: approved_by},
        }});
        match merge(&api, &pending.resource.name, &patch).await {
            Ok(()) => {
                return ApproveOutcome::approved(
                    target,
                    namespace,
                    pending,
                    user,
                    Some(&approved_by),
                );
            }
            // Another approver came first: read again, append again.
            Err(e) if conflict(&e) && attempt < CONFLICT_ATTEMPTS => {}
            Err(e) => return failed(&e),
        }
    }
}

async fn merge(
    api: &Api<DynamicObject>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(patch))
        .await
        .map(|_| ())
}

fn conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approver_appends_their_own_name_once() {
        assert_eq!(approved_by_after(None, "alice").as_deref(), Some("alice"));
        assert_eq!(
            approved_by_after(Some(""), "alice").as_deref(),
            Some("alice")
        );
        assert_eq!(
            approved_by_after(Some("alice"), "bob").as_deref(),
            Some("alice,bob")
        );
        assert_eq!(approved_by_after(Some("alice,bob"), "bob"), None);
        assert_eq!(
            approved_by_after(Some("alice-admin"), "alice").as_deref(),
            Some("alice-admin,alice"),
            "names are compared whole"
        );
    }

    #[test]
    fn a_user_name_that_could_pose_as_two_cannot_approve() {
        assert_eq!(
            refusal("alice,bob").unwrap(),
            "error: the user name \"alice,bob\" contains a comma, which separates the names in core.navique.com/approved-by: it cannot approve"
        );
        assert!(refusal("").unwrap().contains("SelfSubjectReview"));
        assert_eq!(refusal("system:serviceaccount:ci:deployer"), None);
    }
}
