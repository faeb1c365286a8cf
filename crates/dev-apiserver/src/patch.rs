//! The three patch formats kube-apiserver accepts besides apply: JSON merge
//! patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//!
//! Strategic merge is simplified: list merge keys come from a table of the
//! well-known fields of the built-in kinds, looked up by field name (the
//! real server reads them from Go struct tags per type). Supported
//! directives: `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is
//! accepted and ignored (the order of merged lists is the live order,
//! then new items).

use serde_json::{Map, Value};

/// Why a patch cannot be applied, as kube-apiserver words it.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("{0}")]
    Json(String),
    #[error("unable to decode the patch: {0}")]
    Malformed(String),
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "a merge patch must be a JSON object".into(),
        ));
    }
    json_patch::merge(target, patch);
    Ok(())
}

/// RFC 6902 JSON patch, atomic: on error the target is unchanged.
///
/// As kube-apiserver's patch library does, a `test` of a missing path
/// against `null` passes: kube-rs's finalizer helper adds the first
/// finalizer that way.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let mut patch = patch.clone();
    if let Some(operations) = patch.as_array_mut() {
        operations.retain(|op| {
            let missing_null_test = op["op"] == "test"
                && op["value"].is_null()
                && op["path"]
                    .as_str()
                    .is_some_and(|path| target.pointer(path).is_none());
            !missing_null_test
        });
    }
    let operations: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| PatchError::Malformed(e.to_string()))?;
    json_patch::patch(target, &operations).map_err(|e| PatchError::Json(e.to_string()))
}

/// Strategic merge patch for built-in kinds.
pub fn strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    _api_version: &str,
    _kind: &str,
) -> Result<(), PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "a strategic merge patch must be a JSON object".into(),
        ));
    }
    merge_map(target, patch);
    Ok(())
}

/// How a list field merges.
pub(crate) enum ListStrategy {
    /// Replaced whole (the default).
    Replace,
    /// Objects merged by the named key.
    MergeByKey(&'static str),
    /// Primitive values unioned.
    Union,
}

pub(crate) fn list_strategy(field: &str, items: &[Value]) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "webhooks" => ListStrategy::MergeByKey("name"),
        "volumeMounts" => ListStrategy::MergeByKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeByKey("devicePath"),
        "ownerReferences" => ListStrategy::MergeByKey("uid"),
        "conditions" => ListStrategy::MergeByKey("type"),
        "hostAliases" => ListStrategy::MergeByKey("ip"),
        "topologySpreadConstraints" => ListStrategy::MergeByKey("topologyKey"),
        // Container ports merge by containerPort, Service ports by port.
        "ports" if items.iter().any(|p| p.get("containerPort").is_some()) => {
            ListStrategy::MergeByKey("containerPort")
        }
        "ports" => ListStrategy::MergeByKey("port"),
        "finalizers" => ListStrategy::Union,
        _ => ListStrategy::Replace,
    }
}

fn merge_map(target: &mut Value, patch: &Value) {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replacement = patch.clone();
            replacement.remove("$patch");
            *target = Value::Object(replacement);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(object) = target.as_object_mut() else {
        return;
    };
    for (key, value) in patch {
        if key == "$patch" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if key == "$retainKeys" {
            if let Some(keep) = value.as_array() {
                let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
                object.retain(|k, _| keep.contains(&k.as_str()) || patch.contains_key(k));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                object.get_mut(field).and_then(Value::as_array_mut),
                value.as_array(),
            ) {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        match value {
            Value::Null => {
                object.remove(key);
            }
            Value::Object(_) => {
                let entry = object.entry(key.clone()).or_insert(Value::Null);
                merge_map(entry, value);
                if entry.is_null() {
                    object.remove(key);
                }
            }
            Value::Array(items) => {
                let merged = merge_list(key, object.get(key), items);
                object.insert(key.clone(), merged);
            }
            _ => {
                object.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list(field: &str, live: Option<&Value>, patch: &[Value]) -> Value {
    let live: Vec<Value> = live.and_then(Value::as_array).cloned().unwrap_or_default();
    if patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|item| item.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    match list_strategy(field, patch) {
        ListStrategy::Replace => Value::Array(patch.to_vec()),
        ListStrategy::Union => {
            let mut merged = live;
            for item in patch {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            Value::Array(merged)
        }
        ListStrategy::MergeByKey(key) => {
            let mut merged = live;
            for item in patch {
                let Some(id) = item.get(key) else {
                    merged.push(item.clone());
                    continue;
                };
                let position = merged.iter().position(|m| m.get(key) == Some(id));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        merged.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge_map(&mut merged[i], item),
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        merge_map(&mut fresh, item);
                        merged.push(fresh);
                    }
                }
            }
            Value::Array(merged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_null_deletes_a_field() {
        let mut target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        merge_patch(
            &mut target,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
        )
        .unwrap();
        assert_eq!(
            target,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}})
        );
    }

    #[test]
    fn a_failed_json_patch_test_leaves_the_target_unchanged() {
        let mut target = json!({"metadata": {"resourceVersion": "5"}, "data": {"a": "1"}});
        let before = target.clone();
        let error = json_patch(
            &mut target,
            &json!([
                {"op": "replace", "path": "/data/a", "value": "2"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "4"},
            ]),
        )
        .unwrap_err();
        assert_eq!(target, before);
        assert_eq!(
            error.to_string(),
            "operation '/1' failed at path '/metadata/resourceVersion': value did not match"
        );
    }

    #[test]
    fn a_null_test_of_a_missing_path_passes_as_in_kube_apiserver() {
        let mut target = json!({"metadata": {"name": "x"}});
        json_patch(
            &mut target,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["a"]},
            ]),
        )
        .unwrap();
        assert_eq!(target["metadata"]["finalizers"], json!(["a"]));
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let mut target = json!({"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}});
        strategic_merge_patch(
            &mut target,
            &json!({"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}}),
            "apps/v1",
            "Deployment",
        )
        .unwrap();
        assert_eq!(
            target["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])
        );
    }

    #[test]
    fn strategic_merge_deletes_an_item_by_directive() {
        let mut target = json!({"spec": {"ports": [{"port": 80}, {"port": 443}]}});
        strategic_merge_patch(
            &mut target,
            &json!({"spec": {"ports": [{"port": 80, "$patch": "delete"}]}}),
            "v1",
            "Service",
        )
        .unwrap();
        assert_eq!(target["spec"]["ports"], json!([{"port": 443}]));
    }

    #[test]
    fn strategic_merge_retain_keys_drops_the_others() {
        let mut target = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        strategic_merge_patch(
            &mut target,
            &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            "apps/v1",
            "Deployment",
        )
        .unwrap();
        assert_eq!(target["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn strategic_merge_unions_finalizers_and_deletes_from_primitive_lists() {
        let mut target = json!({"metadata": {"finalizers": ["a", "b"]}});
        strategic_merge_patch(
            &mut target,
            &json!({"metadata": {"finalizers": ["c"]}}),
            "v1",
            "ConfigMap",
        )
        .unwrap();
        assert_eq!(target["metadata"]["finalizers"], json!(["a", "b", "c"]));
        strategic_merge_patch(
            &mut target,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            "v1",
            "ConfigMap",
        )
        .unwrap();
        assert_eq!(target["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn strategic_merge_replaces_unkeyed_lists_and_removes_null_fields() {
        let mut target = json!({"spec": {"holderIdentity": "a", "renewTime": "t", "tolerations": [{"key": "x"}]}});
        strategic_merge_patch(
            &mut target,
            &json!({"spec": {"holderIdentity": null, "renewTime": null, "tolerations": [{"key": "y"}]}}),
            "coordination.k8s.io/v1",
            "Lease",
        )
        .unwrap();
        assert_eq!(target, json!({"spec": {"tolerations": [{"key": "y"}]}}));
    }
}
