//! Admission, in kube-apiserver's order: ValidatingAdmissionPolicies, then
//! validating webhooks. Runs on every write from a client or a controller
//! of this server, except on the admission configuration itself.

use std::sync::Arc;

use serde_json::Value;

use crate::attributes::Attributes;
use crate::policy::{self, PolicyContext};
use crate::server::State;
use crate::status::ApiError;
use crate::webhook::{self, WebhookContext};

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// Admits a write; returns the warnings to send, or the denial.
pub async fn admit(state: &Arc<State>, attributes: &Attributes) -> Result<Vec<String>, ApiError> {
    if attributes.resource.group == ADMISSION_GROUP {
        return Ok(Vec::new());
    }
    let (policies, bindings, configurations, namespace_object) = {
        let txn = state.store.lock();
        let all = |plural: &str| -> Vec<Value> {
            txn.list(&(ADMISSION_GROUP.to_owned(), plural.to_owned()), None, None)
                .map(|(_, o)| o.clone())
                .collect()
        };
        let namespace = (!attributes.namespace.is_empty())
            .then(|| {
                txn.get(
                    &(String::new(), "namespaces".to_owned()),
                    &(String::new(), attributes.namespace.clone()),
                )
                .cloned()
            })
            .flatten();
        (
            all("validatingadmissionpolicies"),
            all("validatingadmissionpolicybindings"),
            all("validatingwebhookconfigurations"),
            namespace,
        )
    };

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
            namespace_object: namespace_object.as_ref(),
            params: &params,
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
        namespace_object: namespace_object.as_ref(),
        resolve_service: &resolve,
    };
    match webhook::validate(&context, attributes).await {
        Ok(more) => warnings.extend(more),
        Err(rejection) => {
            return Err(ApiError {
                code: rejection.code,
                body: rejection.status,
            });
        }
    }
    Ok(warnings)
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
        .map(|(_, o)| crate::rest::served(&rt, o.clone()))
        .collect()
}
