//! OpenAPI v3 documents: enough for `kubectl apply` (which looks for each
//! kind's patch operation and its `fieldValidation` parameter) and for
//! `kubectl explain` on custom resources, whose schemas are published whole.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;
use crate::state::State;
use crate::status::ApiError;

/// `api/v1` or `apis/<group>/<version>`.
fn path_of(t: &ResourceType) -> String {
    if t.group.is_empty() {
        format!("api/{}", t.version)
    } else {
        format!("apis/{}/{}", t.group, t.version)
    }
}

fn by_group_version(state: &State) -> BTreeMap<String, Vec<Arc<ResourceType>>> {
    let mut map: BTreeMap<String, Vec<Arc<ResourceType>>> = BTreeMap::new();
    for t in state.types() {
        map.entry(path_of(&t)).or_default().push(t);
    }
    map
}

/// `GET /openapi/v3`: every group-version with a URL whose hash changes
/// when its document does, so clients know when to refetch.
pub fn root(state: &State) -> Value {
    let paths: Map<String, Value> = by_group_version(state)
        .into_iter()
        .map(|(path, types)| {
            let doc = build(&types);
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            doc.to_string().hash(&mut hasher);
            let url = format!("/openapi/v3/{path}?hash={:016X}", hasher.finish());
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `GET /openapi/v3/<group-version path>`.
pub fn document(state: &State, path: &str) -> Result<Value, ApiError> {
    by_group_version(state)
        .get(path)
        .map(|types| build(types))
        .ok_or_else(ApiError::path_not_found)
}

/// The schema name kube-apiserver would give a kind, e.g.
/// `io.k8s.api.core.v1.ConfigMap` or `com.navique.core.v1alpha1.Lock`.
fn schema_name(t: &ResourceType) -> String {
    if t.is_custom() {
        let reversed: Vec<&str> = t.group.split('.').rev().collect();
        format!("{}.{}.{}", reversed.join("."), t.version, t.kind)
    } else {
        let group = t
            .group
            .split('.')
            .next()
            .filter(|g| !g.is_empty())
            .unwrap_or("core");
        format!("io.k8s.api.{group}.{}.{}", t.version, t.kind)
    }
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn build(types: &[Arc<ResourceType>]) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        OBJECT_META.to_owned(),
        json!({
            "description": "ObjectMeta is metadata that all persisted resources must have.",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    );
    for t in types {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let name = schema_name(t);
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        let operation = |action: &str, params: &[&str]| {
            let parameters: Vec<Value> = params
                .iter()
                .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
                .collect();
            json!({
                "operationId": format!("{action}{}", t.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": {"200": {"content": {"application/json": {"schema": reference}}}},
            })
        };
        let prefix = format!("/{}", path_of(t));
        let collection = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{prefix}/{}", t.plural)
        };
        let write = ["dryRun", "fieldManager", "fieldValidation"];
        paths.insert(
            collection.clone(),
            json!({
                "get": operation("list", &["labelSelector", "fieldSelector", "limit", "continue", "watch"]),
                "post": operation("post", &write),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation("get", &[]),
                "put": operation("put", &write),
                "patch": operation("patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
                "delete": operation("delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
            }),
        );
        let mut schema = t.openapi_schema.clone().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert("apiVersion".to_owned(), json!({"type": "string"}));
            properties.insert("kind".to_owned(), json!({"type": "string"}));
            properties.insert(
                "metadata".to_owned(),
                json!({"$ref": format!("#/components/schemas/{OBJECT_META}")}),
            );
        }
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(name, schema);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}
