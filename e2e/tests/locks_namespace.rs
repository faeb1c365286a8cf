//! Namespace-wide Locks, by opt-in: with the chart's
//! `lockGuard.namespaceLocks=true`, a Lock on its own Namespace makes every
//! enforceable object in it (the operator's kinds, and here Secrets, listed
//! in `lockGuard.resources.core`) refuse deletion, by `kubectl delete` and
//! by garbage collection, naming the Lock and its reason, while objects of
//! other kinds (ConfigMaps, Deployments) stay deletable; removing the Lock
//! lifts it. In both guard modes. Without the opt-in such a Lock is
//! InvalidTarget, saying how to turn it on.

use std::time::Duration;

use navique_e2e::eventually;
use navique_e2e::locks::{GuardMode, LockEnv, lock};

const WAIT: Duration = Duration::from_secs(20);

/// The chart's values: namespace-wide Locks on, and Secrets enforceable
/// besides the operator's kinds.
const CHART: &[&str] = &[
    "--set",
    "lockGuard.namespaceLocks=true",
    "--set",
    "lockGuard.groups={core.navique.com,services.kube-dc.com,core}",
    "--set",
    "lockGuard.resources.core={secrets}",
];

/// `(kubectl resource, name)` of one object of each enforceable kind.
const ENFORCEABLE: [(&str, &str); 6] = [
    ("stack", "forge"),
    ("managedservice", "orders-db"),
    ("servicebackup", "manual-1"),
    ("servicebinding", "orders-app"),
    ("servicecredentialpolicy", "orders-rotation"),
    ("secret", "db-credentials"),
];

/// Objects of kinds the Locks do not cover.
const OTHERS: [(&str, &str); 2] = [("configmap", "settings"), ("deployment", "web")];

const REASON: &str = "release week";

/// One object of every kind above; the Stack `child` is owned by the
/// ConfigMap `owner` (uid `owner`).
fn objects(ns: &str, owner: &str) -> String {
    format!(
        "apiVersion: core.navique.com/v1alpha1
kind: Stack
metadata: {{name: forge, namespace: {ns}}}
spec: {{resources: []}}
---
apiVersion: core.navique.com/v1alpha1
kind: Stack
metadata:
  name: child
  namespace: {ns}
  ownerReferences:
  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner}}}
spec: {{resources: []}}
---
apiVersion: services.kube-dc.com/v1alpha1
kind: ManagedService
metadata: {{name: orders-db, namespace: {ns}}}
spec:
  classRef: {{name: postgresql}}
  planRef: {{name: postgresql-small}}
---
apiVersion: services.kube-dc.com/v1alpha1
kind: ServiceBackup
metadata: {{name: manual-1, namespace: {ns}}}
spec:
  serviceRef: {{name: orders-db}}
  origin: Manual
---
apiVersion: services.kube-dc.com/v1alpha1
kind: ServiceBinding
metadata: {{name: orders-app, namespace: {ns}}}
spec:
  serviceRef: {{name: orders-db}}
---
apiVersion: services.kube-dc.com/v1alpha1
kind: ServiceCredentialPolicy
metadata: {{name: orders-rotation, namespace: {ns}}}
spec:
  serviceRef: {{name: orders-db}}
  rotationInterval: 24h
---
apiVersion: v1
kind: Secret
metadata: {{name: db-credentials, namespace: {ns}}}
stringData: {{password: hunter2}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {ns}}}
data: {{mode: production}}
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

/// A Namespace annotation ("" if none).
fn namespace_annotation(env: &LockEnv, ns: &str, key: &str) -> String {
    let key = key.replace('.', "\\.");
    env.cluster.kubectl_ok(&[
        "get",
        "namespace",
        ns,
        "-o",
        &format!("jsonpath={{.metadata.annotations.{key}}}"),
    ])
}

fn ready_message(env: &LockEnv, ns: &str, lock: &str) -> String {
    env.lock_field(
        ns,
        lock,
        r#"{.status.conditions[?(@.type=="Ready")].message}"#,
    )
}

fn is_gone(env: &LockEnv, resource: &str, name: &str, ns: &str) -> bool {
    let get = env
        .cluster
        .kubectl(&["get", resource, name, "-n", ns], None);
    String::from_utf8_lossy(&get.stderr).contains("NotFound")
}

async fn namespace_lock_holds(mode: GuardMode) {
    let env = LockEnv::start_with(mode, CHART);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("forge");
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

    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(&ns, "freeze", "v1", "Namespace", &ns, REASON)),
    );
    env.until_lock(&ns, "freeze", true, "Protecting").await;
    assert_eq!(
        ready_message(&env, &ns, "freeze"),
        format!("protecting every enforceable object in namespace {ns}")
    );
    assert_eq!(
        namespace_annotation(&env, &ns, "core.navique.com/namespace-locked"),
        "freeze"
    );
    assert_eq!(
        namespace_annotation(&env, &ns, "core.navique.com/namespace-lock-reasons"),
        format!("freeze: {REASON}")
    );
    eventually(WAIT, "the Protecting and TargetStamped Events", || async {
        let protecting = k.event_messages(&ns, "Protecting");
        let stamped = k.event_messages(&ns, "TargetStamped");
        (protecting.contains(&format!(
            "Normal protecting every enforceable object in namespace {ns}"
        )) && stamped.contains(&format!(
            "Normal stamped Namespace {ns} with core.navique.com/namespace-locked: deleting its enforceable objects is denied"
        )))
        .then_some(())
    })
    .await;

    // No object is stamped: the guard reads the Namespace.
    for (resource, name) in ENFORCEABLE {
        assert_eq!(env.marker(&[resource, name, "-n", &ns]), "", "{resource}");
    }

    // Every enforceable kind refuses deletion, naming the Lock and its reason.
    let denial = format!(
        "resource is protected by Lock(s) [freeze]; delete the Lock(s) before deleting this resource (reasons: freeze: {REASON})"
    );
    let prefix = match mode {
        GuardMode::Policy => {
            "ValidatingAdmissionPolicy 'navique-lock-guard-namespace-wide' with binding 'navique-lock-guard-namespace-wide' denied request: "
        }
        GuardMode::Webhook => "admission webhook \"locks.navique.com\" denied the request: ",
    };
    for (resource, name) in ENFORCEABLE {
        let err = k.kubectl_err(&["delete", resource, name, "-n", &ns], None);
        assert!(
            err.contains("Error from server (Forbidden): ")
                && err.contains(&format!("{prefix}{denial}")),
            "{resource}: {err}"
        );
    }

    // An object with a Lock of its own is denied naming that Lock, and the
    // Lock itself stays deletable; then the namespace-wide Lock holds it.
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: core.navique.com/v1alpha1\nkind: Stack\nmetadata: {{name: pinned, namespace: {ns}}}\nspec: {{resources: []}}\n"
        )),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "pin",
            "core.navique.com/v1alpha1",
            "Stack",
            "pinned",
            "pinned",
        )),
    );
    env.until_lock(&ns, "pin", true, "Protecting").await;
    let err = k.kubectl_err(&["delete", "stack", "pinned", "-n", &ns], None);
    assert!(
        err.contains(
            "resource is protected by Lock(s) [pin]; delete the Lock(s) before deleting this resource (reasons: pin: pinned)"
        ),
        "{err}"
    );
    k.kubectl_ok(&["delete", "lock", "pin", "-n", &ns]);
    let err = k.kubectl_err(&["delete", "stack", "pinned", "-n", &ns], None);
    assert!(err.contains(&denial), "{err}");

    // Objects of other kinds are deleted.
    for (resource, name) in OTHERS {
        k.kubectl_ok(&["delete", resource, name, "-n", &ns]);
    }

    // Side door, garbage collection: the owner goes, its namespace-locked
    // dependent stays.
    k.kubectl_ok(&["delete", "configmap", "owner", "-n", &ns]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !is_gone(&env, "stack", "child", &ns),
        "the namespace-locked Stack survives its owner's deletion"
    );

    // Side door, namespace deletion: refused while the Lock is there.
    let err = k.kubectl_err(&["delete", "namespace", &ns], None);
    assert!(
        err.contains(&format!(
            "namespace {ns} holds Lock(s) [freeze]; delete the Lock(s) before deleting this namespace"
        )),
        "{err}"
    );

    // Ownership by label: nobody but the lock-controller takes the marker
    // off the Namespace (here the cluster admin).
    let err = k.kubectl_err(
        &[
            "annotate",
            "namespace",
            &ns,
            "core.navique.com/namespace-locked-",
        ],
        None,
    );
    assert!(
        err.contains(
            "the core.navique.com/namespace-locked and core.navique.com/namespace-lock-reasons annotations are managed by the lock-controller; create or delete namespace-wide Locks instead"
        ),
        "{err}"
    );

    // Identity by name: a Lock naming another namespace locks nothing.
    let other = k.namespace("billing");
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: core.navique.com/v1alpha1\nkind: Stack\nmetadata: {{name: ledger, namespace: {other}}}\nspec: {{resources: []}}\n"
        )),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(&ns, "grab", "v1", "Namespace", &other, "")),
    );
    env.until_lock(&ns, "grab", false, "InvalidTarget").await;
    assert_eq!(
        ready_message(&env, &ns, "grab"),
        format!(
            "a Lock on a Namespace protects its own namespace only: targetRef.name is {other}, the Lock is in namespace {ns}"
        )
    );
    assert_eq!(
        namespace_annotation(&env, &other, "core.navique.com/namespace-locked"),
        ""
    );
    k.kubectl_ok(&["delete", "stack", "ledger", "-n", &other]);
    k.kubectl_ok(&["delete", "lock", "grab", "-n", &ns]);

    // Removing the Lock lifts it: the marker goes, the deletes pass, and
    // the orphaned Stack is collected.
    k.kubectl_ok(&["delete", "lock", "freeze", "-n", &ns]);
    assert_eq!(
        namespace_annotation(&env, &ns, "core.navique.com/namespace-locked"),
        "",
        "the finalizer holds the Lock until the marker is off"
    );
    eventually(WAIT, "the TargetCleared Event", || async {
        k.event_messages(&ns, "TargetCleared")
            .contains(&format!(
                "Normal cleared core.navique.com/namespace-locked from Namespace {ns}: no namespace-wide Lock protects its objects now"
            ))
            .then_some(())
    })
    .await;
    eventually(WAIT, "the unlocked orphan to be collected", || async {
        is_gone(&env, "stack", "child", &ns).then_some(())
    })
    .await;
    for (resource, name) in ENFORCEABLE {
        k.kubectl_ok(&["delete", resource, name, "-n", &ns]);
    }
    k.kubectl_ok(&["delete", "stack", "pinned", "-n", &ns]);
    k.kubectl_ok(&["delete", "namespace", &ns]);
}

#[tokio::test]
async fn a_namespace_lock_holds_every_enforceable_kind_with_the_policy_guard() {
    namespace_lock_holds(GuardMode::Policy).await;
}

#[tokio::test]
async fn a_namespace_lock_holds_every_enforceable_kind_with_the_webhook_guard() {
    namespace_lock_holds(GuardMode::Webhook).await;
}

/// Without `lockGuard.namespaceLocks` (the default), a Lock on its own
/// Namespace is InvalidTarget, saying how to enable it, and locks nothing.
async fn off_by_default(mode: GuardMode) {
    let env = LockEnv::start(mode);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("forge");
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: core.navique.com/v1alpha1\nkind: Stack\nmetadata: {{name: forge, namespace: {ns}}}\nspec: {{resources: []}}\n"
        )),
    );
    let applied = k.kubectl(
        &["apply", "-f", "-"],
        Some(&lock(&ns, "freeze", "v1", "Namespace", &ns, REASON)),
    );
    assert!(applied.status.success(), "{applied:?}");
    let message = format!(
        "namespace-wide Locks are not enabled: a Lock on Namespace {ns} would protect every enforceable object in it; to allow it, start the lock-controller with --namespace-locks and install the guard's namespace rules (Helm value lockGuard.namespaceLocks=true)"
    );
    if mode == GuardMode::Policy {
        // The lock-target policy warns at once.
        let warning = String::from_utf8_lossy(&applied.stderr).into_owned();
        assert!(
            warning.contains(&format!("Warning: Validation failed for ValidatingAdmissionPolicy 'navique-lock-target' with binding 'navique-lock-target': {message}")),
            "{warning}"
        );
    }
    env.until_lock(&ns, "freeze", false, "InvalidTarget").await;
    assert_eq!(ready_message(&env, &ns, "freeze"), message);
    eventually(WAIT, "the InvalidTarget Event", || async {
        k.event_messages(&ns, "InvalidTarget")
            .contains(&format!("Warning {message}"))
            .then_some(())
    })
    .await;
    assert_eq!(
        namespace_annotation(&env, &ns, "core.navique.com/namespace-locked"),
        ""
    );
    k.kubectl_ok(&["delete", "stack", "forge", "-n", &ns]);
}

#[tokio::test]
async fn without_the_opt_in_a_namespace_lock_is_invalid_with_the_policy_guard() {
    off_by_default(GuardMode::Policy).await;
}

#[tokio::test]
async fn without_the_opt_in_a_namespace_lock_is_invalid_with_the_webhook_guard() {
    off_by_default(GuardMode::Webhook).await;
}
