//! Who a Stack acts as, end to end in RBAC mode with the services webhook:
//! the real service-lifecycle-controller applies, reads and deletes a
//! Stack's resources as a ServiceAccount of the Stack's namespace, so RBAC
//! decides what a Stack may do ("privileged deputy"), and the webhook's
//! retained-objects guard holds for a Stack's teardown as for any Project
//! identity ("trusted group": the controller's own ServiceAccount is one of
//! the provider's groups).

use std::sync::OnceLock;
use std::time::Duration;

use navique_e2e::eventually;
use navique_e2e::services::ServiceEnv;
use navique_e2e::stacks::{STACK_ACCOUNT, bind_service_account};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn env() -> &'static ServiceEnv {
    static ENV: OnceLock<ServiceEnv> = OnceLock::new();
    ENV.get_or_init(|| ServiceEnv::start(&[]))
}

fn stack(ns: &str, name: &str, resources: &[Value]) -> String {
    json!({
        "apiVersion": "core.navique.com/v1alpha1",
        "kind": "Stack",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"resources": resources},
    })
    .to_string()
}

/// The Stack's row of `kind/name`, once the controller wrote one that
/// `done` accepts.
async fn until_row(
    ns: &str,
    stack: &str,
    kind: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let k = &env().cluster;
    eventually(WAIT, &format!("the row of {kind}/{name}"), || async {
        let text = k
            .kubectl(&["get", "stack", stack, "-n", ns, "-o", "json"], None)
            .stdout;
        let stack: Value = serde_json::from_slice(&text).ok()?;
        let row = stack["status"]["resources"]
            .as_array()?
            .iter()
            .find(|r| r["kind"] == kind && r["name"] == name)?
            .clone();
        done(&row).then_some(row)
    })
    .await
}

/// "Privileged deputy": sam may only write Stacks in the namespace
/// (`kubectl auth can-i` says no to Secrets, Deployments and
/// ManagedServices). Through Stacks sam lists a ServiceAccount-token
/// Secret of an `edit` ServiceAccount, a Deployment running as it, a
/// ServiceBinding delivering alice's database password into a Secret, and
/// a ManagedService under Delete. The Stacks act as the namespace's
/// `navique-stack` ServiceAccount, which the Project binds to ConfigMaps
/// only: none of them is created, each row carries the API server's
/// Forbidden naming the ServiceAccount, and the ConfigMap is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_only_user_creates_nothing_its_stacks_account_may_not() {
    let env = env();
    env.controller_ready().await;
    let k = &env.cluster;
    let ns = k.namespace("deputy");
    k.add_user("sam", &[]);
    let roles = format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: stacks-only, namespace: {ns}}}
rules:
- apiGroups: [core.navique.com]
  resources: [stacks]
  verbs: [get, list, watch, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: sam-stacks-only, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: stacks-only}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: sam}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: stack-configmaps}}
rules:
- apiGroups: [\"\"]
  resources: [configmaps]
  verbs: [get, create, patch, delete]
"
    );
    k.kubectl_in(&["apply", "-f", "-"], Some(&roles));
    bind_service_account(k, &ns, STACK_ACCOUNT, "stack-configmaps");
    // The ServiceAccount whose rights sam is after.
    bind_service_account(k, &ns, "builder", "edit");
    // Another user's database in the Project, whose password sam is after.
    env.apply(&env.orders_db(&ns, "deputy_orders", "Retain", false))
        .await;
    let sam = ["-n", ns.as_str(), "--token", "sam-token"];
    for what in [
        "secrets",
        "deployments.apps",
        "managedservices.services.kube-dc.com",
        "servicebindings.services.kube-dc.com",
    ] {
        let answer = k.kubectl(
            &[&["auth", "can-i", "create", what][..], &sam].concat(),
            None,
        );
        assert_eq!(
            String::from_utf8_lossy(&answer.stdout).trim(),
            "no",
            "sam may create {what}"
        );
    }

    let attempts = [
        (
            "token",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                   "metadata": {"name": "builder-token", "annotations": {"kubernetes.io/service-account.name": "builder"}}}),
            "secrets",
            "",
        ),
        (
            "runner",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "runner"},
                   "spec": {"selector": {"matchLabels": {"app": "runner"}},
                            "template": {"metadata": {"labels": {"app": "runner"}},
                                         "spec": {"serviceAccountName": "builder",
                                                  "containers": [{"name": "c", "image": "busybox"}]}}}}),
            "deployments",
            "apps",
        ),
        (
            "steal",
            json!({"apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ServiceBinding",
                   "metadata": {"name": "stolen"},
                   "spec": {"serviceRef": {"name": "orders-db"}, "secretName": "stolen"}}),
            "servicebindings",
            "services.kube-dc.com",
        ),
        (
            "doomed",
            serde_json::to_value(
                serde_yaml::from_str::<Value>(
                    &env.orders_db(&ns, "deputy_doomed", "Delete", false)
                        .replace("name: orders-db", "name: doomed")
                        .replace("confirm-delete: orders-db", "confirm-delete: doomed"),
                )
                .unwrap(),
            )
            .unwrap(),
            "managedservices",
            "services.kube-dc.com",
        ),
    ];
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "production"}});
    let as_sam =
        |manifest: &str| k.kubectl_in(&[&["apply", "-f", "-"][..], &sam].concat(), Some(manifest));
    as_sam(&stack(&ns, "settings", &[settings]));
    for (name, manifest, _, _) in &attempts {
        as_sam(&stack(&ns, name, std::slice::from_ref(manifest)));
    }

    let account = format!("system:serviceaccount:{ns}:{STACK_ACCOUNT}");
    for (name, manifest, resource, group) in &attempts {
        let kind = manifest["kind"].as_str().unwrap();
        let object = manifest["metadata"]["name"].as_str().unwrap();
        let row = until_row(&ns, name, kind, object, |r| r["message"].is_string()).await;
        assert_eq!(row["status"], "OutOfSync", "{row}");
        let message = row["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "is forbidden: User \"{account}\" cannot get resource \"{resource}\" in API group \"{group}\" in the namespace \"{ns}\""
            )),
            "{message}"
        );
        assert_eq!(
            env.get(&ns, &format!("{resource}/{object}"), "{.metadata.name}"),
            "",
            "{kind}/{object} was created"
        );
    }
    until_row(&ns, "settings", "ConfigMap", "settings", |r| {
        r["status"] == "Synced"
    })
    .await;
    assert_eq!(
        env.get(&ns, "configmap/settings", "{.data.mode}"),
        "production"
    );
    assert_eq!(env.get(&ns, "secret/stolen", "{.metadata.name}"), "");
}

/// "Trusted group": a Stack lists the data volume `data-rdb-0` (wave 0)
/// and the InProject ManagedService `rdb` under Retain (wave 1), and its
/// ServiceAccount may edit the Project. Deleting the Stack deletes the
/// service, whose Retain marks the volume retained; the Stack's delete of
/// the volume is then refused by the webhook (the Stack acts as a Project
/// identity, not as the controller's provider group), the volume stays, a
/// Warning Event says why, and the teardown finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_never_manages_or_deletes_a_services_volume() {
    let env = env();
    env.controller_ready().await;
    let k = &env.cluster;
    let ns = k.namespace("retained");
    bind_service_account(k, &ns, STACK_ACCOUNT, "edit");
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-rdb-0", "labels": {"services.kube-dc.com/service": "rdb"},
                     "annotations": {"cd.hanzo.ai/sync-wave": "0"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}});
    let mut service: Value = serde_yaml::from_str(
        &env.orders_db(&ns, "retained_rdb", "Retain", false)
            .replace("name: orders-db", "name: rdb")
            .replace("mode: ProviderShared", "mode: InProject"),
    )
    .unwrap();
    service["metadata"]["annotations"] = json!({"cd.hanzo.ai/sync-wave": "1"});
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&stack(&ns, "data", &[claim, service])),
    );
    // The Stack creates the claim, then sees it labelled as the service's:
    // a ManagedService's volume is never the Stack's to change or delete
    // (ownership by label is not enough either way), and the row says so.
    until_row(&ns, "data", "PersistentVolumeClaim", "data-rdb-0", |r| {
        r["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("belongs to ManagedService {ns}/rdb")))
    })
    .await;
    k.kubectl_ok(&["delete", "stack", "data", "-n", &ns, "--wait=false"]);
    eventually(WAIT, "the Stack to be gone", || async {
        (env.get(&ns, "stack/data", "{.metadata.name}").is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        env.get(&ns, "pvc/data-rdb-0", "{.metadata.name}"),
        "data-rdb-0",
        "the Stack's teardown never deleted the volume"
    );
}
