//! Owner references on the dev API server: background and foreground
//! deletion remove dependents, orphaning keeps them without the reference,
//! and a dependent whose delete admission denies stays and is retried.

use std::time::Duration;

use navique_e2e::{cluster, eventually};

const WAIT: Duration = Duration::from_secs(20);

/// An owner ConfigMap and `count` dependents pointing at it.
fn family(ns: &str, count: usize, block: bool) {
    cluster().kubectl_ok(&["create", "configmap", "owner", "-n", ns]);
    let uid = cluster().kubectl_ok(&[
        "get",
        "configmap",
        "owner",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    for i in 0..count {
        let manifest = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child-{i}\n  namespace: {ns}\n  labels: {{family: owner}}\n  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: owner\n    uid: {uid}\n    blockOwnerDeletion: {block}\n"
        );
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    }
}

fn configmaps(ns: &str) -> Vec<String> {
    cluster()
        .kubectl_ok(&[
            "get",
            "configmaps",
            "-n",
            ns,
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

async fn until_configmaps(ns: &str, expected: &[&str]) {
    eventually(
        WAIT,
        &format!("configmaps in {ns} to be {expected:?}"),
        || async { (configmaps(ns) == expected).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn background_deletion_removes_the_dependents() {
    let ns = cluster().namespace("gc-bg");
    family(&ns, 2, false);
    cluster().kubectl_ok(&["delete", "configmap", "owner", "-n", &ns]);
    until_configmaps(&ns, &[]).await;
}

#[tokio::test]
async fn foreground_deletion_holds_the_owner_until_its_blocking_dependents_are_gone() {
    let ns = cluster().namespace("gc-fg");
    family(&ns, 2, true);
    cluster().kubectl_ok(&[
        "delete",
        "configmap",
        "owner",
        "-n",
        &ns,
        "--cascade=foreground",
        "--wait=false",
    ]);
    until_configmaps(&ns, &[]).await;
}

#[tokio::test]
async fn orphaning_keeps_the_dependents_without_the_owner_reference() {
    let ns = cluster().namespace("gc-orphan");
    family(&ns, 2, false);
    cluster().kubectl_ok(&[
        "delete",
        "configmap",
        "owner",
        "-n",
        &ns,
        "--cascade=orphan",
    ]);
    until_configmaps(&ns, &["child-0", "child-1"]).await;
    let refs = cluster().kubectl_ok(&[
        "get",
        "configmaps",
        "-n",
        &ns,
        "-o",
        "jsonpath={.items[*].metadata.ownerReferences}",
    ]);
    assert_eq!(refs, "");
}

#[tokio::test]
async fn a_dependent_whose_delete_is_denied_stays_and_is_retried() {
    let ns = cluster().namespace("gc-denied");
    cluster().deny_labelled_configmap_deletes(&format!("keep-{ns}"), &ns, "keep", "kept");
    family(&ns, 2, false);
    cluster().kubectl_ok(&["label", "configmap", "child-1", "-n", &ns, "keep=yes"]);
    cluster().kubectl_ok(&["delete", "configmap", "owner", "-n", &ns]);
    until_configmaps(&ns, &["child-1"]).await;
    // Still there after several retries.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(configmaps(&ns), ["child-1"]);
    cluster().kubectl_ok(&["label", "configmap", "child-1", "-n", &ns, "keep-"]);
    until_configmaps(&ns, &[]).await;
}
