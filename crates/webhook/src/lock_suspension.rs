//! Break-glass in webhook mode (`lockGuard.mode: webhook`): the rule the
//! chart's ValidatingAdmissionPolicy `<release>-lock-suspension` enforces
//! in policy mode, with the same messages (`navique_api::core::suspension::
//! admit`). A write of a Lock that changes its suspension annotations needs
//! the `suspend` verb on that Lock, which the webhook asks the API server
//! with a SubjectAccessReview for the requesting user (the policy's
//! `authorizer` check); any failure to get the answer refuses the write.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::Operation;
use kube::{Client, ResourceExt};
use navique_api::constants::{CORE_GROUP, SUSPEND_VERB};
use navique_api::core::suspension::{self, Written};

use crate::review::{AsyncValidator, Decision, Request};

/// The path the rule is served on.
pub const PATH: &str = "/validate/lock-suspension";

/// How long the authorization check may take; the API server gives the
/// webhook 10 s by default.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// The rule, with the client it asks once the webhook has connected.
#[derive(Default)]
pub struct SuspensionGuard {
    pub client: Arc<OnceLock<Client>>,
}

impl AsyncValidator for SuspensionGuard {
    fn validate<'a>(
        &'a self,
        request: &'a Request,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(self.decide(request))
    }
}

/// What a request asks of the suspension, when it changes it.
#[derive(Debug, PartialEq, Eq)]
pub struct Change {
    pub namespace: String,
    pub lock: String,
    pub new: Written,
}

/// The suspension change of a Lock write, or `None` when it leaves the
/// suspension annotations alone (or is no Lock write).
pub fn change(request: &Request) -> Option<Change> {
    let is_lock = request.kind.group == CORE_GROUP && request.kind.kind == "Lock";
    if !is_lock || !matches!(request.operation, Operation::Create | Operation::Update) {
        return None;
    }
    let object = request.object.as_ref()?;
    let written =
        |o: Option<&DynamicObject>| Written::of(o.and_then(|o| o.metadata.annotations.as_ref()));
    let (old, new) = (written(request.old_object.as_ref()), written(Some(object)));
    suspension::changes(&old, &new).then(|| Change {
        namespace: request.namespace.clone().unwrap_or_default(),
        lock: object.name_any(),
        new,
    })
}

/// The SubjectAccessReview asking whether the request's user may `suspend`
/// the Lock, as the policy's `authorizer` check does.
pub fn access_review(request: &Request, change: &Change) -> SubjectAccessReview {
    let user = &request.user_info;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone().map(|extra| extra.into_iter().collect()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(CORE_GROUP.to_owned()),
                resource: Some("locks".to_owned()),
                namespace: Some(change.namespace.clone()),
                name: Some(change.lock.clone()),
                verb: Some(SUSPEND_VERB.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

impl SuspensionGuard {
    async fn decide(&self, request: &Request) -> Decision {
        let Some(change) = change(request) else {
            return Decision::Allow;
        };
        let may_suspend = match self.may_suspend(request, &change).await {
            Ok(allowed) => allowed,
            Err(problem) => {
                return Decision::Error(format!(
                    "cannot check the suspend verb on Lock {}/{}: {problem}",
                    change.namespace, change.lock
                ));
            }
        };
        let user = request.user_info.username.as_deref().unwrap_or_default();
        let asking = suspension::Request {
            user,
            namespace: &change.namespace,
            lock: &change.lock,
        };
        match suspension::admit(asking, &change.new, may_suspend) {
            Ok(()) => Decision::Allow,
            Err(message) => Decision::Deny(message),
        }
    }

    async fn may_suspend(&self, request: &Request, change: &Change) -> Result<bool, String> {
        let client = self
            .client
            .get()
            .ok_or("the webhook has not connected to the API server yet")?;
        let api = Api::<SubjectAccessReview>::all(client.clone());
        let review = access_review(request, change);
        let answered =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| format!("no answer within {} s", REVIEW_TIMEOUT.as_secs()))?
                .map_err(|e| navique_runtime::one_line(&e))?;
        Ok(answered.status.is_some_and(|s| s.allowed))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(old: Option<serde_json::Value>, new: serde_json::Value) -> Request {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "kind": {"group": "core.navique.com", "version": "v1alpha1", "kind": "Lock"},
                "resource": {"group": "core.navique.com", "version": "v1alpha1", "resource": "locks"},
                "name": "keep",
                "namespace": "shop",
                "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "userInfo": {"username": "oncall", "groups": ["sre", "system:authenticated"]},
                "object": new,
                "oldObject": old,
            }
        });
        crate::review::parse(review.to_string().as_bytes()).unwrap()
    }

    fn lock(annotations: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Lock",
            "metadata": {"name": "keep", "namespace": "shop", "annotations": annotations},
            "spec": {"targetRef": {"kind": "Stack", "name": "forge"}},
        })
    }

    #[test]
    fn only_writes_changing_the_suspension_are_judged() {
        let plain = lock(json!({"note": "x"}));
        assert_eq!(change(&request(Some(plain.clone()), plain.clone())), None);
        let suspended = lock(json!({"core.navique.com/suspend-reason": "drill"}));
        let asked = change(&request(Some(plain), suspended)).unwrap();
        assert_eq!(
            (asked.namespace.as_str(), asked.lock.as_str()),
            ("shop", "keep")
        );
        assert_eq!(asked.new.reason.as_deref(), Some("drill"));
    }

    #[test]
    fn the_access_review_asks_for_the_suspend_verb_as_the_requester() {
        let request = request(
            None,
            lock(json!({"core.navique.com/suspended-by": "oncall"})),
        );
        let review = access_review(&request, &change(&request).unwrap());
        assert_eq!(
            serde_json::to_value(&review.spec).unwrap(),
            json!({
                "user": "oncall",
                "groups": ["sre", "system:authenticated"],
                "resourceAttributes": {
                    "group": "core.navique.com",
                    "resource": "locks",
                    "namespace": "shop",
                    "name": "keep",
                    "verb": "suspend",
                },
            })
        );
    }

    #[tokio::test]
    async fn without_an_answer_from_the_api_server_the_change_is_refused() {
        let request = request(
            None,
            lock(json!({"core.navique.com/suspended-by": "oncall"})),
        );
        let decision = SuspensionGuard::default().decide(&request).await;
        assert_eq!(
            decision,
            Decision::Error(
                "cannot check the suspend verb on Lock shop/keep: the webhook has not connected to the API server yet".into()
            )
        );
    }
}
