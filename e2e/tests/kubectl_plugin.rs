//! The kubectl plugin (`crates/kubectl-navique`) through kubectl's plugin
//! mechanism (`kubectl navique ...`, the built binary on PATH): pending
//! approvals listed from Stacks' status, approving only what is pending,
//! `approve --all --stack`, the API server's refusal in RBAC mode, and
//! Locks reconciled by the real lock-controller. The test writes the Stacks'
//! status itself, standing in for the Stack controller.

use std::path::Path;
use std::sync::OnceLock;

use navique_e2e::Cluster;
use navique_e2e::locks::{GuardMode, LockEnv, lock, stack};
use navique_e2e::plugin::{kubectl_navique, kubectl_navique_ok};
use serde_json::{Value, json};

/// One cluster for the tests that run as the admin: CRDs, the Lock guard
/// and the lock-controller.
fn env() -> &'static LockEnv {
    static ENV: OnceLock<LockEnv> = OnceLock::new();
    ENV.get_or_init(|| LockEnv::start(GuardMode::Policy))
}

/// A Stack `name` in `ns` whose status lists `resources`, as the Stack
/// controller writes it.
fn stack_with_status(cluster: &Cluster, ns: &str, name: &str, resources: Value) {
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&stack(ns, name)));
    let status = json!({"status": {"resources": resources}}).to_string();
    cluster.kubectl_ok(&[
        "patch",
        "stack",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
}

/// A ConfigMap's entry in a Stack's status, pending approval when
/// `operation` names one.
fn configmap(ns: &str, name: &str, operation: Option<&str>) -> Value {
    let mut entry = json!({"version": "v1", "kind": "ConfigMap", "namespace": ns, "name": name, "status": "Synced"});
    if let Some(operation) = operation {
        entry["requiresDeletionApproval"] = true.into();
        entry["requiresPruning"] = (operation == "Prune").into();
    }
    entry
}

/// The deletion-approval annotation of an object ("" if none).
fn approval(cluster: &Cluster, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend([
        "-o",
        r#"jsonpath={.metadata.annotations.cd\.hanzo\.ai/deletion-approved}"#,
    ]);
    cluster.kubectl_ok(&all)
}

#[test]
fn approvals_lists_what_the_stacks_wait_for() {
    let k = &env().cluster;
    let ns = k.namespace("approvals");
    let mut old = configmap(&ns, "old-config", Some("Prune"));
    old["syncWave"] = 1.into();
    old["message"] = "waiting for cd.hanzo.ai/deletion-approved".into();
    let web = json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": ns,
        "name": "web", "status": "Synced", "requiresDeletionApproval": true, "syncWave": 2});
    stack_with_status(
        k,
        &ns,
        "app",
        json!([old, configmap(&ns, "kept", None), web]),
    );
    stack_with_status(k, &ns, "quiet", json!([configmap(&ns, "other", None)]));

    assert_eq!(
        kubectl_navique_ok(k, &["approvals", "-n", &ns]),
        format!(
            "{:<18}   STACK   OPERATION   KIND         NAME         WAVE   MESSAGE\n\
             {ns}   app     Prune       ConfigMap    old-config   1      waiting for cd.hanzo.ai/deletion-approved\n\
             {ns}   app     Delete      Deployment   web          2\n",
            "NAMESPACE"
        )
    );

    let list: Value = serde_json::from_str(&kubectl_navique_ok(
        k,
        &["approvals", "-n", &ns, "-o", "json"],
    ))
    .expect("valid JSON");
    assert_eq!(
        list["approvals"][0],
        json!({
            "stack": {"namespace": ns, "name": "app"},
            "operation": "Prune",
            "resource": {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": ns, "name": "old-config"},
            "wave": 1,
            "message": "waiting for cd.hanzo.ai/deletion-approved"
        })
    );
    assert_eq!(list["approvals"][1]["resource"]["group"], "apps");
    assert_eq!(list["approvals"][1]["operation"], "Delete");
    assert_eq!(list["approvals"].as_array().map(Vec::len), Some(2));

    let yaml: Value = serde_yaml::from_str(&kubectl_navique_ok(
        k,
        &["approvals", "-n", &ns, "-o", "yaml"],
    ))
    .expect("valid YAML");
    assert_eq!(yaml, list);

    // -o name gives what approve takes; -o wide adds since when and who.
    assert_eq!(
        kubectl_navique_ok(k, &["approvals", "-n", &ns, "-o", "name"]),
        "configmap/old-config\ndeployment.apps/web\n"
    );
    let wide = kubectl_navique_ok(k, &["approvals", "-n", &ns, "-o", "wide"]);
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap()
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "STACK",
            "OPERATION",
            "KIND",
            "NAME",
            "WAVE",
            "SINCE",
            "APPROVED BY",
            "MESSAGE"
        ]
    );
    assert!(
        wide.lines()
            .nth(1)
            .unwrap()
            .ends_with("<none>   <none>        waiting for cd.hanzo.ai/deletion-approved"),
        "{wide}"
    );

    // Every namespace: this one's rows among others'.
    let everywhere = kubectl_navique_ok(k, &["approvals", "-A"]);
    let rows: Vec<Vec<&str>> = everywhere
        .lines()
        .map(|l| l.split_whitespace().take(5).collect())
        .filter(|row: &Vec<&str>| row[0] == ns)
        .collect();
    assert_eq!(
        rows,
        [
            [ns.as_str(), "app", "Prune", "ConfigMap", "old-config"],
            [ns.as_str(), "app", "Delete", "Deployment", "web"]
        ],
        "{everywhere}"
    );

    let empty = k.namespace("no-approvals");
    assert_eq!(
        kubectl_navique_ok(k, &["approvals", "-n", &empty]),
        "No approvals pending.\n"
    );
    // --kubeconfig, over a KUBECONFIG that names nothing.
    let run = kubectl_navique(
        k,
        Path::new("/nonexistent/kubeconfig"),
        &[
            "approvals",
            "-n",
            &empty,
            "--kubeconfig",
            k.kubeconfig().to_str().unwrap(),
        ],
    );
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (Some(0), "No approvals pending.\n")
    );
}

#[test]
fn version_names_the_plugin_the_server_and_what_is_installed() {
    let k = &env().cluster;
    let client = format!("v{}", env!("CARGO_PKG_VERSION"));
    // --client asks nothing of a cluster, so needs no kubeconfig.
    let run = kubectl_navique(
        k,
        Path::new("/nonexistent/kubeconfig"),
        &["version", "--client"],
    );
    assert_eq!(
        (run.code, run.stdout),
        (Some(0), format!("Client Version: {client}\n"))
    );
    let report: Value =
        serde_json::from_str(&kubectl_navique_ok(k, &["version", "-o", "json"])).unwrap();
    let server: Value = serde_json::from_str(&k.kubectl_ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(report["clientVersion"]["gitVersion"], client.as_str());
    assert_eq!(
        report["serverVersion"]["gitVersion"],
        server["serverVersion"]["gitVersion"]
    );
    // These tests install deploy/crds, without the chart's labels (the
    // chart test sees the installed version).
    assert_eq!(
        report["naviqueVersion"],
        json!({"error": "the CustomResourceDefinition locks.core.navique.com has no app.kubernetes.io/version label (installed without the chart?)"})
    );
}

/// `kubectl navique <TAB>`: kubectl (1.26+) asks the shipped
/// `kubectl_complete-navique`, which asks the plugin.
#[test]
fn kubectl_completes_the_plugins_commands_flags_and_values() {
    let k = &env().cluster;
    let script_dir = navique_e2e::repo_root().join("crates/kubectl-navique/completion");
    let plugin_dir = navique_e2e::binary("kubectl-navique");
    let path = std::env::join_paths(
        [script_dir, plugin_dir.parent().unwrap().to_path_buf()]
            .into_iter()
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            )),
    )
    .unwrap();
    let complete = |words: &[&str]| {
        let (kubectl, _cache) = k.kubectl_command();
        let output = std::process::Command::new(kubectl.get_program())
            .args(["__complete", "navique"])
            .args(words)
            .env("PATH", &path)
            .env("KUBECONFIG", k.kubeconfig())
            .output()
            .expect("run kubectl __complete");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let commands = complete(&["ap"]);
    let names: Vec<&str> = commands
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["approvals", "approve", ":4"], "{commands}");
    let flags = complete(&["approvals", "--w"]);
    assert!(flags.starts_with("--watch\t"), "{flags}");
    let values = complete(&["locks", "-o", "w"]);
    assert_eq!(
        values
            .lines()
            .map(|l| l.split('\t').next().unwrap())
            .collect::<Vec<_>>(),
        ["wide", ":4"]
    );
}

#[test]
fn approve_annotates_pending_resources_and_refuses_others() {
    let k = &env().cluster;
    let ns = k.namespace("approve");
    for cm in ["old-config", "kept"] {
        k.kubectl_ok(&["create", "configmap", cm, "-n", &ns]);
    }
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: nginx}}]}}\n"
    );
    k.kubectl_in(&["apply", "-f", "-"], Some(&deployment));
    let web = json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": ns,
        "name": "web", "status": "Synced", "requiresDeletionApproval": true});
    stack_with_status(
        k,
        &ns,
        "app",
        json!([
            configmap(&ns, "old-config", Some("Prune")),
            configmap(&ns, "kept", None),
            web
        ]),
    );

    assert_eq!(
        kubectl_navique_ok(k, &["approve", "ConfigMap/old-config", "-n", &ns]),
        "approved configmap/old-config as dev-admin (Prune in Stack app)\n"
    );
    assert_eq!(approval(k, &["configmap", "old-config", "-n", &ns]), "true");

    // Not pending: refused, and nothing patched.
    let refused = kubectl_navique(k, k.kubeconfig(), &["approve", "cm/kept", "-n", &ns]);
    assert_eq!(refused.code, Some(1));
    assert_eq!(refused.stdout, "");
    assert_eq!(
        refused.stderr,
        "error: cm/kept is not waiting for a deletion approval\n"
    );
    assert_eq!(approval(k, &["configmap", "kept", "-n", &ns]), "");
    let unknown = kubectl_navique(k, k.kubeconfig(), &["approve", "gadget/x", "-n", &ns]);
    assert_eq!(
        (unknown.code, unknown.stderr.as_str()),
        (
            Some(1),
            "error: the server doesn't have a resource type \"gadget\"\n"
        )
    );

    // A short name through discovery; the JSON report.
    let report: Value = serde_json::from_str(&kubectl_navique_ok(
        k,
        &["approve", "deploy/web", "-n", &ns, "-o", "json"],
    ))
    .expect("valid JSON");
    assert_eq!(
        report,
        json!({"results": [{
            "target": "deployment.apps/web",
            "namespace": ns,
            "approved": true,
            "stack": {"namespace": ns, "name": "app"},
            "operation": "Delete",
            "approver": "dev-admin",
            "approvedBy": ["dev-admin"]
        }]})
    );
    assert_eq!(approval(k, &["deployment", "web", "-n", &ns]), "true");
}

#[test]
fn approve_all_approves_every_pending_resource_of_one_stack() {
    let k = &env().cluster;
    let ns = k.namespace("approve-all");
    for cm in ["a1", "a2", "b1", "c1"] {
        k.kubectl_ok(&["create", "configmap", cm, "-n", &ns]);
    }
    // In Stack c, "gone" is pending but no longer exists: its patch fails,
    // c1's does not.
    for (stack, pending) in [
        ("a", [("a1", "Prune"), ("a2", "Delete")].as_slice()),
        ("b", &[("b1", "Prune")]),
        ("c", &[("gone", "Prune"), ("c1", "Prune")]),
    ] {
        let entries: Vec<Value> = pending
            .iter()
            .map(|(cm, operation)| configmap(&ns, cm, Some(operation)))
            .collect();
        stack_with_status(k, &ns, stack, entries.into());
    }

    assert_eq!(
        kubectl_navique_ok(k, &["approve", "--all", "--stack", "a", "-n", &ns]),
        "approved configmap/a1 as dev-admin (Prune in Stack a)\napproved configmap/a2 as dev-admin (Delete in Stack a)\n"
    );
    for cm in ["a1", "a2"] {
        assert_eq!(approval(k, &["configmap", cm, "-n", &ns]), "true");
    }
    assert_eq!(approval(k, &["configmap", "b1", "-n", &ns]), "");

    let partly = kubectl_navique(
        k,
        k.kubeconfig(),
        &["approve", "--all", "--stack", "c", "-n", &ns],
    );
    assert_eq!(partly.code, Some(1));
    assert_eq!(
        partly.stdout,
        "approved configmap/c1 as dev-admin (Prune in Stack c)\n"
    );
    assert_eq!(
        partly.stderr,
        "Error from server (NotFound): configmaps \"gone\" not found\n"
    );

    stack_with_status(k, &ns, "d", json!([configmap(&ns, "b1", None)]));
    assert_eq!(
        kubectl_navique_ok(k, &["approve", "--all", "--stack", "d", "-n", &ns]),
        "No approvals pending in Stack d.\n"
    );
    let missing = kubectl_navique(
        k,
        k.kubeconfig(),
        &["approve", "--all", "--stack", "nope", "-n", &ns],
    );
    assert_eq!(
        (missing.code, missing.stderr.as_str()),
        (
            Some(1),
            "Error from server (NotFound): stacks.core.navique.com \"nope\" not found\n"
        )
    );
}

#[test]
fn without_patch_permission_the_api_server_refuses_the_approval() {
    let cluster = Cluster::dev(&["--authorization", "rbac"]);
    // The dev API server serves a CRD as soon as it is stored.
    let crds = navique_e2e::repo_root().join("deploy/crds");
    cluster.kubectl_ok(&["apply", "-f", crds.to_str().unwrap()]);
    let ns = cluster.namespace("rbac-approve");
    cluster.kubectl_ok(&["create", "configmap", "old-config", "-n", &ns]);
    stack_with_status(
        &cluster,
        &ns,
        "app",
        json!([configmap(&ns, "old-config", Some("Prune"))]),
    );
    // bob may read Stacks and ConfigMaps; carol may also patch ConfigMaps.
    cluster.add_user("bob", &[]);
    cluster.add_user("carol", &[]);
    let rbac = format!(
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: approval-viewer, namespace: {ns}}}
rules:
- {{apiGroups: [core.navique.com], resources: [stacks], verbs: [get, list]}}
- {{apiGroups: [""], resources: [configmaps], verbs: [get, list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: approval-viewers, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: approval-viewer}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}}
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: configmap-patcher, namespace: {ns}}}
rules:
- {{apiGroups: [""], resources: [configmaps], verbs: [patch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: configmap-patchers, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-patcher}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}}
"#
    );
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&rbac));
    let dir = tempfile::tempdir().expect("temp dir");
    let bob = cluster.kubeconfig_for("bob-token", dir.path());
    let carol = cluster.kubeconfig_for("carol-token", dir.path());

    let listed = kubectl_navique(&cluster, &bob, &["approvals", "-n", &ns]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(listed.stdout.contains("old-config"), "{}", listed.stdout);

    let refused = kubectl_navique(&cluster, &bob, &["approve", "cm/old-config", "-n", &ns]);
    assert_eq!(refused.code, Some(1));
    assert_eq!(refused.stdout, "");
    assert_eq!(
        refused.stderr,
        format!(
            "Error from server (Forbidden): configmaps \"old-config\" is forbidden: User \"bob\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"\n"
        )
    );
    assert_eq!(
        approval(&cluster, &["configmap", "old-config", "-n", &ns]),
        ""
    );

    assert_eq!(
        kubectl_navique(&cluster, &carol, &["approve", "cm/old-config", "-n", &ns]).stdout,
        "approved configmap/old-config as carol (Prune in Stack app)\n"
    );
    assert_eq!(
        approval(&cluster, &["configmap", "old-config", "-n", &ns]),
        "true"
    );
    // Recorded as the user the API server says carol is.
    assert_eq!(
        cluster.kubectl_ok(&[
            "get",
            "configmap",
            "old-config",
            "-n",
            &ns,
            "-o",
            r#"jsonpath={.metadata.annotations.core\.navique\.com/approved-by}"#,
        ]),
        "carol"
    );
}

#[tokio::test]
async fn locks_shows_each_lock_its_target_and_why() {
    let env = env();
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("locks");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "forge")));
    let reason = "Production — delete deliberately";
    for (name, target, reason) in [("protect", "forge", reason), ("later", "next", "")] {
        let manifest = lock(
            &ns,
            name,
            "core.navique.com/v1alpha1",
            "Stack",
            target,
            reason,
        );
        k.kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    }
    env.until_lock(&ns, "protect", true, "Protecting").await;
    env.until_lock(&ns, "later", false, "MissingReference")
        .await;

    assert_eq!(
        kubectl_navique_ok(k, &["locks", "-n", &ns]),
        format!(
            "{:<14}   NAME      TARGET        ACTIVE   READY   STATUS             REASON\n\
             {ns}   later     Stack/next    false    False   MissingReference\n\
             {ns}   protect   Stack/forge   true     True    Protecting         {reason}\n\
             \n\
             {:<14}   LOCKED OBJECT   PROTECTED BY   WHY\n\
             {ns}   Stack/forge     protect        protect: {reason}\n",
            "NAMESPACE", "NAMESPACE"
        )
    );

    let report: Value =
        serde_json::from_str(&kubectl_navique_ok(k, &["locks", "-n", &ns, "-o", "json"]))
            .expect("valid JSON");
    assert_eq!(
        report["locks"][1],
        json!({
            "namespace": ns,
            "name": "protect",
            "target": {"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack", "name": "forge"},
            "active": true,
            "reason": reason,
            "ready": {"status": "True", "reason": "Protecting", "message": "protecting Stack forge"}
        })
    );
    assert_eq!(report["locks"][0]["ready"]["reason"], "MissingReference");

    assert_eq!(
        kubectl_navique_ok(k, &["locks", "-n", &ns, "-o", "name"]),
        "lock.core.navique.com/later\nlock.core.navique.com/protect\n"
    );
    let wide = kubectl_navique_ok(k, &["locks", "-n", &ns, "-o", "wide"]);
    let protect = wide.lines().nth(2).unwrap();
    let cells: Vec<&str> = protect
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            ns.as_str(),
            "protect",
            "Stack/forge",
            "core.navique.com/v1alpha1",
            "true",
            "True",
            "Protecting",
            "protecting Stack forge",
            reason
        ],
        "{wide}"
    );
    assert_eq!(
        report["lockedObjects"],
        json!([{
            "namespace": ns,
            "apiVersion": "core.navique.com/v1alpha1",
            "kind": "Stack",
            "name": "forge",
            "locks": [{"lock": "protect", "reason": reason}]
        }])
    );

    let empty = k.namespace("no-locks");
    assert_eq!(
        kubectl_navique_ok(k, &["locks", "-n", &empty]),
        format!("No Locks found in {empty} namespace.\n")
    );
}
