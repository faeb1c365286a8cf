//! The REST verbs on resources: get, list, watch, create, update, patch,
//! delete and deletecollection, with kube-apiserver's semantics for
//! resourceVersions, generation, the status subresource, finalizers,
//! preconditions, dry runs and field ownership.

use std::sync::Arc;

use base64::Engine;
use http::{Method, Response, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector, builtin_selectable};
use crate::server::{Body, Req, State, full, json};
use crate::status::{self, ApiError};
use crate::store::{ObjectKey, Txn};
use crate::{admission, apply, crds, events, names, namespaces, patch, protobuf, table, watch};

/// A request on one resource type, parsed from its path.
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    fn key(&self) -> ObjectKey {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
}

/// Routes `/api/v1/...` and `/apis/<group>/<version>/...` below the version.
pub async fn handle(
    state: &Arc<State>,
    req: &Req,
    group: &str,
    version: &str,
    segments: &[&str],
) -> Result<Response<Body>, ApiError> {
    let target = parse(state, group, version, segments)?;
    if req.wants_table() {
        check_include_object(req)?;
    }
    let subresource = target.subresource.as_deref();
    match (&req.method, target.name.is_some(), subresource) {
        (&Method::GET, true, None | Some("status")) => get(state, req, &target),
        (&Method::GET, false, None) if watching(req) => watch::watch(state, req, &target),
        (&Method::GET, false, None) => list(state, req, &target),
        (&Method::POST, false, None) => create(state, req, &target),
        (&Method::PUT, true, _) => update(state, req, &target),
        (&Method::PATCH, true, _) => patch(state, req, &target),
        (&Method::DELETE, true, None) => delete(state, req, &target),
        (&Method::DELETE, false, None) => delete_collection(state, req, &target),
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn watching(req: &Req) -> bool {
    matches!(req.param("watch"), Some("true" | "1"))
}

fn parse(state: &State, group: &str, version: &str, segments: &[&str]) -> Result<Target, ApiError> {
    // `namespaces/<ns>/<resource>...`, except the namespace's own
    // subresources `namespaces/<ns>/status|finalize`.
    let (namespace, rest) = match segments {
        ["namespaces", ns, resource, ..]
            if !matches!(*resource, "status" | "finalize") || segments.len() > 3 =>
        {
            (Some((*ns).to_owned()), &segments[2..])
        }
        _ => (None, segments),
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some((*name).to_owned()), None),
        [resource, name, sub] => (*resource, Some((*name).to_owned()), Some((*sub).to_owned())),
        _ => return Err(ApiError::path_not_found()),
    };
    let rt = state
        .find(group, version, resource)
        .ok_or_else(ApiError::path_not_found)?;
    if namespace.is_some() && !rt.namespaced {
        return Err(ApiError::path_not_found());
    }
    if rt.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    match subresource.as_deref() {
        None => {}
        Some("status") if rt.status_subresource => {}
        Some("finalize") if rt.plural == "namespaces" && rt.group.is_empty() => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    Ok(Target {
        rt,
        namespace,
        name,
        subresource,
    })
}

// === reading ===

fn get(state: &State, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let txn = state.store.lock();
    let object = txn
        .get(&target.rt.storage_key(), &target.key())
        .ok_or_else(|| {
            ApiError::not_found(&target.rt, target.name.as_deref().unwrap_or_default())
        })?;
    let object = served(&target.rt, object.clone());
    drop(txn);
    if req.wants_table() {
        let list_meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
        return Ok(table_response(&target.rt, &[object], req, list_meta));
    }
    Ok(respond(req, StatusCode::OK, &object))
}

/// What a reader sees of a stored object: the served apiVersion, or the
/// events.k8s.io form of an event.
pub fn served(rt: &ResourceType, mut object: Value) -> Value {
    if rt.group == "events.k8s.io" {
        return events::to_events_v1(&object);
    }
    object["apiVersion"] = json!(rt.api_version());
    object["kind"] = json!(rt.kind);
    object
}

/// Selectors of a list or watch request.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    pub fn from(req: &Req, rt: &ResourceType) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(req.param("labelSelector").unwrap_or_default())?;
        let fields =
            FieldSelector::parse(req.param("fieldSelector").unwrap_or_default(), |field| {
                matches!(field, "metadata.name" | "metadata.namespace")
                    || builtin_selectable(&rt.storage_key().0, &rt.storage_key().1, field)
            })?;
        Ok(Self { labels, fields })
    }

    /// Matches a stored object.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(&object["metadata"]["labels"]) && self.fields.matches(object)
    }
}

fn list(state: &State, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let filter = Filter::from(req, rt)?;
    let limit: usize = req
        .param("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let after = match req.param("continue") {
        Some(token) if !token.is_empty() => Some(decode_continue(token)?),
        _ => None,
    };
    let txn = state.store.lock();
    let mut matching = txn
        .list(
            &rt.storage_key(),
            target.namespace.as_deref(),
            after.as_ref(),
        )
        .filter(|(_, object)| filter.matches(object));
    let items: Vec<(ObjectKey, Value)> = matching
        .by_ref()
        .take(limit)
        .map(|(key, object)| (key.clone(), served(rt, object.clone())))
        .collect();
    let remaining = matching.count();
    let mut metadata = json!({"resourceVersion": txn.current_rv().to_string()});
    drop(txn);
    if remaining > 0
        && let Some((last, _)) = items.last()
    {
        metadata["continue"] = json!(encode_continue(last));
        metadata["remainingItemCount"] = json!(remaining);
    }
    let items: Vec<Value> = items.into_iter().map(|(_, object)| object).collect();
    if req.wants_table() {
        return Ok(table_response(rt, &items, req, metadata));
    }
    let list = json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": metadata,
        "items": items,
    });
    Ok(respond(req, StatusCode::OK, &list))
}

fn encode_continue(key: &ObjectKey) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"namespace": key.0, "name": key.1}).to_string())
}

fn decode_continue(token: &str) -> Result<ObjectKey, ApiError> {
    let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok((
        value["namespace"].as_str().ok_or_else(invalid)?.to_owned(),
        value["name"].as_str().ok_or_else(invalid)?.to_owned(),
    ))
}

pub fn table_response(
    rt: &ResourceType,
    objects: &[Value],
    req: &Req,
    list_meta: Value,
) -> Response<Body> {
    let include = include_object(req);
    let table = table::table(
        &printer(rt),
        objects,
        include,
        list_meta,
        jiff::Timestamp::now(),
    );
    crate::server::json_as(
        StatusCode::OK,
        &table,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
}

/// `includeObject` of a Table request (Metadata by default).
pub fn include_object(req: &Req) -> &str {
    req.param("includeObject").unwrap_or("Metadata")
}

fn check_include_object(req: &Req) -> Result<(), ApiError> {
    let include = include_object(req);
    if table::is_valid_include_object(include) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "includeObject: Unsupported value: \"{include}\": supported values: \"Metadata\", \"None\", \"Object\""
        )))
    }
}

/// How rows of this type are printed.
pub fn printer(rt: &ResourceType) -> table::TableKind {
    rt.table
        .clone()
        .unwrap_or_else(|| table::TableKind::builtin(&rt.group, &rt.plural))
}

/// Answers JSON, or protobuf when the client prefers it and the kind has a
/// protobuf form.
pub fn respond(req: &Req, status: StatusCode, object: &Value) -> Response<Body> {
    let accept = req.header(header::ACCEPT);
    let prefers_protobuf = accept
        .split(',')
        .next()
        .is_some_and(|first| first.trim().starts_with(protobuf::CONTENT_TYPE));
    let supported = protobuf::supports(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    );
    if prefers_protobuf
        && supported
        && let Ok(bytes) = protobuf::encode(object)
    {
        return Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
            .body(full(bytes))
            .unwrap_or_else(|_| Response::new(full("")));
    }
    json(status, object)
}

// === writing ===

/// Parses a request body: JSON, YAML or protobuf.
fn decode_body(req: &Req) -> Result<Value, ApiError> {
    let content_type = req.header(header::CONTENT_TYPE);
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let value: Value = match media {
        "application/vnd.kubernetes.protobuf" => {
            protobuf::decode(&req.body).map_err(|e| ApiError::bad_request(e.to_string()))?
        }
        "application/yaml" | "application/apply-patch+yaml" => serde_yaml::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
        _ => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(value)
}

/// Checks (and fills) apiVersion/kind against the endpoint, and converts
/// an events.k8s.io event to the stored core form.
fn to_stored(rt: &ResourceType, mut object: Value) -> Result<Value, ApiError> {
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

/// The field manager of a write: the `fieldManager` parameter, else the
/// client's user agent up to the first `/`, as kube-apiserver does.
fn manager(req: &Req) -> String {
    req.param("fieldManager")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let agent = req.header(header::USER_AGENT);
            agent
                .split('/')
                .next()
                .filter(|a| !a.is_empty())
                .unwrap_or("unknown")
                .to_owned()
        })
}

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// What a write produced, and the warnings to send.
pub struct Written {
    pub object: Value,
    pub warnings: Vec<String>,
}

fn written_response(
    req: &Req,
    status: StatusCode,
    rt: &ResourceType,
    written: Written,
) -> Response<Body> {
    let mut response = respond(req, status, &served(rt, written.object));
    for warning in written.warnings {
        if let Ok(value) = header::HeaderValue::from_str(&format!(
            "299 - {}",
            serde_json::to_string(&warning).unwrap_or_default()
        )) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

fn create(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let object = to_stored(&target.rt, decode_body(req)?)?;
    let mut txn = state.store.lock();
    let written = create_object(state, &mut txn, req, target, object, false)?;
    drop(txn);
    Ok(written_response(
        req,
        StatusCode::CREATED,
        &target.rt,
        written,
    ))
}

/// Creates `object` (already in stored form). `applied`: a server-side apply
/// creates it, and its managedFields are already computed.
fn create_object(
    state: &Arc<State>,
    txn: &mut Txn<'_>,
    req: &Req,
    target: &Target,
    mut object: Value,
    applied: bool,
) -> Result<Written, ApiError> {
    let rt = &target.rt;
    let meta = object["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    if rt.namespaced {
        let namespace = target.namespace.clone().unwrap_or_default();
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
    let name = match meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
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
    if let Some(url_name) = &target.name
        && *url_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    meta.insert("name".into(), json!(name));
    if let Some(detail) =
        names::invalid_name(&name, rt.plural == "namespaces" && rt.group.is_empty())
    {
        return Err(invalid_field(
            rt,
            &name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": {detail}"),
            "FieldValueInvalid",
        ));
    }
    let key: ObjectKey = (target.namespace.clone().unwrap_or_default(), name.clone());
    if txn.get(&rt.storage_key(), &key).is_some() {
        return Err(ApiError::already_exists(rt, &name));
    }
    if let Some(namespace) = &target.namespace {
        namespaces::check_writable(txn, namespace)?;
    }

    let now = now();
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
    if rt.status_subresource && rt.is_custom() {
        object.as_object_mut().map(|o| o.remove("status"));
    }
    namespaces::prepare_create(rt, &mut object);
    let mut warnings = Vec::new();
    admission::validate(state, txn, rt, req, None, &mut object, &mut warnings)?;
    if !applied {
        apply::record_update(None, &mut object, &manager(req), None, &now);
    }
    let rv = txn.next_rv();
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    if !req.dry_run() {
        txn.put(rt.storage_key(), key, object.clone());
        crds::after_write(state, txn, rt, &object);
    }
    Ok(Written { object, warnings })
}

fn invalid_field(rt: &ResourceType, name: &str, field: &str, body: &str, reason: &str) -> ApiError {
    let message = format!("{field}: {body}");
    ApiError::invalid(
        rt,
        name,
        format!("{} \"{name}\" is invalid: {message}", kind_group(rt)),
        vec![json!({"reason": reason, "message": body, "field": field})],
    )
}

/// `Lock.core.navique.com` or `ConfigMap`, as 422 messages name a kind.
pub fn kind_group(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    }
}

fn update(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let new = to_stored(rt, decode_body(req)?)?;
    let name = target.name.clone().unwrap_or_default();
    if let Some(body_name) = new["metadata"]["name"].as_str()
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let mut txn = state.store.lock();
    let old = txn
        .get(&rt.storage_key(), &target.key())
        .cloned()
        .ok_or_else(|| ApiError::not_found(rt, &name))?;
    if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
        && !rv.is_empty()
        && Some(rv) != old["metadata"]["resourceVersion"].as_str()
    {
        return Err(ApiError::stale(rt, &name));
    }
    let written = update_object(state, &mut txn, req, target, old, new, false)?;
    drop(txn);
    Ok(written_response(req, StatusCode::OK, rt, written))
}

fn patch(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let content_type = req.header(header::CONTENT_TYPE);
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut txn = state.store.lock();
    let old = txn.get(&rt.storage_key(), &target.key()).cloned();

    if media == "application/apply-patch+yaml" {
        let manager = req.param("fieldManager").ok_or_else(|| {
            ApiError::invalid(
                rt,
                "",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".to_owned(),
                vec![json!({"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"})],
            )
        })?;
        let applied = to_stored(rt, decode_body(req)?)?;
        let force = req.param("force") == Some("true");
        let subresource = target.subresource.as_deref();
        let merged = apply::apply(
            old.as_ref().map(|o| served(rt, o.clone())).as_ref(),
            &applied,
            manager,
            force,
            subresource,
            &now(),
        )
        .map_err(|e| match e {
            apply::ApplyError::Conflicts(_) => {
                ApiError::apply_conflict(e.to_string(), e.causes_json())
            }
            apply::ApplyError::Invalid(message) => ApiError::bad_request(message),
        })?;
        let merged = to_stored(rt, merged)?;
        let (written, status) = match old {
            Some(old) => (
                update_object(state, &mut txn, req, target, old, merged, true)?,
                StatusCode::OK,
            ),
            None if subresource.is_some() => return Err(ApiError::not_found(rt, &name)),
            None => (
                create_object(state, &mut txn, req, target, merged, true)?,
                StatusCode::CREATED,
            ),
        };
        drop(txn);
        return Ok(written_response(req, status, rt, written));
    }

    let old = old.ok_or_else(|| ApiError::not_found(rt, &name))?;
    let patch_body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut new = served(rt, old.clone());
    let result = match media.as_str() {
        "application/merge-patch+json" => patch::merge_patch(&mut new, &patch_body),
        "application/json-patch+json" => patch::json_patch(&mut new, &patch_body),
        "application/strategic-merge-patch+json" if !rt.is_custom() => {
            patch::strategic_merge_patch(&mut new, &patch_body, &rt.api_version(), &rt.kind)
        }
        _ => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
    };
    result.map_err(|e| ApiError::unprocessable_patch(e.to_string()))?;
    let new = to_stored(rt, new)?;
    if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
        && Some(rv) != old["metadata"]["resourceVersion"].as_str()
    {
        return Err(ApiError::stale(rt, &name));
    }
    let written = update_object(state, &mut txn, req, target, old, new, false)?;
    drop(txn);
    Ok(written_response(req, StatusCode::OK, rt, written))
}

/// Replaces `old` with `new` (stored forms): server-owned fields kept, the
/// status subresource honoured, generation counted, ownership recorded, and
/// the object removed if this write cleared the last finalizer of an object
/// being deleted. A write that changes nothing changes no resourceVersion.
fn update_object(
    state: &Arc<State>,
    txn: &mut Txn<'_>,
    req: &Req,
    target: &Target,
    old: Value,
    mut new: Value,
    applied: bool,
) -> Result<Written, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let status_write = target.subresource.as_deref() == Some("status");
    if status_write {
        // Only status changes; metadata and spec stay as stored.
        let status = new.get("status").cloned();
        let managed = new["metadata"]["managedFields"].clone();
        new = old.clone();
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
        let meta = new["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
            "generation",
        ] {
            match old["metadata"].get(field) {
                Some(value) => meta.insert(field.into(), value.clone()),
                None => meta.remove(field),
            };
        }
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
                &name,
                "metadata.finalizers",
                &format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"
                ),
                "FieldValueForbidden",
            ));
        }
    }
    if rt.tracks_generation && spec_of(&old) != spec_of(&new) {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        new["metadata"]["generation"] = json!(generation);
    }
    let mut warnings = Vec::new();
    admission::validate(state, txn, rt, req, Some(&old), &mut new, &mut warnings)?;
    let now = now();
    if !applied {
        let subresource = target.subresource.as_deref();
        apply::record_update(Some(&old), &mut new, &manager(req), subresource, &now);
    }
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if new == old {
        return Ok(Written {
            object: old,
            warnings,
        });
    }
    new["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
    if req.dry_run() {
        return Ok(Written {
            object: new,
            warnings,
        });
    }
    let key = target.key();
    if deleting && finalizers(&new).is_empty() {
        txn.remove(rt.storage_key(), key, new.clone());
        crds::after_delete(state, txn, rt, &new);
    } else {
        txn.put(rt.storage_key(), key, new.clone());
        crds::after_write(state, txn, rt, &new);
    }
    Ok(Written {
        object: new,
        warnings,
    })
}

fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Everything but metadata and status: what generation counts changes of.
fn spec_of(object: &Value) -> Map<String, Value> {
    let mut rest = object.as_object().cloned().unwrap_or_default();
    for field in ["metadata", "status", "apiVersion", "kind"] {
        rest.remove(field);
    }
    rest
}

// === deleting ===

/// DeleteOptions from the body and the query.
struct DeleteOptions {
    uid: Option<String>,
    resource_version: Option<String>,
}

fn delete_options(req: &Req) -> Result<DeleteOptions, ApiError> {
    let body: Value = if req.body.is_empty() {
        Value::Null
    } else {
        decode_body(req)?
    };
    let precondition = |field: &str| body["preconditions"][field].as_str().map(str::to_owned);
    Ok(DeleteOptions {
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
    })
}

fn delete(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let options = delete_options(req)?;
    let mut txn = state.store.lock();
    let old = txn
        .get(&rt.storage_key(), &target.key())
        .cloned()
        .ok_or_else(|| ApiError::not_found(rt, &name))?;
    let meta = &old["metadata"];
    if let Some(uid) = &options.uid
        && Some(uid.as_str()) != meta["uid"].as_str()
    {
        return Err(ApiError::conflict(
            rt,
            &name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta["uid"].as_str().unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &options.resource_version
        && Some(rv.as_str()) != meta["resourceVersion"].as_str()
    {
        return Err(ApiError::conflict(
            rt,
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta["resourceVersion"].as_str().unwrap_or_default()
            ),
        ));
    }
    admission::validate_delete(state, &txn, rt, req, &old)?;
    let outcome = delete_object(state, &mut txn, req, target, old)?;
    drop(txn);
    Ok(match outcome {
        Deleted::Gone(status) => json(StatusCode::OK, &status),
        Deleted::Marked(object) => respond(req, StatusCode::OK, &served(rt, object)),
    })
}

enum Deleted {
    Gone(Value),
    Marked(Value),
}

fn delete_object(
    state: &Arc<State>,
    txn: &mut Txn<'_>,
    req: &Req,
    target: &Target,
    old: Value,
) -> Result<Deleted, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    if rt.plural == "namespaces" && rt.group.is_empty() {
        return namespaces::delete(state, txn, req, old).map(Deleted::Marked);
    }
    let key = target.key();
    let mut object = old.clone();
    if !finalizers(&old).is_empty() {
        if old["metadata"]["deletionTimestamp"].is_string() {
            return Ok(Deleted::Marked(old));
        }
        object["metadata"]["deletionTimestamp"] = json!(now());
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if rt.tracks_generation {
            object["metadata"]["generation"] =
                json!(old["metadata"]["generation"].as_i64().unwrap_or(0) + 1);
        }
        object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
        if !req.dry_run() {
            txn.put(rt.storage_key(), key, object.clone());
        }
        return Ok(Deleted::Marked(object));
    }
    object["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
    let uid = old["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if !req.dry_run() {
        txn.remove(rt.storage_key(), key, object.clone());
        crds::after_delete(state, txn, rt, &object);
    }
    Ok(Deleted::Gone(status::deleted(rt, &name, &uid)))
}

fn delete_collection(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let filter = Filter::from(req, rt)?;
    let mut txn = state.store.lock();
    let victims: Vec<(ObjectKey, Value)> = txn
        .list(&rt.storage_key(), target.namespace.as_deref(), None)
        .filter(|(_, object)| filter.matches(object))
        .map(|(key, object)| (key.clone(), object.clone()))
        .collect();
    let mut items = Vec::new();
    for ((namespace, name), object) in victims {
        let one = Target {
            rt: rt.clone(),
            namespace: (!namespace.is_empty()).then_some(namespace),
            name: Some(name),
            subresource: None,
        };
        admission::validate_delete(state, &txn, rt, req, &object)?;
        delete_object(state, &mut txn, req, &one, object.clone())?;
        items.push(served(rt, object));
    }
    let list = json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": {"resourceVersion": txn.current_rv().to_string()},
        "items": items,
    });
    Ok(json(StatusCode::OK, &list))
}
