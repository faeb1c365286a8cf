//! Garbage collection, as kube-controller-manager's garbage collector does
//! it: dependents whose owners are all gone are deleted; an owner deleted
//! with `propagationPolicy: Foreground` (finalizer `foregroundDeletion`)
//! goes once its blocking dependents are gone; one deleted with `Orphan`
//! (finalizer `orphan`) first has its references removed from its
//! dependents. Every delete and update goes through admission as the
//! garbage collector's identity; a denied one is retried with backoff.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::auth;
use crate::resources::ResourceType;
use crate::state::State;
use crate::write::{self, Change, DeleteOptions, FOREGROUND, ORPHAN, Place, WriteOptions};

const IDENTITY: &str = "generic-garbage-collector";
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(10);

/// One object, as the collector sees it.
struct Object {
    rt: Arc<ResourceType>,
    namespace: String,
    name: String,
    uid: String,
    owners: Vec<(String, bool)>,
    finalizers: Vec<String>,
    deleting: bool,
}

/// Runs the collector until the process ends; writes wake it through
/// `State::gc`.
pub async fn run(state: Arc<State>) {
    let mut retries: HashMap<String, (Instant, Duration)> = HashMap::new();
    loop {
        tokio::select! {
            // Writes come in bursts: one sweep after a short pause serves
            // them all, instead of a sweep of every object per write.
            () = state.gc.notified() => tokio::time::sleep(Duration::from_millis(50)).await,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        sweep(&state, &mut retries).await;
    }
}

/// The objects the collector may act on (dependents, and owners being
/// deleted with `orphan` or `foregroundDeletion`), from the store's index
/// of them, and which of their owners' uids exist: a sweep costs what
/// there is to collect, not a pass over every object.
fn snapshot(state: &State) -> (Vec<Object>, HashSet<String>) {
    // One type per storage (events.k8s.io shares core events).
    let types: HashMap<_, _> = state
        .types()
        .into_iter()
        .filter(|rt| rt.storage.is_none())
        .map(|rt| (rt.storage_key(), rt))
        .collect();
    let txn = state.store.lock();
    let mut objects = Vec::new();
    let mut alive = HashSet::new();
    for (storage, (namespace, name), object) in txn.collectable() {
        let Some(rt) = types.get(storage) else {
            continue;
        };
        let meta = &object["metadata"];
        let owners: Vec<(String, bool)> = meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| {
                Some((
                    o["uid"].as_str()?.to_owned(),
                    o["blockOwnerDeletion"] == Value::Bool(true),
                ))
            })
            .collect();
        alive.extend(
            owners
                .iter()
                .filter(|(uid, _)| txn.has_uid(uid))
                .map(|(uid, _)| uid.clone()),
        );
        objects.push(Object {
            rt: rt.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
            uid: meta["uid"].as_str().unwrap_or_default().to_owned(),
            owners,
            finalizers: write::finalizers(object),
            deleting: meta["deletionTimestamp"].is_string(),
        });
    }
    (objects, alive)
}

fn place(object: &Object) -> Place {
    Place {
        rt: object.rt.clone(),
        namespace: (!object.namespace.is_empty()).then(|| object.namespace.clone()),
        subresource: None,
    }
}

async fn sweep(state: &Arc<State>, retries: &mut HashMap<String, (Instant, Duration)>) {
    let (objects, alive) = snapshot(state);
    let opts = WriteOptions::internal(auth::controller(IDENTITY), IDENTITY);
    let now = Instant::now();
    let due = |uid: &str, retries: &HashMap<String, (Instant, Duration)>| {
        retries.get(uid).is_none_or(|(at, _)| *at <= now)
    };

    for object in &objects {
        let result = if !object.owners.is_empty()
            && !object.deleting
            && object
                .owners
                .iter()
                .all(|(uid, _)| !alive.contains(uid.as_str()))
        {
            // Every owner is gone: the dependent goes too.
            if !due(&object.uid, retries) {
                continue;
            }
            write::delete(
                state,
                &place(object),
                &opts,
                &object.name,
                &DeleteOptions::default(),
            )
            .await
            .map(|_| ())
        } else if object.deleting && object.finalizers.iter().any(|f| f == ORPHAN) {
            if !due(&object.uid, retries) {
                continue;
            }
            orphan(state, &objects, object, &opts).await
        } else if object.deleting && object.finalizers.iter().any(|f| f == FOREGROUND) {
            if !due(&object.uid, retries) {
                continue;
            }
            foreground(state, &objects, object, &opts).await
        } else {
            continue;
        };
        match result {
            Ok(()) => {
                retries.remove(&object.uid);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => {
                let delay = retries
                    .get(&object.uid)
                    .map_or(FIRST_RETRY, |(_, d)| (*d * 2).min(MAX_RETRY));
                tracing::info!(
                    resource = %object.rt.group_resource(), namespace = %object.namespace, name = %object.name,
                    error = %e.message_text(), retry_in = ?delay, "garbage collection denied; retrying"
                );
                retries.insert(object.uid.clone(), (Instant::now() + delay, delay));
            }
        }
    }
}

fn dependents<'a>(
    objects: &'a [Object],
    owner: &'a Object,
) -> impl Iterator<Item = &'a Object> + 'a {
    objects
        .iter()
        .filter(move |o| o.owners.iter().any(|(uid, _)| *uid == owner.uid))
}

/// Removes the owner's references from its dependents, then its finalizer.
async fn orphan(
    state: &Arc<State>,
    objects: &[Object],
    owner: &Object,
    opts: &WriteOptions,
) -> Result<(), crate::status::ApiError> {
    for dependent in dependents(objects, owner) {
        let uid = owner.uid.clone();
        let derive = move |old: &Value| {
            let mut new = old.clone();
            if let Some(refs) = new["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
                if refs.is_empty() {
                    new["metadata"]
                        .as_object_mut()
                        .map(|m| m.remove("ownerReferences"));
                }
            }
            Ok(new)
        };
        write::update(
            state,
            &place(dependent),
            opts,
            &dependent.name,
            Change::Derive(&derive),
            false,
        )
        .await?;
    }
    remove_finalizer(state, owner, ORPHAN, opts).await
}

/// Deletes the owner's dependents; releases the owner once none that
/// blocks its deletion is left.
async fn foreground(
    state: &Arc<State>,
    objects: &[Object],
    owner: &Object,
    opts: &WriteOptions,
) -> Result<(), crate::status::ApiError> {
    let mut blocking = false;
    for dependent in dependents(objects, owner) {
        blocking |= dependent
            .owners
            .iter()
            .any(|(uid, block)| *uid == owner.uid && *block);
        if !dependent.deleting {
            let options = DeleteOptions {
                propagation: Some("Foreground".to_owned()),
                ..DeleteOptions::default()
            };
            write::delete(state, &place(dependent), opts, &dependent.name, &options).await?;
        }
    }
    if blocking {
        return Ok(());
    }
    remove_finalizer(state, owner, FOREGROUND, opts).await
}

async fn remove_finalizer(
    state: &Arc<State>,
    object: &Object,
    finalizer: &str,
    opts: &WriteOptions,
) -> Result<(), crate::status::ApiError> {
    let derive = |old: &Value| {
        let mut new = old.clone();
        if let Some(list) = new["metadata"]["finalizers"].as_array_mut() {
            list.retain(|f| f.as_str() != Some(finalizer));
        }
        Ok(new)
    };
    write::update(
        state,
        &place(object),
        opts,
        &object.name,
        Change::Derive(&derive),
        false,
    )
    .await
    .map(|_| ())
}
