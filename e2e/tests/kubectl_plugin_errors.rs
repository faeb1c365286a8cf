//! The plugin's errors when Navique cannot be used: an API server that
//! does not answer is named, and a cluster without Navique's CRDs says so,
//! naming the CRD the command needs. Exact messages.

use navique_e2e::plugin::kubectl_navique;
use navique_e2e::{Cluster, free_port, write_kubeconfig};

#[test]
fn a_cluster_without_navique_says_which_crd_is_missing() {
    // A dev API server with no CRD installed.
    let cluster = Cluster::dev(&[]);
    let server = cluster.kubectl_ok(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let server = server.trim_end_matches('/');
    for (args, crd) in [
        (&["locks"][..], "locks.core.navique.com"),
        (&["approvals"], "stacks.core.navique.com"),
        (&["approve", "configmap/x"], "stacks.core.navique.com"),
    ] {
        let run = kubectl_navique(&cluster, cluster.kubeconfig(), args);
        assert_eq!(run.code, Some(1), "{args:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        assert_eq!(
            run.stderr,
            format!(
                "error: Navique is not installed on {server}/: the CustomResourceDefinition {crd} is missing (install Navique: README.md, \"Quick start\")\n"
            ),
            "{args:?}"
        );
    }
}

#[test]
fn an_unreachable_server_is_named() {
    let cluster = Cluster::dev(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("https://127.0.0.1:{port}"));
    let run = kubectl_navique(&cluster, &kubeconfig, &["locks"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot reach the Kubernetes API server https://127.0.0.1:{port}/: ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)\n"
        )
    );
}
