//! Deleting a namespace on the dev API server: its contents are deleted
//! through admission, new content is refused, and it goes when empty; an
//! object admission protects keeps it Terminating, and its conditions say so.

use std::time::Duration;

use navique_e2e::{cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);

async fn until_gone(ns: &str) {
    eventually(WAIT, &format!("namespace {ns} to go"), || async {
        (!cluster()
            .kubectl(&["get", "namespace", ns], None)
            .status
            .success())
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_deleted_namespace_empties_refuses_new_content_and_goes() {
    let ns = cluster().namespace("term");
    let held = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n  finalizers: [example.com/hold]\n"
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&held));
    cluster().kubectl_ok(&["create", "configmap", "plain", "-n", &ns]);
    cluster().kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);

    let phase = cluster().kubectl_ok(&["get", "namespace", &ns, "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Terminating");
    let err = cluster().kubectl_err(&["create", "configmap", "late", "-n", &ns], None);
    assert_eq!(
        err,
        format!(
            "error: failed to create configmap: configmaps \"late\" is forbidden: unable to create new content in namespace {ns} because it is being terminated\n"
        )
    );
    eventually(WAIT, "the finalizer to be reported", || async {
        let conditions = cluster().kubectl_ok(&["get", "namespace", &ns, "-o", "jsonpath={.status.conditions}"]);
        let conditions: Value = serde_json::from_str(&conditions).ok()?;
        let message = conditions.as_array()?.iter().find(|c| c["type"] == "NamespaceFinalizersRemaining")?["message"].clone();
        (message == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances").then_some(())
    })
    .await;
    cluster().kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        &ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    until_gone(&ns).await;
}

#[tokio::test]
async fn an_object_admission_protects_keeps_the_namespace_terminating_and_reported() {
    let ns = cluster().namespace("term-protected");
    cluster().deny_labelled_configmap_deletes(
        &format!("protect-{ns}"),
        &ns,
        "protected",
        "this ConfigMap is protected",
    );
    cluster().kubectl_ok(&["create", "configmap", "guarded", "-n", &ns]);
    cluster().kubectl_ok(&["label", "configmap", "guarded", "-n", &ns, "protected=yes"]);
    cluster().kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);

    let expected_failure = format!(
        "Failed to delete all resource types, 1 remaining: configmaps \"guarded\" is forbidden: ValidatingAdmissionPolicy 'protect-{ns}' with binding 'protect-{ns}' denied request: this ConfigMap is protected"
    );
    eventually(WAIT, "the denial to be reported", || async {
        let conditions = cluster().kubectl_ok(&[
            "get",
            "namespace",
            &ns,
            "-o",
            "jsonpath={.status.conditions}",
        ]);
        let conditions: Value = serde_json::from_str(&conditions).ok()?;
        let find = |t: &str| {
            conditions
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == t).cloned())
        };
        let failure = find("NamespaceDeletionContentFailure")?;
        let remaining = find("NamespaceContentRemaining")?;
        (failure["status"] == "True"
            && failure["message"] == expected_failure
            && remaining["message"]
                == "Some resources are remaining: configmaps has 1 resource instances")
            .then_some(())
    })
    .await;
    assert_eq!(
        cluster().kubectl_ok(&["get", "namespace", &ns, "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    cluster().kubectl_ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        &format!("protect-{ns}"),
    ]);
    until_gone(&ns).await;
}
