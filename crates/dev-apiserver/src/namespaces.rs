//! Namespaces: the defaults every cluster has, refusing writes into missing
//! or terminating namespaces, and handing a deleted one to its controller
//! (`termination.rs`).

use serde_json::{Value, json};

use crate::gofmt::now;
use crate::resources::ResourceType;
use crate::state::State;
use crate::status::ApiError;
use crate::store::Txn;

const DEFAULTS: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Where namespaces are stored.
pub fn storage() -> (String, String) {
    (String::new(), "namespaces".to_owned())
}

pub fn is_namespaces(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

pub fn create_defaults(state: &State) {
    let mut txn = state.store.lock();
    for name in DEFAULTS {
        default_service_account(&mut txn, name);
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

/// After a namespace is created: the serviceaccount controller's `default`
/// ServiceAccount in it, stored with the namespace (kube-controller-manager
/// adds it a moment later).
pub fn after_create(txn: &mut Txn<'_>, rt: &ResourceType, object: &Value) {
    if let (true, Some(name)) = (is_namespaces(rt), object["metadata"]["name"].as_str()) {
        default_service_account(txn, name);
    }
}

fn default_service_account(txn: &mut Txn<'_>, namespace: &str) {
    let rv = txn.next_rv();
    let account = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "default",
            "namespace": namespace,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": now(),
            "resourceVersion": rv.to_string(),
        },
    });
    txn.put(
        (String::new(), "serviceaccounts".to_owned()),
        (namespace.to_owned(), "default".to_owned()),
        account,
    );
}

/// Refuses creating `name` in a namespace that is missing or being deleted.
pub fn check_writable(
    txn: &Txn<'_>,
    rt: &ResourceType,
    name: &str,
    namespace: &str,
) -> Result<(), ApiError> {
    let object = txn
        .get(&storage(), &(String::new(), namespace.to_owned()))
        .ok_or_else(|| ApiError::namespace_not_found(namespace))?;
    if object["metadata"]["deletionTimestamp"].is_string() {
        return Err(ApiError::namespace_terminating(rt, name, namespace));
    }
    Ok(())
}

/// What kube-apiserver adds to a new namespace.
pub fn prepare_create(rt: &ResourceType, object: &mut Value) {
    if !is_namespaces(rt) {
        return;
    }
    let name = object["metadata"]["name"].clone();
    object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
    if object["spec"]["finalizers"].is_null() {
        object["spec"]["finalizers"] = json!(["kubernetes"]);
    }
    object["status"] = json!({"phase": "Active"});
}

/// After a write: a namespace being deleted is queued for its controller,
/// once.
pub fn after_write(state: &State, rt: &ResourceType, object: &Value) {
    if !is_namespaces(rt) || !object["metadata"]["deletionTimestamp"].is_string() {
        return;
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut terminating = state.terminating.lock().unwrap_or_else(|p| p.into_inner());
    if terminating.insert(name.clone()) {
        // The controller runs as long as the server: the queue stays open.
        let _ = state.terminations.send(name);
    }
}
