//! Defaults kube-apiserver applies to the built-in kinds clients rely on:
//! Secrets, Services, the workloads a Stack holds and the pods they
//! template (`SetDefaults_*` of `k8s.io/kubernetes/pkg/apis/*/v1`).

use base64::Engine;
use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Applies built-in defaulting to a create or update of `object`.
pub fn apply(rt: &ResourceType, object: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "secrets") => secret(object),
        ("", "services") => service(object),
        ("", "pods") => pod_spec(&mut object["spec"]),
        ("", "persistentvolumeclaims") => {
            or(&mut object["spec"], "volumeMode", json!("Filesystem"))
        }
        ("apps", "deployments") => deployment(&mut object["spec"]),
        ("apps", "statefulsets") => stateful_set(&mut object["spec"]),
        ("apps", "daemonsets") => daemon_set(&mut object["spec"]),
        ("apps", "replicasets") => {
            or(&mut object["spec"], "replicas", json!(1));
            pod_spec(&mut object["spec"]["template"]["spec"]);
        }
        ("batch", "jobs") => {
            job_selector(object);
            job(&mut object["spec"]);
        }
        ("batch", "cronjobs") => cron_job(&mut object["spec"]),
        _ => {}
    }
}

/// Sets `field` of `object` when it is unset.
fn or(object: &mut Value, field: &str, value: Value) {
    if object.is_object() && object[field].is_null() {
        object[field] = value;
    }
}

/// Sets `field` when it is unset or zero: a Go non-pointer number, whose
/// zero means unset.
fn or_nonzero(object: &mut Value, field: &str, value: Value) {
    if object.is_object() && matches!(object[field].as_i64(), None | Some(0)) {
        object[field] = value;
    }
}

fn deployment(spec: &mut Value) {
    or(spec, "replicas", json!(1));
    or(spec, "strategy", json!({}));
    or(&mut spec["strategy"], "type", json!("RollingUpdate"));
    if spec["strategy"]["type"] == "RollingUpdate" {
        or(&mut spec["strategy"], "rollingUpdate", json!({}));
        let rolling = &mut spec["strategy"]["rollingUpdate"];
        or(rolling, "maxUnavailable", json!("25%"));
        or(rolling, "maxSurge", json!("25%"));
    }
    or(spec, "revisionHistoryLimit", json!(10));
    or(spec, "progressDeadlineSeconds", json!(600));
    pod_spec(&mut spec["template"]["spec"]);
}

fn stateful_set(spec: &mut Value) {
    or(spec, "replicas", json!(1));
    or(spec, "podManagementPolicy", json!("OrderedReady"));
    or(spec, "updateStrategy", json!({}));
    or(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        or(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
        or(
            &mut spec["updateStrategy"]["rollingUpdate"],
            "partition",
            json!(0),
        );
    }
    or(spec, "revisionHistoryLimit", json!(10));
    or(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    pod_spec(&mut spec["template"]["spec"]);
}

fn daemon_set(spec: &mut Value) {
    or(spec, "updateStrategy", json!({}));
    or(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        or(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
        let rolling = &mut spec["updateStrategy"]["rollingUpdate"];
        or(rolling, "maxUnavailable", json!(1));
        or(rolling, "maxSurge", json!(0));
    }
    or(spec, "revisionHistoryLimit", json!(10));
    pod_spec(&mut spec["template"]["spec"]);
}

fn job(spec: &mut Value) {
    or(spec, "completions", json!(1));
    or(spec, "parallelism", json!(1));
    or(spec, "backoffLimit", json!(6));
    or(spec, "completionMode", json!("NonIndexed"));
    or(spec, "suspend", json!(false));
    or(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    pod_spec(&mut spec["template"]["spec"]);
}

/// The job strategy's generated selector: the Job's pods are labelled with
/// its uid and name, and selected by the uid.
fn job_selector(object: &mut Value) {
    let (Some(uid), Some(name)) = (
        object["metadata"]["uid"].as_str().map(str::to_owned),
        object["metadata"]["name"].as_str().map(str::to_owned),
    ) else {
        return;
    };
    let spec = &mut object["spec"];
    if !spec.is_object() || spec["manualSelector"] == json!(true) || !spec["selector"].is_null() {
        return;
    }
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let labels = &mut spec["template"]["metadata"]["labels"];
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        labels[key] = json!(value);
    }
}

fn cron_job(spec: &mut Value) {
    or(spec, "concurrencyPolicy", json!("Allow"));
    or(spec, "suspend", json!(false));
    or(spec, "successfulJobsHistoryLimit", json!(3));
    or(spec, "failedJobsHistoryLimit", json!(1));
    job(&mut spec["jobTemplate"]["spec"]);
}

/// A pod spec (a pod's, or a workload's template).
fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    or(spec, "restartPolicy", json!("Always"));
    or(spec, "terminationGracePeriodSeconds", json!(30));
    or(spec, "dnsPolicy", json!("ClusterFirst"));
    or(spec, "securityContext", json!({}));
    or(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            self::container(container);
        }
    }
}

fn container(container: &mut Value) {
    or(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    or(container, "terminationMessagePolicy", json!("File"));
    // `:latest`, or no tag, is pulled every time.
    let image = container["image"].as_str().unwrap_or_default();
    let name = image.rsplit('/').next().unwrap_or_default();
    let latest =
        !image.contains('@') && name.split_once(':').is_none_or(|(_, tag)| tag == "latest");
    or(
        container,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    or(container, "resources", json!({}));
    for port in container["ports"].as_array_mut().into_iter().flatten() {
        or(port, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let probe = &mut container[probe];
        if probe.is_object() {
            or_nonzero(probe, "timeoutSeconds", json!(1));
            or_nonzero(probe, "periodSeconds", json!(10));
            or_nonzero(probe, "successThreshold", json!(1));
            or_nonzero(probe, "failureThreshold", json!(3));
        }
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
    if object["spec"]["type"] != "ExternalName" {
        let spec = &mut object["spec"];
        or(spec, "sessionAffinity", json!("None"));
        or(spec, "ipFamilies", json!(["IPv4"]));
        or(spec, "ipFamilyPolicy", json!("SingleStack"));
        or(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = object["spec"]["ports"].as_array_mut() {
        for port in ports {
            or(port, "protocol", json!("TCP"));
            // Protobuf carries an unset IntOrString as 0.
            if port["targetPort"].is_null() || port["targetPort"] == json!(0) {
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
    fn a_deployment_and_its_pod_template_get_kube_apiserver_defaults() {
        let mut deployment = json!({"spec": {
            "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.27", "readinessProbe": {"periodSeconds": 0}},
                {"name": "sidecar", "image": "example.com/tools"}
            ]}}
        }});
        apply(&rt("apps", "deployments"), &mut deployment);
        let spec = &deployment["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(
            (
                spec["revisionHistoryLimit"].clone(),
                spec["progressDeadlineSeconds"].clone()
            ),
            (json!(10), json!(600))
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["containers"][1]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["containers"][0]["readinessProbe"],
            json!({"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
        );
    }

    #[test]
    fn a_job_selects_its_pods_by_its_uid_unless_its_selector_is_manual() {
        let mut job =
            json!({"metadata": {"name": "once", "uid": "u-1"}, "spec": {"template": {"spec": {}}}});
        apply(&rt("batch", "jobs"), &mut job);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({
                "batch.kubernetes.io/controller-uid": "u-1",
                "batch.kubernetes.io/job-name": "once",
                "controller-uid": "u-1",
                "job-name": "once"
            })
        );
        let mut manual = json!({"metadata": {"name": "m", "uid": "u-2"}, "spec": {"manualSelector": true, "template": {}}});
        apply(&rt("batch", "jobs"), &mut manual);
        assert_eq!(manual["spec"].get("selector"), None);
    }

    #[test]
    fn a_job_keeps_an_explicit_zero_parallelism_and_a_cron_job_defaults_its_template() {
        let mut job = json!({"spec": {"parallelism": 0, "template": {"spec": {"containers": []}}}});
        apply(&rt("batch", "jobs"), &mut job);
        assert_eq!(job["spec"]["parallelism"], 0);
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["completions"], 1);

        let mut cron = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        apply(&rt("batch", "cronjobs"), &mut cron);
        assert_eq!(cron["spec"]["suspend"], false);
        assert_eq!(cron["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cron["spec"]["jobTemplate"]["spec"]["backoffLimit"], 6);
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
