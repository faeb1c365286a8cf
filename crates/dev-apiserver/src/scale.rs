//! The `/scale` subresource of the workloads kube-apiserver scales
//! (`kubectl scale`, HorizontalPodAutoscalers): an `autoscaling/v1` Scale
//! read from, and written to, the object's `spec.replicas`.

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::table::selector_string;

/// Whether `rt` has a `/scale` subresource.
pub fn has_scale(rt: &ResourceType) -> bool {
    matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        ("apps", "deployments" | "statefulsets" | "replicasets") | ("", "replicationcontrollers")
    )
}

/// The Scale of a stored object.
pub fn of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut metadata = serde_json::Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = meta.get(field) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    // A replication controller selects by a plain map.
    let selector = match &object["spec"]["selector"] {
        Value::Object(map)
            if !map.contains_key("matchLabels") && !map.contains_key("matchExpressions") =>
        {
            json!({"matchLabels": map})
        }
        selector => selector.clone(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {
            "replicas": object["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector_string(Some(&selector)).unwrap_or_default(),
        },
    })
}

/// The object with the replicas `scale` asks for.
pub fn scaled(rt: &ResourceType, old: &Value, scale: &Value) -> Result<Value, ApiError> {
    let name = old["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str()
        && !rv.is_empty()
        && Some(rv) != old["metadata"]["resourceVersion"].as_str()
    {
        return Err(ApiError::stale(rt, name));
    }
    let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::invalid(
            rt,
            name,
            format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
            ),
            vec![
                json!({"reason": "FieldValueInvalid", "message": format!("Invalid value: {replicas}: must be greater than or equal to 0"), "field": "spec.replicas"}),
            ],
        ));
    }
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(replicas);
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, plural: &str) -> std::sync::Arc<ResourceType> {
        crate::resources::builtins()
            .into_iter()
            .find(|t| t.group == group && t.plural == plural)
            .unwrap()
    }

    #[test]
    fn a_deployment_scale_reads_its_replicas_and_selector_and_writes_its_replicas() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "tier": "front"}}},
            "status": {"replicas": 2}
        });
        let scale = of(&deployment);
        assert_eq!(
            scale,
            json!({
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "7"},
                "spec": {"replicas": 2},
                "status": {"replicas": 2, "selector": "app=web,tier=front"}
            })
        );
        let rt = rt("apps", "deployments");
        let scaled = scaled(&rt, &deployment, &json!({"spec": {"replicas": 5}})).unwrap();
        assert_eq!(scaled["spec"]["replicas"], 5);
        let stale = json!({"metadata": {"resourceVersion": "6"}, "spec": {"replicas": 5}});
        assert_eq!(
            super::scaled(&rt, &deployment, &stale).unwrap_err().code,
            409
        );
        let negative = json!({"spec": {"replicas": -1}});
        assert_eq!(
            super::scaled(&rt, &deployment, &negative).unwrap_err().code,
            422
        );
    }

    #[test]
    fn a_replication_controller_scale_formats_its_map_selector() {
        let rc = json!({"metadata": {"name": "old"}, "spec": {"replicas": 1, "selector": {"app": "old"}}});
        assert_eq!(of(&rc)["status"]["selector"], "app=old");
    }
}
