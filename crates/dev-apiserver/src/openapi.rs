//! OpenAPI v3 documents: enough for `kubectl apply` (which looks for each
//! kind's patch operation and its `fieldValidation` parameter) and for
//! `kubectl explain`: a custom resource's schema is its CRD's, a built-in's
//! is k8s-openapi's (with every definition it refers to).

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

/// The schema name kube-apiserver gives a kind, e.g.
/// `io.k8s.api.core.v1.ConfigMap` or `com.navique.core.v1alpha1.Lock`.
fn schema_name(t: &ResourceType) -> String {
    match t.builtin {
        Some(builtin) => builtin.message.to_owned(),
        None => {
            let reversed: Vec<&str> = t.group.split('.').rev().collect();
            format!("{}.{}.{}", reversed.join("."), t.version, t.kind)
        }
    }
}

/// k8s-openapi's schemas of every built-in kind and what they refer to, by
/// definition name, as OpenAPI v3 components.
fn builtin_schemas() -> &'static Map<String, Value> {
    static SCHEMAS: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        for resource in crate::schema::RESOURCES {
            (resource.openapi)(&mut generator);
        }
        generator.take_definitions(true).into_iter().collect()
    })
}

/// The names of the definitions `schema` refers to, directly or not.
fn references(
    schema: &Value,
    all: &Map<String, Value>,
    found: &mut std::collections::BTreeSet<String>,
) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "$ref"
                    && let Some(name) = value
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/components/schemas/"))
                {
                    if found.insert(name.to_owned())
                        && let Some(definition) = all.get(name)
                    {
                        references(definition, all, found);
                    }
                } else {
                    references(value, all, found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, all, found)),
        _ => {}
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
        if t.builtin.is_some() {
            let all = builtin_schemas();
            let mut used = std::collections::BTreeSet::from([name.clone()]);
            references(&all[&name], all, &mut used);
            for definition in used {
                let mut schema = all[&definition].clone();
                if definition == name {
                    schema["x-kubernetes-group-version-kind"] = json!([gvk]);
                }
                schemas.insert(definition, schema);
            }
            continue;
        }
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
