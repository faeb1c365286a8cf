//! Locks beyond the operator's groups, by opt-in: with the chart's
//! `lockGuard.groups` naming `core` and `apps` and `lockGuard.resources`
//! listing PersistentVolumeClaims, Secrets and Deployments, a Lock on each
//! holds against `kubectl delete`, garbage collection and namespace
//! deletion, in both guard modes, as the Lock tests show for the
//! operator's kinds. A core kind left out (ConfigMap) is InvalidTarget.

use std::time::Duration;

use navique_e2e::eventually;
use navique_e2e::locks::{GuardMode, LockEnv, lock};

const WAIT: Duration = Duration::from_secs(20);

/// The chart's values for this test: the seed's groups plus core and apps,
/// each limited to the kinds tested.
const CHART: &[&str] = &[
    "--set",
    "lockGuard.groups={core.navique.com,services.kube-dc.com,core,apps}",
    "--set",
    "lockGuard.resources.core={persistentvolumeclaims,secrets}",
    "--set",
    "lockGuard.resources.apps={deployments}",
];

/// `(kubectl resource, apiVersion, kind, name)` of each locked object.
const TARGETS: [(&str, &str, &str, &str); 3] = [
    (
        "persistentvolumeclaim",
        "v1",
        "PersistentVolumeClaim",
        "data",
    ),
    ("secret", "v1", "Secret", "db-credentials"),
    ("deployment", "apps/v1", "Deployment", "web"),
];

/// The objects, the Secret owned by the ConfigMap `owner` (uid `owner`).
fn objects(ns: &str, owner: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data, namespace: {ns}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: Secret
metadata:
  name: db-credentials
  namespace: {ns}
  ownerReferences:
  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner}}}
stringData: {{password: hunter2}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: nginx}}]
"
    )
}

async fn core_kinds_hold(mode: GuardMode) {
    let env = LockEnv::start_with(mode, CHART);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("core-locks");
    k.kubectl_ok(&["create", "configmap", "owner", "-n", &ns]);
    let owner = k.kubectl_ok(&[
        "get",
        "configmap",
        "owner",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    k.kubectl_in(&["apply", "-f", "-"], Some(&objects(&ns, &owner)));
    for (resource, api_version, kind, name) in TARGETS {
        let lock_name = format!("keep-{resource}");
        k.kubectl_in(
            &["apply", "-f", "-"],
            Some(&lock(
                &ns,
                &lock_name,
                api_version,
                kind,
                name,
                "production data",
            )),
        );
        env.until_lock(&ns, &lock_name, true, "Protecting").await;
        assert_eq!(
            env.marker(&[resource, name, "-n", &ns]),
            lock_name,
            "{kind}"
        );
    }

    // kubectl delete is refused, naming the Lock and its reason.
    for (resource, _, kind, name) in TARGETS {
        let err = k.kubectl_err(&["delete", resource, name, "-n", &ns], None);
        assert!(
            err.contains(&format!(
                "resource is protected by Lock(s) [keep-{resource}]; delete the Lock(s) before deleting this resource (reasons: keep-{resource}: production data)"
            )),
            "{kind}: {err}"
        );
    }

    // Garbage collection: the owner goes, its locked dependent stays.
    k.kubectl_ok(&["delete", "configmap", "owner", "-n", &ns]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        k.kubectl(&["get", "secret", "db-credentials", "-n", &ns], None)
            .status
            .success(),
        "the locked Secret survives its owner's deletion"
    );

    // Namespace deletion is refused while the Locks are there.
    eventually(WAIT, "the namespace marker", || async {
        (!env.marker(&["namespace", &ns]).is_empty()).then_some(())
    })
    .await;
    let err = k.kubectl_err(&["delete", "namespace", &ns], None);
    assert!(
        err.contains(&format!("namespace {ns} holds Lock(s) [")),
        "{err}"
    );
    // A core kind the chart did not list is InvalidTarget, saying how.
    k.kubectl_ok(&["create", "configmap", "settings", "-n", &ns]);
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "keep-settings",
            "v1",
            "ConfigMap",
            "settings",
            "",
        )),
    );
    env.until_lock(&ns, "keep-settings", false, "InvalidTarget")
        .await;
    assert_eq!(
        env.lock_field(
            &ns,
            "keep-settings",
            r#"{.status.conditions[?(@.type=="Ready")].message}"#
        ),
        "kind ConfigMap of v1 is not enforceable: only persistentvolumeclaims, secrets can be locked in its group; add its resource to the lock-controller's --enforceable-resources (Helm value lockGuard.resources)"
    );
    assert_eq!(env.marker(&["configmap", "settings", "-n", &ns]), "");

    // Without the Locks, the same deletes pass; the Secret, whose owner is
    // gone, is collected as soon as its marker is, as kube's garbage
    // collector would.
    for (resource, _, _, name) in TARGETS {
        k.kubectl_ok(&["delete", "lock", &format!("keep-{resource}"), "-n", &ns]);
        if resource == "secret" {
            eventually(WAIT, "the unlocked orphan to be collected", || async {
                let get = k.kubectl(&["get", resource, name, "-n", &ns], None);
                String::from_utf8_lossy(&get.stderr)
                    .contains("NotFound")
                    .then_some(())
            })
            .await;
            continue;
        }
        eventually(WAIT, "the marker to go", || async {
            env.marker(&[resource, name, "-n", &ns])
                .is_empty()
                .then_some(())
        })
        .await;
        k.kubectl_ok(&["delete", resource, name, "-n", &ns]);
    }
}

#[tokio::test]
async fn core_and_apps_kinds_hold_with_the_policy_guard() {
    core_kinds_hold(GuardMode::Policy).await;
}

#[tokio::test]
async fn core_and_apps_kinds_hold_with_the_webhook_guard() {
    core_kinds_hold(GuardMode::Webhook).await;
}
