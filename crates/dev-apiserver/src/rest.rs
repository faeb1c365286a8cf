//! The REST verbs on resources: get, list, watch, create, update, patch,
//! delete and deletecollection, with kube-apiserver's semantics for
//! resourceVersions, generation, the status subresource, finalizers,
//! preconditions, dry runs and field ownership.

use std::sync::Arc;

use base64::Engine;
use http::{Method, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::gofmt::now;
use crate::request::{Req, Target};
use crate::resources::{ResourceType, served, served_ref};
use crate::respond::{Body, include_object, json, respond, table_response};
use crate::selectors::Filter;
use crate::state::{Authorization, State};
use crate::status::ApiError;
use crate::store::ObjectKey;
use crate::write::{self, Change, DeleteOptions, Outcome, Place, WriteOptions, to_stored};
use crate::{apply, faults, patch, protobuf, rbac, scale, table, watch};

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
    let verb = verb(req, &target);
    let request = rbac::Request {
        user: &req.user,
        verb,
        resource_request: true,
        api_group: &target.rt.group,
        resource: &target.rt.plural,
        subresource: target.subresource.as_deref().unwrap_or_default(),
        namespace: target.namespace.as_deref().unwrap_or_default(),
        name: target.name.as_deref().unwrap_or_default(),
        path: &req.path,
    };
    state.authorize(&request)?;
    faults::inject(
        &state.faults,
        faults::Target {
            verb,
            group: &target.rt.group,
            resource: &target.rt.plural,
            subresource: target.subresource.as_deref().unwrap_or_default(),
            namespace: target.namespace.as_deref().unwrap_or_default(),
            user: &request.user.username,
        },
    )
    .await?;
    if target.rt.review {
        return match req.method {
            Method::POST => match target.rt.kind.as_str() {
                "TokenReview" => token_review(state, req, &target),
                "SelfSubjectReview" => {
                    let status = json!({"userInfo": req.user.to_json()});
                    Ok(answered(decode_body(req)?, &target, status))
                }
                // Listing what a user may do is not implemented: kubectl
                // prints the evaluation error.
                "SelfSubjectRulesReview" => {
                    let status = json!({
                        "resourceRules": [],
                        "nonResourceRules": [],
                        "incomplete": true,
                        "evaluationError": "this dev API server does not list rules",
                    });
                    Ok(answered(decode_body(req)?, &target, status))
                }
                _ => access_review(state, req, &target),
            },
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )),
        };
    }
    let subresource = target.subresource.as_deref();
    match (&req.method, target.name.is_some(), subresource) {
        (&Method::GET, true, Some("scale")) => get_scale(state, req, &target),
        (&Method::PUT | &Method::PATCH, true, Some("scale")) => {
            update_scale(state, req, &target).await
        }
        (&Method::GET, true, None | Some("status")) => get(state, req, &target),
        (&Method::GET, false, None) if watching(req) => watch::watch(state, req, &target),
        (&Method::GET, false, None) => list(state, req, &target),
        (&Method::POST, false, None) => create(state, req, &target).await,
        (&Method::PUT, true, _) => update(state, req, &target).await,
        (&Method::PATCH, true, _) => patch(state, req, &target).await,
        (&Method::DELETE, true, None) => delete(state, req, &target).await,
        (&Method::DELETE, false, None) => delete_collection(state, req, &target).await,
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

/// The authorization verb of a request.
fn verb(req: &Req, target: &Target) -> &'static str {
    match (&req.method, target.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if watching(req) => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

/// SubjectAccessReview (about the user in its spec) and
/// SelfSubjectAccessReview (about the requester), answered from RBAC.
fn access_review(state: &State, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let review = decode_body(req)?;
    let spec = review["spec"].clone();
    let user = if target.rt.kind == "SelfSubjectAccessReview" {
        req.user.clone()
    } else {
        crate::attributes::UserInfo {
            username: spec["user"].as_str().unwrap_or_default().to_owned(),
            uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
            groups: spec["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect(),
            extra: serde_json::from_value(spec["extra"].clone()).unwrap_or_default(),
        }
    };
    let status = if state.authorization == Authorization::AlwaysAllow {
        json!({"allowed": true, "reason": "authorization is off on this server"})
    } else {
        state.with_rbac(|rbac| rbac.access_review_status(&spec, &user))
    };
    Ok(answered(review, target, status))
}

/// The audience of this server's tokens: kube-apiserver's `--api-audiences`,
/// which defaults to its service-account issuer.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// TokenReview (`authentication.k8s.io/v1`): whom a bearer token stands
/// for, answered as kube-apiserver answers it for its static, audience-less
/// tokens: `{"authenticated": true, "user": {...}, "audiences": [...]}`, or
/// for an unknown token `{"user": {}}` (Go leaves `authenticated: false`
/// out). A review naming audiences none of which is [`API_AUDIENCE`] is not
/// authenticated, with kube's error.
fn token_review(state: &State, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let review = decode_body(req)?;
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences: Vec<&str> = review["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let status = match state.users.user_of(token) {
        Some(user) if audiences.is_empty() || audiences.contains(&API_AUDIENCE) => json!({
            "authenticated": true,
            "user": user.to_json(),
            "audiences": [API_AUDIENCE],
        }),
        Some(_) => {
            let quoted = |list: &[&str]| {
                let items: Vec<String> = list.iter().map(|a| json!(a).to_string()).collect();
                format!("[{}]", items.join(" "))
            };
            json!({
                "user": {},
                "error": format!(
                    "token audiences {} is invalid for the target audiences {}",
                    quoted(&[API_AUDIENCE]),
                    quoted(&audiences)
                ),
            })
        }
        None => json!({"user": {}}),
    };
    Ok(answered(review, target, status))
}

/// A review sent back with its `status`, as created (201).
fn answered(mut review: Value, target: &Target, status: Value) -> Response<Body> {
    review["status"] = status;
    review["apiVersion"] = json!(target.rt.api_version());
    review["kind"] = json!(target.rt.kind);
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    json(StatusCode::CREATED, &review)
}

fn watching(req: &Req) -> bool {
    req.flag("watch")
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
        Some("scale") if scale::has_scale(&rt) => {}
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
    // Built by hand: `json!` would copy every item (`to_value`).
    let list = serde_json::Map::from_iter([
        ("kind".to_owned(), Value::from(format!("{}List", rt.kind))),
        ("apiVersion".to_owned(), Value::from(rt.api_version())),
        ("metadata".to_owned(), metadata),
        ("items".to_owned(), Value::Array(list_items(rt, items))),
    ]);
    Ok(respond(req, StatusCode::OK, &Value::Object(list)))
}

/// A list's items: a typed list's carry no `apiVersion` and `kind`, as Go
/// prints them; a custom resource list's do (it is unstructured).
fn list_items(rt: &ResourceType, mut items: Vec<Value>) -> Vec<Value> {
    if !rt.is_custom() {
        for item in &mut items {
            if let Some(item) = item.as_object_mut() {
                item.remove("apiVersion");
                item.remove("kind");
            }
        }
    }
    items
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

// === writing ===

/// Parses a request body: JSON, YAML or protobuf.
fn decode_body(req: &Req) -> Result<Value, ApiError> {
    let content_type = req.header(header::CONTENT_TYPE);
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let value: Value = match media {
        "application/vnd.kubernetes.protobuf" => {
            protobuf::decode(&req.body).map_err(|e| ApiError::bad_request(e.to_string()))?
        }
        "application/yaml" | "application/apply-patch+yaml" => decode_yaml(&req.body)?,
        _ => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(value)
}

/// YAML, parsed as JSON where it is JSON (what clients such as kube-rs
/// send in apply patches): the same value, at a fraction of the YAML
/// parser's cost, which was 5% of the server's CPU in a burst of Locks.
fn decode_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if body.trim_ascii_start().starts_with(b"{")
        && let Ok(value) = serde_json::from_slice(body)
    {
        return Ok(value);
    }
    serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// The options of a write request. The field manager is the
/// `fieldManager` parameter, else the client's user agent up to the first
/// `/`, as kube-apiserver does.
fn write_options(req: &Req) -> WriteOptions {
    let manager = req
        .param("fieldManager")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let agent = req.header(header::USER_AGENT);
            agent
                .split('/')
                .next()
                .filter(|a| !a.is_empty())
                .unwrap_or("unknown")
                .to_owned()
        });
    WriteOptions {
        user: req.user.clone(),
        dry_run: req.dry_run(),
        manager,
        field_validation: req.param("fieldValidation").map(str::to_owned),
    }
}

fn place(target: &Target) -> Place {
    Place {
        rt: target.rt.clone(),
        namespace: target.namespace.clone(),
        subresource: target.subresource.clone(),
    }
}

fn written(req: &Req, status: StatusCode, rt: &ResourceType, outcome: Outcome) -> Response<Body> {
    let mut response = respond(req, status, &served_ref(rt, &outcome.object));
    add_warnings(&mut response, &outcome.warnings);
    response
}

fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        if let Ok(value) = header::HeaderValue::from_str(&format!(
            "299 - {}",
            serde_json::to_string(warning).unwrap_or_default()
        )) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

async fn create(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
    let object = to_stored(&target.rt, decode_body(req)?)?;
    let outcome = write::create(
        state,
        &place(target),
        &write_options(req),
        object,
        None,
        false,
    )
    .await?;
    Ok(written(req, StatusCode::CREATED, &target.rt, outcome))
}

async fn update(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
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
    let opts = write_options(req);
    let outcome = write::update(
        state,
        &place(target),
        &opts,
        &name,
        Change::Replace(&new),
        false,
    )
    .await?;
    Ok(written(req, StatusCode::OK, rt, outcome))
}

async fn patch(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let content_type = req.header(header::CONTENT_TYPE);
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let opts = write_options(req);
    let place = place(target);

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
        let force = req.flag("force");
        let subresource = target.subresource.clone();
        let merge = |live: Option<&Value>| -> Result<Value, ApiError> {
            let live = live.map(|o| served(rt, o.clone()));
            let merged = apply::apply(
                live.as_ref(),
                &applied,
                manager,
                force,
                subresource.as_deref(),
                &now(),
            )
            .map_err(|e| match e {
                apply::ApplyError::Conflicts(_) => {
                    ApiError::apply_conflict(e.to_string(), e.causes_json())
                }
                apply::ApplyError::Invalid(message) => ApiError::bad_request(message),
            })?;
            to_stored(rt, merged)
        };
        let exists = state
            .store
            .lock()
            .get(&rt.storage_key(), &target.key())
            .is_some();
        if !exists {
            if subresource.is_some() {
                return Err(ApiError::not_found(rt, &name));
            }
            let outcome =
                write::create(state, &place, &opts, merge(None)?, Some(&name), true).await;
            // Lost a race with another create: apply onto it instead.
            if !matches!(&outcome, Err(e) if e.code == 409) {
                return Ok(written(req, StatusCode::CREATED, rt, outcome?));
            }
        }
        let derive = move |old: &Value| merge(Some(old));
        let outcome =
            write::update(state, &place, &opts, &name, Change::Derive(&derive), true).await?;
        return Ok(written(req, StatusCode::OK, rt, outcome));
    }

    let (kind, patch_body) = PatchKind::of(req, rt)?;
    let derive = move |old: &Value| -> Result<Value, ApiError> {
        let mut new = served(rt, old.clone());
        kind.apply(&mut new, &patch_body)?;
        to_stored(rt, new)
    };
    let outcome =
        write::update(state, &place, &opts, &name, Change::Derive(&derive), false).await?;
    Ok(written(req, StatusCode::OK, rt, outcome))
}

#[derive(Clone, Copy)]
enum PatchKind {
    Merge,
    Json,
    Strategic,
}

impl PatchKind {
    /// A patch request's kind, by its content type, and its body.
    fn of(req: &Req, rt: &ResourceType) -> Result<(PatchKind, Value), ApiError> {
        let content_type = req.header(header::CONTENT_TYPE);
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let kind = match media {
            "application/merge-patch+json" => PatchKind::Merge,
            "application/json-patch+json" => PatchKind::Json,
            "application/strategic-merge-patch+json" if !rt.is_custom() => PatchKind::Strategic,
            _ => {
                return Err(ApiError::unsupported_media_type(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]));
            }
        };
        let body = serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        Ok((kind, body))
    }

    /// Patches `target`, an object with its apiVersion and kind.
    fn apply(self, target: &mut Value, patch_body: &Value) -> Result<(), ApiError> {
        let api_version = target["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = target["kind"].as_str().unwrap_or_default().to_owned();
        match self {
            PatchKind::Merge => patch::merge_patch(target, patch_body),
            PatchKind::Json => patch::json_patch(target, patch_body),
            PatchKind::Strategic => {
                patch::strategic_merge_patch(target, patch_body, &api_version, &kind)
            }
        }
        .map_err(|e| ApiError::unprocessable_patch(e.to_string()))
    }
}

// === scale ===

fn get_scale(state: &State, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let object = state
        .store
        .lock()
        .get(&target.rt.storage_key(), &target.key())
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found(&target.rt, target.name.as_deref().unwrap_or_default())
        })?;
    Ok(respond(req, StatusCode::OK, &scale::of(&object)))
}

/// A PUT of a Scale, or a patch of one: the object's `spec.replicas`
/// changes, and the new Scale is answered.
async fn update_scale(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let change = if req.method == Method::PUT {
        (None, decode_body(req)?)
    } else {
        let (kind, body) = PatchKind::of(req, rt)?;
        (Some(kind), body)
    };
    let derive = move |old: &Value| -> Result<Value, ApiError> {
        let wanted = match &change {
            (None, scale) => scale.clone(),
            (Some(kind), patch_body) => {
                let mut scale = scale::of(old);
                kind.apply(&mut scale, patch_body)?;
                // A patch is of the Scale as it is: its resourceVersion is not a precondition.
                if let Some(meta) = scale["metadata"].as_object_mut() {
                    meta.remove("resourceVersion");
                }
                scale
            }
        };
        let mut new = scale::scaled(rt, old, &wanted)?;
        // The Scale's resourceVersion is checked above; this one is the stored one.
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        Ok(new)
    };
    let outcome = write::update(
        state,
        &place(target),
        &write_options(req),
        &name,
        Change::Derive(&derive),
        false,
    )
    .await?;
    let mut response = respond(req, StatusCode::OK, &scale::of(&outcome.object));
    add_warnings(&mut response, &outcome.warnings);
    Ok(response)
}

// === deleting ===

/// DeleteOptions from the body and the query.
fn delete_options(req: &Req) -> Result<DeleteOptions, ApiError> {
    let body: Value = if req.body.is_empty() {
        Value::Null
    } else {
        decode_body(req)?
    };
    let precondition = |field: &str| body["preconditions"][field].as_str().map(str::to_owned);
    let propagation = req
        .param("propagationPolicy")
        .map(str::to_owned)
        .or_else(|| body["propagationPolicy"].as_str().map(str::to_owned))
        .or_else(|| (body["orphanDependents"] == json!(true)).then(|| "Orphan".to_owned()));
    Ok(DeleteOptions {
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
        propagation,
        dry_run: body["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All")),
    })
}

async fn delete(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let name = target.name.clone().unwrap_or_default();
    let options = delete_options(req)?;
    let mut opts = write_options(req);
    opts.dry_run |= options.dry_run;
    let outcome = write::delete(state, &place(target), &opts, &name, &options).await?;
    let body = write::delete_response(rt, &outcome);
    let mut response = if outcome.removed && !write::returns_deleted_object(rt) {
        json(StatusCode::OK, &body)
    } else {
        respond(req, StatusCode::OK, &body)
    };
    add_warnings(&mut response, &outcome.warnings);
    Ok(response)
}

async fn delete_collection(
    state: &Arc<State>,
    req: &Req,
    target: &Target,
) -> Result<Response<Body>, ApiError> {
    let rt = &target.rt;
    let filter = Filter::from(req, rt)?;
    let options = delete_options(req)?;
    let mut opts = write_options(req);
    opts.dry_run |= options.dry_run;
    let victims: Vec<ObjectKey> = state
        .store
        .lock()
        .list(&rt.storage_key(), target.namespace.as_deref(), None)
        .filter(|(_, object)| filter.matches(object))
        .map(|(key, _)| key.clone())
        .collect();
    let mut items = Vec::new();
    for (namespace, name) in victims {
        let one = Place {
            rt: rt.clone(),
            namespace: (!namespace.is_empty()).then_some(namespace),
            subresource: None,
        };
        match write::delete(state, &one, &opts, &name, &options).await {
            Ok(outcome) => items.push(served(rt, Arc::unwrap_or_clone(outcome.object))),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": {"resourceVersion": state.store.lock().current_rv().to_string()},
        "items": list_items(rt, items),
    });
    Ok(json(StatusCode::OK, &list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yaml_body_reads_the_same_whether_it_is_json_or_not() {
        let json = br#" {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 3, "f": 1.5, "on": true, "none": null}}"#;
        let yaml = b"metadata:\n  name: a\n  labels: {x: \"1\"}\nspec: {n: 3, f: 1.5, \"on\": true, none: null}\n";
        let flow = b"{metadata: {name: a, labels: {x: \"1\"}}, spec: {n: 3, f: 1.5, \"on\": true, none: null}}";
        let expected = serde_json::from_slice::<Value>(json).unwrap();
        assert_eq!(decode_yaml(json).unwrap(), expected);
        assert_eq!(decode_yaml(yaml).unwrap(), expected);
        // JSON-like but not JSON: the YAML parser reads it.
        assert_eq!(decode_yaml(flow).unwrap(), expected);
        let error = decode_yaml(b"{metadata: [").unwrap_err();
        let message = error.body["message"].as_str().unwrap();
        assert!(message.starts_with("error decoding YAML: "), "{message}");
    }
}
