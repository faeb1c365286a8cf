//! Defaults kube-apiserver applies to the built-in kinds clients rely on.

use base64::Engine;
use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Applies built-in defaulting to a create or update of `object`.
pub fn apply(rt: &ResourceType, object: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "secrets") => secret(object),
        ("", "services") => service(object),
        ("apps", "deployments" | "statefulsets") if object["spec"]["replicas"].is_null() => {
            object["spec"]["replicas"] = json!(1);
        }
        _ => {}
    }
}

/// `stringData` is write-only: merged into `data`, base64-encoded.
fn secret(object: &mut Value) {
    if object["type"].is_null() {
        object["type"] = json!("Opaque");
    }
    let Some(string_data) = object
        .as_object_mut()
        .and_then(|o| o.remove("stringData"))
        .and_then(|v| v.as_object().cloned())
    else {
        return;
    };
    if !object["data"].is_object() {
        object["data"] = json!({});
    }
    for (key, value) in string_data {
        let text = value.as_str().unwrap_or_default();
        object["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn service(object: &mut Value) {
    let spec = &mut object["spec"];
    if spec["type"].is_null() {
        spec["type"] = json!("ClusterIP");
    }
    if spec["clusterIP"].is_null() && spec["type"] != "ExternalName" {
        // A stable address derived from the name: the dev server has no
        // network, but clients print and compare it.
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let hash = name
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let ip = format!("10.96.{}.{}", (hash >> 8) % 256, hash % 254 + 1);
        object["spec"]["clusterIP"] = json!(ip);
        object["spec"]["clusterIPs"] = json!([ip]);
    }
    if let Some(ports) = object["spec"]["ports"].as_array_mut() {
        for port in ports {
            if port["protocol"].is_null() {
                port["protocol"] = json!("TCP");
            }
            if port["targetPort"].is_null() {
                port["targetPort"] = port["port"].clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, plural: &str) -> ResourceType {
        crate::resources::builtins()
            .into_iter()
            .find(|t| t.group == group && t.plural == plural)
            .map(|t| std::sync::Arc::try_unwrap(t).unwrap())
            .unwrap()
    }

    #[test]
    fn secret_string_data_becomes_base64_data() {
        let mut secret = json!({"stringData": {"token": "abc"}, "data": {"a": "eA=="}});
        apply(&rt("", "secrets"), &mut secret);
        assert_eq!(
            secret,
            json!({"type": "Opaque", "data": {"a": "eA==", "token": "YWJj"}})
        );
    }

    #[test]
    fn service_ports_default_to_tcp_and_their_port() {
        let mut service = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
        apply(&rt("", "services"), &mut service);
        assert_eq!(service["spec"]["type"], "ClusterIP");
        assert_eq!(
            service["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
        );
        assert!(
            service["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.96.")
        );
    }
}
