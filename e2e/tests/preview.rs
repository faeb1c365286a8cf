//! `kubectl navique preview` end to end: the real lock-controller, Lock
//! guard and service-lifecycle-controller on the dev API server, the plugin
//! run through kubectl with the admin's kubeconfig. Each preview is checked
//! against what the real delete or sync then does, and against the
//! objects' resourceVersions: a preview never writes.

use std::sync::OnceLock;
use std::time::Duration;

use navique_e2e::locks::lock;
use navique_e2e::plugin::kubectl_navique_ok;
use navique_e2e::services::ServiceEnv;
use navique_e2e::stacks::{STACK_ACCOUNT, StackEnv, bind_service_account};
use navique_e2e::{Cluster, Process, eventually, free_port};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn env() -> &'static StackEnv {
    static ENV: OnceLock<StackEnv> = OnceLock::new();
    ENV.get_or_init(StackEnv::start)
}

fn cluster() -> &'static Cluster {
    &env().locks.cluster
}

fn config_map(name: &str, wave: i32, options: Option<&str>) -> Value {
    let mut annotations = json!({"cd.hanzo.ai/sync-wave": wave.to_string()});
    if let Some(options) = options {
        annotations["cd.hanzo.ai/sync-options"] = json!(options);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "annotations": annotations}, "data": {"name": name}})
}

fn stack_manifest(ns: &str, name: &str, resources: &[Value]) -> String {
    json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
           "metadata": {"name": name, "namespace": ns}, "spec": {"resources": resources}})
    .to_string()
}

fn apply_stack(ns: &str, name: &str, resources: &[Value]) {
    bind_service_account(cluster(), ns, STACK_ACCOUNT, "edit");
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&stack_manifest(ns, name, resources)),
    );
}

fn stack(ns: &str, name: &str) -> Option<Value> {
    let output = cluster().kubectl(&["get", "stack", name, "-n", ns, "-o", "json"], None);
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).unwrap())
}

async fn until_stack(ns: &str, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(WAIT, what, || async {
        stack(ns, name).filter(|s| check(s))
    })
    .await
}

fn ready_reason(stack: &Value) -> String {
    stack["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["reason"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// `kind/name=resourceVersion` of every Stack, ConfigMap, Lock and
/// ManagedService of `ns`, and of the namespace itself: what a preview must
/// leave unchanged.
fn versions(cluster: &Cluster, ns: &str) -> String {
    let path = r#"jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}"#;
    let objects = cluster.kubectl_ok(&[
        "get",
        "stacks,configmaps,locks,managedservices,secrets",
        "-n",
        ns,
        "-o",
        path,
    ]);
    let namespace = cluster.kubectl_ok(&[
        "get",
        "namespace",
        ns,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    format!("{objects}Namespace/{ns}={namespace}")
}

/// [`versions`] once the controllers have stopped writing: the same over
/// two seconds (a service's controller still writes its Secret right after
/// it turns Ready).
async fn settled_versions(cluster: &Cluster, ns: &str) -> String {
    eventually(WAIT, "the objects to settle", || async {
        let first = versions(cluster, ns);
        tokio::time::sleep(Duration::from_secs(2)).await;
        (versions(cluster, ns) == first).then_some(first)
    })
    .await
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    cluster()
        .kubectl(&["get", kind, name, "-n", ns, "-o", "name"], None)
        .status
        .success()
}

/// A locked Stack child: the preview predicts the partial teardown (the
/// upper wave goes, the locked child stops its wave, the lower wave and the
/// Stack stay), and the real delete leaves exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_stack_child_is_predicted_to_stop_the_teardown_where_the_real_delete_stops() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("preview-locked");
    let inner = json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
        "metadata": {"name": "inner", "annotations": {"cd.hanzo.ai/sync-wave": "1"}},
        "spec": {"resources": []}});
    apply_stack(
        &ns,
        "outer",
        &[
            config_map("base", 0, None),
            inner,
            config_map("front", 2, None),
        ],
    );
    until_stack(&ns, "outer", "the sync", |s| {
        s["status"]["operation"]["phase"] == "Succeeded" && ready_reason(s) == "Synced"
    })
    .await;
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

    let before = settled_versions(cluster(), &ns).await;
    let out = kubectl_navique_ok(cluster(), &["preview", "delete", "stack/outer", "-n", &ns]);
    assert_eq!(
        out,
        "KIND        NAME    WAVE   FATE      DETAIL\n\
         ConfigMap   front   2      removed   deleted\n\
         Stack       inner   1      stops     locked by keep-inner: resource is protected by Lock(s) [keep-inner]; delete the Lock(s) before deleting this resource (reasons: keep-inner: holds production data)\n\
         ConfigMap   base    0      stays     not reached: waits for wave 1 to be deleted\n\
         Stack       outer          stays     marked for deletion: its teardown stops at wave 1\n\
         partial: Stack outer stops at Stack inner (locked by keep-inner)\n"
    );
    let json: Value = serde_json::from_str(&kubectl_navique_ok(
        cluster(),
        &["preview", "delete", "stack/outer", "-n", &ns, "-o", "json"],
    ))
    .unwrap();
    assert_eq!(json["outcome"]["verdict"], "partial");
    assert_eq!(json["stops"][0]["cause"], "Locked");
    assert_eq!(json["cascade"], "background");
    assert_eq!(
        versions(cluster(), &ns),
        before,
        "the preview wrote nothing"
    );

    cluster().kubectl_ok(&["delete", "stack", "outer", "-n", &ns, "--wait=false"]);
    until_stack(&ns, "outer", "the denial", |s| {
        ready_reason(s) == "DeletionDenied"
    })
    .await;
    assert!(!exists(&ns, "configmap", "front"), "removed, as predicted");
    assert!(exists(&ns, "stack", "inner"), "stops, as predicted");
    assert!(exists(&ns, "configmap", "base"), "stays, as predicted");
    assert!(exists(&ns, "stack", "outer"), "stays, as predicted");
    // The denial stays: a while later nothing more has gone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "configmap", "base") && exists(&ns, "stack", "inner"));

    cluster().kubectl_ok(&["delete", "lock", "keep-inner", "-n", &ns]);
    eventually(WAIT, "the teardown to finish", || async {
        stack(&ns, "outer").is_none().then_some(())
    })
    .await;
}

/// A namespace holding Locks: the preview says the delete is refused,
/// naming the Locks, as the guard then refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_holding_locks_is_predicted_refused() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("preview-ns");
    apply_stack(&ns, "storefront", &[config_map("settings", 0, None)]);
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "keep-storefront",
            "core.navique.com/v1alpha1",
            "Stack",
            "storefront",
            "Black Friday: no deletes",
        )),
    );
    env.locks
        .until_lock(&ns, "keep-storefront", true, "Protecting")
        .await;
    let expected = format!(
        "KIND        NAME{pad}   WAVE   FATE    DETAIL\n\
         Namespace   {ns}          stops   namespace {ns} holds Lock(s) [keep-storefront]: namespace {ns} holds Lock(s) [keep-storefront]; delete the Lock(s) before deleting this namespace\n\
         refused: namespace {ns} holds Lock(s) [keep-storefront]\n",
        pad = " ".repeat(ns.len() - 4)
    );
    let out = eventually(WAIT, "the namespace's marker", || async {
        let out = kubectl_navique_ok(
            cluster(),
            &["preview", "delete", &format!("namespace/{ns}"), "-n", &ns],
        );
        out.ends_with(&format!(
            "refused: namespace {ns} holds Lock(s) [keep-storefront]\n"
        ))
        .then_some(out)
    })
    .await;
    assert_eq!(out, expected);
    let before = settled_versions(cluster(), &ns).await;
    kubectl_navique_ok(
        cluster(),
        &["preview", "delete", &format!("namespace/{ns}"), "-n", &ns],
    );
    assert_eq!(
        versions(cluster(), &ns),
        before,
        "the preview wrote nothing"
    );
    let refused = cluster().kubectl_err(&["delete", "namespace", &ns], None);
    assert!(
        refused.contains(&format!("namespace {ns} holds Lock(s) [keep-storefront]; delete the Lock(s) before deleting this namespace")),
        "{refused}"
    );

    // Without the Lock the same preview allows it, listing what goes.
    cluster().kubectl_ok(&["delete", "lock", "keep-storefront", "-n", &ns]);
    let out = eventually(WAIT, "the marker to go", || async {
        let out = kubectl_navique_ok(
            cluster(),
            &["preview", "delete", &format!("namespace/{ns}"), "-n", &ns],
        );
        out.contains("allowed: ").then_some(out)
    })
    .await;
    // (Namespace names here are 19 characters: the columns do not move.)
    assert_eq!(
        out,
        format!(
            "KIND             NAME                  WAVE   FATE      DETAIL\n\
             ConfigMap        settings                     removed   deleted with the namespace\n\
             ServiceAccount   default                      removed   deleted with the namespace\n\
             ServiceAccount   navique-stack                removed   deleted with the namespace\n\
             Stack            storefront                   removed   deleted with the namespace\n\
             RoleBinding      navique-stack-edit           removed   deleted with the namespace\n\
             Namespace        {ns}          removed   deleted\n\
             note: Stacks end their teardown at once: the namespace controller deletes their resources whatever they wait for\n\
             allowed: namespace {ns} and the 5 object(s) in it are deleted\n"
        )
    );
}

/// A Stack change that prunes one plain and one `Prune=confirm` resource:
/// `preview sync` lists both, the second as waiting for approval, and
/// applying the change does exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_sync_lists_a_plain_prune_and_one_that_waits_for_approval() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("preview-sync");
    let kept = config_map("kept", 0, None);
    apply_stack(
        &ns,
        "app",
        &[
            kept.clone(),
            config_map("plain", 0, None),
            config_map("gated", 1, Some("Prune=confirm")),
        ],
    );
    until_stack(&ns, "app", "the sync", |s| ready_reason(s) == "Synced").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("new.yaml");
    std::fs::write(&file, stack_manifest(&ns, "app", &[kept])).unwrap();

    let before = settled_versions(cluster(), &ns).await;
    let out = kubectl_navique_ok(
        cluster(),
        &[
            "preview",
            "sync",
            "stack/app",
            "-f",
            file.to_str().unwrap(),
            "-n",
            &ns,
        ],
    );
    assert_eq!(
        out,
        "KIND        NAME    WAVE   FATE      DETAIL\n\
         ConfigMap   plain   0      removed   pruned\n\
         ConfigMap   gated   1      stops     waiting for deletion approval: Prune=confirm: waits for 1 approver(s): kubectl navique approve configmap/gated\n\
         partial: Stack app stops at ConfigMap gated (waiting for deletion approval)\n"
    );
    assert_eq!(
        versions(cluster(), &ns),
        before,
        "the preview wrote nothing"
    );

    cluster().kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    until_stack(&ns, "app", "the prune to wait", |s| {
        s["status"]["resources"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|r| r["name"] == "gated" && r["requiresDeletionApproval"] == true)
        })
    })
    .await;
    assert!(!exists(&ns, "configmap", "plain"), "pruned, as predicted");
    assert!(exists(&ns, "configmap", "gated"), "waits, as predicted");
}

/// The managed-services environment with backup-runner storing final
/// backups into a local directory, and the controller leading.
async fn services() -> (ServiceEnv, Process, tempfile::TempDir) {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    env.controller_ready().await;
    (env, runner, store)
}

/// A SnapshotAndDelete service: the preview names the final backup that
/// the deletion takes first and what it removes, and the real delete then
/// takes that backup and removes those objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_and_delete_service_is_predicted_to_take_its_final_backup_first() {
    let (env, _runner, _store) = services().await;
    let ns = env.cluster.namespace("preview-svc");
    env.apply(&env.orders_db(&ns, "preview_orders", "SnapshotAndDelete", false))
        .await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let final_backup = format!("orders-db-final-{}", &uid[..8]);

    let before = settled_versions(&env.cluster, &ns).await;
    let out = kubectl_navique_ok(
        &env.cluster,
        &["preview", "delete", "managedservice/orders-db", "-n", &ns],
    );
    assert_eq!(
        out,
        format!(
            "KIND             NAME                    WAVE   FATE      DETAIL\n\
             Secret           orders-db-credentials          removed   deleted after the final backup\n\
             Service          orders-db                      removed   deleted after the final backup\n\
             ManagedService   orders-db                      removed   deleted (its finalizer goes once the policy ran)\n\
             \n\
             SERVICEBACKUP              ORIGIN   FATE\n\
             {final_backup}   Final    taken first\n\
             note: the database and role are on the provider's server, which the plugin cannot see: it assumes they exist, as the controller does when it cannot tell\n\
             allowed: SnapshotAndDelete: final backup {final_backup} is taken first, then ManagedService orders-db and its database and role on the provider's server are removed\n"
        )
    );
    assert_eq!(
        versions(&env.cluster, &ns),
        before,
        "the preview wrote nothing"
    );

    // With protection on, the same preview is refused with the webhook's words.
    env.cluster.kubectl_ok(&[
        "patch",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"deletionProtection":true}}"#,
    ]);
    let json: Value = serde_json::from_str(&kubectl_navique_ok(
        &env.cluster,
        &[
            "preview",
            "delete",
            "managedservice/orders-db",
            "-n",
            &ns,
            "-o",
            "json",
        ],
    ))
    .unwrap();
    assert_eq!(
        json["outcome"]["line"],
        "refused: deletionProtection is enabled"
    );
    assert_eq!(
        json["stops"][0]["message"],
        "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
    );

    // The real delete takes that final backup first, and removes what was
    // listed as removed.
    env.cluster.kubectl_ok(&[
        "patch",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"deletionProtection":false}}"#,
    ]);
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(
        env.get(
            &ns,
            &format!("servicebackup/{final_backup}"),
            "{.spec.origin} {.status.phase}"
        ),
        "Final Completed"
    );
    assert_eq!(
        env.get(&ns, "secret/orders-db-credentials", "{.metadata.name}"),
        ""
    );
    assert_eq!(env.get(&ns, "service/orders-db", "{.metadata.name}"), "");
}

/// Any other kind follows the garbage collector: a ConfigMap owning a
/// locked Stack (`blockOwnerDeletion: true`). Foreground keeps the owner
/// behind the dependent that stays, background deletes the owner and
/// stops at the dependent, orphan deletes only the owner; the real
/// foreground and background deletes do what was predicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_reference_tree_is_predicted_for_each_propagation_policy() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("preview-gc");
    bind_service_account(cluster(), &ns, STACK_ACCOUNT, "edit");
    let owner_for = |name: &str| {
        cluster().kubectl_in(&["create", "configmap", name, "-n", &ns], None);
        let uid = cluster().kubectl_ok(&[
            "get",
            "configmap",
            name,
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        let child = format!("child-of-{name}");
        let stack = json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
            "metadata": {"name": child, "namespace": ns, "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "blockOwnerDeletion": true}]},
            "spec": {"resources": []}});
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&stack.to_string()));
        cluster().kubectl_in(
            &["apply", "-f", "-"],
            Some(&lock(
                &ns,
                &format!("keep-{name}"),
                "core.navique.com/v1alpha1",
                "Stack",
                &child,
                "kept",
            )),
        );
        child
    };
    let child = owner_for("fg");
    env.locks
        .until_lock(&ns, "keep-fg", true, "Protecting")
        .await;
    let before = settled_versions(cluster(), &ns).await;
    let preview = |cascade: &str, name: &str| {
        kubectl_navique_ok(
            cluster(),
            &[
                "preview",
                "delete",
                &format!("configmap/{name}"),
                "--cascade",
                cascade,
                "-n",
                &ns,
            ],
        )
    };
    assert_eq!(
        preview("foreground", "fg"),
        format!(
            "KIND        NAME          WAVE   FATE    DETAIL\n\
             Stack       {child}          stops   locked by keep-fg: resource is protected by Lock(s) [keep-fg]; delete the Lock(s) before deleting this resource (reasons: keep-fg: kept)\n\
             ConfigMap   fg                   stays   marked for deletion: waits for a dependent that stays (blockOwnerDeletion)\n\
             waits: ConfigMap fg stops at Stack {child} (locked by keep-fg)\n"
        )
    );
    assert_eq!(
        preview("background", "fg").lines().last().unwrap(),
        format!("partial: ConfigMap fg stops at Stack {child} (locked by keep-fg)")
    );
    assert_eq!(
        preview("orphan", "fg"),
        format!(
            "KIND        NAME          WAVE   FATE      DETAIL\n\
             ConfigMap   fg                   removed   deleted\n\
             Stack       {child}          stays     orphaned: its owner reference to ConfigMap fg is removed\n\
             allowed: ConfigMap fg is deleted; its dependents stay\n"
        )
    );
    assert_eq!(
        versions(cluster(), &ns),
        before,
        "the previews wrote nothing"
    );

    // Foreground: the owner stays, marked, behind its locked dependent.
    cluster().kubectl_ok(&[
        "delete",
        "configmap",
        "fg",
        "-n",
        &ns,
        "--cascade=foreground",
        "--wait=false",
    ]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "stack", &child), "the locked dependent stays");
    let deleting = cluster().kubectl_ok(&[
        "get",
        "configmap",
        "fg",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!deleting.is_empty(), "the owner stays, marked for deletion");

    // Background: the owner goes, the locked dependent stays.
    let child = owner_for("bg");
    env.locks
        .until_lock(&ns, "keep-bg", true, "Protecting")
        .await;
    cluster().kubectl_ok(&[
        "delete",
        "configmap",
        "bg",
        "-n",
        &ns,
        "--cascade=background",
    ]);
    eventually(WAIT, "the owner to go", || async {
        (!exists(&ns, "configmap", "bg")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&ns, "stack", &child), "the locked dependent stays");
}

/// The preview acts only as its user ("privileged deputy"): a user with no
/// role in the namespace gets the API server's refusal, not a preview made
/// with anyone else's rights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_role_is_refused_by_the_api_server() {
    let env = env();
    env.ready().await;
    cluster().add_user("dave", &[]);
    let ns = cluster().namespace("preview-rbac");
    apply_stack(&ns, "app", &[config_map("settings", 0, None)]);
    let dir = tempfile::tempdir().unwrap();
    let dave = cluster().kubeconfig_for("dave-token", dir.path());
    let run = navique_e2e::plugin::kubectl_navique(
        cluster(),
        &dave,
        &["preview", "delete", "stack/app", "-n", &ns],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        format!(
            "Error from server (Forbidden): stacks.core.navique.com \"app\" is forbidden: User \"dave\" cannot get resource \"stacks\" in API group \"core.navique.com\" in the namespace \"{ns}\"\n"
        )
    );
}

/// A `Delete=confirm` resource in the last wave: the preview says the
/// teardown waits for its approval before anything goes, and the real
/// delete waits there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_confirm_resource_is_predicted_to_hold_the_teardown_for_approval() {
    let env = env();
    env.ready().await;
    let ns = cluster().namespace("preview-confirm");
    apply_stack(
        &ns,
        "app",
        &[
            config_map("base", 0, None),
            config_map("data", 1, Some("Delete=confirm")),
        ],
    );
    until_stack(&ns, "app", "the sync", |s| ready_reason(s) == "Synced").await;
    let before = settled_versions(cluster(), &ns).await;
    assert_eq!(
        kubectl_navique_ok(cluster(), &["preview", "delete", "stack/app", "-n", &ns]),
        "KIND        NAME   WAVE   FATE    DETAIL\n\
         ConfigMap   data   1      stops   waiting for deletion approval: Delete=confirm: waits for 1 approver(s): kubectl navique approve configmap/data\n\
         ConfigMap   base   0      stays   not reached: waits for wave 1 to be deleted\n\
         Stack       app           stays   marked for deletion: its teardown stops at wave 1\n\
         waits: Stack app stops at ConfigMap data (waiting for deletion approval)\n"
    );
    assert_eq!(
        versions(cluster(), &ns),
        before,
        "the preview wrote nothing"
    );

    cluster().kubectl_ok(&["delete", "stack", "app", "-n", &ns, "--wait=false"]);
    until_stack(&ns, "app", "the wait for approval", |s| {
        ready_reason(s) == "WaitingForApproval"
    })
    .await;
    assert!(exists(&ns, "configmap", "data") && exists(&ns, "configmap", "base"));
}
