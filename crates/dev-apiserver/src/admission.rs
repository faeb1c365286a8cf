//! Admission, in kube-apiserver's order: mutating webhooks ([`mutate`]),
//! then, once the registry has validated the object they leave,
//! ValidatingAdmissionPolicies and validating webhooks ([`validate`]). Runs
//! on every write from a client or a controller of this server, except on
//! the admission configuration itself.

use std::sync::Arc;

use serde_json::Value;

use crate::attributes::Attributes;
use crate::authorizer::{Authorize, Check};
use crate::policy::{self, PolicyContext};
use crate::rbac;
use crate::state::State;
use crate::status::ApiError;
use crate::store::{StorageKey, Txn};
use crate::webhook::{self, Mutation, Rejection, WebhookContext};

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// Runs the mutating webhooks on a write; returns the object they leave
/// when they changed it, and their warnings, or the denial.
pub async fn mutate(state: &Arc<State>, attributes: &Attributes) -> Result<Mutation, ApiError> {
    if attributes.resource.group == ADMISSION_GROUP {
        return Ok(Mutation::default());
    }
    let (configurations, namespace_object) = {
        let txn = state.store.lock();
        (
            all(&txn, "mutatingwebhookconfigurations"),
            namespace_object(&txn, attributes),
        )
    };
    let resolve =
        |namespace: &str, name: &str, port: u16| state.resolve_service(namespace, name, port);
    let context = WebhookContext {
        configurations: &configurations,
        namespace_object: namespace_object.as_deref(),
        resolve_service: &resolve,
        connections: &state.webhook_connections,
    };
    webhook::mutate(&context, attributes).await.map_err(refusal)
}

/// Admits a write, as mutated and validated; returns the warnings to send,
/// or the denial.
pub async fn validate(
    state: &Arc<State>,
    attributes: &Attributes,
) -> Result<Vec<String>, ApiError> {
    if attributes.resource.group == ADMISSION_GROUP {
        return Ok(Vec::new());
    }
    let (policies, policies_at, bindings, configurations, namespace_object) = {
        let txn = state.store.lock();
        let policies = storage("validatingadmissionpolicies");
        (
            txn.all(&policies),
            txn.changed_at(&policies),
            all(&txn, "validatingadmissionpolicybindings"),
            all(&txn, "validatingwebhookconfigurations"),
            namespace_object(&txn, attributes),
        )
    };
    let reads = state.policy_reads(policies_at, &policies);

    let params = |api_version: &str,
                  kind: &str,
                  namespace: Option<&str>,
                  name: Option<&str>,
                  selector: Option<&Value>| {
        find_params(state, api_version, kind, namespace, name, selector)
    };
    let verdict = policy::evaluate(
        &PolicyContext {
            policies: &policies,
            bindings: &bindings,
            namespace_object: namespace_object.as_deref(),
            reads: &reads,
            params: &params,
            authorizer: Some(authorizer(state, attributes)),
        },
        attributes,
    );
    if let Some(denial) = verdict.denial {
        return Err(ApiError {
            code: denial.code,
            body: denial.status(attributes),
        });
    }
    let mut warnings = verdict.warnings;
    let resolve =
        |namespace: &str, name: &str, port: u16| state.resolve_service(namespace, name, port);
    let context = WebhookContext {
        configurations: &configurations,
        namespace_object: namespace_object.as_deref(),
        resolve_service: &resolve,
        connections: &state.webhook_connections,
    };
    warnings.extend(
        webhook::validate(&context, attributes)
            .await
            .map_err(refusal)?,
    );
    Ok(warnings)
}

/// The `authorizer` of the policies: the request's user, asked of this
/// server's authorizer as any request of theirs would be.
fn authorizer(state: &Arc<State>, attributes: &Attributes) -> Authorize {
    let state = state.clone();
    let user = attributes.user.clone();
    Arc::new(move |check: &Check| {
        let request = rbac::Request {
            user: &user,
            verb: &check.verb,
            resource_request: check.group.is_some(),
            api_group: check.group.as_deref().unwrap_or_default(),
            resource: &check.resource,
            subresource: &check.subresource,
            namespace: &check.namespace,
            name: &check.name,
            path: &check.path,
        };
        state.access(&request)
    })
}

/// Every stored object of an admissionregistration.k8s.io resource.
fn all(txn: &Txn<'_>, plural: &str) -> Arc<Vec<Value>> {
    txn.all(&storage(plural))
}

fn storage(plural: &str) -> StorageKey {
    (ADMISSION_GROUP.to_owned(), plural.to_owned())
}

/// The request namespace's Namespace object, as stored: what reads it
/// (namespace selectors, the CEL `namespaceObject`) reads labels or copies
/// the few fields it shows, so a copy of all of it on every write in a
/// namespace was waste.
fn namespace_object(txn: &Txn<'_>, attributes: &Attributes) -> Option<Arc<Value>> {
    if attributes.namespace.is_empty() {
        return None;
    }
    txn.get_shared(
        &(String::new(), "namespaces".to_owned()),
        &(String::new(), attributes.namespace.clone()),
    )
    .cloned()
}

fn refusal(rejection: Rejection) -> ApiError {
    ApiError {
        code: rejection.code,
        body: rejection.status,
    }
}

/// The objects a binding's paramRef names.
fn find_params(
    state: &State,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: Option<&str>,
    selector: Option<&Value>,
) -> Vec<Value> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let Some(rt) = state
        .types()
        .into_iter()
        .find(|t| t.group == group && t.version == version && t.kind == kind)
    else {
        return Vec::new();
    };
    let labels = selector
        .and_then(|s| crate::selectors::LabelSelector::from_json(s).ok())
        .unwrap_or_default();
    let txn = state.store.lock();
    txn.list(&rt.storage_key(), namespace, None)
        .filter(|((_, n), _)| name.is_none_or(|name| name == n))
        .filter(|(_, o)| labels.matches(&o["metadata"]["labels"]))
        .map(|(_, o)| crate::resources::served(&rt, o.clone()))
        .collect()
}
