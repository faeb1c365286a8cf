//! Namespace termination, as kube-controller-manager's namespace controller
//! does it: a deleted namespace turns `Terminating`, its contents are
//! deleted through admission as the controller's identity (denials retried
//! with backoff), its status conditions say what remains, and it goes when
//! it is empty.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::auth;
use crate::gofmt::now;
use crate::namespaces::storage;
use crate::resources::ResourceType;
use crate::state::State;
use crate::write::{self, DeleteOptions, Place, WriteOptions};

const IDENTITY: &str = "namespace-controller";

/// Runs until the process ends, terminating each namespace that writes
/// queue (`State::terminations`) in a task of its own.
pub async fn run(state: Arc<State>, mut queue: mpsc::UnboundedReceiver<String>) {
    while let Some(name) = queue.recv().await {
        let state = state.clone();
        tokio::spawn(async move {
            terminate(&state, &name).await;
            state
                .terminating
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&name);
        });
    }
}

/// Deletes the namespace's contents until it is empty, then removes it.
async fn terminate(state: &Arc<State>, namespace: &str) {
    let opts = WriteOptions::internal(auth::controller(IDENTITY), IDENTITY);
    let mut delay = Duration::from_millis(100);
    loop {
        let remaining = contents(state, namespace);
        if remaining.is_empty() {
            finalize(state, namespace);
            return;
        }
        let mut failures = Vec::new();
        for (rt, name, deleting) in &remaining {
            if *deleting {
                continue;
            }
            let place = Place {
                rt: rt.clone(),
                namespace: Some(namespace.to_owned()),
                subresource: None,
            };
            if let Err(e) =
                write::delete(state, &place, &opts, name, &DeleteOptions::default()).await
                && e.code != 404
            {
                failures.push(e.message_text().to_owned());
            }
        }
        report(state, namespace, &failures);
        delay = if failures.is_empty() {
            Duration::from_millis(100)
        } else {
            (delay * 2).min(Duration::from_secs(5))
        };
        tokio::time::sleep(delay).await;
    }
}

/// Every object in the namespace: its type, name, and whether it is
/// already being deleted.
fn contents(state: &State, namespace: &str) -> Vec<(Arc<ResourceType>, String, bool)> {
    let types = state.types();
    let txn = state.store.lock();
    let mut out = Vec::new();
    for storage in txn.any_in_namespace(namespace) {
        let Some(rt) = types
            .iter()
            .find(|t| t.storage_key() == storage && t.storage.is_none())
        else {
            continue;
        };
        for ((_, name), object) in txn.list(&storage, Some(namespace), None) {
            out.push((
                rt.clone(),
                name.clone(),
                object["metadata"]["deletionTimestamp"].is_string(),
            ));
        }
    }
    out
}

/// Writes the namespace's deletion conditions, as the namespace controller
/// words them.
fn report(state: &State, namespace: &str, failures: &[String]) {
    let types = state.types();
    let mut txn = state.store.lock();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut finalizers: BTreeMap<String, usize> = BTreeMap::new();
    for storage in txn.any_in_namespace(namespace) {
        let resource = types
            .iter()
            .find(|t| t.storage_key() == storage)
            .map_or_else(|| storage.1.clone(), |t| t.group_resource());
        for (_, object) in txn.list(&storage, Some(namespace), None) {
            *counts.entry(resource.clone()).or_default() += 1;
            for finalizer in write::finalizers(object) {
                *finalizers.entry(finalizer).or_default() += 1;
            }
        }
    }
    let key = (String::new(), namespace.to_owned());
    let Some(mut object) = txn.get(&storage(), &key).cloned() else {
        return;
    };
    let time = now();
    let condition = |type_: &str, status: bool, reason: &str, message: String| json!({"type": type_, "status": if status { "True" } else { "False" }, "lastTransitionTime": time, "reason": reason, "message": message});
    let content_failure = if failures.is_empty() {
        condition(
            "NamespaceDeletionContentFailure",
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".to_owned(),
        )
    } else {
        let errors = if failures.len() == 1 {
            failures[0].clone()
        } else {
            format!("[{}]", failures.join(", "))
        };
        condition(
            "NamespaceDeletionContentFailure",
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {errors}",
                failures.len()
            ),
        )
    };
    let remaining = if counts.is_empty() {
        condition(
            "NamespaceContentRemaining",
            false,
            "ContentRemoved",
            "All content successfully removed".to_owned(),
        )
    } else {
        let list: Vec<String> = counts
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        condition(
            "NamespaceContentRemaining",
            true,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", list.join(", ")),
        )
    };
    let finalizing = if finalizers.is_empty() {
        condition(
            "NamespaceFinalizersRemaining",
            false,
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".to_owned(),
        )
    } else {
        let list: Vec<String> = finalizers
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        condition(
            "NamespaceFinalizersRemaining",
            true,
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                list.join(", ")
            ),
        )
    };
    let conditions = json!([
        condition(
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".to_owned()
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".to_owned()
        ),
        content_failure,
        remaining,
        finalizing,
    ]);
    // Keep transition times of conditions whose status did not change.
    let previous = object["status"]["conditions"].clone();
    let mut conditions = conditions;
    for condition in conditions.as_array_mut().into_iter().flatten() {
        if let Some(old) = previous
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == condition["type"] && c["status"] == condition["status"])
        {
            condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
        }
    }
    if object["status"]["conditions"] == conditions {
        return;
    }
    object["status"]["conditions"] = conditions;
    object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
    txn.put(storage(), key, object);
}

/// Releases the `kubernetes` finalizer and removes the empty namespace.
fn finalize(state: &State, namespace: &str) {
    let mut txn = state.store.lock();
    let key = (String::new(), namespace.to_owned());
    if let Some(mut object) = txn.get(&storage(), &key).cloned() {
        object["spec"]["finalizers"] = json!([]);
        object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
        if write::finalizers(&object).is_empty() {
            txn.remove(storage(), key, object);
        } else {
            txn.put(storage(), key, object);
        }
    }
}
