//! What the controllers of a cluster without nodes report. This server runs no
//! kubelet and no scheduler, so pods are never placed and never run; a created
//! workload gets the status its controller gives it on such a cluster, and
//! keeps it until a client (a test standing in for the controllers) writes
//! another through `/status`.

use serde_json::{Value, json};

use crate::gofmt::now;
use crate::resources::ResourceType;

/// The status a created object of this built-in kind starts with, as
/// kube-apiserver's strategies reset it and the controllers then write it.
/// None for kinds without a status subresource, and for namespaces (which
/// `namespaces.rs` handles).
pub fn initial_status(rt: &ResourceType, object: &Value) -> Option<Value> {
    if !rt.status_subresource || rt.is_custom() {
        return None;
    }
    let spec = &object["spec"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1);
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    Some(match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => return None,
        ("", "Service") => json!({"loadBalancer": {}}),
        ("", "PersistentVolumeClaim") => json!({"phase": "Pending"}),
        // The quota controller's first count; nothing recounts it.
        ("", "ResourceQuota") => {
            let hard = spec["hard"].as_object().cloned().unwrap_or_default();
            let used: serde_json::Map<String, Value> =
                hard.keys().map(|k| (k.clone(), json!("0"))).collect();
            json!({"hard": hard, "used": used})
        }
        ("", "PersistentVolume") => json!({"phase": "Pending"}),
        ("", "Pod") => json!({
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": now(),
                "reason": "Unschedulable",
                "message": "no nodes available to schedule pods",
            }],
            "qosClass": "BestEffort",
        }),
        // Its ReplicaSet's pods are created and stay Pending.
        ("apps", "Deployment") if replicas > 0 => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "unavailableReplicas": replicas,
            "conditions": [condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )],
        }),
        ("apps", "Deployment") => json!({
            "observedGeneration": generation,
            "conditions": [condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )],
        }),
        // The first pod is created and stays Pending, so no more follow.
        ("apps", "StatefulSet") => json!({
            "observedGeneration": generation,
            "replicas": replicas.min(1),
            "currentReplicas": replicas.min(1),
            "updatedReplicas": replicas.min(1),
            "availableReplicas": 0,
        }),
        ("apps", "ReplicaSet") | ("", "ReplicationController") => json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
        }),
        // No node is eligible: nothing is desired, and so all is well.
        ("apps", "DaemonSet") => json!({
            "observedGeneration": generation,
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        }),
        // Its pods are created and stay Pending: active, never ready.
        ("batch", "Job") if spec["suspend"] != json!(true) => json!({
            "startTime": now(),
            "active": spec["parallelism"].as_i64().unwrap_or(1),
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }),
        _ => json!({}),
    })
}

/// After a spec change: the controller has seen the new generation.
pub fn observe_generation(rt: &ResourceType, object: &mut Value) {
    if rt.is_custom() || !object["status"]["observedGeneration"].is_i64() {
        return;
    }
    object["status"]["observedGeneration"] = object["metadata"]["generation"].clone();
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = now();
    json!({
        "type": type_,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
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
    fn a_service_starts_with_an_empty_load_balancer_and_a_config_map_with_no_status() {
        let service = json!({"spec": {"ports": [{"port": 80}]}});
        assert_eq!(
            initial_status(&rt("", "services"), &service),
            Some(json!({"loadBalancer": {}}))
        );
        assert_eq!(initial_status(&rt("", "configmaps"), &json!({})), None);
    }

    #[test]
    fn an_unscheduled_deployment_is_unavailable_and_a_daemon_set_desires_nothing() {
        let deployment = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2}});
        let status = initial_status(&rt("apps", "deployments"), &deployment).unwrap();
        assert_eq!(status["replicas"], 2);
        assert_eq!(status["unavailableReplicas"], 2);
        assert_eq!(status.get("readyReplicas"), None);
        assert_eq!(
            status["conditions"][0]["reason"],
            "MinimumReplicasUnavailable"
        );

        let daemon_set = json!({"metadata": {"generation": 3}, "spec": {}});
        let status = initial_status(&rt("apps", "daemonsets"), &daemon_set).unwrap();
        assert_eq!(status["desiredNumberScheduled"], 0);
        assert_eq!(status["observedGeneration"], 3);
    }

    #[test]
    fn a_job_is_active_and_never_ready_unless_suspended() {
        let job = json!({"spec": {"template": {}}});
        let status = initial_status(&rt("batch", "jobs"), &job).unwrap();
        assert_eq!(
            (status["active"].clone(), status["ready"].clone()),
            (json!(1), json!(0))
        );
        let suspended = json!({"spec": {"suspend": true}});
        assert_eq!(
            initial_status(&rt("batch", "jobs"), &suspended),
            Some(json!({}))
        );
    }
}
