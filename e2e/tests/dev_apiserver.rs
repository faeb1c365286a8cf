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
