//! Side doors to ServiceBackup records and retained objects, end to end: a
//! dev API server with RBAC authorization, the chart's Project roles and the
//! real webhook behind the chart's webhook configuration. In each test's
//! Project bob is bound to `edit` and acts with his own token; the provider
//! is the dev admin.
//!
//! The attack (side door through a trusted group): a record with an
//! ownerReference to a Project's ConfigMap is deleted by the garbage
//! collector, a kube-system service account and so in the provider groups,
//! once the Project deletes the ConfigMap.

use std::sync::OnceLock;
use std::time::Duration;

use navique_api::messages;
use navique_e2e::locks::{helm_template, start_webhook};
use navique_e2e::{Cluster, Process, eventually, free_port};

struct Env {
    cluster: Cluster,
    _webhook: Process,
    _dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cluster = Cluster::dev(&[
            "--authorization",
            "rbac",
            &format!("--webhook-service=navique-system/navique-webhook=127.0.0.1:{port}"),
        ]);
        cluster.install_crds();
        cluster.kubectl_ok(&["create", "namespace", "navique-system"]);
        let roles = helm_template(&["--show-only", "templates/project-roles.yaml"]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&roles));
        cluster.add_user("bob", &[]);
        let (webhook, ca_bundle) = start_webhook(&cluster, &dir, port);
        let configuration = helm_template(&[
            "--set",
            &format!("webhook.caBundle={ca_bundle}"),
            "--show-only",
            "templates/services-webhook.yaml",
        ]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&configuration));
        Env {
            cluster,
            _webhook: webhook,
            _dir: dir,
        }
    })
}

/// A Project with bob as editor, and bob's ConfigMap `anchor` in it; returns
/// the namespace and the ConfigMap's uid.
fn project_with_anchor(prefix: &str) -> (String, String) {
    let k = &env().cluster;
    let ns = k.namespace(prefix);
    k.bind_role(&ns, "bob", "edit");
    k.kubectl_ok(&[
        "create",
        "configmap",
        "anchor",
        "-n",
        &ns,
        "--token",
        "bob-token",
    ]);
    let uid = k.kubectl_ok(&[
        "get",
        "configmap",
        "anchor",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    (ns, uid)
}

/// `metadata.ownerReferences` naming the ConfigMap `anchor`.
fn owned_by_anchor(uid: &str) -> String {
    format!(
        "  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: anchor, uid: {uid}}}\n"
    )
}

/// A manual ServiceBackup record, with `extra_metadata` under metadata.
fn manual_backup(ns: &str, extra_metadata: &str) -> String {
    format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata:\n  name: manual-1\n  namespace: {ns}\n{extra_metadata}spec:\n  serviceRef: {{name: orders-db}}\n  origin: Manual\n"
    )
}

/// A Secret labelled retained, with `extra_metadata` under metadata.
fn retained_secret(ns: &str, extra_metadata: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: orders-db-credentials\n  namespace: {ns}\n  labels: {{services.kube-dc.com/retained: \"true\"}}\n{extra_metadata}stringData: {{password: x}}\n"
    )
}

fn exists(ns: &str, what: &str) -> bool {
    env()
        .cluster
        .kubectl(&["get", what, "-n", ns], None)
        .status
        .success()
}

#[test]
fn a_project_editor_cannot_create_a_backup_record_with_an_owner_nor_mark_objects_retained() {
    let k = &env().cluster;
    let (ns, uid) = project_with_anchor("plant");
    // Side door: the record would go with bob's ConfigMap.
    let err = k.kubectl_err(
        &["create", "-f", "-", "--token", "bob-token"],
        Some(&manual_backup(&ns, &owned_by_anchor(&uid))),
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"managedservices.navique.com\" denied the request: {}\n",
            messages::BACKUP_RECORD_OWNER_REFERENCES
        )
    );
    assert_eq!(
        messages::BACKUP_RECORD_OWNER_REFERENCES,
        "metadata.ownerReferences: ServiceBackup records have no owner; they are kept by the platform and removed with their Project"
    );
    // Ownership by label: only the platform marks objects retained.
    let err = k.kubectl_err(
        &["create", "-f", "-", "--token", "bob-token"],
        Some(&retained_secret(&ns, "")),
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"retained.navique.com\" denied the request: {}\n",
            messages::RETAINED_LABEL_RESERVED
        )
    );
    // Without the owner, bob records his manual backup.
    assert_eq!(
        k.kubectl_in(
            &["create", "-f", "-", "--token", "bob-token"],
            Some(&manual_backup(&ns, ""))
        ),
        "servicebackup.services.kube-dc.com/manual-1 created\n"
    );
}

#[tokio::test]
async fn the_garbage_collector_keeps_owned_records_and_retained_objects_until_the_project_goes() {
    let k = &env().cluster;
    let (ns, uid) = project_with_anchor("gc");
    // The provider may record an owner (or one was planted before the
    // webhook refused it): the garbage collector still cannot use it.
    k.kubectl_in(
        &["create", "-f", "-"],
        Some(&manual_backup(&ns, &owned_by_anchor(&uid))),
    );
    k.kubectl_in(
        &["create", "-f", "-"],
        Some(&retained_secret(&ns, &owned_by_anchor(&uid))),
    );
    k.kubectl_ok(&[
        "delete",
        "configmap",
        "anchor",
        "-n",
        &ns,
        "--token",
        "bob-token",
    ]);
    // The collector, acting through admission as
    // system:serviceaccount:kube-system:generic-garbage-collector, is
    // refused both deletes and retries them.
    for resource in ["servicebackups.services.kube-dc.com", "secrets"] {
        eventually(
            Duration::from_secs(20),
            &format!("the garbage collector's delete of {resource} in {ns} to be refused"),
            || async {
                k.dev_log()
                    .lines()
                    .any(|line| {
                        line.contains("garbage collection denied")
                            && line.contains(&ns)
                            && line.contains(resource)
                            && line.contains(messages::GARBAGE_COLLECTION_REFUSED)
                    })
                    .then_some(())
            },
        )
        .await;
    }
    assert!(exists(&ns, "servicebackup/manual-1"));
    assert!(exists(&ns, "secret/orders-db-credentials"));

    // Deleting the Project still removes them.
    k.kubectl_ok(&["delete", "namespace", &ns, "--timeout", "30s"]);
    assert!(!k.kubectl(&["get", "namespace", &ns], None).status.success());
    assert!(!exists(&ns, "servicebackup/manual-1"));
    assert!(!exists(&ns, "secret/orders-db-credentials"));
}
