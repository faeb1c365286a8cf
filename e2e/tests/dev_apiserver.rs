//! The dev API server driven by the clients Navique's users and components
//! use: the pinned kubectl, kube-rs and Helm. Each test works in its own
//! namespace.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use navique_e2e::{cluster, repo_root};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

/// The Lock CRD installed once (CRDs are cluster-scoped, tests share it).
fn lock_crd() {
    let crd = repo_root().join("deploy/crds/locks.core.navique.com.yaml");
    cluster().kubectl_ok(&["apply", "-f", crd.to_str().unwrap()]);
    cluster().kubectl_ok(&[
        "wait",
        "--for",
        "condition=established",
        "crd/locks.core.navique.com",
        "--timeout",
        "20s",
    ]);
}

fn lock_manifest(namespace: &str, name: &str) -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples/lock.yaml"))
        .unwrap()
        .replace("namespace: forge", &format!("namespace: {namespace}"))
        .replace("name: protect-forge-stack", &format!("name: {name}"))
}

#[test]
fn a_crd_is_served_at_once_with_its_printer_columns() {
    lock_crd();
    let ns = cluster().namespace("crd");
    let out = cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock_manifest(&ns, "protect-forge-stack")),
    );
    assert_eq!(out, "lock.core.navique.com/protect-forge-stack created\n");
    let table = cluster().kubectl_ok(&["get", "locks", "-n", &ns]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "KIND", "TARGET", "ACTIVE", "STATUS", "REASON", "AGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["protect-forge-stack", "Stack", "forge"]);
    // The short name and the category resolve too.
    assert!(
        cluster()
            .kubectl_ok(&["get", "lck", "-n", &ns])
            .contains("protect-forge-stack")
    );
    assert!(
        cluster()
            .kubectl_ok(&["get", "navique", "-n", &ns])
            .contains("protect-forge-stack")
    );
}

#[test]
fn a_schema_violation_is_refused_naming_the_field() {
    lock_crd();
    let ns = cluster().namespace("invalid");
    let manifest = lock_manifest(&ns, "no-kind").replace("    kind: Stack\n", "");
    let err = cluster().kubectl_err(&["apply", "-f", "-"], Some(&manifest));
    assert_eq!(
        err,
        "The Lock \"no-kind\" is invalid: spec.targetRef.kind: Required value\n"
    );
    let missing = cluster().kubectl(&["get", "lock", "no-kind", "-n", &ns], None);
    assert!(!missing.status.success(), "nothing is stored");
}

#[test]
fn unknown_fields_are_refused_by_strict_validation_and_pruned_otherwise() {
    lock_crd();
    let ns = cluster().namespace("prune");
    let manifest = lock_manifest(&ns, "extra").replace("  reason:", "  bogus: true\n  reason:");
    let err = cluster().kubectl_err(&["apply", "-f", "-"], Some(&manifest));
    assert!(
        err.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{err}"
    );
    let out = cluster().kubectl_in(&["apply", "--validate=false", "-f", "-"], Some(&manifest));
    assert_eq!(out, "lock.core.navique.com/extra created\n");
    let spec = cluster().kubectl_ok(&["get", "lock", "extra", "-n", &ns, "-o", "jsonpath={.spec}"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(spec.get("bogus"), None, "pruned: {spec}");
    assert_eq!(spec["targetRef"]["kind"], "Stack");
}

#[test]
fn kubectl_create_namespace_configmap_and_secret_send_protobuf_and_work() {
    let ns = cluster().namespace("create");
    assert_eq!(
        cluster().kubectl_ok(&[
            "create",
            "configmap",
            "settings",
            "-n",
            &ns,
            "--from-literal",
            "mode=fast"
        ]),
        "configmap/settings created\n"
    );
    assert_eq!(
        cluster().kubectl_ok(&[
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            &ns,
            "--from-literal",
            "password=s3cret"
        ]),
        "secret/creds created\n"
    );
    let data = cluster().kubectl_ok(&[
        "get",
        "configmap",
        "settings",
        "-n",
        &ns,
        "-o",
        "jsonpath={.data.mode}",
    ]);
    assert_eq!(data, "fast");
    let password = cluster().kubectl_ok(&[
        "get",
        "secret",
        "creds",
        "-n",
        &ns,
        "-o",
        "jsonpath={.data.password}",
    ]);
    assert_eq!(password, "czNjcmV0");
    let namespaces = cluster().kubectl_ok(&["get", "namespace", &ns]);
    assert!(namespaces.contains("Active"), "{namespaces}");
}

#[test]
fn client_side_apply_creates_then_patches() {
    let ns = cluster().namespace("apply");
    let manifest = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\ndata:\n  mode: {mode}\n"
        )
    };
    assert_eq!(
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest("slow"))),
        "configmap/app created\n"
    );
    assert_eq!(
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest("fast"))),
        "configmap/app configured\n"
    );
    assert_eq!(
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest("fast"))),
        "configmap/app unchanged\n"
    );
    let mode =
        cluster().kubectl_ok(&["get", "cm", "app", "-n", &ns, "-o", "jsonpath={.data.mode}"]);
    assert_eq!(mode, "fast");
}

#[test]
fn server_side_apply_creates_updates_and_reports_conflicts() {
    let ns = cluster().namespace("ssa");
    let manifest = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\ndata:\n  mode: {mode}\n"
        )
    };
    let ssa = |manager: &str, mode: &str, force: bool| {
        let mut args = vec![
            "apply",
            "--server-side",
            "--field-manager",
            manager,
            "-f",
            "-",
        ];
        if force {
            args.push("--force-conflicts");
        }
        cluster().kubectl(&args, Some(&manifest(mode)))
    };
    let created = ssa("alice", "slow", false);
    assert!(created.status.success());
    assert_eq!(
        String::from_utf8_lossy(&created.stdout),
        "configmap/app serverside-applied\n"
    );
    assert!(ssa("alice", "fast", false).status.success());

    let conflict = ssa("bob", "paused", false);
    assert!(!conflict.status.success());
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with \"alice\": .data.mode"),
        "{stderr}"
    );
    assert_eq!(
        cluster().kubectl_ok(&["get", "cm", "app", "-n", &ns, "-o", "jsonpath={.data.mode}"]),
        "fast"
    );

    assert!(ssa("bob", "paused", true).status.success());
    assert_eq!(
        cluster().kubectl_ok(&["get", "cm", "app", "-n", &ns, "-o", "jsonpath={.data.mode}"]),
        "paused"
    );
    let managers = cluster().kubectl_ok(&[
        "get",
        "cm",
        "app",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
        "--show-managed-fields",
    ]);
    assert!(managers.contains("bob"), "{managers}");
}

#[test]
fn get_watch_sees_add_modify_and_delete() {
    let ns = cluster().namespace("watch");
    let (mut kubectl, _cache) = cluster().kubectl_command();
    let mut watch = kubectl
        .args([
            "get",
            "configmaps",
            "-n",
            &ns,
            "-w",
            "--output-watch-events",
            "--request-timeout",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let next_line = || lines_rx.recv_timeout(WAIT).expect("a watch line");
    cluster().kubectl_ok(&[
        "create",
        "configmap",
        "w",
        "-n",
        &ns,
        "--from-literal",
        "a=1",
    ]);
    // kubectl prints the header with the first row.
    let header: Vec<String> = next_line().split_whitespace().map(str::to_owned).collect();
    assert_eq!(header, ["EVENT", "NAME", "DATA", "AGE"]);
    assert!(next_line().starts_with("ADDED"));
    cluster().kubectl_ok(&["label", "configmap", "w", "-n", &ns, "touched=yes"]);
    assert!(next_line().starts_with("MODIFIED"));
    cluster().kubectl_ok(&["delete", "configmap", "w", "-n", &ns]);
    assert!(next_line().starts_with("DELETED"));
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn a_finalizer_holds_the_object_until_it_is_removed_and_wait_returns_then() {
    let ns = cluster().namespace("finalizer");
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n  finalizers: [example.com/hold]\n"
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    cluster().kubectl_ok(&["delete", "cm", "held", "-n", &ns, "--wait=false"]);
    let stamp = cluster().kubectl_ok(&[
        "get",
        "cm",
        "held",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(stamp.ends_with('Z'), "deletionTimestamp set: {stamp:?}");

    let (mut kubectl, _cache) = cluster().kubectl_command();
    let mut wait = kubectl
        .args([
            "wait",
            "--for=delete",
            "cm/held",
            "-n",
            &ns,
            "--timeout",
            "20s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        wait.try_wait().unwrap().is_none(),
        "wait returned while the finalizer held the object"
    );
    cluster().kubectl_ok(&[
        "patch",
        "cm",
        "held",
        "-n",
        &ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let status = wait.wait().expect("kubectl wait exits");
    assert!(status.success(), "kubectl wait --for=delete");
    assert!(
        !cluster()
            .kubectl(&["get", "cm", "held", "-n", &ns], None)
            .status
            .success()
    );
}

#[test]
fn a_stale_replace_is_a_conflict() {
    let ns = cluster().namespace("stale");
    cluster().kubectl_ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        &ns,
        "--from-literal",
        "v=1",
    ]);
    let stale = cluster().kubectl_ok(&["get", "cm", "c", "-n", &ns, "-o", "json"]);
    cluster().kubectl_ok(&["label", "cm", "c", "-n", &ns, "bump=1"]);
    let err = cluster().kubectl_err(&["replace", "-f", "-"], Some(&stale));
    assert_eq!(
        err,
        "Error from server (Conflict): error when replacing \"STDIN\": Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again\n"
    );
}

#[tokio::test]
async fn a_delete_with_a_wrong_uid_precondition_is_refused_and_removes_nothing() {
    let ns = cluster().namespace("precondition");
    let client = cluster().client().await;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "orders-db"}, "data": {"k": "v"}}))
            .unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let error = api.delete("orders-db", &params).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("not an API error: {error}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(
        status.message,
        format!(
            "Operation cannot be fulfilled on configmaps \"orders-db\": Precondition failed: UID in precondition: not-the-uid, UID in object meta: {}",
            created.metadata.uid.clone().unwrap()
        )
    );
    assert!(api.get_opt("orders-db").await.unwrap().is_some());
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete("orders-db", &right).await.unwrap();
    assert!(api.get_opt("orders-db").await.unwrap().is_none());
}

#[tokio::test]
async fn kube_rs_lists_pages_and_selects_by_label() {
    let ns = cluster().namespace("list");
    let api: Api<ConfigMap> = Api::namespaced(cluster().client().await, &ns);
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}"), "labels": {"parity": if i % 2 == 0 {"even"} else {"odd"}}}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.metadata.remaining_item_count, Some(3));
    let rest = api
        .list(&ListParams::default().continue_token(page.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    let names: Vec<_> = page
        .items
        .iter()
        .chain(&rest.items)
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
    let even = api
        .list(&ListParams::default().labels("parity=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 3);
    let named = api
        .list(&ListParams::default().fields("metadata.name=cm-3"))
        .await
        .unwrap();
    assert_eq!(named.items.len(), 1);
}

#[test]
fn helm_installs_and_uninstalls_a_chart() {
    let ns = cluster().namespace("helm");
    let helm = repo_root().join(".tools/bin/helm");
    let chart = repo_root().join("e2e/fixtures/charts/hello");
    let run = |args: &[&str]| {
        let output = Command::new(&helm)
            .args([
                "--kubeconfig",
                cluster().kubeconfig().to_str().unwrap(),
                "-n",
                &ns,
            ])
            .args(args)
            .env(
                "HELM_CACHE_HOME",
                std::env::temp_dir().join("navique-e2e-helm"),
            )
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "helm {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let installed = run(&[
        "install",
        "hello",
        chart.to_str().unwrap(),
        "--set",
        "greeting=bonjour",
    ]);
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    assert_eq!(
        cluster().kubectl_ok(&[
            "get",
            "cm",
            "hello-settings",
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.greeting}"
        ]),
        "bonjour"
    );
    assert_eq!(
        cluster().kubectl_ok(&[
            "get",
            "secret",
            "hello-token",
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.token}"
        ]),
        "bm90LWEtc2VjcmV0"
    );
    assert!(run(&["list"]).contains("deployed"));
    run(&["uninstall", "hello"]);
    assert!(
        !cluster()
            .kubectl(&["get", "cm", "hello-settings", "-n", &ns], None)
            .status
            .success()
    );
}

/// The kinds a user's first commands create: kubectl builds each as a typed
/// object and sends it as protobuf. Each is then read, patched and deleted.
#[test]
fn kubectl_creates_gets_patches_and_deletes_every_kind_it_sends_as_protobuf() {
    let ns = cluster().namespace("kinds");
    let pc = format!("{ns}-high");
    let creates: [(&[&str], &str); 10] = [
        (
            &["deployment", "web", "--image=nginx:1.27", "--replicas=2"],
            "deployment.apps/web",
        ),
        (
            &[
                "rolebinding",
                "readers",
                "--clusterrole=view",
                "--user=alice",
            ],
            "rolebinding.rbac.authorization.k8s.io/readers",
        ),
        (
            &[
                "poddisruptionbudget",
                "web",
                "--selector=app=web",
                "--min-available=1",
            ],
            "poddisruptionbudget.policy/web",
        ),
        (
            &["job", "once", "--image=busybox", "--", "true"],
            "job.batch/once",
        ),
        (
            &[
                "cronjob",
                "tick",
                "--image=busybox",
                "--schedule=*/5 * * * *",
                "--",
                "date",
            ],
            "cronjob.batch/tick",
        ),
        (&["quota", "pods", "--hard=pods=3"], "resourcequota/pods"),
        (
            &["priorityclass", &pc, "--value=1000"],
            &format!("priorityclass.scheduling.k8s.io/{pc}"),
        ),
        (
            &["ingress", "web", "--rule=example.com/=web:80"],
            "ingress.networking.k8s.io/web",
        ),
        (&["serviceaccount", "robot"], "serviceaccount/robot"),
        (
            &["service", "clusterip", "web", "--tcp=80:8080"],
            "service/web",
        ),
    ];
    for (args, object) in creates {
        // Before the arguments: a container's command follows `--`.
        let mut command = vec!["create", "-n", &ns];
        command.extend_from_slice(args);
        assert_eq!(
            cluster().kubectl_ok(&command),
            format!("{object} created\n")
        );
        let patched = cluster().kubectl_ok(&[
            "patch",
            object,
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"checked":"yes"}}}"#,
        ]);
        assert_eq!(patched, format!("{object} patched\n"));
        let label = cluster().kubectl_ok(&[
            "get",
            object,
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.labels.checked}",
        ]);
        assert_eq!(label, "yes", "{object}");
    }
    let get = |object: &str, path: &str| {
        cluster().kubectl_ok(&["get", object, "-n", &ns, "-o", &format!("jsonpath={path}")])
    };
    assert_eq!(
        get(
            "deployment/web",
            "{.spec.replicas} {.spec.template.spec.containers[0].image}"
        ),
        "2 nginx:1.27"
    );
    assert_eq!(
        get("rolebinding/readers", "{.roleRef.name} {.subjects[0].name}"),
        "view alice"
    );
    assert_eq!(
        get(
            "pdb/web",
            "{.spec.minAvailable} {.spec.selector.matchLabels.app}"
        ),
        "1 web"
    );
    assert_eq!(
        get("cronjob/tick", "{.spec.schedule} {.spec.suspend}"),
        "*/5 * * * * false"
    );
    assert_eq!(get("quota/pods", "{.spec.hard.pods}"), "3");
    assert_eq!(get(&format!("priorityclass/{pc}"), "{.value}"), "1000");
    assert_eq!(get("ingress/web", "{.spec.rules[0].host}"), "example.com");
    assert_eq!(get("service/web", "{.spec.ports[0].targetPort}"), "8080");
    for (_, object) in creates {
        assert_eq!(
            cluster().kubectl_ok(&["delete", object, "-n", &ns]),
            format!(
                "{} \"{}\" deleted\n",
                object.split_once('/').unwrap().0,
                object.split_once('/').unwrap().1
            )
        );
    }
}

#[test]
fn every_built_in_resource_is_discovered_with_kubectl_short_names() {
    let resources = cluster().kubectl_ok(&["api-resources", "--no-headers", "-o", "name"]);
    for name in [
        "jobs.batch",
        "cronjobs.batch",
        "daemonsets.apps",
        "replicasets.apps",
        "replicationcontrollers",
        "resourcequotas",
        "limitranges",
        "pods",
        "priorityclasses.scheduling.k8s.io",
        "ingresses.networking.k8s.io",
        "networkpolicies.networking.k8s.io",
        "horizontalpodautoscalers.autoscaling",
        "storageclasses.storage.k8s.io",
        "runtimeclasses.node.k8s.io",
        "certificatesigningrequests.certificates.k8s.io",
        "flowschemas.flowcontrol.apiserver.k8s.io",
        "endpointslices.discovery.k8s.io",
    ] {
        assert!(
            resources.lines().any(|l| l == name),
            "{name} is not served:\n{resources}"
        );
    }
    let ns = cluster().namespace("short");
    assert_eq!(
        cluster().kubectl_ok(&["get", "cj,ds,rc,quota", "-n", &ns]),
        ""
    );
}

/// A workload stays unscheduled (no kubelet, no scheduler) and reports what
/// its controller reports on a cluster without nodes.
#[test]
fn an_unscheduled_deployment_and_job_report_what_a_cluster_without_nodes_reports() {
    let ns = cluster().namespace("unscheduled");
    cluster().kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
        "-n",
        &ns,
    ]);
    cluster().kubectl_ok(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "-n",
        &ns,
        "--",
        "true",
    ]);
    let deployment = cluster().kubectl_ok(&[
        "get", "deployment", "web", "-n", &ns, "-o",
        "jsonpath={.status.replicas} {.status.updatedReplicas} {.status.unavailableReplicas} {.status.readyReplicas} {.status.conditions[0].type}={.status.conditions[0].status} {.status.conditions[0].reason}",
    ]);
    assert_eq!(
        deployment,
        "2 2 2  Available=False MinimumReplicasUnavailable"
    );
    let table = cluster().kubectl_ok(&["get", "deployment", "web", "-n", &ns, "--no-headers"]);
    assert_eq!(
        table.split_whitespace().take(4).collect::<Vec<_>>(),
        ["web", "0/2", "2", "0"]
    );
    let job = cluster().kubectl_ok(&[
        "get", "job", "once", "-n", &ns, "-o",
        "jsonpath={.status.active} {.status.ready} {.spec.backoffLimit} {.spec.template.spec.restartPolicy}",
    ]);
    assert_eq!(job, "1 0 6 Never");
    let status = cluster().kubectl_ok(&["get", "job", "once", "-n", &ns, "--no-headers"]);
    assert_eq!(
        status.split_whitespace().take(3).collect::<Vec<_>>(),
        ["once", "Running", "0/1"]
    );
}

#[tokio::test]
async fn a_service_gets_its_load_balancer_status_and_its_delete_answers_the_service() {
    use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service, ServiceAccount, ServiceStatus};
    let ns = cluster().namespace("svc");
    let client = cluster().client().await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    assert_eq!(
        created.status,
        Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus::default()),
            conditions: None,
        })
    );
    let deleted = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = deleted
        .left()
        .expect("a Service's delete answers the Service, not a Status");
    assert_eq!(deleted.metadata.uid, created.metadata.uid);

    // The serviceaccount controller's account is there as soon as the namespace is.
    let accounts: Api<ServiceAccount> = Api::namespaced(client, &ns);
    let default = accounts.get("default").await.unwrap();
    assert_eq!(default.metadata.namespace.as_deref(), Some(ns.as_str()));
    let robot: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &robot)
        .await
        .unwrap();
    let deleted = accounts
        .delete("robot", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deleted.is_left(),
        "a ServiceAccount's delete answers the ServiceAccount"
    );
}

/// kube-apiserver's bytes: Go's field order and a trailing newline, for
/// objects and for error Status bodies.
#[tokio::test]
async fn objects_and_errors_are_written_in_go_field_order_with_a_trailing_newline() {
    let ns = cluster().namespace("bytes");
    let client = cluster().client().await;
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"settings","namespace":"{ns}"}},"data":{{"mode":"fast"}}}}"#
    );
    let send = |body: String| {
        let client = client.clone();
        let ns = ns.clone();
        async move {
            let request = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.into_bytes()))
                .unwrap();
            let response = client.send(request).await.unwrap();
            let status = response.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            (status, String::from_utf8(bytes.to_vec()).unwrap())
        }
    };
    let (status, created) = send(body.clone()).await;
    assert_eq!(status, 201);
    assert!(
        created.starts_with(&format!(r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"settings","namespace":"{ns}","uid":"#)),
        "{created}"
    );
    assert!(
        created.ends_with("}]},\"data\":{\"mode\":\"fast\"}}\n"),
        "{created}"
    );
    let (status, conflict) = send(body).await;
    assert_eq!(status, 409);
    assert_eq!(
        conflict,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"settings\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"settings\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );
}

/// A second client nobody here wrote: the official Python client, installed
/// by scripts/tools.sh, parses every answer into its typed models.
#[test]
fn the_official_python_client_creates_patches_lists_watches_and_deletes() {
    let ns = cluster().namespace("python");
    let python_path = repo_root().join(".tools/python");
    assert!(
        python_path.join(".installed").exists(),
        "{} is missing: run scripts/tools.sh (make test does) to install the Python client",
        python_path.display()
    );
    let output = Command::new("python3")
        .arg(repo_root().join("e2e/python/client_conformance.py"))
        .arg(cluster().kubeconfig())
        .arg(&ns)
        .env("PYTHONPATH", &python_path)
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let conflict = r#"'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"services \\"twice\\" already exists","reason":"AlreadyExists","details":{"name":"twice","kind":"services"},"code":409}\n'"#;
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!(
            "service created: TCP 80->8080 loadBalancer={{'ingress': None}}\n\
             service patched: [('app', 'web'), ('tier', 'front')]\n\
             services listed: ['web']\n\
             service deleted: V1Service web\n\
             service watched: DELETED web\n\
             deployment created: replicas=1 strategy=RollingUpdate unavailable=1\n\
             deployment patched: replicas=3 generation=2\n\
             deployment watched: MODIFIED web\n\
             deployments listed: ['web']\n\
             deployment deleted: V1Status Success\n\
             job created: backoffLimit=6 active=1 ready=0\n\
             job patched: {{'run': '1'}}\n\
             job watched: MODIFIED once\n\
             jobs listed: ['once']\n\
             job deleted: V1Status Success\n\
             second create: 409 {conflict}\n"
        )
    );
}

/// A built-in kind's unknown fields are pruned like a custom resource's:
/// kubectl's server-side validation refuses them, `--validate=false` drops
/// them.
#[test]
fn unknown_fields_of_a_built_in_kind_are_refused_by_strict_validation_and_pruned_otherwise() {
    let ns = cluster().namespace("builtin-prune");
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n  colour: red\ndata:\n  mode: fast\n"
    );
    let err = cluster().kubectl_err(&["apply", "-f", "-"], Some(&manifest));
    assert!(
        err.contains("strict decoding error: unknown field \"metadata.colour\""),
        "{err}"
    );
    let out = cluster().kubectl_in(&["apply", "--validate=false", "-f", "-"], Some(&manifest));
    assert_eq!(out, "configmap/settings created\n");
    let metadata = cluster().kubectl_ok(&[
        "get",
        "configmap",
        "settings",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.colour}|{.data.mode}",
    ]);
    assert_eq!(metadata, "|fast");
}

/// `kubectl scale` finds the `/scale` subresource in discovery, patches it
/// (or, with a precondition, replaces it) and the Deployment's replicas move.
#[test]
fn kubectl_scale_changes_replicas_through_the_scale_subresource() {
    let ns = cluster().namespace("scale");
    cluster().kubectl_ok(&["create", "deployment", "web", "--image=nginx", "-n", &ns]);
    assert_eq!(
        cluster().kubectl_ok(&["scale", "deployment", "web", "--replicas=3", "-n", &ns]),
        "deployment.apps/web scaled\n"
    );
    let err = cluster().kubectl_err(
        &[
            "scale",
            "deployment",
            "web",
            "--replicas=1",
            "--current-replicas=2",
            "-n",
            &ns,
        ],
        None,
    );
    assert_eq!(err, "error: Expected replicas to be 2, was 3\n");
    assert_eq!(
        cluster().kubectl_ok(&[
            "scale",
            "deployment",
            "web",
            "--replicas=0",
            "--current-replicas=3",
            "-n",
            &ns
        ]),
        "deployment.apps/web scaled\n"
    );
    let scale = cluster().kubectl_ok(&[
        "get",
        "--raw",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/web/scale"),
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["spec"], json!({"replicas": 0}));
    assert_eq!(scale["status"]["selector"], "app=web");
}
