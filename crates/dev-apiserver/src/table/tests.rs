use super::jsonpath::jsonpath;
use super::*;

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

fn lock_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "locks.navique.io"},
        "spec": {
            "group": "navique.io",
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Kind", "type": "string", "jsonPath": ".spec.target.kind"},
                    {"name": "Target", "type": "string", "jsonPath": ".spec.target.name",
                     "description": "The locked object"},
                    {"name": "Active", "type": "boolean", "jsonPath": ".status.active"},
                    {"name": "Reason", "type": "string", "priority": 1,
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ]
            }, {
                "name": "v2",
                "served": true,
                "storage": false
            }]
        }
    })
}

fn lock(name: &str, created: &str) -> Value {
    json!({
        "apiVersion": "navique.io/v1",
        "kind": "Lock",
        "metadata": {
            "name": name,
            "namespace": "default",
            "resourceVersion": "42",
            "creationTimestamp": created,
            "uid": "u-1"
        },
        "spec": {"target": {"kind": "Deployment", "name": "web"}},
        "status": {
            "active": true,
            "conditions": [
                {"type": "Progressing", "status": "True", "reason": "Applying"},
                {"type": "Ready", "status": "False", "reason": "Waiting"}
            ]
        }
    })
}

#[test]
fn jsonpath_filter_selects_the_condition_of_a_type() {
    let object = lock("a", "2025-06-01T11:59:00Z");
    let path = "{.status.conditions[?(@.type==\"Ready\")].reason}";
    assert_eq!(jsonpath(&object, path), vec![json!("Waiting")]);
    let single_quoted = ".status.conditions[?(@.type == 'Progressing')].status";
    assert_eq!(jsonpath(&object, single_quoted), vec![json!("True")]);
}

#[test]
fn jsonpath_supports_indexes_wildcards_slices_and_recursion() {
    let object = json!({"a": {"items": [{"n": 1}, {"n": 2}, {"n": 3}], "k.x": "dot"}});
    assert_eq!(jsonpath(&object, ".a.items[0].n"), vec![json!(1)]);
    assert_eq!(jsonpath(&object, ".a.items[-1].n"), vec![json!(3)]);
    assert_eq!(
        jsonpath(&object, ".a.items[*].n"),
        vec![json!(1), json!(2), json!(3)]
    );
    assert_eq!(
        jsonpath(&object, ".a.items[1:].n"),
        vec![json!(2), json!(3)]
    );
    assert_eq!(
        jsonpath(&object, ".a.items[0,2].n"),
        vec![json!(1), json!(3)]
    );
    assert_eq!(jsonpath(&object, "..n"), vec![json!(1), json!(2), json!(3)]);
    assert_eq!(jsonpath(&object, ".a['k.x']"), vec![json!("dot")]);
    assert_eq!(jsonpath(&object, ".a.k\\.x"), vec![json!("dot")]);
    assert_eq!(
        jsonpath(&object, ".a.items[?(@.n>1)].n"),
        vec![json!(2), json!(3)]
    );
    assert_eq!(jsonpath(&object, ".a.items[?(@.n)].n").len(), 3);
}

#[test]
fn jsonpath_returns_nothing_for_missing_keys_and_errors() {
    let object = json!({"a": {"items": [1, 2]}, "s": "text"});
    assert!(jsonpath(&object, ".a.missing.deeper").is_empty());
    assert!(jsonpath(&object, ".a.items[5]").is_empty());
    assert!(jsonpath(&object, ".s[0]").is_empty());
    assert!(jsonpath(&object, ".a.items[?(@.type==\"x\")]").is_empty());
    assert!(jsonpath(&object, "{.a").is_empty());
}

#[test]
fn crd_columns_follow_the_name_column_with_defaults_applied() {
    let TableKind::Custom(columns) = TableKind::for_crd(&lock_crd(), "v1") else {
        panic!("expected custom columns");
    };
    assert_eq!(columns.len(), 5);
    assert_eq!(
        columns[0].description,
        "Custom resource definition column (in JSONPath format): .spec.target.kind"
    );
    assert_eq!(columns[1].description, "The locked object");
    assert_eq!(columns[3].priority, 1);
    let table = table(
        &TableKind::for_crd(&lock_crd(), "v1"),
        &[],
        "",
        json!({}),
        now(),
    );
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Kind", "Target", "Active", "Reason", "Age"]);
    assert_eq!(
        table["columnDefinitions"][0],
        json!({"name": "Name", "type": "string", "format": "name",
               "description": NAME_DESCRIPTION, "priority": 0})
    );
    assert_eq!(table["rows"], json!([]));
}

#[test]
fn a_crd_version_without_columns_gets_an_age_column() {
    let kind = TableKind::for_crd(&lock_crd(), "v2");
    assert_eq!(kind, TableKind::Custom(vec![Column::default_crd_age()]));
    let object = lock("a", "2025-06-01T11:00:00Z");
    let table = table(&kind, &[object], "None", json!({}), now());
    // Short duration for CRD dates (a built-in Age would read `60m`).
    assert_eq!(table["rows"][0]["cells"], json!(["a", "1h"]));
    assert_eq!(
        table["columnDefinitions"][1]["description"],
        CREATION_TIMESTAMP_DESCRIPTION
    );
}

#[test]
fn a_lock_renders_exact_cells() {
    let kind = TableKind::for_crd(&lock_crd(), "v1");
    let objects = [
        lock("a", "2025-06-01T11:59:01Z"),
        lock("b", "2025-05-29T09:00:00Z"),
    ];
    let table = table(
        &kind,
        &objects,
        "Metadata",
        json!({"resourceVersion": "77", "continue": ""}),
        now(),
    );
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["metadata"], json!({"resourceVersion": "77"}));
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["a", "Deployment", "web", true, "Waiting", "59s"])
    );
    // The CRD convertor uses the short duration: 3d3h is shown as 3d.
    assert_eq!(
        table["rows"][1]["cells"],
        json!(["b", "Deployment", "web", true, "Waiting", "3d"])
    );
}

#[test]
fn a_missing_value_is_a_null_cell() {
    let kind = TableKind::for_crd(&lock_crd(), "v1");
    let mut object = lock("a", "2025-06-01T11:59:01Z");
    object["status"] = json!({"active": "yes"});
    object["spec"]["target"]["name"] = Value::Null;
    let table = table(&kind, &[object], "None", Value::Null, now());
    // A non-boolean `active` is null too; a JSON null in a string column prints like Go.
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["a", "Deployment", "<no value>", null, null, "59s"])
    );
    assert_eq!(table["metadata"], json!({"resourceVersion": "42"}));
}

#[test]
fn typed_crd_cells_follow_the_column_type() {
    let columns = vec![
        Column::from_crd(&json!({"name": "I", "type": "integer", "jsonPath": ".f"})).unwrap(),
        Column::from_crd(&json!({"name": "N", "type": "number", "jsonPath": ".i"})).unwrap(),
        Column::from_crd(&json!({"name": "S", "type": "string", "jsonPath": ".m"})).unwrap(),
        Column::from_crd(&json!({"name": "D", "type": "date", "jsonPath": ".bad"})).unwrap(),
        Column::from_crd(&json!({"name": "F", "type": "string", "jsonPath": ".x"})).unwrap(),
    ];
    let object = json!({
        "metadata": {"name": "o"},
        "f": 2.9, "i": 3, "m": {"b": "<", "a": [1, 2.5]}, "bad": "yesterday", "x": 0.000012
    });
    let table = table(
        &TableKind::Custom(columns),
        &[object],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "o",
            2,
            3,
            "{\"a\":[1,2.5],\"b\":\"\\u003c\"}",
            "<invalid>",
            "1.2e-05"
        ])
    );
}

#[test]
fn configmaps_count_data_and_binary_data_keys() {
    let object = json!({
        "metadata": {"name": "settings", "creationTimestamp": "2025-06-01T11:56:40Z"},
        "data": {"a": "1", "b": "2"},
        "binaryData": {"c": "AA=="}
    });
    let table = table(
        &TableKind::builtin("", "configmaps"),
        &[object],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(table["rows"][0]["cells"], json!(["settings", 3, "3m20s"]));
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Data", "Age"]);
}

#[test]
fn resource_quotas_show_used_over_hard_with_limits_apart() {
    let object = json!({
        "metadata": {"name": "compute", "creationTimestamp": "2025-06-01T11:59:00Z"},
        "status": {
            "hard": {"pods": "10", "requests.cpu": "4", "limits.memory": "8Gi"},
            "used": {"pods": "2"}
        }
    });
    let table = table(
        &TableKind::builtin("", "resourcequotas"),
        &[object],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "compute",
            "60s",
            "pods: 2/10, requests.cpu: 0/4",
            "limits.memory: 0/8Gi"
        ])
    );
}

#[test]
fn autoscalers_show_their_target_and_metrics_unknown_until_measured() {
    let objects = [
        json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:59:00Z"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 10,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}
                ]
            },
            "status": {"currentReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}
            ]}
        }),
        json!({
            "metadata": {"name": "v1"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "api"}, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}
        }),
    ];
    let table = table(
        &TableKind::builtin("autoscaling", "horizontalpodautoscalers"),
        &objects,
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web",
            "Deployment/web",
            "cpu: 40%/80%, memory: <unknown>/500Mi",
            "2",
            10,
            2,
            "60s"
        ])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!([
            "v1",
            "Deployment/api",
            "cpu: <unknown>/50%",
            "<unset>",
            3,
            0,
            "<unknown>"
        ])
    );
}

#[test]
fn certificate_signing_requests_show_their_conditions_and_issuance() {
    let objects = [
        json!({
            "metadata": {"name": "alice", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "alice", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}
        }),
        json!({"metadata": {"name": "bob"}, "spec": {"signerName": "example.com/x", "username": "bob"}}),
    ];
    let table = table(
        &TableKind::builtin("certificates.k8s.io", "certificatesigningrequests"),
        &objects,
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "alice",
            "60m",
            "kubernetes.io/kube-apiserver-client",
            "alice",
            "24h",
            "Approved,Issued"
        ])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!([
            "bob",
            "<unknown>",
            "example.com/x",
            "bob",
            "<none>",
            "Pending"
        ])
    );
}

#[test]
fn secrets_show_type_and_data_count() {
    let objects = [
        json!({
            "metadata": {"name": "tls", "creationTimestamp": "2025-05-30T09:00:00Z"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "", "tls.key": ""}
        }),
        json!({"metadata": {"name": "empty"}}),
    ];
    let table = table(
        &TableKind::builtin("", "secrets"),
        &objects,
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["tls", "kubernetes.io/tls", 2, "2d3h"])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!(["empty", "Opaque", 0, "<unknown>"])
    );
}

#[test]
fn services_render_ports_and_addresses() {
    let objects = [
        json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:59:00Z"},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.0.0.10",
                "clusterIPs": ["10.0.0.10"],
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                "selector": {"tier": "web", "app": "shop"}
            }
        }),
        json!({
            "metadata": {"name": "edge", "creationTimestamp": "2025-06-01T11:59:00Z"},
            "spec": {
                "type": "LoadBalancer",
                "clusterIPs": ["10.0.0.11"],
                "ports": [{"port": 443, "nodePort": 30443, "protocol": "TCP"}]
            },
            "status": {"loadBalancer": {}}
        }),
    ];
    let table = table(
        &TableKind::builtin("", "services"),
        &objects,
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web",
            "ClusterIP",
            "10.0.0.10",
            "<none>",
            "80/TCP,53/UDP",
            "60s",
            "app=shop,tier=web"
        ])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!([
            "edge",
            "LoadBalancer",
            "10.0.0.11",
            "<pending>",
            "443:30443/TCP",
            "60s",
            "<none>"
        ])
    );
    assert_eq!(table["columnDefinitions"][4]["name"], "Port(s)");
    assert_eq!(table["columnDefinitions"][6]["priority"], 1);
}

#[test]
fn namespaces_show_their_phase() {
    let objects = [
        json!({"metadata": {"name": "default", "creationTimestamp": "2025-06-01T11:00:00Z"},
               "status": {"phase": "Active"}}),
        json!({"metadata": {"name": "old", "creationTimestamp": "2025-06-01T11:00:00Z",
                            "deletionTimestamp": "2025-06-01T11:59:00Z"},
               "status": {"phase": "Terminating"}}),
    ];
    let table = table(
        &TableKind::builtin("", "namespaces"),
        &objects,
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["default", "Active", "60m"])
    );
    assert_eq!(
        table["rows"][1]["cells"],
        json!(["old", "Terminating", "60m"])
    );
}

#[test]
fn deployments_and_statefulsets_show_readiness() {
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"},
                         "matchExpressions": [{"key": "env", "operator": "In",
                                               "values": ["prod", "dev"]}]},
            "template": {"spec": {"containers": [
                {"name": "app", "image": "web:1"}, {"name": "proxy", "image": "envoy:2"}
            ]}}
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
    });
    let table_d = table(
        &TableKind::builtin("apps", "deployments"),
        &[deployment],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table_d["rows"][0]["cells"],
        json!([
            "web",
            "2/3",
            3,
            2,
            "60m",
            "app,proxy",
            "web:1,envoy:2",
            "app=web,env in (dev,prod)"
        ])
    );
    let statefulset = json!({
        "metadata": {"name": "db", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"template": {"spec": {"containers": [{"name": "pg", "image": "pg:16"}]}}}
    });
    let table_s = table(
        &TableKind::builtin("apps", "statefulsets"),
        &[statefulset],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table_s["rows"][0]["cells"],
        json!(["db", "0/1", "60m", "pg", "pg:16"])
    );
}

#[test]
fn leases_webhooks_and_bindings_render_their_columns() {
    let lease = json!({"metadata": {"name": "leader"},
                       "spec": {"holderIdentity": "navique-0"}});
    let lease_table = table(
        &TableKind::builtin("coordination.k8s.io", "leases"),
        &[lease],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        lease_table["rows"][0]["cells"],
        json!(["leader", "navique-0", "<unknown>"])
    );
    let webhook = json!({"metadata": {"name": "navique"}, "webhooks": [{}, {}]});
    let webhook_table = table(
        &TableKind::builtin(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
        ),
        &[webhook],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        webhook_table["rows"][0]["cells"],
        json!(["navique", 2, "<unknown>"])
    );
    let binding = json!({
        "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "op", "namespace": "navique"},
            {"kind": "User", "name": "bob"}
        ]
    });
    let binding_table = table(
        &TableKind::builtin("rbac.authorization.k8s.io", "rolebindings"),
        &[binding],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        binding_table["rows"][0]["cells"],
        json!([
            "b",
            "ClusterRole/edit",
            "<unknown>",
            "alice, bob",
            "",
            "navique/op"
        ])
    );
}

#[test]
fn resources_without_a_printer_use_the_created_at_table() {
    let role = json!({"metadata": {"name": "reader",
                                   "creationTimestamp": "2025-05-01T08:09:10.5Z"}});
    let table = table(
        &TableKind::builtin("rbac.authorization.k8s.io", "roles"),
        &[role],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["columnDefinitions"][1],
        json!({"name": "Created At", "type": "date", "format": "",
               "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0})
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["reader", "2025-05-01T08:09:10Z"])
    );
    let undated = super::table(
        &TableKind::builtin("", "limitranges"),
        &[json!({"metadata": {"name": "limits"}})],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        undated["rows"][0]["cells"],
        json!(["limits", "0001-01-01T00:00:00Z"])
    );
    let crd_columns = builtin_columns("apiextensions.k8s.io", "customresourcedefinitions");
    let names: Vec<&str> = crd_columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Name", "Created At"]);
}

#[test]
fn pods_summarise_readiness_status_and_restarts() {
    let pod = json!({
        "metadata": {"name": "web-0", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.1.0.5"}],
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2,
                 "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": "2025-06-01T11:55:00Z"}}},
                {"name": "b", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]
        }
    });
    let table = table(
        &TableKind::builtin("", "pods"),
        &[pod],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web-0",
            "1/2",
            "CrashLoopBackOff",
            "2 (5m ago)",
            "60m",
            "10.1.0.5",
            "node-1",
            "<none>",
            "<none>"
        ])
    );
    assert!(table["rows"][0].get("conditions").is_none());
}

#[test]
fn events_print_object_and_message() {
    let event = json!({
        "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Deployment", "name": "web"},
        "type": "Normal",
        "reason": "Scaled",
        "message": "Scaled up \n",
        "source": {"component": "navique"},
        "firstTimestamp": "2025-06-01T11:00:00Z",
        "lastTimestamp": "2025-06-01T11:59:00Z",
        "count": 3
    });
    let table = table(
        &TableKind::builtin("", "events"),
        &[event],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "60s",
            "Normal",
            "Scaled",
            "deployment/web",
            "",
            "navique",
            "Scaled up",
            "60m",
            3,
            "web.1"
        ])
    );
    assert_eq!(table["columnDefinitions"][0]["name"], "Last Seen");
}

#[test]
fn metadata_rows_carry_partial_object_metadata() {
    let kind = TableKind::for_crd(&lock_crd(), "v1");
    let object = lock("a", "2025-06-01T11:59:01Z");
    let table = table(
        &kind,
        std::slice::from_ref(&object),
        "Metadata",
        json!({}),
        now(),
    );
    assert_eq!(
        table["rows"][0]["object"],
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object["metadata"].clone()
        })
    );
    let default = super::table(&kind, std::slice::from_ref(&object), "", json!({}), now());
    assert_eq!(default["rows"][0]["object"], table["rows"][0]["object"]);
    let full = super::table(
        &kind,
        std::slice::from_ref(&object),
        "Object",
        json!({}),
        now(),
    );
    assert_eq!(full["rows"][0]["object"], object);
}

#[test]
fn include_object_none_leaves_a_null_object() {
    let object = json!({"metadata": {"name": "settings"}});
    let table = table(
        &TableKind::builtin("", "configmaps"),
        &[object],
        "None",
        json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4}),
        now(),
    );
    let row = table["rows"][0].as_object().unwrap();
    assert_eq!(row.get("object"), Some(&Value::Null));
    assert_eq!(
        table["metadata"],
        json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4})
    );
    assert!(is_valid_include_object("None"));
    assert!(!is_valid_include_object("Everything"));
}

#[test]
fn watch_events_omit_headers_after_the_first() {
    let kind = TableKind::builtin("", "configmaps");
    let object = json!({"metadata": {"name": "c", "resourceVersion": "15"}});
    let first = watch_event_table(&kind, &object, "", true, now());
    let later = watch_event_table(&kind, &object, "", false, now());
    assert_eq!(first["columnDefinitions"].as_array().map(Vec::len), Some(3));
    assert_eq!(later["columnDefinitions"], Value::Null);
    assert_eq!(later["metadata"], json!({"resourceVersion": "15"}));
    assert_eq!(later["rows"].as_array().map(Vec::len), Some(1));
}

#[test]
fn every_builtin_row_has_one_cell_per_column() {
    let resources = [
        ("", "pods"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "namespaces"),
        ("", "serviceaccounts"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("", "nodes"),
        ("", "endpoints"),
        ("", "replicationcontrollers"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("apps", "controllerrevisions"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("coordination.k8s.io", "leases"),
        ("discovery.k8s.io", "endpointslices"),
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
        ),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("storage.k8s.io", "storageclasses"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
        ("networking.k8s.io", "networkpolicies"),
        ("policy", "poddisruptionbudgets"),
        ("", "resourcequotas"),
        ("autoscaling", "horizontalpodautoscalers"),
        ("", "podtemplates"),
        ("node.k8s.io", "runtimeclasses"),
        ("certificates.k8s.io", "certificatesigningrequests"),
        ("example.com", "widgets"),
    ];
    let object = json!({"metadata": {"name": "x"}});
    for (group, resource) in resources {
        let table = table(
            &TableKind::builtin(group, resource),
            std::slice::from_ref(&object),
            "None",
            json!({}),
            now(),
        );
        let columns = table["columnDefinitions"].as_array().unwrap().len();
        let cells = table["rows"][0]["cells"].as_array().unwrap().len();
        assert_eq!(columns, cells, "{group}/{resource}");
    }
}
