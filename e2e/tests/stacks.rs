//! Stacks end to end: the real service-lifecycle-controller and
//! lock-controller on the dev API server, driven with kubectl. Waves apply
//! in order; `Prune=confirm` and `Delete=confirm` wait for approval, which
//! the gRPC stream, an Event and a notification announce; `Prune=false`
//! never prunes; an approval is used once; a Lock keeps a deleted Stack
//! partially torn down; ApprovalEvents shows each caller only the Projects
//! its own identity may read. Fail closed: sync options that are not
//! understood hold the resource ("fail open"), and an approval set before
//! the removal waited is never used ("stale authorisation").

use std::sync::OnceLock;
use std::time::Duration;

use navique_api::constants::finalizers;
use navique_api::grpc::approvals::v1::approval_events_client::ApprovalEventsClient;
use navique_api::grpc::approvals::v1::{
    ApprovalEvent, EventType, ListPendingApprovalsRequest, StreamApprovalEventsRequest,
};
use navique_api::messages;
use navique_e2e::locks::lock;
use navique_e2e::plugin::{Watch, kubectl_navique, kubectl_navique_ok};
use navique_e2e::services::CONTROLLER_USER;
use navique_e2e::stacks::{STACK_ACCOUNT, StackEnv, bind_service_account};
use navique_e2e::{Cluster, PROJECT_MEMBERS, eventually};
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

const WAIT: Duration = Duration::from_secs(30);

fn env() -> &'static StackEnv {
    static ENV: OnceLock<StackEnv> = OnceLock::new();
    ENV.get_or_init(StackEnv::start)
}

fn cluster() -> &'static Cluster {
    &env().locks.cluster
}

/// A ConfigMap manifest in wave `wave`, with `options` as its sync options.
fn config_map(name: &str, wave: i32, options: Option<&str>) -> Value {
    let mut annotations = json!({"cd.hanzo.ai/sync-wave": wave.to_string()});
    if let Some(options) = options {
        annotations["cd.hanzo.ai/sync-options"] = json!(options);
    }
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations},
        "data": {"name": name},
    })
}

/// Applies Stack `ns/name`; it acts as the namespace's default Stack
/// ServiceAccount, which these tests let edit the namespace.
fn apply_stack(ns: &str, name: &str, resources: &[Value]) {
    bind_service_account(cluster(), ns, STACK_ACCOUNT, "edit");
    let stack = json!({
        "apiVersion": "core.navique.com/v1alpha1",
        "kind": "Stack",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"resources": resources},
    });
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&stack.to_string()));
}

fn stack(ns: &str, name: &str) -> Option<Value> {
    let output = cluster().kubectl(&["get", "stack", name, "-n", ns, "-o", "json"], None);
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).unwrap())
}

/// `phase reason` of the Stack's operation and Ready condition.
fn state(stack: &Value) -> (String, String) {
    let phase = stack["status"]["operation"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let reason = stack["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["reason"].as_str())
        .unwrap_or_default()
        .to_owned();
    (phase, reason)
}

/// The inventory row of `name`.
fn row(stack: &Value, name: &str) -> Option<Value> {
    stack["status"]["resources"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)
        .cloned()
}

async fn until_stack(ns: &str, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(WAIT, what, || async {
        stack(ns, name).filter(|s| check(s))
    })
    .await
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    cluster()
        .kubectl(&["get", kind, name, "-n", ns, "-o", "name"], None)
        .status
        .success()
}

fn annotation(ns: &str, kind: &str, name: &str, key: &str) -> String {
    let path = format!(
        "jsonpath={{.metadata.annotations.{}}}",
        key.replace('.', "\\.")
    );
    cluster().kubectl_ok(&["get", kind, name, "-n", ns, "-o", &path])
}

/// Sets (overwrites) annotation `key` of an object to `value`.
fn annotate(ns: &str, kind: &str, name: &str, key: &str, value: &str) {
    cluster().kubectl_ok(&[
        "annotate",
        kind,
        name,
        "-n",
        ns,
        &format!("{key}={value}"),
        "--overwrite",
    ]);
}

/// The declarative approval by hand, as the cluster's admin: the
/// approval-identity policy wants the approver named beside it.
fn approve(ns: &str, kind: &str, name: &str) {
    cluster().kubectl_ok(&[
        "annotate",
        kind,
        name,
        "-n",
        ns,
        "cd.hanzo.ai/deletion-approved=true",
        &format!("{APPROVED_BY}={ADMIN}"),
        "--overwrite",
    ]);
}

/// The user name a Stack of `ns` acts as: the controller's deletes of its
/// resources are this user's requests.
fn stack_account(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:{STACK_ACCOUNT}")
}

/// The dev API server's admin, whose kubeconfig the tests use.
const ADMIN: &str = "dev-admin";
const APPROVED_BY: &str = navique_api::constants::annotations::APPROVED_BY;

/// A client of the controller's ApprovalEvents server: TLS, verified
/// against the gRPC CA; no client certificate (the subscribers are people).
async fn approval_events() -> ApprovalEventsClient<tonic::transport::Channel> {
    let ca = std::fs::read(env().approvals_ca_file().await).expect("read the gRPC CA");
    let channel = Endpoint::from_shared(env().approvals_url())
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .unwrap()
        .connect()
        .await
        .expect("connect to ApprovalEvents over TLS");
    ApprovalEventsClient::new(channel)
}

/// `message` with `authorization: Bearer <token>` metadata, when a token.
fn bearing<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("metadata value");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Approval events of `ns`, as they arrive, as the cluster's admin.
async fn subscribe(ns: &str) -> tonic::Streaming<ApprovalEvent> {
    let request = StreamApprovalEventsRequest {
        namespace: ns.to_owned(),
        include_existing: true,
    };
    approval_events()
        .await
        .stream_approval_events(bearing(request, Some(&cluster().token())))
        .await
        .expect("stream approval events")
        .into_inner()
}

/// The next event's type and resource name.
async fn next_event(events: &mut tonic::Streaming<ApprovalEvent>) -> (EventType, String) {
    let event = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an approval event in time")
        .expect("the stream goes on")
        .expect("an event, not an error");
    let name = event
        .approval
        .as_ref()
        .and_then(|a| a.resource.as_ref())
        .map(|r| r.name.clone())
        .unwrap_or_default();
    (event.r#type(), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_apply_in_order_and_a_confirmed_prune_waits_for_approval() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("waves");
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "db", "annotations": {"cd.hanzo.ai/sync-wave": "0"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
        },
    });
    let settings = config_map("settings", 1, Some("Prune=confirm"));
    let flags = config_map("flags", 1, None);
    apply_stack(&ns, "web", &[deployment.clone(), settings, flags.clone()]);

    // Wave 1 waits for wave 0 to be healthy.
    // Past the pass that records the create ("creating Deployment/db").
    let waiting = until_stack(&ns, "web", "wave 0 to hold wave 1 back", |s| {
        state(s).0 == "Progressing" && row(s, "db").is_some_and(|r| r.get("creating").is_none())
    })
    .await;
    assert_eq!(
        waiting["status"]["operation"]["message"],
        "waiting for Deployment/db in wave 0: 0 of 1 replicas ready"
    );
    assert_eq!(
        row(&waiting, "flags").unwrap()["message"],
        "waits for wave 0"
    );
    assert!(!exists(&ns, "configmap", "settings") && !exists(&ns, "configmap", "flags"));
    // The test stands in for the Deployment controller.
    cluster().kubectl_ok(&[
        "patch",
        "deployment",
        "db",
        "-n",
        &ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":1,"readyReplicas":1}}"#,
    ]);
    let synced = until_stack(&ns, "web", "every resource to be synced", |s| {
        state(s) == ("Succeeded".to_owned(), "Synced".to_owned())
    })
    .await;
    let rows = synced["status"]["resources"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(row["status"], "Synced", "{row}");
        assert_eq!(row["health"]["status"], "Healthy", "{row}");
    }
    assert_eq!(
        cluster().kubectl_ok(&[
            "get",
            "configmap",
            "settings",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.labels.core\\.navique\\.com/stack}"
        ]),
        "web"
    );

    // settings leaves the Stack: it waits for approval.
    let mut events = subscribe(&ns).await;
    apply_stack(&ns, "web", &[deployment.clone(), flags.clone()]);
    let pending = until_stack(&ns, "web", "the prune to wait for approval", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    let settings_row = row(&pending, "settings").unwrap();
    assert_eq!(settings_row["requiresPruning"], true);
    let since = settings_row["waitingSince"].clone();
    assert!(
        since.as_str().is_some_and(|s| s.ends_with('Z')),
        "{settings_row}"
    );
    assert_eq!(settings_row["status"], "OutOfSync");
    assert_eq!(
        state(&pending),
        ("Progressing".to_owned(), "WaitingForApproval".to_owned())
    );
    assert_eq!(
        pending["status"]["operation"]["message"],
        "waiting for deletion approval of ConfigMap/settings"
    );
    assert_eq!(
        next_event(&mut events).await,
        (EventType::ApprovalRequired, "settings".to_owned())
    );
    assert!(cluster().event_messages(&ns, "DeletionApprovalRequired").contains(&format!(
        "Normal waiting for approval to prune ConfigMap/settings: run kubectl navique approve --all --stack web -n {ns}"
    )
    ));
    // The Event names this Stack by uid and resourceVersion, so that
    // `kubectl describe` (which selects by uid) shows it.
    let regarding = cluster().kubectl_ok(&[
        "get",
        "events",
        "-n",
        &ns,
        "--field-selector",
        "reason=DeletionApprovalRequired",
        "-o",
        "jsonpath={.items[0].involvedObject.uid} {.items[0].involvedObject.resourceVersion}",
    ]);
    let (uid, resource_version) = regarding.split_once(' ').unwrap();
    assert_eq!(uid, pending["metadata"]["uid"].as_str().unwrap());
    assert!(!resource_version.is_empty(), "{regarding}");
    let described = cluster().kubectl_ok(&["describe", "stack", "web", "-n", &ns]);
    assert!(
        described.contains("DeletionApprovalRequired")
            && described.contains("waiting for approval to prune ConfigMap/settings"),
        "{described}"
    );
    eventually(WAIT, "one notification", || async {
        (env.notifications.about(&ns).len() == 1).then_some(())
    })
    .await;
    let notification = &env.notifications.about(&ns)[0];
    assert_eq!(notification["stack"]["name"], "web");
    assert_eq!(notification["resources"][0]["name"], "settings");
    assert_eq!(notification["resources"][0]["operation"], "prune");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        exists(&ns, "configmap", "settings"),
        "not pruned before approval"
    );
    // Since when it waits is set once: later passes (every 2 s while it
    // waits) keep it.
    let later = stack(&ns, "web").unwrap();
    assert_eq!(row(&later, "settings").unwrap()["waitingSince"], since);
    let wide = kubectl_navique_ok(cluster(), &["approvals", "-n", &ns, "-o", "wide"]);
    assert!(wide.contains(since.as_str().unwrap()), "{wide}");
    let metrics = navique_e2e::http_get(env.controller_admin, "/metrics")
        .await
        .unwrap()
        .body;
    let pending: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("navique_service_lifecycle_controller_pending_approvals "))
        .unwrap_or_else(|| panic!("no pending_approvals gauge in\n{metrics}"))
        .parse()
        .unwrap();
    assert!(pending >= 1.0, "{pending}");
    // It has waited at least the 3 s slept above.
    let oldest: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("navique_service_lifecycle_controller_oldest_pending_approval_seconds ")
        })
        .unwrap_or_else(|| panic!("no oldest_pending_approval_seconds gauge in\n{metrics}"))
        .parse()
        .unwrap();
    assert!(oldest >= 3.0, "{oldest}");

    assert_eq!(
        kubectl_navique_ok(cluster(), &["approve", "configmap/settings", "-n", &ns]).trim(),
        "approved configmap/settings as dev-admin (Prune in Stack web)"
    );
    until_stack(&ns, "web", "the sync to complete", |s| {
        state(s).0 == "Succeeded" && row(s, "settings").is_none()
    })
    .await;
    assert!(!exists(&ns, "configmap", "settings"));
    assert!(exists(&ns, "configmap", "flags"));
    assert_eq!(
        next_event(&mut events).await,
        (EventType::Approved, "settings".to_owned())
    );
    assert_eq!(
        next_event(&mut events).await,
        (EventType::Deleted, "settings".to_owned())
    );
    assert_eq!(
        env.notifications.about(&ns).len(),
        1,
        "one notification per wait"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_false_is_never_pruned_and_reported_out_of_sync() {
    env().ready().await;
    let ns = cluster().namespace("prune-false");
    let keep = config_map("keep", 0, Some("Prune=false"));
    let other = config_map("other", 0, None);
    apply_stack(&ns, "app", &[keep, other.clone()]);
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;

    apply_stack(&ns, "app", &[other]);
    let skipped = until_stack(&ns, "app", "the prune to be skipped", |s| {
        state(s).1 == "PruneSkipped"
    })
    .await;
    let keep_row = row(&skipped, "keep").unwrap();
    assert_eq!(keep_row["status"], "OutOfSync");
    assert_eq!(keep_row["requiresPruning"], true);
    assert_eq!(keep_row["message"], "not pruned: Prune=false");
    assert_eq!(
        skipped["status"]["operation"]["message"],
        "synced; not pruned (Prune=false): ConfigMap/keep"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(exists(&ns, "configmap", "keep"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_used_once() {
    env().ready().await;
    let ns = cluster().namespace("used-once");
    let settings = config_map("settings", 0, Some("Prune=confirm"));
    let other = config_map("other", 0, None);
    apply_stack(&ns, "app", &[settings.clone(), other.clone()]);
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;
    apply_stack(&ns, "app", std::slice::from_ref(&other));
    until_stack(&ns, "app", "the prune to wait", |s| {
        state(s).1 == "WaitingForApproval"
    })
    .await;

    // Approved, then put back before the prune could run (the controller's
    // deletes fail meanwhile).
    cluster().post_raw(
        "/debug/faults",
        &json!({"faults": [{"verb": "delete", "resource": "configmaps", "namespace": ns, "user": stack_account(&ns), "code": 500, "message": "injected"}]}).to_string(),
    );
    approve(&ns, "configmap", "settings");
    apply_stack(&ns, "app", &[settings, other.clone()]);
    cluster().kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    until_stack(&ns, "app", "the resource to be synced again", |s| {
        state(s).1 == "Synced"
    })
    .await;
    eventually(WAIT, "the approval to be taken away", || async {
        annotation(
            &ns,
            "configmap",
            "settings",
            "cd.hanzo.ai/deletion-approved",
        )
        .is_empty()
        .then_some(())
    })
    .await;

    // Removed again, it waits for a new approval.
    apply_stack(&ns, "app", &[other]);
    until_stack(&ns, "app", "a new wait", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        exists(&ns, "configmap", "settings"),
        "the old approval approved nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_stack_pauses_at_a_confirmed_delete_and_goes_in_reverse_wave_order() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("teardown");
    apply_stack(
        &ns,
        "shop",
        &[
            config_map("base", 0, None),
            config_map("data", 1, Some("Delete=confirm")),
            config_map("cache", 1, None),
            config_map("front", 2, None),
        ],
    );
    until_stack(&ns, "shop", "the sync", |s| state(s).1 == "Synced").await;
    let watch = Watch::start(
        cluster(),
        &env.approvals_url(),
        &env.approvals_ca_file().await,
        &["-n", &ns, "-o", "json"],
    );
    // The same events for a user who cannot reach the service.
    let through_api_server = Watch::through_api_server(cluster(), &["-n", &ns]);
    cluster().kubectl_ok(&["delete", "stack", "shop", "-n", &ns, "--wait=false"]);
    let paused = until_stack(&ns, "shop", "the teardown to pause in wave 1", |s| {
        state(s).1 == "WaitingForApproval"
    })
    .await;
    assert_eq!(
        paused["status"]["operation"]["message"],
        "deleting wave 1: waiting for deletion approval of ConfigMap/data"
    );
    assert!(!exists(&ns, "configmap", "front"), "wave 2 went first");
    assert!(!exists(&ns, "configmap", "cache"));
    assert!(exists(&ns, "configmap", "data"));
    assert!(exists(&ns, "configmap", "base"), "wave 0 waits for wave 1");
    assert_eq!(
        row(&paused, "base").unwrap()["message"],
        "waits for wave 1 to be deleted"
    );
    assert_eq!(
        row(&paused, "data").unwrap()["requiresDeletionApproval"],
        true
    );
    eventually(WAIT, "the notification", || async {
        env.notifications
            .about(&ns)
            .iter()
            .any(|n| {
                n["resources"][0]["name"] == "data" && n["resources"][0]["operation"] == "delete"
            })
            .then_some(())
    })
    .await;

    let event = |line: String| -> (String, String, String) {
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        (
            text(&event["type"]),
            text(&event["approval"]["operation"]),
            text(&event["approval"]["resource"]["name"]),
        )
    };
    let required = (
        "APPROVAL_REQUIRED".to_owned(),
        "Delete".to_owned(),
        "data".to_owned(),
    );
    assert_eq!(event(watch.next_line(WAIT)), required);
    let table = kubectl_navique_ok(cluster(), &["approvals", "-n", &ns]);
    assert!(
        table
            .lines()
            .any(|l| l.contains("shop") && l.contains("Delete") && l.contains("data")),
        "{table}"
    );

    let approved = kubectl_navique_ok(
        cluster(),
        &["approve", "--all", "--stack", "shop", "-n", &ns],
    );
    assert_eq!(
        approved.trim(),
        "approved configmap/data as dev-admin (Delete in Stack shop)"
    );
    eventually(WAIT, "the Stack to be gone", || async {
        stack(&ns, "shop").is_none().then_some(())
    })
    .await;
    assert!(!exists(&ns, "configmap", "data") && !exists(&ns, "configmap", "base"));
    assert_eq!(event(watch.next_line(WAIT)).0, "APPROVED");
    assert_eq!(event(watch.next_line(WAIT)).0, "DELETED");
    let lines: Vec<String> = (0..3)
        .map(|_| {
            let line = through_api_server.next_line(WAIT);
            // The time, then the event.
            line.split_once("  ").expect("a time first").1.to_owned()
        })
        .collect();
    assert_eq!(
        lines,
        [
            format!("APPROVAL_REQUIRED  {ns}/shop  Delete ConfigMap/data"),
            format!("APPROVED           {ns}/shop  Delete ConfigMap/data by dev-admin"),
            format!("DELETED            {ns}/shop  Delete ConfigMap/data"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_resource_keeps_a_deleted_stack_partially_torn_down() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("locked");
    let inner = json!({
        "apiVersion": "core.navique.com/v1alpha1",
        "kind": "Stack",
        "metadata": {"name": "inner", "annotations": {"cd.hanzo.ai/sync-wave": "0"}},
        "spec": {"resources": []},
    });
    apply_stack(&ns, "outer", &[inner, config_map("front", 1, None)]);
    until_stack(&ns, "outer", "the sync", |s| state(s).1 == "Synced").await;
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "keep-inner",
            "core.navique.com/v1alpha1",
            "Stack",
            "inner",
            "holds production data",
        )),
    );
    env.locks
        .until_lock(&ns, "keep-inner", true, "Protecting")
        .await;

    cluster().kubectl_ok(&["delete", "stack", "outer", "-n", &ns, "--wait=false"]);
    let denied = until_stack(&ns, "outer", "the denial", |s| {
        state(s).1 == "DeletionDenied"
    })
    .await;
    let message = denied["status"]["operation"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("deleting wave 0: the delete of Stack/inner was denied: ")
            && message.contains("keep-inner"),
        "{message}"
    );
    assert!(
        row(&denied, "inner").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("keep-inner")
    );
    assert!(!exists(&ns, "configmap", "front"), "wave 1 is deleted");
    assert!(exists(&ns, "stack", "inner"));
    assert!(
        cluster()
            .event_messages(&ns, "DeletionDenied")
            .contains("Warning the delete of Stack/inner was denied: "),
        "{}",
        cluster().event_messages(&ns, "DeletionDenied")
    );

    // Without the Lock, the teardown finishes.
    cluster().kubectl_ok(&["delete", "lock", "keep-inner", "-n", &ns]);
    eventually(WAIT, "both Stacks to be gone", || async {
        (stack(&ns, "outer").is_none() && stack(&ns, "inner").is_none()).then_some(())
    })
    .await;
}

/// Makes a prune of ConfigMap `name` (Prune=confirm) in Stack `app` of `ns`
/// wait for approval, keeping `kept` in the Stack.
async fn pending_prune(ns: &str, name: &str, kept: &[Value]) {
    let mut all = kept.to_vec();
    all.push(config_map(name, 0, Some("Prune=confirm")));
    apply_stack(ns, "app", &all);
    until_stack(ns, "app", "the sync", |s| {
        row(s, name).is_some_and(|r| r["status"] == "Synced")
    })
    .await;
    apply_stack(ns, "app", kept);
    until_stack(ns, "app", "the prune to wait for approval", |s| {
        row(s, name).is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
}

/// The Stack namespaces of a listing or of events.
fn namespaces<'a>(
    approvals: impl IntoIterator<Item = &'a navique_api::grpc::approvals::v1::PendingApproval>,
) -> Vec<String> {
    let mut namespaces: Vec<String> = approvals
        .into_iter()
        .filter_map(|a| a.stack.as_ref().map(|s| s.namespace.clone()))
        .collect();
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

/// ApprovalEvents answers as the caller's own Kubernetes identity. Without
/// authentication it would be "unauthenticated inside": anyone on the pod
/// network could read every Project's pending deletions. Answering with the
/// controller's own (cluster-wide) rights would make it a "privileged
/// deputy": a Project viewer would read every other Project through it.
/// Two Projects: alice administers both, carol views A only, dave has no
/// role anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_events_show_a_caller_only_the_projects_it_may_read() {
    let env = env();
    env.ready().await;
    let k = cluster();
    for user in ["alice", "bob", "carol", "dave"] {
        k.add_user(user, &[]);
    }
    let a = k.project("team-a", &PROJECT_MEMBERS);
    let b = k.project("team-b", &[("alice", "admin")]);
    let kept = [config_map("kept", 0, None)];
    for ns in [&a, &b] {
        pending_prune(ns, "settings", &kept).await;
    }
    let list = async |namespace: &str, token: Option<&str>| {
        let request = ListPendingApprovalsRequest {
            namespace: namespace.to_owned(),
            stack: String::new(),
        };
        approval_events()
            .await
            .list_pending_approvals(bearing(request, token))
            .await
            .map(|r| namespaces(&r.into_inner().approvals))
    };
    let refusal = |result: Result<Vec<String>, tonic::Status>| {
        let status = result.expect_err("refused");
        (status.code(), status.message().to_owned())
    };

    // Who the caller is comes from its token, reviewed by the API server.
    let (code, message) = refusal(list("", None).await);
    assert_eq!(code, tonic::Code::Unauthenticated);
    assert!(
        message.contains("authorization: Bearer <token>"),
        "{message}"
    );
    let (code, message) = refusal(list(&a, Some("bogus-token")).await);
    assert_eq!(code, tonic::Code::Unauthenticated);
    assert_eq!(
        message,
        "the Kubernetes API server does not accept the bearer token: send a current token of your kubeconfig's user"
    );

    // What it sees is what it may list.
    assert_eq!(
        list("", Some("alice-token")).await.unwrap(),
        [a.clone(), b.clone()]
    );
    assert_eq!(
        list("", Some("carol-token")).await.unwrap(),
        std::slice::from_ref(&a)
    );
    assert_eq!(
        list(&a, Some("carol-token")).await.unwrap(),
        std::slice::from_ref(&a)
    );
    let (code, message) = refusal(list(&b, Some("carol-token")).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert_eq!(
        message,
        format!(
            "User \"carol\" cannot list resource \"stacks\" in API group \"core.navique.com\" in the namespace \"{b}\": ApprovalEvents shows a namespace's approvals to whoever may list its Stacks"
        )
    );
    assert_eq!(
        list("", Some("dave-token")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        refusal(list(&a, Some("dave-token")).await).0,
        tonic::Code::PermissionDenied
    );
    let (code, message) = refusal(list("Team_A", Some("carol-token")).await);
    assert_eq!(code, tonic::Code::InvalidArgument);
    assert!(
        message.starts_with("namespace: Invalid value: \"Team_A\""),
        "{message}"
    );

    // A stream of every namespace carries A's events, never B's.
    let request = StreamApprovalEventsRequest {
        namespace: String::new(),
        include_existing: true,
    };
    let mut carols = approval_events()
        .await
        .stream_approval_events(bearing(request, Some("carol-token")))
        .await
        .expect("carol's stream")
        .into_inner();
    let next_namespace = async |events: &mut tonic::Streaming<ApprovalEvent>| {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an approval event in time")
            .expect("the stream goes on")
            .expect("an event, not an error");
        namespaces(event.approval.as_ref())
    };
    assert_eq!(next_namespace(&mut carols).await, std::slice::from_ref(&a));

    // The plugin, with each user's own kubeconfig token.
    let dir = tempfile::tempdir().expect("temp dir");
    let url = env.approvals_url();
    let ca = env.approvals_ca_file().await;
    let ca_arg = ca.to_str().expect("a UTF-8 path");
    let carol = k.kubeconfig_for("carol-token", dir.path());
    let watch = Watch::start_as(k, &carol, &url, &ca, &["-A", "-o", "json"]);
    let namespace_of = |line: String| -> String {
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        event["approval"]["stack"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(namespace_of(watch.next_line(WAIT)), a);

    // New waits in B, then in A: only A's reach carol.
    pending_prune(&b, "later", &kept).await;
    pending_prune(&a, "later", &kept).await;
    assert_eq!(next_namespace(&mut carols).await, std::slice::from_ref(&a));
    assert_eq!(namespace_of(watch.next_line(WAIT)), a);

    let refused = kubectl_navique(
        k,
        &carol,
        &[
            "approvals",
            "--watch",
            "-n",
            &b,
            "--approvals-url",
            &url,
            "--approvals-ca-file",
            ca_arg,
        ],
    );
    assert_eq!(refused.code, Some(1));
    assert_eq!(
        refused.stderr,
        format!(
            "error: the ApprovalEvents service at {url} refused the stream: User \"carol\" cannot list resource \"stacks\" in API group \"core.navique.com\" in the namespace \"{b}\": ApprovalEvents shows a namespace's approvals to whoever may list its Stacks\n"
        )
    );
    let dave = k.kubeconfig_for("dave-token", dir.path());
    let refused = kubectl_navique(
        k,
        &dave,
        &[
            "approvals",
            "--watch",
            "-n",
            &a,
            "--approvals-url",
            &url,
            "--approvals-ca-file",
            ca_arg,
        ],
    );
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("User \"dave\" cannot list"),
        "{}",
        refused.stderr
    );

    // A kubeconfig user without a token gets told what to use.
    let basic = dir.path().join("kubeconfig-basic");
    let text = std::fs::read_to_string(&carol).expect("read kubeconfig");
    std::fs::write(
        &basic,
        text.replace(
            "token: carol-token",
            "username: carol\n    password: secret",
        ),
    )
    .expect("write kubeconfig");
    let refused = kubectl_navique(
        k,
        &basic,
        &[
            "approvals",
            "--watch",
            "-n",
            &a,
            "--approvals-url",
            &url,
            "--approvals-ca-file",
            ca_arg,
        ],
    );
    assert_eq!(
        (refused.code, refused.stderr.as_str()),
        (
            Some(1),
            "error: ApprovalEvents needs a bearer token; the kubeconfig's user has a username and password: use a context whose user has a token, a tokenFile or an exec plugin that returns a token\n"
        )
    );
}

/// The row message of `name`, or "".
fn row_message(stack: &Value, name: &str) -> String {
    row(stack, name)
        .and_then(|r| r["message"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Fail open: misspelt, wrong-case, wrongly separated and conflicting sync
/// options once meant "prune now". In a manifest they are refused before
/// anything is applied; on a live resource that leaves the Stack they hold
/// it, and the Stack names the value and what is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misspelt_sync_options_keep_the_resource_and_say_what_is_accepted() {
    env().ready().await;
    let ns = cluster().namespace("fail-closed");
    let other = config_map("other", 0, None);
    apply_stack(
        &ns,
        "app",
        &[config_map("settings", 0, None), other.clone()],
    );
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;

    // In a manifest: the Stack is refused, nothing is applied or pruned.
    apply_stack(
        &ns,
        "app",
        &[other.clone(), config_map("typo", 0, Some("Prune=confrim"))],
    );
    let refused = until_stack(&ns, "app", "the manifest to be refused", |s| {
        state(s).1 == "InvalidManifest"
    })
    .await;
    assert_eq!(
        refused["status"]["operation"]["message"],
        format!(
            "spec.resources[1]: {}",
            messages::sync_options_invalid(
                "Prune=confrim",
                "Prune takes confirm, false or true, not \"confrim\""
            )
        )
    );
    assert!(!exists(&ns, "configmap", "typo"));
    assert!(exists(&ns, "configmap", "settings"), "nothing pruned");

    // On the live object of a resource that leaves the Stack: held.
    annotate(
        &ns,
        "configmap",
        "settings",
        "cd.hanzo.ai/sync-options",
        "Prune=Confirm",
    );
    apply_stack(&ns, "app", std::slice::from_ref(&other));
    let held = until_stack(&ns, "app", "the resource to be held", |s| {
        state(s).1 == "InvalidSyncOptions"
    })
    .await;
    let why = messages::sync_options_invalid(
        "Prune=Confirm",
        "Prune takes confirm, false or true, not \"Confirm\" (did you mean confirm? sync options are case-sensitive)",
    );
    assert_eq!(row_message(&held, "settings"), messages::held(&why));
    let settings = row(&held, "settings").unwrap();
    assert_eq!(settings["requiresPruning"], true);
    assert_eq!(settings.get("requiresDeletionApproval"), None);
    assert_eq!(state(&held).0, "Progressing");
    assert_eq!(
        held["status"]["operation"]["message"],
        messages::stack_resource_held("ConfigMap/settings", &why)
    );
    assert!(
        cluster()
            .event_messages(&ns, "InvalidSyncOptions")
            .contains(&format!(
                "Warning {}",
                messages::stack_resource_held("ConfigMap/settings", &why)
            )),
        "{}",
        cluster().event_messages(&ns, "InvalidSyncOptions")
    );

    // Every other bad value holds it too, and is named.
    for (value, problem) in [
        (
            "Prune=confrim",
            "Prune takes confirm, false or true, not \"confrim\"".to_owned(),
        ),
        (
            "Prune=confirm;Delete=confirm",
            "Prune takes confirm, false or true, not \"confirm;Delete=confirm\" (separate options with commas)".to_owned(),
        ),
        (
            "prune=confirm",
            "\"prune\" is not an option (did you mean Prune? sync options are case-sensitive)".to_owned(),
        ),
        ("Prune=confirm,", messages::sync_options_empty_item(2)),
    ] {
        annotate(&ns, "configmap", "settings", "cd.hanzo.ai/sync-options", value);
        let expected = messages::held(&messages::sync_options_invalid(value, &problem));
        until_stack(&ns, "app", &format!("{value:?} to be named"), |s| {
            row_message(s, "settings") == expected
        })
        .await;
        assert!(exists(&ns, "configmap", "settings"), "{value:?} pruned it");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "configmap", "settings"));

    // Conflicting values: the most protective (confirm) holds, with a warning.
    let conflicting = "Delete=confirm,Prune=confirm,Prune=true";
    annotate(
        &ns,
        "configmap",
        "settings",
        "cd.hanzo.ai/sync-options",
        conflicting,
    );
    let waiting = until_stack(&ns, "app", "the conflict to wait for approval", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    let conflict =
        messages::sync_options_conflict(conflicting, "Prune", &["confirm", "true"], "confirm");
    assert_eq!(
        row_message(&waiting, "settings"),
        format!(
            "waiting for approval: run kubectl navique approve, or annotate cd.hanzo.ai/deletion-approved=true and add your user name to core.navique.com/approved-by, to prune it; {conflict}"
        )
    );
    assert!(
        cluster()
            .event_messages(&ns, "ConflictingSyncOptions")
            .contains(&format!("Warning ConfigMap/settings: {conflict}"))
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "configmap", "settings"));
    approve(&ns, "configmap", "settings");
    until_stack(&ns, "app", "the approved prune", |s| {
        state(s).1 == "Synced" && row(s, "settings").is_none()
    })
    .await;
    assert!(!exists(&ns, "configmap", "settings"));
}

/// Fail open, at teardown: a deleted Stack holds a resource whose options
/// are not understood (neither deleting nor letting it go) until they are
/// fixed; `Delete=false` then lets it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_stack_holds_a_resource_whose_options_are_not_understood() {
    env().ready().await;
    let ns = cluster().namespace("held-teardown");
    apply_stack(&ns, "shop", &[config_map("data", 0, None)]);
    until_stack(&ns, "shop", "the sync", |s| state(s).1 == "Synced").await;
    annotate(
        &ns,
        "configmap",
        "data",
        "cd.hanzo.ai/sync-options",
        "Delete=Confirm",
    );
    cluster().kubectl_ok(&["delete", "stack", "shop", "-n", &ns, "--wait=false"]);
    let held = until_stack(&ns, "shop", "the teardown to hold", |s| {
        state(s).1 == "InvalidSyncOptions"
    })
    .await;
    let message = held["status"]["operation"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "deleting wave 0: ConfigMap/data is held, neither pruned nor deleted: cd.hanzo.ai/sync-options \"Delete=Confirm\" is not understood"
        ),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "configmap", "data"));
    assert!(stack(&ns, "shop").is_some());

    annotate(
        &ns,
        "configmap",
        "data",
        "cd.hanzo.ai/sync-options",
        "Delete=false",
    );
    eventually(WAIT, "the Stack to be gone", || async {
        stack(&ns, "shop").is_none().then_some(())
    })
    .await;
    assert!(exists(&ns, "configmap", "data"), "Delete=false keeps it");
}

/// Stale authorisation: an approval put on a resource by hand while it is
/// still in the Stack is taken away when its prune starts to wait, and the
/// wait is announced as usual; only an approval given while it waits
/// prunes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_set_before_the_prune_waited_is_not_used_and_a_fresh_one_is() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("early-approval");
    let other = config_map("other", 0, None);
    apply_stack(
        &ns,
        "app",
        &[
            config_map("settings", 0, Some("Prune=confirm")),
            other.clone(),
        ],
    );
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;
    // Let the pass that follows the status write go by.
    tokio::time::sleep(Duration::from_secs(2)).await;
    approve(&ns, "configmap", "settings");
    let mut events = subscribe(&ns).await;
    apply_stack(&ns, "app", std::slice::from_ref(&other));

    let waiting = until_stack(&ns, "app", "the prune to wait", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    assert_eq!(
        state(&waiting),
        ("Progressing".to_owned(), "WaitingForApproval".to_owned())
    );
    assert_eq!(
        annotation(
            &ns,
            "configmap",
            "settings",
            "cd.hanzo.ai/deletion-approved"
        ),
        "",
        "the early approval is taken away"
    );
    assert!(
        env.controller_log()
            .contains("took away an approval set before the removal waited"),
        "the approval was taken away when the wait started"
    );
    assert_eq!(
        next_event(&mut events).await,
        (EventType::ApprovalRequired, "settings".to_owned())
    );
    assert!(
        cluster()
            .event_messages(&ns, "DeletionApprovalRequired")
            .contains("waiting for approval to prune ConfigMap/settings")
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        exists(&ns, "configmap", "settings"),
        "the early approval pruned it"
    );

    // Given while it waits, an approval prunes it.
    approve(&ns, "configmap", "settings");
    until_stack(&ns, "app", "the approved prune", |s| {
        state(s).1 == "Synced" && row(s, "settings").is_none()
    })
    .await;
    assert!(!exists(&ns, "configmap", "settings"));
    assert_eq!(
        next_event(&mut events).await,
        (EventType::Approved, "settings".to_owned())
    );
}

/// Stale authorisation: a resource put back into the Stack stops waiting
/// and loses its approval at once, even while its wave is held back (not
/// at the next periodic apply, minutes later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_put_back_behind_a_held_wave_loses_its_approval_at_once() {
    env().ready().await;
    let ns = cluster().namespace("put-back");
    let gate = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gate", "annotations": {"cd.hanzo.ai/sync-wave": "0"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "gate"}},
            "template": {"metadata": {"labels": {"app": "gate"}}, "spec": {"containers": [{"name": "gate", "image": "busybox"}]}},
        },
    });
    let ready = |replicas: i32| {
        cluster().kubectl_ok(&[
            "patch",
            "deployment",
            "gate",
            "-n",
            &ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &format!(r#"{{"status":{{"replicas":1,"readyReplicas":{replicas}}}}}"#),
        ]);
    };
    let settings = config_map("settings", 1, Some("Prune=confirm"));
    apply_stack(&ns, "app", &[gate.clone(), settings.clone()]);
    until_stack(&ns, "app", "wave 0", |s| row(s, "gate").is_some()).await;
    ready(1);
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;
    apply_stack(&ns, "app", std::slice::from_ref(&gate));
    until_stack(&ns, "app", "the prune to wait", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;

    // Approved, then put back behind an unhealthy wave 0 before the prune
    // could run (the controller's deletes fail meanwhile).
    ready(0);
    cluster().post_raw(
        "/debug/faults",
        &json!({"faults": [{"verb": "delete", "resource": "configmaps", "namespace": ns, "user": stack_account(&ns), "code": 500, "message": "injected"}]}).to_string(),
    );
    approve(&ns, "configmap", "settings");
    apply_stack(&ns, "app", &[gate.clone(), settings]);
    cluster().kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    let back = until_stack(&ns, "app", "the resource to be held back by wave 0", |s| {
        row_message(s, "settings") == "waits for wave 0"
    })
    .await;
    assert_eq!(
        row(&back, "settings")
            .unwrap()
            .get("requiresDeletionApproval"),
        None
    );
    eventually(WAIT, "the approval to be taken away", || async {
        annotation(
            &ns,
            "configmap",
            "settings",
            "cd.hanzo.ai/deletion-approved",
        )
        .is_empty()
        .then_some(())
    })
    .await;
    assert!(exists(&ns, "configmap", "settings"));

    // Removed again, it waits for a new approval.
    ready(1);
    apply_stack(&ns, "app", &[gate]);
    until_stack(&ns, "app", "a new wait", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        exists(&ns, "configmap", "settings"),
        "the old approval approved nothing"
    );
}

/// `name: y` is the boolean true to YAML: the Stack says so, rather than
/// that the name is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_boolean_name_is_reported_as_a_boolean() {
    env().ready().await;
    let ns = cluster().namespace("yaml-name");
    let yaml = format!(
        "apiVersion: core.navique.com/v1alpha1
kind: Stack
metadata: {{name: app, namespace: {ns}}}
spec:
  resources:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: y
"
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&yaml));
    let refused = until_stack(&ns, "app", "the manifest to be refused", |s| {
        state(s).1 == "InvalidManifest"
    })
    .await;
    assert_eq!(
        refused["status"]["operation"]["message"],
        "spec.resources[0]: metadata.name must be a string, not the boolean true: quote it (name: \"y\", not name: y); YAML reads an unquoted y, yes, on or true as the boolean true"
    );
}

/// A PersistentVolumeClaim manifest (or object) named `name`, labelled
/// `labels`.
fn volume(name: &str, labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    })
}

/// `metadata.<field>` of an object as JSON.
fn metadata(ns: &str, kind: &str, name: &str) -> Value {
    let json = cluster().kubectl_ok(&["get", kind, name, "-n", ns, "-o", "json"]);
    serde_json::from_str::<Value>(&json).unwrap()["metadata"].clone()
}

/// Ownership by label: a Project editor labelled volumes
/// `core.navique.com/stack: grab`, one of them retained from a deleted
/// ManagedService; a Stack `grab` listing them (the retained one even with
/// `core.navique.com/adopt: "true"`, and a manifest that would mark it no
/// longer retained) adopts neither, changes neither, and once they leave
/// the Stack prunes neither. An object adopted explicitly keeps its uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_neither_adopts_nor_prunes_a_labelled_or_a_retained_volume() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("grab");
    let retained_labels = json!({"core.navique.com/stack": "grab", "services.kube-dc.com/retained": "true",
        "services.kube-dc.com/service": "rdb"});
    for object in [
        volume("data-rdb-0", retained_labels.clone(), json!({})),
        volume(
            "planted",
            json!({"core.navique.com/stack": "grab"}),
            json!({}),
        ),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy"}, "data": {"a": "1"}}),
    ] {
        cluster().kubectl_in(&["apply", "-n", &ns, "-f", "-"], Some(&object.to_string()));
    }
    let before = |name: &str| metadata(&ns, "pvc", name);
    let (retained_before, planted_before) = (before("data-rdb-0"), before("planted"));
    let legacy_uid = metadata(&ns, "configmap", "legacy")["uid"].clone();

    let mut adopted = config_map("legacy", 0, None);
    adopted["metadata"]["annotations"]["core.navique.com/adopt"] = json!("true");
    apply_stack(
        &ns,
        "grab",
        &[
            adopted,
            config_map("fresh", 0, None),
            volume(
                "data-rdb-0",
                json!({"services.kube-dc.com/retained": "false"}),
                json!({"core.navique.com/adopt": "true", "cd.hanzo.ai/sync-wave": "1"}),
            ),
            volume(
                "planted",
                json!({}),
                json!({"taken": "yes", "cd.hanzo.ai/sync-wave": "1"}),
            ),
        ],
    );
    let refused = until_stack(&ns, "grab", "both volumes refused", |s| {
        !row_message(s, "data-rdb-0").is_empty()
            && !row_message(s, "planted").is_empty()
            && row(s, "fresh").is_some_and(|r| r["status"] == "Synced")
    })
    .await;
    assert_eq!(
        row_message(&refused, "data-rdb-0"),
        format!(
            "PersistentVolumeClaim {ns}/data-rdb-0 is retained from a deleted ManagedService; a Stack never adopts, changes or deletes it"
        )
    );
    assert_eq!(
        row_message(&refused, "planted"),
        format!(
            "PersistentVolumeClaim {ns}/planted exists and was not created by Stack grab: it is not adopted; annotate its manifest core.navique.com/adopt=\"true\" to adopt it, or take it out of the Stack"
        )
    );
    assert_eq!(state(&refused), ("Failed".into(), "SyncFailed".into()));
    assert!(row(&refused, "data-rdb-0").unwrap()["uid"].is_null());
    // Adopted explicitly: the same object, now recorded by its uid.
    assert_eq!(row(&refused, "legacy").unwrap()["uid"], legacy_uid);
    assert_eq!(metadata(&ns, "configmap", "legacy")["uid"], legacy_uid);
    assert_eq!(
        row(&refused, "fresh").unwrap()["uid"],
        metadata(&ns, "configmap", "fresh")["uid"]
    );
    let unchanged = |name: &str, was: &Value| {
        let now = before(name);
        assert_eq!(now["labels"], was["labels"], "{name} was relabelled");
        assert_eq!(now["annotations"], was["annotations"], "{name} was changed");
        assert_eq!(now["uid"], was["uid"]);
    };
    unchanged("data-rdb-0", &retained_before);
    unchanged("planted", &planted_before);

    // Out of the Stack: neither is pruned; what the Stack owns is.
    apply_stack(&ns, "grab", &[config_map("legacy", 0, None)]);
    until_stack(&ns, "grab", "the prune", |s| {
        state(s).1 == "Synced" && row(s, "fresh").is_none()
    })
    .await;
    assert!(
        !exists(&ns, "configmap", "fresh"),
        "the Stack's own is pruned"
    );
    unchanged("data-rdb-0", &retained_before);
    unchanged("planted", &planted_before);
    cluster().kubectl_ok(&["delete", "stack", "grab", "-n", &ns]);
    unchanged("data-rdb-0", &retained_before);
    unchanged("planted", &planted_before);
    assert!(
        !exists(&ns, "configmap", "legacy"),
        "the adopted one is the Stack's"
    );
}

/// Lets the controller manage `resource` of `group`, as a chart's
/// `serviceLifecycleController.stackResources` entry would.
fn allow_controller(group: &str, resource: &str) {
    let name = format!("stack-{resource}-{}", group.replace('.', "-"));
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {name}}}\nrules:\n- {{apiGroups: [{group}], resources: [{resource}], verbs: [get, list, watch, create, patch, update, delete]}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}\nsubjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: \"{CONTROLLER_USER}\"}}\n"
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&rbac));
}

/// A namespaced CRD of `kind` in `group`, serving `versions` (the first
/// stored), with no conversion webhook (strategy `None`: the versions
/// differ only in name), and the controller allowed to manage it.
fn install_crd(group: &str, kind: &str, versions: &[&str]) {
    let plural = format!("{}s", kind.to_lowercase());
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"name": v, "served": true, "storage": i == 0, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "conversion": {"strategy": "None"},
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": versions},
    });
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&crd.to_string()));
    allow_controller(group, &plural);
}

fn gadget(version: &str, size: i64) -> Value {
    json!({"apiVersion": format!("adv.example.com/{version}"), "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"size": size}})
}

/// Version and key drift: a manifest moved to another served version of
/// its kind is the same object, updated in place (its uid stays), never
/// pruned and recreated; the same object listed under two versions is
/// refused, naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_moved_to_another_served_version_keeps_its_object() {
    let env = env();
    env.ready().await;
    install_crd("adv.example.com", "Gadget", &["v1", "v2"]);
    let ns = cluster().namespace("versions");
    // The Stack's account may manage the test's own kinds (`edit` covers
    // only the built-in ones).
    bind_service_account(cluster(), &ns, STACK_ACCOUNT, "cluster-admin");
    apply_stack(&ns, "adv", &[gadget("v1", 1)]);
    let first = until_stack(&ns, "adv", "the sync", |s| state(s).1 == "Synced").await;
    let uid = metadata(&ns, "gadgets.adv.example.com", "g")["uid"].clone();
    assert_eq!(row(&first, "g").unwrap()["uid"], uid);

    apply_stack(&ns, "adv", &[gadget("v2", 2)]);
    let moved = until_stack(&ns, "adv", "the sync under v2", |s| {
        state(s).1 == "Synced" && row(s, "g").is_some_and(|r| r["version"] == "v2")
    })
    .await;
    let live = cluster().kubectl_ok(&[
        "get",
        "gadgets.v2.adv.example.com",
        "g",
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    let live: Value = serde_json::from_str(&live).unwrap();
    assert_eq!(live["metadata"]["uid"], uid, "the object was recreated");
    assert_eq!(live["spec"]["size"], 2, "updated in place");
    assert_eq!(row(&moved, "g").unwrap()["uid"], uid);
    assert_eq!(moved["status"]["resources"].as_array().unwrap().len(), 1);

    apply_stack(&ns, "adv", &[gadget("v2", 2), gadget("v1", 3)]);
    let refused = until_stack(&ns, "adv", "the refusal", |s| {
        state(s).1 == "InvalidManifest"
    })
    .await;
    assert_eq!(
        refused["status"]["operation"]["message"],
        "spec.resources[1]: Gadget/g is already spec.resources[0] under adv.example.com/v2, not another object under adv.example.com/v1: list an object once, under one version"
    );
    assert_eq!(metadata(&ns, "gadgets.adv.example.com", "g")["uid"], uid);
    cluster().kubectl_ok(&["delete", "stack", "adv", "-n", &ns]);
    assert!(!exists(&ns, "gadgets.adv.example.com", "g"));
}

/// Stuck forever: a kind the API server does not serve shows in the
/// Stack's status while the rest syncs; a Stack listing it is deleted (with
/// a Warning Event), and so is the namespace of a Stack whose CRD was
/// uninstalled after the sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_not_served_is_reported_and_never_keeps_a_stack_or_its_namespace() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("unserved");
    // The Stack's account may manage the test's own kinds (`edit` covers
    // only the built-in ones).
    bind_service_account(cluster(), &ns, STACK_ACCOUNT, "cluster-admin");
    let thing =
        json!({"apiVersion": "nowhere.example.com/v1", "kind": "Thing", "metadata": {"name": "t"}});
    // A typo of a core kind: its group is served, the kind is not.
    let typo = json!({"apiVersion": "v1", "kind": "Stak", "metadata": {"name": "s"}});
    // Synced once, then left the Stack: its prune finds the kind gone.
    apply_stack(
        &ns,
        "odd",
        &[thing.clone(), typo, config_map("kept", 1, None)],
    );
    let synced = until_stack(&ns, "odd", "the rest to sync", |s| {
        row(s, "kept").is_some_and(|r| r["status"] == "Synced")
    })
    .await;
    let message = row_message(&synced, "t");
    assert!(
        message.starts_with(&format!("Thing {ns}/t is not served by the API server: ")),
        "{message}"
    );
    assert_eq!(
        row_message(&synced, "s"),
        format!("Stak {ns}/s is not served by the API server: v1 has no kind Stak")
    );
    assert_eq!(state(&synced), ("Failed".into(), "SyncFailed".into()));
    let metrics = navique_e2e::http_get(env.controller_admin, "/metrics")
        .await
        .unwrap()
        .body;
    assert!(
        metrics.lines().any(|l| l
            .strip_prefix("navique_service_lifecycle_controller_stack_reconcile_errors_total{error=\"kind_not_served\"} ")
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v >= 1.0)),
        "the failure is counted:\n{metrics}"
    );
    assert!(
        exists(&ns, "configmap", "kept"),
        "the later wave is applied"
    );
    cluster().kubectl_ok(&["delete", "stack", "odd", "-n", &ns]);
    assert!(!exists(&ns, "configmap", "kept"));
    assert!(
        cluster()
            .event_messages(&ns, "KindNotServed")
            .contains(&format!(
                "Warning Thing {ns}/t is not served by the API server: "
            )),
        "{}",
        cluster().event_messages(&ns, "KindNotServed")
    );

    // A CRD uninstalled after the sync: the namespace still goes.
    install_crd("fleeting.example.com", "Fleet", &["v1"]);
    let gone = cluster().namespace("uninstalled");
    // The Stack's account may manage the test's own kinds (`edit` covers
    // only the built-in ones).
    bind_service_account(cluster(), &gone, STACK_ACCOUNT, "cluster-admin");
    let fleet = json!({"apiVersion": "fleeting.example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}});
    apply_stack(
        &gone,
        "brief",
        &[fleet, config_map("c", 0, Some("Delete=true"))],
    );
    until_stack(&gone, "brief", "the sync", |s| state(s).1 == "Synced").await;
    cluster().kubectl_ok(&["delete", "crd", "fleets.fleeting.example.com"]);
    cluster().kubectl_ok(&["delete", "namespace", &gone, "--wait=false"]);
    eventually(WAIT, "the namespace to be deleted", || async {
        (!cluster()
            .kubectl(&["get", "namespace", &gone], None)
            .status
            .success())
        .then_some(())
    })
    .await;
}

/// A nested Stack's pending approval shows on the Stack that lists it (its
/// row counts it), as a tree in `kubectl navique approvals`, and
/// `approve --all --stack <parent>` approves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_stacks_pending_approval_shows_on_its_parent_and_in_the_plugin() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("nested");
    let inner = |resources: Vec<Value>| {
        json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
            "metadata": {"name": "inner"}, "spec": {"resources": resources}})
    };
    let old = config_map("old", 0, Some("Prune=confirm"));
    apply_stack(
        &ns,
        "outer",
        &[inner(vec![old, config_map("new", 0, None)])],
    );
    until_stack(&ns, "inner", "the inner sync", |s| {
        row(s, "old").is_some_and(|r| r["status"] == "Synced")
    })
    .await;
    apply_stack(&ns, "outer", &[inner(vec![config_map("new", 0, None)])]);
    let parent = until_stack(
        &ns,
        "outer",
        "the parent to show the pending approval",
        |s| row(s, "inner").is_some_and(|r| r["pendingApprovals"] == 1),
    )
    .await;
    assert_eq!(
        row_message(&parent, "inner"),
        format!("1 deletion approval(s) pending in Stack inner: kubectl navique approvals -n {ns}")
    );
    let table = kubectl_navique_ok(cluster(), &["approvals", "-n", &ns]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines.len() == 3
            && lines[1].split_whitespace().collect::<Vec<_>>() == [ns.as_str(), "outer"],
        "{table}"
    );
    assert!(
        lines[2].contains("└─ inner") && lines[2].contains("Prune") && lines[2].contains("old"),
        "{table}"
    );
    let json = kubectl_navique_ok(cluster(), &["approvals", "-n", &ns, "-o", "json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["approvals"][0]["parents"], json!(["outer"]));

    // Approving all of the parent reaches what its row counts.
    let approved = kubectl_navique_ok(
        cluster(),
        &["approve", "--all", "--stack", "outer", "-n", &ns],
    );
    assert_eq!(
        approved.trim(),
        "approved configmap/old as dev-admin (Prune in Stack inner)"
    );
    until_stack(&ns, "outer", "the parent to show nothing pending", |s| {
        row(s, "inner").is_some_and(|r| r["pendingApprovals"].is_null())
    })
    .await;
    assert!(!exists(&ns, "configmap", "old"));
}

/// Stuck forever, all at once: a namespace holding every kind of broken
/// object (a service of a class that never existed, Stacks listing an
/// unknown kind, a ClusterRole or a delete waiting for approval, Locks on
/// a misspelt kind and on a kind that is not enforced, a binding, a policy
/// and a backup of services that do not exist) is deleted, and it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_of_broken_objects_is_deleted_and_goes() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("broken");
    let service = json!({"apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ManagedService",
        "metadata": {"name": "my", "namespace": ns,
            "annotations": {"services.kube-dc.com/confirm-delete": "my"}},
        "spec": {"classRef": {"name": "mysql"}, "planRef": {"name": "mysql-small"},
            "deletionPolicy": "Delete"}});
    let lock_on = |name: &str, api_version: &str, kind: &str| {
        json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"targetRef": {"apiVersion": api_version, "kind": kind, "name": "nothing"}}})
    };
    let of_missing = |kind: &str, extra: Value| {
        let mut spec = json!({"serviceRef": {"name": "missing"}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"apiVersion": "services.kube-dc.com/v1alpha1", "kind": kind,
            "metadata": {"name": "of-missing", "namespace": ns}, "spec": spec})
    };
    for object in [
        service,
        lock_on("typo", "core.navique.com/v1alpha1", "Stak"),
        lock_on("config", "v1", "ConfigMap"),
        of_missing("ServiceBinding", json!({})),
        of_missing(
            "ServiceCredentialPolicy",
            json!({"rotationInterval": "30d"}),
        ),
        of_missing("ServiceBackup", json!({})),
    ] {
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&object.to_string()));
    }
    let typo = json!({"apiVersion": "v1", "kind": "Stak", "metadata": {"name": "s"}});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{ns}-role")}});
    apply_stack(&ns, "unknown", &[typo, config_map("a", 0, None)]);
    apply_stack(&ns, "cluster-wide", &[role]);
    apply_stack(
        &ns,
        "confirm",
        &[config_map("c", 0, Some("Delete=confirm"))],
    );
    for name in ["unknown", "cluster-wide"] {
        until_stack(&ns, name, "the Stack to fail", |s| {
            state(s).1 == "SyncFailed"
        })
        .await;
    }
    until_stack(&ns, "confirm", "the sync", |s| state(s).1 == "Synced").await;
    // Not vacuous: the service and each Stack hold a finalizer.
    eventually(WAIT, "the finalizers", || async {
        let held = |kind: &str, name: &str, finalizer: &str| {
            cluster()
                .kubectl_ok(&[
                    "get",
                    kind,
                    name,
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.metadata.finalizers}",
                ])
                .contains(finalizer)
        };
        (held("managedservice", "my", finalizers::MANAGED_SERVICE)
            && ["unknown", "cluster-wide", "confirm"]
                .iter()
                .all(|s| held("stack", s, finalizers::STACK)))
        .then_some(())
    })
    .await;

    cluster().kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    eventually(WAIT, "the namespace to go", || async {
        (!cluster()
            .kubectl(&["get", "namespace", &ns], None)
            .status
            .success())
        .then_some(())
    })
    .await;
}

/// Every controller exports the same reconcile metrics: runs and time (and
/// failures by error, from the first one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_controller_counts_and_times_its_reconciles() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("metered");
    apply_stack(&ns, "m", &[config_map("a", 0, None)]);
    until_stack(&ns, "m", "the sync", |s| state(s).1 == "Synced").await;
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "l",
            "core.navique.com/v1alpha1",
            "Stack",
            "m",
            "metered",
        )),
    );
    let value = |metrics: &str, line: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let scrape =
        |admin| async move { navique_e2e::http_get(admin, "/metrics").await.unwrap().body };
    let controllers = [
        (
            env.controller_admin,
            "navique_service_lifecycle_controller_stack_",
        ),
        (
            env.controller_admin,
            "navique_service_lifecycle_controller_service_plan_",
        ),
        (
            env.controller_admin,
            "navique_service_lifecycle_controller_managed_service_",
        ),
        (env.locks.controller_admin, "navique_lock_controller_"),
    ];
    for (admin, prefix) in controllers {
        let metrics = scrape(admin).await;
        // `reconcile_errors_total` shows its first series at the first
        // failure (the unserved-kind test reads it).
        for family in ["reconciles", "reconcile_duration_seconds"] {
            assert!(
                metrics.contains(&format!("# HELP {prefix}{family} ")),
                "{prefix}{family} in\n{metrics}"
            );
        }
    }
    eventually(WAIT, "the Lock's and the Stack's reconciles", || async {
        let slc = scrape(env.controller_admin).await;
        let locks = scrape(env.locks.controller_admin).await;
        (value(
            &slc,
            "navique_service_lifecycle_controller_stack_reconciles_total ",
        ) >= 1.0
            && value(
                &slc,
                "navique_service_lifecycle_controller_stack_reconcile_duration_seconds_count ",
            ) >= 1.0
            && value(&locks, "navique_lock_controller_reconciles_total ") >= 1.0
            && value(
                &locks,
                "navique_lock_controller_reconcile_duration_seconds_count ",
            ) >= 1.0)
            .then_some(())
    })
    .await;
}

/// The approvers' Project: users of their own, so that these Projects stay
/// out of what other tests' users are shown.
const APPROVERS: [(&str, &str); 2] = [("erin", "admin"), ("frank", "edit")];

/// Stack `ns/name` listing `resources` and requiring `required` distinct
/// approvers.
fn apply_stack_requiring(ns: &str, name: &str, resources: &[Value], required: i64) {
    bind_service_account(cluster(), ns, STACK_ACCOUNT, "edit");
    let stack = json!({
        "apiVersion": "core.navique.com/v1alpha1",
        "kind": "Stack",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"resources": resources, "approvals": {"required": required}},
    });
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&stack.to_string()));
}

/// `kubectl annotate` of ConfigMap `ns/name` as the user of `token`: its
/// stderr when refused, else empty.
fn annotate_as(token: &str, ns: &str, name: &str, annotations: &[&str]) -> String {
    let mut args = vec!["annotate", "configmap", name, "-n", ns, "--overwrite"];
    args.extend_from_slice(annotations);
    let token = format!("--token={token}");
    args.push(&token);
    let output = cluster().kubectl(&args, None);
    String::from_utf8_lossy(&output.stderr).trim().to_owned()
}

/// The policy's denial as kubectl prints it.
fn identity_denial(message: &str) -> String {
    format!(
        "Error from server (Forbidden): configmaps \"settings\" is forbidden: ValidatingAdmissionPolicy 'navique-approval-identity' with binding 'navique-approval-identity' denied request: {message}"
    )
}

/// `kubectl navique approve configmap/settings` as the user of `kubeconfig`.
fn approve_with_plugin(kubeconfig: &std::path::Path, ns: &str) -> String {
    let run = kubectl_navique(
        cluster(),
        kubeconfig,
        &["approve", "configmap/settings", "-n", ns],
    );
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    run.stdout
}

/// The next `APPROVED` event of `events`: its approvers' names.
async fn approved_by(events: &mut tonic::Streaming<ApprovalEvent>) -> Vec<String> {
    loop {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an approval event in time")
            .expect("the stream goes on")
            .expect("an event, not an error");
        if event.r#type() == EventType::Approved {
            let approval = event.approval.expect("the approval");
            assert!(approval.approved_by.iter().all(|a| a.time.is_some()));
            return approval.approved_by.into_iter().map(|a| a.user).collect();
        }
    }
}

/// Identity by name: who approved is the user the API server authenticated.
/// erin (Project admin) cannot approve in frank's name, nor approve without
/// being named; `kubectl navique approve` records her as she is, and the
/// prune's Events and gRPC `APPROVED` event name her.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_is_the_user_the_api_server_authenticated_never_a_name_they_typed() {
    let env = env();
    env.ready().await;
    let k = cluster();
    for user in ["erin", "frank"] {
        k.add_user(user, &[]);
    }
    let ns = k.project("who", &APPROVERS);
    let kept = [config_map("kept", 0, None)];
    let mut events = subscribe(&ns).await;
    pending_prune(&ns, "settings", &kept).await;

    // erin writes frank's name: refused, and told what she may write.
    let forged = annotate_as(
        "erin-token",
        &ns,
        "settings",
        &[
            "cd.hanzo.ai/deletion-approved=true",
            &format!("{APPROVED_BY}=frank"),
        ],
    );
    assert_eq!(
        forged,
        identity_denial(
            "core.navique.com/approved-by may only gain the name of the user who sends the request, erin: set it to \"erin\", not \"frank\""
        )
    );
    // An approval that names nobody: refused too.
    let unnamed = annotate_as(
        "erin-token",
        &ns,
        "settings",
        &["cd.hanzo.ai/deletion-approved=true"],
    );
    assert_eq!(
        unnamed,
        identity_denial(
            "cd.hanzo.ai/deletion-approved=true needs its approver named: add core.navique.com/approved-by=erin in the same request, or run kubectl navique approve"
        )
    );
    assert_eq!(annotation(&ns, "configmap", "settings", APPROVED_BY), "");
    assert!(exists(&ns, "configmap", "settings"));

    let dir = tempfile::tempdir().unwrap();
    let erin = k.kubeconfig_for("erin-token", dir.path());
    assert_eq!(
        approve_with_plugin(&erin, &ns),
        "approved configmap/settings as erin (Prune in Stack app)\n"
    );
    until_stack(&ns, "app", "the approved prune", |s| {
        row(s, "settings").is_none()
    })
    .await;
    assert!(!exists(&ns, "configmap", "settings"));
    assert_eq!(approved_by(&mut events).await, ["erin"]);
    let counted = k.event_messages(&ns, "DeletionApproved");
    assert!(
        counted.contains("Normal erin approved the prune of ConfigMap/settings at ")
            && counted.contains("(1 of 1 distinct approvers)"),
        "{counted}"
    );
    let removed = k.event_messages(&ns, "ApprovedRemoval");
    assert!(
        removed.contains("Normal pruned ConfigMap/settings, approved by erin at "),
        "{removed}"
    );
}

/// Four eyes: with `spec.approvals.required: 2` a prune waits for two
/// distinct people. erin's approval counts once however often she gives
/// it; frank cannot take it away or change it; his own makes two, and the
/// prune runs. Status, Events and gRPC name both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_eyes_waits_for_a_second_distinct_approver() {
    let env = env();
    env.ready().await;
    let k = cluster();
    for user in ["erin", "frank"] {
        k.add_user(user, &[]);
    }
    let ns = k.project("eyes", &APPROVERS);
    let kept = config_map("kept", 0, None);
    let settings = config_map("settings", 0, Some("Prune=confirm"));
    apply_stack_requiring(&ns, "app", &[kept.clone(), settings], 2);
    until_stack(&ns, "app", "the sync", |s| state(s).1 == "Synced").await;
    let mut events = subscribe(&ns).await;
    apply_stack_requiring(&ns, "app", std::slice::from_ref(&kept), 2);
    let waiting = until_stack(&ns, "app", "the prune to wait", |s| {
        row(s, "settings").is_some_and(|r| r["requiresDeletionApproval"] == true)
    })
    .await;
    assert_eq!(row(&waiting, "settings").unwrap()["approvalsRequired"], 2);
    assert_eq!(
        row_message(&waiting, "settings"),
        "waiting for approval: 0 of 2 distinct approvers; 2 more must run kubectl navique approve to prune it"
    );
    assert!(k.event_messages(&ns, "DeletionApprovalRequired").contains(&format!(
        "run kubectl navique approve --all --stack app -n {ns} (2 distinct approvers needed)"
    )));

    let dir = tempfile::tempdir().unwrap();
    let erin = k.kubeconfig_for("erin-token", dir.path());
    let frank = k.kubeconfig_for("frank-token", dir.path());
    assert_eq!(
        approve_with_plugin(&erin, &ns),
        "approved configmap/settings as erin (Prune in Stack app; 1 of 2 approvers: erin)\n"
    );
    let one = until_stack(&ns, "app", "erin counted", |s| {
        row(s, "settings").is_some_and(|r| r["approvedBy"].as_array().is_some_and(|a| a.len() == 1))
    })
    .await;
    let row_one = row(&one, "settings").unwrap();
    assert_eq!(row_one["approvedBy"][0]["user"], "erin");
    assert!(row_one["approvedBy"][0]["time"].is_string());
    assert_eq!(
        row_one["message"],
        "waiting for approval: 1 of 2 distinct approvers (erin); 1 more must run kubectl navique approve to prune it"
    );
    // Twice is still once.
    approve_with_plugin(&erin, &ns);
    assert_eq!(
        annotation(&ns, "configmap", "settings", APPROVED_BY),
        "erin"
    );
    let again = annotate_as(
        "erin-token",
        &ns,
        "settings",
        &[&format!("{APPROVED_BY}=erin,erin")],
    );
    assert_eq!(
        again,
        identity_denial(
            "erin already approved (core.navique.com/approved-by: erin); each approver counts once"
        )
    );

    // frank takes erin's approval away, or replaces it with his: refused.
    let removal = identity_denial(
        "core.navique.com/approved-by lists who approved (erin); a request may only add its own user name to it, never remove or change one: frank may set it to \"erin,frank\"",
    );
    assert_eq!(
        annotate_as(
            "frank-token",
            &ns,
            "settings",
            &[&format!("{APPROVED_BY}-")]
        ),
        removal
    );
    assert_eq!(
        annotate_as(
            "frank-token",
            &ns,
            "settings",
            &[&format!("{APPROVED_BY}=frank")]
        ),
        removal
    );
    // Nor does he add a third person.
    assert_eq!(
        annotate_as(
            "frank-token",
            &ns,
            "settings",
            &[&format!("{APPROVED_BY}=erin,grace")]
        ),
        identity_denial(
            "core.navique.com/approved-by may only gain the name of the user who sends the request, frank: set it to \"erin,frank\", not \"erin,grace\""
        )
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        exists(&ns, "configmap", "settings"),
        "one approver is not enough"
    );

    assert_eq!(
        approve_with_plugin(&frank, &ns),
        "approved configmap/settings as frank (Prune in Stack app; 2 of 2 approvers: erin, frank)\n"
    );
    until_stack(&ns, "app", "the approved prune", |s| {
        row(s, "settings").is_none()
    })
    .await;
    assert!(!exists(&ns, "configmap", "settings"));
    assert_eq!(approved_by(&mut events).await, ["erin", "frank"]);
    let counted = k.event_messages(&ns, "DeletionApproved");
    assert!(counted.contains("(1 of 2 distinct approvers)"), "{counted}");
    assert!(
        counted.contains("Normal frank approved the prune of ConfigMap/settings at ")
            && counted.contains("(2 of 2 distinct approvers)"),
        "{counted}"
    );
    let removed = k.event_messages(&ns, "ApprovedRemoval");
    assert!(
        removed.contains("Normal pruned ConfigMap/settings, approved by erin at ")
            && removed.contains(", frank at "),
        "{removed}"
    );

    // The notifications, each trigger once (the generic JSON template).
    let notifications = &env.notifications;
    let required = notifications.about(&ns);
    assert_eq!(required.len(), 1, "{required:?}");
    assert_eq!(required[0]["approvalsRequired"], 2);
    assert!(
        required[0]["text"]
            .as_str()
            .unwrap()
            .ends_with(&format!("Each needs 2 distinct approvers.\nApprove with: kubectl navique approve --all --stack app -n {ns}\nOr review and approve them one by one in: kubectl navique ui")),
        "{}",
        required[0]
    );
    let approved = eventually(WAIT, "two approved notifications", || async {
        let approved = notifications.of(&ns, "approved");
        (approved.len() == 2).then_some(approved)
    })
    .await;
    let users = |n: &Value| -> Vec<String> {
        n["approvedBy"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["user"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut counts: Vec<Vec<String>> = approved.iter().map(users).collect();
    counts.sort();
    assert_eq!(
        counts,
        [
            vec!["erin".to_owned()],
            vec!["erin".to_owned(), "frank".to_owned()]
        ]
    );
    let removed = eventually(WAIT, "the removed notification", || async {
        let removed = notifications.of(&ns, "removed");
        (!removed.is_empty()).then_some(removed)
    })
    .await;
    assert_eq!(removed.len(), 1);
    assert_eq!(users(&removed[0]), ["erin", "frank"]);
    assert_eq!(removed[0]["resources"][0]["name"], "settings");
    // Counted once sent (the count follows the endpoint's answer).
    eventually(WAIT, "each trigger counted as sent", || async {
        let scrape = navique_e2e::http_get(env.controller_admin, "/metrics")
            .await
            .ok()?
            .body;
        ["approval-required", "approved", "removed"]
            .iter()
            .all(|trigger| {
                scrape.contains(&format!(
                    "navique_service_lifecycle_controller_approval_notifications_total{{trigger=\"{trigger}\",outcome=\"sent\"}}"
                ))
            })
            .then_some(())
    })
    .await;
}

/// `approval_notifications_total{trigger="approval-required",outcome}`.
async fn required_notifications(outcome: &str) -> f64 {
    env()
        .controller_metric(&format!(
            "navique_service_lifecycle_controller_approval_notifications_total{{trigger=\"approval-required\",outcome=\"{outcome}\"}} "
        ))
        .await
}

/// The gaps between consecutive attempts.
fn gaps(attempts: &[(std::time::Instant, bool)]) -> Vec<Duration> {
    attempts.windows(2).map(|w| w[1].0 - w[0].0).collect()
}

/// "hot loop": a notification the endpoint refuses is tried again after
/// 0.5 s, then 1 s, then 2 s, and delivered exactly once when the endpoint
/// recovers; when it never does, given up after four attempts, counted as
/// `failed`, and never tried again. The only test that makes the endpoint
/// fail, so the `retried` and `failed` counts are its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_notification_is_retried_with_backoff_and_delivered_once_or_given_up() {
    let env = env();
    env.ready().await;
    let notifications = &env.notifications;
    let (retried, sent, failed) = (
        required_notifications("retried").await,
        required_notifications("sent").await,
        required_notifications("failed").await,
    );

    // Refused twice, then taken.
    let recovering = cluster().namespace("notify-retry");
    notifications.fail(&recovering, 2);
    pending_prune(&recovering, "settings", &[]).await;
    let delivered = eventually(WAIT, "the notification after two refusals", || async {
        let delivered = notifications.about(&recovering);
        (!delivered.is_empty()).then_some(delivered)
    })
    .await;
    assert_eq!(delivered[0]["resources"][0]["name"], "settings");
    let attempts = notifications.attempts(&recovering, "approval-required");
    assert_eq!(
        attempts.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
        [false, false, true]
    );
    let waited = gaps(&attempts);
    assert!(
        waited[0] >= Duration::from_millis(450) && waited[1] >= Duration::from_millis(950),
        "{waited:?}"
    );
    eventually(WAIT, "two retries and one send counted", || async {
        (required_notifications("retried").await == retried + 2.0
            && required_notifications("sent").await > sent)
            .then_some(())
    })
    .await;
    // Delivered once: no attempt after the one that was taken.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        notifications
            .attempts(&recovering, "approval-required")
            .len(),
        3
    );
    assert_eq!(notifications.about(&recovering).len(), 1);

    // Refused for good: four attempts, backing off, then given up.
    let down = cluster().namespace("notify-down");
    notifications.fail(&down, u32::MAX);
    pending_prune(&down, "settings", &[]).await;
    eventually(WAIT, "the notification to be given up", || async {
        (required_notifications("failed").await == failed + 1.0).then_some(())
    })
    .await;
    assert_eq!(required_notifications("retried").await, retried + 2.0 + 3.0);
    let attempts = notifications.attempts(&down, "approval-required");
    assert_eq!(
        attempts.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
        [false; 4]
    );
    let waited = gaps(&attempts);
    assert!(
        waited[0] >= Duration::from_millis(450)
            && waited[1] >= Duration::from_millis(950)
            && waited[2] >= Duration::from_millis(1950),
        "{waited:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(notifications.attempts(&down, "approval-required").len(), 4);
    assert!(
        env.controller_log()
            .contains("cannot post the approval notification"),
        "the cause is logged"
    );
    // The removal still waits: a notification that fails holds nothing.
    let stack = stack(&down, "app").unwrap();
    assert_eq!(
        row(&stack, "settings").unwrap()["requiresDeletionApproval"],
        true
    );
}

/// Fail closed: a number of approvers the controller would not understand
/// is refused by the schema, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_count_below_one_is_refused_naming_the_field() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("quorum");
    for required in [0, -1] {
        let stack = json!({
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Stack",
            "metadata": {"name": "app", "namespace": ns},
            "spec": {"resources": [], "approvals": {"required": required}},
        });
        let error = cluster().kubectl_err(&["apply", "-f", "-"], Some(&stack.to_string()));
        assert!(
            error.contains(&format!(
                "spec.approvals.required: Invalid value: {required}: spec.approvals.required in body should be greater than or equal to 1"
            )),
            "{error}"
        );
    }
}
