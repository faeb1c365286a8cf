//! Namespaces: the defaults every cluster has, refusing writes into missing
//! or terminating namespaces, and termination: a deleted namespace turns
//! `Terminating`, its objects are deleted (honouring their finalizers), and
//! it goes when it is empty.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::rest::now;
use crate::server::{Req, State};
use crate::status::ApiError;
use crate::store::Txn;

const DEFAULTS: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

fn storage() -> (String, String) {
    (String::new(), "namespaces".to_owned())
}

pub fn create_defaults(state: &State) {
    let mut txn = state.store.lock();
    for name in DEFAULTS {
        let rv = txn.next_rv();
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": now(),
                "resourceVersion": rv.to_string(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        txn.put(storage(), (String::new(), name.to_owned()), namespace);
    }
}

/// Refuses writes into a namespace that is missing or being deleted.
pub fn check_writable(txn: &Txn<'_>, namespace: &str) -> Result<(), ApiError> {
    let object = txn
        .get(&storage(), &(String::new(), namespace.to_owned()))
        .ok_or_else(|| ApiError::namespace_not_found(namespace))?;
    if object["metadata"]["deletionTimestamp"].is_string() {
        return Err(ApiError::forbidden(format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        )));
    }
    Ok(())
}

/// What kube-apiserver adds to a new namespace.
pub fn prepare_create(rt: &ResourceType, object: &mut Value) {
    if !(rt.group.is_empty() && rt.plural == "namespaces") {
        return;
    }
    let name = object["metadata"]["name"].clone();
    object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
    if object["spec"]["finalizers"].is_null() {
        object["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    object["status"] = json!({"phase": "Active"});
}

/// Marks a namespace Terminating and starts emptying it.
pub fn delete(
    state: &Arc<State>,
    txn: &mut Txn<'_>,
    req: &Req,
    old: Value,
) -> Result<Value, ApiError> {
    if old["metadata"]["deletionTimestamp"].is_string() {
        return Ok(old);
    }
    let mut object = old;
    object["metadata"]["deletionTimestamp"] = json!(now());
    object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    object["status"]["phase"] = json!("Terminating");
    object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
    if req.dry_run() {
        return Ok(object);
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    txn.put(storage(), (String::new(), name.clone()), object.clone());
    let state = state.clone();
    tokio::spawn(async move { terminate(&state, &name).await });
    Ok(object)
}

/// Deletes everything in the namespace, waits for finalizers, then removes
/// the namespace.
async fn terminate(state: &State, namespace: &str) {
    loop {
        if empty_step(state, namespace) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One pass: deletes what can go, marks what has finalizers. True when the
/// namespace itself is gone.
fn empty_step(state: &State, namespace: &str) -> bool {
    let mut txn = state.store.lock();
    let mut remaining = false;
    for storage in txn.any_in_namespace(namespace) {
        let objects: Vec<_> = txn
            .list(&storage, Some(namespace), None)
            .map(|(key, object)| (key.clone(), object.clone()))
            .collect();
        for (key, mut object) in objects {
            remaining = true;
            let has_finalizers = object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if has_finalizers {
                if object["metadata"]["deletionTimestamp"].is_null() {
                    object["metadata"]["deletionTimestamp"] = json!(now());
                    object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
                    txn.put(storage.clone(), key, object);
                }
            } else {
                object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
                txn.remove(storage.clone(), key, object);
            }
        }
    }
    if remaining {
        return false;
    }
    let key = (String::new(), namespace.to_owned());
    if let Some(mut object) = txn.get(&storage(), &key).cloned() {
        object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
        txn.remove(storage(), key, object);
    }
    true
}
