//! Every write, from a client or from a controller of this server, goes
//! through one pipeline, as in kube-apiserver: the registry prepares the
//! new object under the store's lock; without it, mutating admission runs,
//! the registry validates the object it leaves, and validating admission
//! (policies, then webhooks) runs; the result is committed only if the
//! stored object did not change meanwhile (otherwise the write is planned
//! and admitted again).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::attributes::{Attributes, GroupVersion, Operation, UserInfo};
use crate::gofmt::now;
use crate::resources::{ResourceType, kind_group, served_ref, served_shared};
use crate::state::State;
use crate::status::{self, ApiError};
use crate::store::{ObjectKey, Txn};
use crate::{
    admission, aggregation, apply, crds, events, names, namespaces, validation, workloads,
};

/// The finalizers of a delete with `propagationPolicy: Foreground` or
/// `Orphan`, which the garbage collector acts on.
pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// How many times a write whose object changed during admission is redone.
const ATTEMPTS: usize = 5;

/// Metadata the server owns: an update keeps the stored values, and a
/// mutating webhook cannot change them.
const SYSTEM_FIELDS: [&str; 8] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "name",
    "generation",
    "resourceVersion",
];

/// Who writes, and the write's options.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    pub user: UserInfo,
    pub dry_run: bool,
    /// The field manager recorded in managedFields.
    pub manager: String,
    /// `fieldValidation`: Strict, Warn (default) or Ignore.
    pub field_validation: Option<String>,
}

impl WriteOptions {
    /// A controller of this server writing as `user`.
    pub fn internal(user: UserInfo, manager: &str) -> Self {
        Self {
            user,
            dry_run: false,
            manager: manager.to_owned(),
            field_validation: None,
        }
    }
}

/// Where the object lives.
#[derive(Clone, Debug)]
pub struct Place {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub subresource: Option<String>,
}

impl Place {
    fn key(&self, name: &str) -> ObjectKey {
        (self.namespace.clone().unwrap_or_default(), name.to_owned())
    }
}

enum Commit {
    Put,
    Remove,
    /// A write that changes nothing keeps its resourceVersion.
    Nothing,
}

/// A write decided under the lock, waiting for admission.
struct Plan {
    name: String,
    /// The stored object's resourceVersion when planned (None: absent).
    seen: Option<String>,
    /// Shared with the admission attributes while admission reads it, and
    /// then stored as it is.
    object: Arc<Value>,
    commit: Commit,
    admit: Option<Attributes>,
    warnings: Vec<String>,
    /// The stored object an update changes.
    old: Option<Arc<Value>>,
}

/// What a write did.
pub struct Outcome {
    /// The object as stored (or as it would be, on a dry run), or the last
    /// state of a removed object.
    pub object: Arc<Value>,
    pub removed: bool,
    pub warnings: Vec<String>,
}

fn rv_of(object: Option<&Value>) -> Option<String> {
    object.and_then(|o| o["metadata"]["resourceVersion"].as_str().map(str::to_owned))
}

/// Plans, admits and commits a write, redoing it if the object changed
/// while admission ran.
async fn execute(
    state: &Arc<State>,
    place: &Place,
    opts: &WriteOptions,
    mut plan: impl FnMut(&mut Txn<'_>) -> Result<Plan, ApiError>,
) -> Result<Outcome, ApiError> {
    let rt = &place.rt;
    for _ in 0..ATTEMPTS {
        let planned = plan(&mut state.store.lock())?;
        let Plan {
            name,
            seen,
            mut object,
            commit,
            admit: attributes,
            warnings,
            old: _,
        } = admit(state, place, opts, planned).await?;
        // Admission is done with the object: unshared, it is stored as is.
        drop(attributes);
        let mut txn = state.store.lock();
        let key = place.key(&name);
        if rv_of(txn.get(&rt.storage_key(), &key)) != seen {
            continue;
        }
        let removed = matches!(commit, Commit::Remove);
        let created = seen.is_none();
        if !matches!(commit, Commit::Nothing) {
            Arc::make_mut(&mut object)["metadata"]["resourceVersion"] =
                json!(txn.next_rv().to_string());
        }
        if !opts.dry_run {
            match commit {
                Commit::Put => {
                    txn.put(rt.storage_key(), key, object.clone());
                    crds::after_write(state, &mut txn, rt, &object);
                    if created {
                        namespaces::after_create(&mut txn, rt, &object);
                    }
                }
                Commit::Remove => {
                    txn.remove(rt.storage_key(), key, object.clone());
                    crds::after_delete(state, &mut txn, rt, &object);
                }
                Commit::Nothing => {}
            }
            drop(txn);
            aggregation::after_write(state, rt);
            namespaces::after_write(state, rt, &object);
            state.gc.notify_one();
        }
        return Ok(Outcome {
            object,
            removed,
            warnings,
        });
    }
    Err(ApiError::conflict(
        rt,
        "",
        "the object kept changing while the write was admitted; try again",
    ))
}

/// Admission of a planned write: mutating webhooks, the registry's
/// validation of the object they leave, then validating admission.
async fn admit(
    state: &Arc<State>,
    place: &Place,
    opts: &WriteOptions,
    mut plan: Plan,
) -> Result<Plan, ApiError> {
    let Some(attributes) = &plan.admit else {
        return Ok(plan);
    };
    let mutation = admission::mutate(state, attributes).await?;
    if let Some(mutated) = mutation.object {
        let warnings = std::mem::take(&mut plan.warnings);
        plan = replan(place, opts, plan, mutated)?;
        plan.warnings.splice(0..0, warnings);
    }
    plan.warnings.extend(mutation.warnings);
    let Some(attributes) = &mut plan.admit else {
        return Ok(plan);
    };
    if attributes.operation != Operation::Delete {
        // Unshared first, so that what validation changes is not a copy.
        attributes.object = None;
        validation::check(
            &place.rt,
            plan.old.as_deref(),
            Arc::make_mut(&mut plan.object),
        )?;
        attributes.object = Some(served_shared(&place.rt, &plan.object));
    }
    let warnings = admission::validate(state, attributes).await?;
    plan.warnings.extend(warnings);
    Ok(plan)
}

/// Plans the object a mutating webhook left as the write's new object, as
/// kube-apiserver prepares an object for storage after mutating admission:
/// what the server owns (system fields, managedFields computed from the
/// request, a status the subresource guards) stays as planned. Deletes
/// never get here: webhooks cannot patch them.
fn replan(
    place: &Place,
    opts: &WriteOptions,
    plan: Plan,
    mutated: Value,
) -> Result<Plan, ApiError> {
    let mut object = to_stored(&place.rt, mutated)?;
    keep_fields(&plan.object, &mut object, &["managedFields"])?;
    // Fields the webhook added that the schema lacks are dropped silently.
    let opts = WriteOptions {
        field_validation: Some("Ignore".to_owned()),
        ..opts.clone()
    };
    match plan.old {
        Some(old) => plan_update(place, &opts, &plan.name, old, object, true),
        None => {
            keep_fields(&plan.object, &mut object, &SYSTEM_FIELDS)?;
            finish_create(place, &opts, &plan.name, object, true)
        }
    }
}

/// Sets `fields` of `into`'s metadata to `from`'s, removing those `from`
/// lacks.
fn keep_fields(from: &Value, into: &mut Value, fields: &[&str]) -> Result<(), ApiError> {
    let meta = into["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    for field in fields {
        match from["metadata"].get(*field) {
            Some(value) => meta.insert((*field).into(), value.clone()),
            None => meta.remove(*field),
        };
    }
    Ok(())
}

fn attributes(
    place: &Place,
    operation: Operation,
    name: &str,
    object: Option<&Arc<Value>>,
    old: Option<&Arc<Value>>,
    opts: &WriteOptions,
    options_kind: &str,
) -> Attributes {
    let rt = &place.rt;
    Attributes {
        operation,
        kind: GroupVersion {
            group: rt.group.clone(),
            version: rt.version.clone(),
            name: rt.kind.clone(),
        },
        resource: GroupVersion {
            group: rt.group.clone(),
            version: rt.version.clone(),
            name: rt.plural.clone(),
        },
        sub_resource: place.subresource.clone().unwrap_or_default(),
        name: name.to_owned(),
        namespace: place.namespace.clone().unwrap_or_default(),
        object: object.map(|o| served_shared(rt, o)),
        old_object: old.map(|o| served_shared(rt, o)),
        user: opts.user.clone(),
        dry_run: opts.dry_run,
        options: Some(json!({
            "kind": options_kind,
            "apiVersion": "meta.k8s.io/v1",
            "fieldManager": opts.manager,
        })),
    }
}

/// Checks (and fills) apiVersion/kind against the endpoint, and converts
/// an events.k8s.io event to the stored core form.
pub fn to_stored(rt: &ResourceType, mut object: Value) -> Result<Value, ApiError> {
    let expected = rt.api_version();
    match object["apiVersion"].as_str() {
        None | Some("") => object["apiVersion"] = json!(expected),
        Some(v) if v == expected => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )));
        }
    }
    match object["kind"].as_str() {
        None | Some("") => object["kind"] = json!(rt.kind),
        Some(k) if k == rt.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    Ok(if rt.group == "events.k8s.io" {
        events::from_events_v1(&object)
    } else {
        object
    })
}

pub fn invalid_field(
    rt: &ResourceType,
    name: &str,
    field: &str,
    body: &str,
    reason: &str,
) -> ApiError {
    let message = format!("{field}: {body}");
    ApiError::invalid(
        rt,
        name,
        format!("{} \"{name}\" is invalid: {message}", kind_group(rt)),
        vec![json!({"reason": reason, "message": body, "field": field})],
    )
}

// === create ===

/// Creates `object` (stored form). `applied`: a server-side apply creates
/// it, with its managedFields computed already. `url_name`: the name in the
/// request's path, if any.
pub async fn create(
    state: &Arc<State>,
    place: &Place,
    opts: &WriteOptions,
    object: Value,
    url_name: Option<&str>,
    applied: bool,
) -> Result<Outcome, ApiError> {
    let (object, name) = name_object(place, object, url_name)?;
    execute(state, place, opts, |txn| {
        plan_create(place, opts, txn, object.clone(), &name, applied)
    })
    .await
}

/// Settles namespace and name (generating one from `generateName`).
fn name_object(
    place: &Place,
    mut object: Value,
    url_name: Option<&str>,
) -> Result<(Value, String), ApiError> {
    let rt = &place.rt;
    let meta = object["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    if rt.namespaced {
        let namespace = place.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(namespace));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let given = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let name = match given {
        Some(name) => name.to_owned(),
        None => match meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
        {
            Some(prefix) => format!("{prefix}{}", names::random_suffix()),
            None => {
                return Err(invalid_field(
                    rt,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                    "FieldValueRequired",
                ));
            }
        },
    };
    if let Some(url_name) = url_name
        && url_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    meta.insert("name".into(), json!(name));
    if let Some(detail) = names::invalid_name(&name, namespaces::is_namespaces(rt)) {
        return Err(invalid_field(
            rt,
            &name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": {detail}"),
            "FieldValueInvalid",
        ));
    }
    Ok((object, name))
}

fn plan_create(
    place: &Place,
    opts: &WriteOptions,
    txn: &mut Txn<'_>,
    mut object: Value,
    name: &str,
    applied: bool,
) -> Result<Plan, ApiError> {
    let rt = &place.rt;
    if txn.get(&rt.storage_key(), &place.key(name)).is_some() {
        return Err(ApiError::already_exists(rt, name));
    }
    if let Some(namespace) = &place.namespace {
        namespaces::check_writable(txn, rt, name, namespace)?;
    }
    let now = now();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
        ] {
            meta.remove(field);
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now));
        if rt.tracks_generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    finish_create(place, opts, name, object, applied)
}

/// The rest of a create's plan, from an object with its system fields set.
fn finish_create(
    place: &Place,
    opts: &WriteOptions,
    name: &str,
    mut object: Value,
    applied: bool,
) -> Result<Plan, ApiError> {
    let rt = &place.rt;
    if rt.status_subresource && rt.is_custom() {
        object.as_object_mut().map(|o| o.remove("status"));
    }
    namespaces::prepare_create(rt, &mut object);
    let mut warnings = Vec::new();
    validation::prepare(
        rt,
        opts.field_validation.as_deref(),
        &mut object,
        &mut warnings,
    )?;
    if !applied {
        apply::record_update(None, &mut object, &opts.manager, None, &now());
    }
    // Set by the server, so no manager owns it.
    if let Some(status) = workloads::initial_status(rt, &object) {
        object["status"] = status;
    }
    let object = Arc::new(object);
    let admit = attributes(
        place,
        Operation::Create,
        name,
        Some(&object),
        None,
        opts,
        "CreateOptions",
    );
    Ok(Plan {
        name: name.to_owned(),
        seen: None,
        object,
        commit: Commit::Put,
        admit: Some(admit),
        warnings,
        old: None,
    })
}

// === update ===

/// How an update derives the new object from the stored one.
pub enum Change<'a> {
    /// A full replacement (PUT); its resourceVersion, if set, must match.
    Replace(&'a Value),
    /// A change computed from the stored object (patches, apply, and this
    /// server's controllers): stored form in, stored form out, or an error.
    Derive(&'a (dyn Fn(&Value) -> Result<Value, ApiError> + Sync)),
}

/// Updates object `name`. `applied`: the change is a server-side apply whose
/// managedFields are computed already.
pub async fn update(
    state: &Arc<State>,
    place: &Place,
    opts: &WriteOptions,
    name: &str,
    change: Change<'_>,
    applied: bool,
) -> Result<Outcome, ApiError> {
    let rt = &place.rt;
    execute(state, place, opts, |txn| {
        let old = txn
            .get_shared(&rt.storage_key(), &place.key(name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        let new = match &change {
            Change::Replace(new) => {
                if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
                    && !rv.is_empty()
                    && Some(rv) != old["metadata"]["resourceVersion"].as_str()
                {
                    return Err(ApiError::stale(rt, name));
                }
                (*new).clone()
            }
            Change::Derive(derive) => {
                let new = derive(&old)?;
                if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
                    && Some(rv) != old["metadata"]["resourceVersion"].as_str()
                {
                    return Err(ApiError::stale(rt, name));
                }
                new
            }
        };
        plan_update(place, opts, name, old, new, applied)
    })
    .await
}

fn plan_update(
    place: &Place,
    opts: &WriteOptions,
    name: &str,
    old: Arc<Value>,
    mut new: Value,
    applied: bool,
) -> Result<Plan, ApiError> {
    let rt = &place.rt;
    let status_write = place.subresource.as_deref() == Some("status");
    if status_write {
        // Only status changes; metadata and spec stay as stored.
        let status = new.get("status").cloned();
        let managed = new["metadata"]["managedFields"].clone();
        new = (*old).clone();
        match status {
            Some(status) => new["status"] = status,
            None => {
                new.as_object_mut().map(|o| o.remove("status"));
            }
        }
        if applied {
            new["metadata"]["managedFields"] = managed;
        }
    } else if rt.status_subresource {
        match old.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                new.as_object_mut().map(|o| o.remove("status"));
            }
        }
    }
    {
        keep_fields(&old, &mut new, &SYSTEM_FIELDS)?;
        let meta = new["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        if !applied
            && !meta.contains_key("managedFields")
            && let Some(managed) = old["metadata"].get("managedFields")
        {
            meta.insert("managedFields".into(), managed.clone());
        }
    }
    let deleting = old["metadata"]["deletionTimestamp"].is_string();
    if deleting {
        let before = finalizers(&old);
        if let Some(added) = finalizers(&new).into_iter().find(|f| !before.contains(f)) {
            return Err(invalid_field(
                rt,
                name,
                "metadata.finalizers",
                &format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"
                ),
                "FieldValueForbidden",
            ));
        }
    }
    if rt.tracks_generation && !same_spec(&old, &new) {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        new["metadata"]["generation"] = json!(generation);
        workloads::observe_generation(rt, &mut new);
    }
    let mut warnings = Vec::new();
    validation::prepare(
        rt,
        opts.field_validation.as_deref(),
        &mut new,
        &mut warnings,
    )?;
    if !applied {
        apply::record_update(
            Some(&old),
            &mut new,
            &opts.manager,
            place.subresource.as_deref(),
            &now(),
        );
    }
    let seen = rv_of(Some(&old));
    if new == *old {
        return Ok(Plan {
            name: name.to_owned(),
            seen,
            object: old,
            commit: Commit::Nothing,
            admit: None,
            warnings,
            old: None,
        });
    }
    let new = Arc::new(new);
    let admit = attributes(
        place,
        Operation::Update,
        name,
        Some(&new),
        Some(&old),
        opts,
        "UpdateOptions",
    );
    let commit = if deleting && finalizers(&new).is_empty() {
        Commit::Remove
    } else {
        Commit::Put
    };
    Ok(Plan {
        name: name.to_owned(),
        seen,
        object: new,
        commit,
        admit: Some(admit),
        warnings,
        old: Some(old),
    })
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether two objects agree on everything but metadata and status: what
/// generation counts changes of.
fn same_spec(a: &Value, b: &Value) -> bool {
    const NOT_SPEC: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];
    let empty = Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let spec_fields = |map: &Map<String, Value>| {
        map.keys()
            .filter(|field| !NOT_SPEC.contains(&field.as_str()))
            .count()
    };
    spec_fields(a) == spec_fields(b)
        && a.iter()
            .filter(|(field, _)| !NOT_SPEC.contains(&field.as_str()))
            .all(|(field, value)| b.get(field) == Some(value))
}

// === delete ===

/// What a delete asks for.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `Background` (default), `Foreground` or `Orphan`.
    pub propagation: Option<String>,
    /// `dryRun: [All]` in the body (kubectl sends it there for deletes).
    pub dry_run: bool,
}

/// Deletes object `name`: marks it when finalizers (or the propagation
/// policy) hold it, removes it otherwise.
pub async fn delete(
    state: &Arc<State>,
    place: &Place,
    opts: &WriteOptions,
    name: &str,
    options: &DeleteOptions,
) -> Result<Outcome, ApiError> {
    let rt = &place.rt;
    execute(state, place, opts, |txn| {
        let old = txn
            .get_shared(&rt.storage_key(), &place.key(name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        plan_delete(place, opts, name, old, options)
    })
    .await
}

fn plan_delete(
    place: &Place,
    opts: &WriteOptions,
    name: &str,
    old: Arc<Value>,
    options: &DeleteOptions,
) -> Result<Plan, ApiError> {
    let rt = &place.rt;
    let meta = &old["metadata"];
    let preconditions = [
        ("UID", "uid", &options.uid),
        (
            "ResourceVersion",
            "resourceVersion",
            &options.resource_version,
        ),
    ];
    for (label, field, wanted) in preconditions {
        let actual = meta[field].as_str().unwrap_or_default();
        if let Some(wanted) = wanted
            && wanted != actual
        {
            return Err(ApiError::conflict(
                rt,
                name,
                &format!(
                    "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
                ),
            ));
        }
    }
    let seen = rv_of(Some(&old));
    let admit = Some(attributes(
        place,
        Operation::Delete,
        name,
        None,
        Some(&old),
        opts,
        "DeleteOptions",
    ));
    let already_deleting = meta["deletionTimestamp"].is_string();
    let mut marks = finalizers(&old);
    match options.propagation.as_deref() {
        Some("Orphan") => marks.push(ORPHAN.to_owned()),
        Some("Foreground") => marks.push(FOREGROUND.to_owned()),
        _ => {}
    }
    marks.dedup();
    let namespace = namespaces::is_namespaces(rt);
    if marks.is_empty() && !namespace {
        return Ok(Plan {
            name: name.to_owned(),
            seen,
            object: old,
            commit: Commit::Remove,
            admit,
            warnings: Vec::new(),
            old: None,
        });
    }
    if already_deleting && marks == finalizers(&old) {
        return Ok(Plan {
            name: name.to_owned(),
            seen,
            object: old,
            commit: Commit::Nothing,
            admit,
            warnings: Vec::new(),
            old: None,
        });
    }
    let mut object = (*old).clone();
    if !marks.is_empty() {
        object["metadata"]["finalizers"] = json!(marks);
    }
    if !already_deleting {
        object["metadata"]["deletionTimestamp"] = json!(now());
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if rt.tracks_generation {
            object["metadata"]["generation"] =
                json!(old["metadata"]["generation"].as_i64().unwrap_or(0) + 1);
        }
    }
    if namespace {
        object["status"]["phase"] = json!("Terminating");
    }
    Ok(Plan {
        name: name.to_owned(),
        seen,
        object: Arc::new(object),
        commit: Commit::Put,
        admit,
        warnings: Vec::new(),
        old: None,
    })
}

/// Whether a finished delete answers the deleted object rather than a
/// Status: the storages that set `ReturnDeletedObject`.
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    rt.group.is_empty() && matches!(rt.plural.as_str(), "services" | "serviceaccounts")
}

/// The Status a finished delete answers, or the deleted or marked object.
pub fn delete_response(rt: &ResourceType, outcome: &Outcome) -> Value {
    if outcome.removed && !returns_deleted_object(rt) {
        let name = outcome.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        let uid = outcome.object["metadata"]["uid"]
            .as_str()
            .unwrap_or_default();
        status::deleted(rt, name, uid)
    } else {
        served_ref(rt, &outcome.object).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::same_spec;

    #[test]
    fn generation_counts_changes_outside_metadata_and_status() {
        let object = json!({
            "apiVersion": "v1", "kind": "Thing",
            "metadata": {"name": "a", "labels": {"x": "1"}},
            "spec": {"replicas": 1}, "data": {"k": "v"}, "status": {"ready": true},
        });
        let with = |field: &str, value: serde_json::Value| {
            let mut changed = object.clone();
            changed[field] = value;
            changed
        };
        assert!(same_spec(&object, &object));
        assert!(same_spec(&object, &with("metadata", json!({"name": "a"}))));
        assert!(same_spec(&object, &with("status", json!({}))));
        assert!(same_spec(&object, &with("apiVersion", json!("v2"))));
        assert!(!same_spec(&object, &with("spec", json!({"replicas": 2}))));
        assert!(!same_spec(&object, &with("extra", json!(null))));
        let mut without_data = object.clone();
        without_data.as_object_mut().unwrap().remove("data");
        assert!(!same_spec(&object, &without_data));
        assert!(!same_spec(&without_data, &object));
    }
}
