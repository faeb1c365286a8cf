//! CustomResourceDefinitions: a CRD is checked, established and served as
//! soon as it is stored; deleting it removes its objects.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::gofmt::now;
use crate::resources::{self, ResourceType};
use crate::state::State;
use crate::store::Txn;

pub fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

/// Checks a CRD and writes the status kube-apiserver gives an established
/// one. Errs with the field error's text.
pub fn establish(crd: &mut Value) -> Result<(), String> {
    let types = resources::from_crd(crd)?;
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str())
        .ok_or(
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        )?
        .to_owned();
    let names = types
        .first()
        .map(|t| {
            let mut names = json!({"plural": t.plural, "singular": t.singular, "kind": t.kind, "listKind": format!("{}List", t.kind)});
            if !t.short_names.is_empty() {
                names["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                names["categories"] = json!(t.categories);
            }
            names
        })
        .unwrap_or_else(|| crd["spec"]["names"].clone());
    let now = now();
    let previous = crd["status"]["conditions"].clone();
    let since = |type_: &str| {
        previous
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map_or_else(|| now.clone(), str::to_owned)
    };
    crd["status"] = json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since("Established")},
        ],
        "acceptedNames": names,
        "storedVersions": [storage],
    });
    Ok(())
}

/// After a CRD is stored: serve its types.
pub fn after_write(state: &State, _txn: &mut Txn<'_>, rt: &ResourceType, object: &Value) {
    if !is_crd(rt) {
        return;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match resources::from_crd(object) {
        Ok(types) => state.set_crd_types(name, types),
        Err(e) => tracing::warn!(crd = name, error = %e, "stored CRD cannot be served"),
    }
}

/// After a CRD is removed: stop serving its types and remove their objects,
/// which watchers see deleted.
pub fn after_delete(state: &State, txn: &mut Txn<'_>, rt: &ResourceType, object: &Value) {
    if !is_crd(rt) {
        return;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let served: Vec<Arc<ResourceType>> = state
        .types()
        .into_iter()
        .filter(|t| t.crd.as_deref() == Some(name))
        .collect();
    state.set_crd_types(name, Vec::new());
    if let Some(t) = served.first() {
        let storage = t.storage_key();
        let objects: Vec<_> = txn
            .list(&storage, None, None)
            .map(|(key, object)| (key.clone(), object.clone()))
            .collect();
        for (key, mut object) in objects {
            object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
            txn.remove(storage.clone(), key, object);
        }
    }
}
