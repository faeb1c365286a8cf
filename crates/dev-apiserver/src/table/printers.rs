//! The built-in printers' cells, as kube-apiserver's printers compute them.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::columns::Builtin;
use super::{
    array_at, at, bool_at, int_at, is_deleting, map_len, object_name, opt_str_at, or_placeholder,
    str_at,
};
use crate::gofmt;

impl Builtin {
    /// The row cells, "wide" (one per column) as kube-apiserver generates them.
    pub(super) fn cells(self, o: &Value, now: Timestamp) -> Vec<Value> {
        let name = || Value::from(object_name(o));
        let s = |text: &str| Value::from(text);
        match self {
            Builtin::Default => {
                let created = time_at(o, &["metadata", "creationTimestamp"]).unwrap_or_else(|| {
                    Timestamp::from_second(gofmt::ZERO_TIME_UNIX).unwrap_or(Timestamp::UNIX_EPOCH)
                });
                let created = gofmt::time(created);
                vec![name(), Value::from(created)]
            }
            Builtin::Pod => pod_cells(o, now),
            Builtin::Service => service_cells(o, now),
            Builtin::ConfigMap => vec![
                name(),
                Value::from(map_len(o, &["data"]) + map_len(o, &["binaryData"])),
                age(o, now),
            ],
            Builtin::Secret => vec![
                name(),
                s(opt_str_at(o, &["type"]).unwrap_or("Opaque")),
                Value::from(map_len(o, &["data"])),
                age(o, now),
            ],
            Builtin::Namespace => {
                let phase = match str_at(o, &["status", "phase"]) {
                    "" if is_deleting(o) => "Terminating",
                    "" => "Active",
                    phase => phase,
                };
                vec![name(), s(phase), age(o, now)]
            }
            Builtin::ServiceAccount => vec![
                name(),
                Value::from(array_at(o, &["secrets"]).len()),
                age(o, now),
            ],
            Builtin::PersistentVolumeClaim => {
                let phase = if is_deleting(o) {
                    "Terminating"
                } else {
                    str_at(o, &["status", "phase"])
                };
                let volume = str_at(o, &["spec", "volumeName"]);
                let (capacity, modes) = if volume.is_empty() {
                    (String::new(), String::new())
                } else {
                    (
                        str_at(o, &["status", "capacity", "storage"]).to_owned(),
                        access_modes(array_at(o, &["status", "accessModes"])),
                    )
                };
                vec![
                    name(),
                    s(phase),
                    s(volume),
                    Value::from(capacity),
                    Value::from(modes),
                    Value::from(storage_class(o)),
                    s(opt_str_at(o, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
                    age(o, now),
                    s(opt_str_at(o, &["spec", "volumeMode"]).unwrap_or("<unset>")),
                ]
            }
            Builtin::PersistentVolume => {
                let claim = at(o, &["spec", "claimRef"])
                    .filter(|c| c.is_object())
                    .map_or(String::new(), |c| {
                        format!("{}/{}", str_at(c, &["namespace"]), str_at(c, &["name"]))
                    });
                let phase = if is_deleting(o) {
                    "Terminating"
                } else {
                    str_at(o, &["status", "phase"])
                };
                vec![
                    name(),
                    s(str_at(o, &["spec", "capacity", "storage"])),
                    Value::from(access_modes(array_at(o, &["spec", "accessModes"]))),
                    s(str_at(o, &["spec", "persistentVolumeReclaimPolicy"])),
                    s(phase),
                    Value::from(claim),
                    Value::from(storage_class(o)),
                    s(opt_str_at(o, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
                    s(str_at(o, &["status", "reason"])),
                    age(o, now),
                    s(opt_str_at(o, &["spec", "volumeMode"]).unwrap_or("<unset>")),
                ]
            }
            Builtin::Event => event_cells(o, false, now),
            Builtin::EventsV1 => event_cells(o, true, now),
            Builtin::Node => node_cells(o, now),
            Builtin::Endpoints => vec![name(), Value::from(format_endpoints(o)), age(o, now)],
            Builtin::ReplicationController | Builtin::ReplicaSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                let selector = if self == Builtin::ReplicaSet {
                    format_label_selector(at(o, &["spec", "selector"]))
                } else {
                    format_labels(at(o, &["spec", "selector"]))
                };
                vec![
                    name(),
                    Value::from(replicas(o)),
                    Value::from(int_at(o, &["status", "replicas"])),
                    Value::from(int_at(o, &["status", "readyReplicas"])),
                    age(o, now),
                    names,
                    images,
                    Value::from(selector),
                ]
            }
            Builtin::Deployment => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                let selector = selector_string(at(o, &["spec", "selector"]))
                    .unwrap_or_else(|| "<invalid>".to_owned());
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        int_at(o, &["status", "readyReplicas"]),
                        replicas(o)
                    )),
                    Value::from(int_at(o, &["status", "updatedReplicas"])),
                    Value::from(int_at(o, &["status", "availableReplicas"])),
                    age(o, now),
                    names,
                    images,
                    Value::from(selector),
                ]
            }
            Builtin::StatefulSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        int_at(o, &["status", "readyReplicas"]),
                        replicas(o)
                    )),
                    age(o, now),
                    names,
                    images,
                ]
            }
            Builtin::DaemonSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                vec![
                    name(),
                    Value::from(int_at(o, &["status", "desiredNumberScheduled"])),
                    Value::from(int_at(o, &["status", "currentNumberScheduled"])),
                    Value::from(int_at(o, &["status", "numberReady"])),
                    Value::from(int_at(o, &["status", "updatedNumberScheduled"])),
                    Value::from(int_at(o, &["status", "numberAvailable"])),
                    Value::from(format_labels(at(
                        o,
                        &["spec", "template", "spec", "nodeSelector"],
                    ))),
                    age(o, now),
                    names,
                    images,
                    Value::from(format_label_selector(at(o, &["spec", "selector"]))),
                ]
            }
            Builtin::ControllerRevision => {
                let controller = array_at(o, &["metadata", "ownerReferences"])
                    .iter()
                    .find(|r| bool_at(r, &["controller"]))
                    .map_or_else(
                        || "<none>".to_owned(),
                        |r| {
                            let api_version = str_at(r, &["apiVersion"]);
                            let group = api_version.split_once('/').map_or("", |(group, _)| group);
                            let kind = str_at(r, &["kind"]);
                            let group_kind = if group.is_empty() {
                                kind.to_owned()
                            } else {
                                format!("{kind}.{group}")
                            };
                            if group_kind.is_empty() {
                                str_at(r, &["name"]).to_owned()
                            } else {
                                format!("{}/{}", group_kind.to_lowercase(), str_at(r, &["name"]))
                            }
                        },
                    );
                vec![
                    name(),
                    Value::from(controller),
                    Value::from(int_at(o, &["revision"])),
                    age(o, now),
                ]
            }
            Builtin::Job => job_cells(o, now),
            Builtin::CronJob => {
                let template = at(o, &["spec", "jobTemplate", "spec", "template", "spec"]);
                let (names, images) = container_cells(template);
                let last_schedule = match time_at(o, &["status", "lastScheduleTime"]) {
                    Some(ts) => since(Some(ts), now),
                    None if at(o, &["status", "lastScheduleTime"])
                        .is_some_and(|v| !v.is_null()) =>
                    {
                        "<unknown>".to_owned()
                    }
                    None => "<none>".to_owned(),
                };
                let suspend = match at(o, &["spec", "suspend"]).and_then(Value::as_bool) {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                };
                vec![
                    name(),
                    s(str_at(o, &["spec", "schedule"])),
                    s(opt_str_at(o, &["spec", "timeZone"]).unwrap_or("<none>")),
                    s(suspend),
                    Value::from(array_at(o, &["status", "active"]).len()),
                    Value::from(last_schedule),
                    age(o, now),
                    names,
                    images,
                    Value::from(format_label_selector(at(
                        o,
                        &["spec", "jobTemplate", "spec", "selector"],
                    ))),
                ]
            }
            Builtin::Lease => vec![
                name(),
                s(str_at(o, &["spec", "holderIdentity"])),
                age(o, now),
            ],
            Builtin::EndpointSlice => {
                let ports = array_at(o, &["ports"]);
                let port_names: Vec<String> = ports
                    .iter()
                    .map(|p| {
                        match (
                            at(p, &["port"]).and_then(Value::as_i64),
                            opt_str_at(p, &["name"]),
                        ) {
                            (Some(port), _) => port.to_string(),
                            (None, Some(name)) => name.to_owned(),
                            (None, None) => "*".to_owned(),
                        }
                    })
                    .collect();
                let addresses: Vec<String> = array_at(o, &["endpoints"])
                    .iter()
                    .flat_map(|e| array_at(e, &["addresses"]))
                    .map(|a| a.as_str().unwrap_or("").to_owned())
                    .collect();
                vec![
                    name(),
                    s(str_at(o, &["addressType"])),
                    Value::from(list_with_more(&port_names, port_names.len(), "<unset>")),
                    Value::from(list_with_more(&addresses, addresses.len(), "<unset>")),
                    age(o, now),
                ]
            }
            Builtin::ValidatingWebhook | Builtin::MutatingWebhook => vec![
                name(),
                Value::from(array_at(o, &["webhooks"]).len()),
                age(o, now),
            ],
            Builtin::RoleBinding => {
                let subjects = array_at(o, &["subjects"]);
                let of_kind = |kind: &str| -> Value {
                    let names: Vec<String> = subjects
                        .iter()
                        .filter(|s| str_at(s, &["kind"]) == kind)
                        .map(|s| {
                            if kind == "ServiceAccount" {
                                format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"]))
                            } else {
                                str_at(s, &["name"]).to_owned()
                            }
                        })
                        .collect();
                    Value::from(names.join(", "))
                };
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        str_at(o, &["roleRef", "kind"]),
                        str_at(o, &["roleRef", "name"])
                    )),
                    age(o, now),
                    of_kind("User"),
                    of_kind("Group"),
                    of_kind("ServiceAccount"),
                ]
            }
            Builtin::ResourceQuota => {
                // Status, as the quota controller writes it; `limits.*` apart.
                let hard = at(o, &["status", "hard"]).and_then(Value::as_object);
                let (mut requests, mut limits) = (Vec::new(), Vec::new());
                for (resource, quantity) in hard.into_iter().flatten() {
                    let used = opt_str_at(o, &["status", "used", resource]).unwrap_or("0");
                    let cell = format!(
                        "{resource}: {used}/{}",
                        quantity.as_str().unwrap_or_default()
                    );
                    match resource.split_once('.') {
                        Some(("limits", _)) => limits.push(cell),
                        _ => requests.push(cell),
                    }
                }
                vec![
                    name(),
                    age(o, now),
                    s(&requests.join(", ")),
                    s(&limits.join(", ")),
                ]
            }
            Builtin::HorizontalPodAutoscaler => {
                let target = at(o, &["spec", "scaleTargetRef"]);
                let reference = format!(
                    "{}/{}",
                    target.map_or("", |t| str_at(t, &["kind"])),
                    target.map_or("", |t| str_at(t, &["name"]))
                );
                let min = at(o, &["spec", "minReplicas"])
                    .and_then(Value::as_i64)
                    .map_or_else(|| "<unset>".to_owned(), |m| m.to_string());
                vec![
                    name(),
                    s(&reference),
                    s(&hpa_metrics(o)),
                    s(&min),
                    Value::from(int_at(o, &["spec", "maxReplicas"])),
                    Value::from(int_at(o, &["status", "currentReplicas"])),
                    age(o, now),
                ]
            }
            Builtin::RuntimeClass => vec![name(), s(str_at(o, &["handler"])), age(o, now)],
            Builtin::PodTemplate => {
                let template = at(o, &["template"]);
                let (containers, images) = container_cells(template.and_then(|t| t.get("spec")));
                let labels = template.and_then(|t| at(t, &["metadata", "labels"]));
                vec![name(), containers, images, s(&format_labels(labels))]
            }
            Builtin::CertificateSigningRequest => {
                let duration = match at(o, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
                    Some(seconds) => {
                        gofmt::human_duration(jiff::SignedDuration::from_secs(seconds))
                    }
                    None => "<none>".to_owned(),
                };
                let mut condition: Vec<&str> = array_at(o, &["status", "conditions"])
                    .iter()
                    .map(|c| str_at(c, &["type"]))
                    .collect();
                if condition.is_empty() {
                    condition.push("Pending");
                }
                if !str_at(o, &["status", "certificate"]).is_empty() {
                    condition.push("Issued");
                }
                vec![
                    name(),
                    age(o, now),
                    s(str_at(o, &["spec", "signerName"])),
                    s(str_at(o, &["spec", "username"])),
                    s(&duration),
                    s(&condition.join(",")),
                ]
            }
            Builtin::PriorityClass => vec![
                name(),
                Value::from(int_at(o, &["value"])),
                Value::Bool(bool_at(o, &["globalDefault"])),
                age(o, now),
                s(str_at(o, &["preemptionPolicy"])),
            ],
            Builtin::StorageClass => {
                let annotation = |key: &str| str_at(o, &["metadata", "annotations", key]) == "true";
                let mut display = object_name(o).to_owned();
                if annotation("storageclass.kubernetes.io/is-default-class")
                    || annotation("storageclass.beta.kubernetes.io/is-default-class")
                {
                    display.push_str(" (default)");
                }
                vec![
                    Value::from(display),
                    s(str_at(o, &["provisioner"])),
                    s(opt_str_at(o, &["reclaimPolicy"]).unwrap_or("Delete")),
                    s(opt_str_at(o, &["volumeBindingMode"]).unwrap_or("Immediate")),
                    Value::Bool(bool_at(o, &["allowVolumeExpansion"])),
                    age(o, now),
                ]
            }
            Builtin::Ingress => {
                let rules = array_at(o, &["spec", "rules"]);
                let hosts: Vec<String> = rules
                    .iter()
                    .map(|r| str_at(r, &["host"]).to_owned())
                    .collect();
                vec![
                    name(),
                    s(opt_str_at(o, &["spec", "ingressClassName"]).unwrap_or("<none>")),
                    Value::from(format_ingress_hosts(&hosts)),
                    Value::from(load_balancer_ingress(o)),
                    s(if array_at(o, &["spec", "tls"]).is_empty() {
                        "80"
                    } else {
                        "80, 443"
                    }),
                    age(o, now),
                ]
            }
            Builtin::IngressClass => {
                let parameters = at(o, &["spec", "parameters"])
                    .filter(|p| p.is_object())
                    .map_or_else(
                        || "<none>".to_owned(),
                        |p| {
                            let mut text = str_at(p, &["kind"]).to_owned();
                            if let Some(group) = opt_str_at(p, &["apiGroup"]) {
                                text.push('.');
                                text.push_str(group);
                            }
                            format!("{text}/{}", str_at(p, &["name"]))
                        },
                    );
                vec![
                    name(),
                    s(str_at(o, &["spec", "controller"])),
                    Value::from(parameters),
                    age(o, now),
                ]
            }
            Builtin::NetworkPolicy => vec![
                name(),
                Value::from(format_label_selector(
                    at(o, &["spec", "podSelector"]).or(Some(&json!({}))),
                )),
                age(o, now),
            ],
            Builtin::PodDisruptionBudget => {
                let bound = |key: &str| {
                    at(o, &["spec", key])
                        .filter(|v| !v.is_null())
                        .map_or_else(|| "N/A".to_owned(), int_or_string)
                };
                vec![
                    name(),
                    Value::from(bound("minAvailable")),
                    Value::from(bound("maxUnavailable")),
                    Value::from(int_at(o, &["status", "disruptionsAllowed"])),
                    age(o, now),
                ]
            }
        }
    }
}

/// `spec.replicas`, defaulted to 1 as the API server does.
/// kube-apiserver's `formatHPAMetrics` for resource metrics (`cpu:
/// 40%/80%`, `<unknown>` before the autoscaler has measured), at most two
/// then `+ N more...`. An `autoscaling/v1` object's CPU target counts as
/// one such metric, as its conversion to v2 makes it.
fn hpa_metrics(o: &Value) -> String {
    let v1_target = at(o, &["spec", "targetCPUUtilizationPercentage"]).and_then(Value::as_i64);
    let specs: Vec<Value> = match v1_target {
        Some(target) => vec![
            json!({"type": "Resource", "resource": {"name": "cpu", "target": {"averageUtilization": target}}}),
        ],
        None => array_at(o, &["spec", "metrics"]).to_vec(),
    };
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let statuses = array_at(o, &["status", "currentMetrics"]);
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let source = match str_at(spec, &["type"]) {
            "ContainerResource" => "containerResource",
            _ => "resource",
        };
        let metric = at(spec, &[source]);
        let current = statuses.get(i).and_then(|s| at(s, &[source, "current"]));
        let name = metric.map_or("", |m| str_at(m, &["name"]));
        let target = metric.and_then(|m| at(m, &["target"]));
        let cell = match target.and_then(|t| t.get("averageValue")) {
            Some(value) => format!(
                "{name}: {}/{}",
                current
                    .and_then(|c| opt_str_at(c, &["averageValue"]))
                    .unwrap_or("<unknown>"),
                int_or_string(value)
            ),
            None => format!(
                "{name}: {}/{}",
                current
                    .and_then(|c| at(c, &["averageUtilization"]))
                    .and_then(Value::as_i64)
                    .map_or_else(|| "<unknown>".to_owned(), |u| format!("{u}%")),
                target
                    .and_then(|t| at(t, &["averageUtilization"]))
                    .and_then(Value::as_i64)
                    .map_or_else(|| "<auto>".to_owned(), |u| format!("{u}%"))
            ),
        };
        list.push(cell);
        if list.len() > 2 {
            list.truncate(2);
            return format!("{} + {} more...", list.join(", "), specs.len() - i);
        }
    }
    list.join(", ")
}

fn replicas(object: &Value) -> i64 {
    at(object, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn format_ingress_hosts(hosts: &[String]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for host in hosts {
        if list.len() == MAX {
            more = true;
        }
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", hosts.len() - MAX)
    } else {
        joined
    }
}

fn format_endpoints(object: &Value) -> String {
    const MAX: usize = 3;
    let subsets = array_at(object, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for subset in subsets {
        let addresses = array_at(subset, &["addresses"]);
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(address, &["ip"]).to_owned());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(
                    str_at(address, &["ip"]),
                    int_at(port, &["port"]),
                ));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn service_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = opt_str_at(o, &["spec", "type"]).unwrap_or("ClusterIP");
    let cluster_ip = array_at(o, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| opt_str_at(o, &["spec", "clusterIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let external_ips: Vec<&str> = array_at(o, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match type_ {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_owned(),
        "LoadBalancer" => {
            let ingress = load_balancer_ingress(o);
            let mut all: Vec<&str> = if ingress.is_empty() {
                Vec::new()
            } else {
                ingress.split(',').collect()
            };
            all.extend(external_ips.iter().copied());
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(o, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    };
    let ports: Vec<String> = array_at(o, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let protocol = opt_str_at(p, &["protocol"]).unwrap_or("TCP");
            let node_port = int_at(p, &["nodePort"]);
            if node_port > 0 {
                format!("{port}:{node_port}/{protocol}")
            } else {
                format!("{port}/{protocol}")
            }
        })
        .collect();
    vec![
        Value::from(object_name(o)),
        Value::from(type_),
        Value::from(cluster_ip),
        Value::from(external_ip),
        Value::from(or_placeholder(&ports.join(","), "<none>")),
        age(o, now),
        Value::from(format_labels(at(o, &["spec", "selector"]))),
    ]
}

fn job_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = int_at(o, &["status", "succeeded"]);
    let completions = match at(o, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(total) => format!("{succeeded}/{total}"),
        None => match int_at(o, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(o, &["status", "startTime"]),
        time_at(o, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => gofmt::human_duration(now.duration_since(start)),
        (Some(start), Some(end)) => gofmt::human_duration(end.duration_since(start)),
    };
    let condition = |type_: &str| {
        array_at(o, &["status", "conditions"])
            .iter()
            .find(|c| str_at(c, &["type"]) == type_)
            .is_some_and(|c| str_at(c, &["status"]) == "True")
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else if is_deleting(o) {
        "Terminating"
    } else if condition("Suspended") {
        "Suspended"
    } else if condition("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
    vec![
        Value::from(object_name(o)),
        Value::from(status),
        Value::from(completions),
        Value::from(duration),
        age(o, now),
        names,
        images,
        Value::from(format_label_selector(at(o, &["spec", "selector"]))),
    ]
}

fn node_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let mut status: Vec<&str> = Vec::new();
    if let Some(ready) = array_at(o, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == "Ready")
    {
        status.push(if str_at(ready, &["status"]) == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if bool_at(o, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = at(o, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!role.is_empty()).then_some(role)
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|v| !v.is_empty())
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let address = |type_: &str| {
        array_at(o, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == type_)
            .map_or("<none>", |a| str_at(a, &["address"]))
            .to_owned()
    };
    let info = |key: &str| or_placeholder(str_at(o, &["status", "nodeInfo", key]), "<unknown>");
    vec![
        Value::from(object_name(o)),
        Value::from(status.join(",")),
        Value::from(or_placeholder(&roles.join(","), "<none>")),
        age(o, now),
        Value::from(str_at(o, &["status", "nodeInfo", "kubeletVersion"])),
        Value::from(address("InternalIP")),
        Value::from(address("ExternalIP")),
        Value::from(info("osImage")),
        Value::from(info("kernelVersion")),
        Value::from(info("containerRuntimeVersion")),
    ]
}

/// Core `v1` events and `events.k8s.io/v1` events (whose fields the printer sees after
/// conversion: `regarding`, `note`, `deprecated*`).
fn event_cells(o: &Value, events_v1: bool, now: Timestamp) -> Vec<Value> {
    let field = |core: &'static str, v1: &'static str| if events_v1 { v1 } else { core };
    let first_ts = time_at(o, &[field("firstTimestamp", "deprecatedFirstTimestamp")]);
    let last_ts = time_at(o, &[field("lastTimestamp", "deprecatedLastTimestamp")]);
    let first = match first_ts {
        Some(ts) => since(Some(ts), now),
        None => since(time_at(o, &["eventTime"]), now),
    };
    let mut last = match last_ts {
        Some(ts) => since(Some(ts), now),
        None => first.clone(),
    };
    let mut count = int_at(o, &[field("count", "deprecatedCount")]);
    if at(o, &["series"]).is_some_and(Value::is_object) {
        last = since(time_at(o, &["series", "lastObservedTime"]), now);
        count = int_at(o, &["series", "count"]);
    } else if count == 0 {
        count = 1;
    }
    let regarding = field("involvedObject", "regarding");
    let kind = str_at(o, &[regarding, "kind"]).to_lowercase();
    let target_name = str_at(o, &[regarding, "name"]);
    let target = if target_name.is_empty() {
        kind
    } else {
        format!("{kind}/{target_name}")
    };
    let source = field("source", "deprecatedSource");
    let component = or_placeholder(
        str_at(o, &[source, "component"]),
        str_at(o, &[field("reportingComponent", "reportingController")]),
    );
    let host = or_placeholder(
        str_at(o, &[source, "host"]),
        str_at(o, &["reportingInstance"]),
    );
    let source_text = if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
    };
    vec![
        Value::from(last),
        Value::from(str_at(o, &["type"])),
        Value::from(str_at(o, &["reason"])),
        Value::from(target),
        Value::from(str_at(o, &[regarding, "fieldPath"])),
        Value::from(source_text),
        Value::from(str_at(o, &[field("message", "note")]).trim()),
        Value::from(first),
        Value::from(count),
        Value::from(object_name(o)),
    ]
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let init_containers = array_at(pod, &["spec", "initContainers"]);
    let restartable = |name: &str| {
        init_containers
            .iter()
            .find(|c| str_at(c, &["name"]) == name)
            .is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
    };
    let total = array_at(pod, &["spec", "containers"]).len()
        + init_containers
            .iter()
            .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
            .count();
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut restartable_restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;
    let later =
        |current: Option<Timestamp>, candidate: Option<Timestamp>| match (current, candidate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };

    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = or_placeholder(str_at(pod, &["status", "reason"]), phase);
    if array_at(pod, &["status", "conditions"]).iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".to_owned();
    }

    let mut initializing = false;
    for (i, status) in array_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(status, &["restartCount"]);
        let finished = time_at(status, &["lastState", "terminated", "finishedAt"]);
        restarts += count;
        last_restart = later(last_restart, finished);
        let name = str_at(status, &["name"]);
        if restartable(name) {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        if let Some(terminated) = terminated
            && int_at(terminated, &["exitCode"]) == 0
        {
            continue;
        }
        if restartable(name) && bool_at(status, &["started"]) {
            if bool_at(status, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(terminated) = terminated {
            match str_at(terminated, &["reason"]) {
                "" => match int_at(terminated, &["signal"]) {
                    0 => format!("Init:ExitCode:{}", int_at(terminated, &["exitCode"])),
                    signal => format!("Init:Signal:{signal}"),
                },
                why => format!("Init:{why}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_containers.len())
        };
        initializing = true;
        break;
    }

    if !initializing || has_condition(pod, "Initialized") {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for status in array_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(status, &["restartCount"]);
            last_restart = later(
                last_restart,
                time_at(status, &["lastState", "terminated", "finishedAt"]),
            );
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
            let running = at(status, &["state", "running"]).is_some_and(Value::is_object);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(terminated) = terminated {
                reason = match str_at(terminated, &["reason"]) {
                    "" => match int_at(terminated, &["signal"]) {
                        0 => format!("ExitCode:{}", int_at(terminated, &["exitCode"])),
                        signal => format!("Signal:{signal}"),
                    },
                    why => why.to_owned(),
                };
            } else if bool_at(status, &["ready"]) && running {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }

    if is_deleting(pod) && str_at(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if is_deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_owned();
    }

    let restarts_text = match last_restart {
        Some(ts) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(ts), now)),
        _ => restarts.to_string(),
    };

    let pod_ip = array_at(pod, &["status", "podIPs"])
        .first()
        .map(|ip| str_at(ip, &["ip"]))
        .or_else(|| opt_str_at(pod, &["status", "podIP"]))
        .unwrap_or("");
    let gates = array_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = array_at(pod, &["status", "conditions"]);
        let passing = gates
            .iter()
            .filter(|gate| {
                let type_ = str_at(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == type_)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{passing}/{}", gates.len())
    };
    vec![
        Value::from(object_name(pod)),
        Value::from(format!("{ready}/{total}")),
        Value::from(reason),
        Value::from(restarts_text),
        age(pod, now),
        Value::from(or_placeholder(pod_ip, "<none>")),
        Value::from(or_placeholder(str_at(pod, &["spec", "nodeName"]), "<none>")),
        Value::from(or_placeholder(
            str_at(pod, &["status", "nominatedNodeName"]),
            "<none>",
        )),
        Value::from(readiness_gates),
    ]
}

/// Row conditions kube-apiserver attaches to finished pods.
pub(super) fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_at(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{
        "type": "Completed",
        "status": "True",
        "reason": reason,
        "message": message,
    }]))
}

/// A `metav1.Time`/`MicroTime` field: `None` when absent, empty, unparsable or zero.
fn time_at(value: &Value, path: &[&str]) -> Option<Timestamp> {
    let text = at(value, path)?.as_str()?;
    text.parse::<Timestamp>()
        .ok()
        .filter(|ts| !gofmt::is_zero_time(*ts))
}

/// The printers' `translateTimestampSince`.
fn since(ts: Option<Timestamp>, now: Timestamp) -> String {
    match ts {
        Some(ts) => gofmt::human_duration(now.duration_since(ts)),
        None => "<unknown>".to_owned(),
    }
}

fn age(object: &Value, now: Timestamp) -> Value {
    Value::String(since(
        time_at(object, &["metadata", "creationTimestamp"]),
        now,
    ))
}

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> String {
    let Some(map) = labels.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_owned();
    };
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// `metav1.LabelSelectorAsSelector(...).String()`; `None` when the selector is invalid.
pub(crate) fn selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Some(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push((key.clone(), format!("{key}={}", value.as_str()?)));
        }
    }
    for expression in array_at(selector, &["matchExpressions"]) {
        let key = str_at(expression, &["key"]);
        let mut values: Vec<&str> = array_at(expression, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match str_at(expression, &["operator"]) {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" if values.is_empty() => key.to_owned(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, text)| text)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` when empty, `<error>` when invalid.
fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        None => "<error>".to_owned(),
        Some(text) if text.is_empty() => "<none>".to_owned(),
        Some(text) => text,
    }
}

/// Container names and images of a pod spec, comma-separated.
fn container_cells(pod_spec: Option<&Value>) -> (Value, Value) {
    let containers = pod_spec.map_or(&[][..], |spec| array_at(spec, &["containers"]));
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (Value::from(names.join(",")), Value::from(images.join(",")))
}

/// `IntOrString.String()`.
fn int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// `GetAccessModesAsString`: always in the order RWO, ROX, RWX, RWOP.
fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// Storage class of a PV or PVC: the beta annotation wins over `spec.storageClassName`.
fn storage_class(object: &Value) -> String {
    opt_str_at(
        object,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .unwrap_or_else(|| str_at(object, &["spec", "storageClassName"]))
    .to_owned()
}

fn has_condition(object: &Value, type_: &str) -> bool {
    array_at(object, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == "True")
}

/// IPs (or hostnames) of a load balancer status, unique and sorted.
fn load_balancer_ingress(object: &Value) -> String {
    let mut entries: Vec<&str> = array_at(object, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let hostname = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !hostname.is_empty() {
                Some(hostname)
            } else {
                None
            }
        })
        .collect();
    entries.sort_unstable();
    entries.dedup();
    entries.join(",")
}

/// The printers' "first three, then `+ N more...`" lists; `<unset>` when empty.
fn list_with_more(items: &[String], total: usize, empty: &str) -> String {
    const MAX: usize = 3;
    let shown = items
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if total > MAX {
        format!("{shown} + {} more...", total - MAX)
    } else if shown.is_empty() {
        empty.to_owned()
    } else {
        shown
    }
}

fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
