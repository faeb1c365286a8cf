//! The kubectl plugin as a user runs it: `kubectl navique ...`, kubectl
//! finding the built `kubectl-navique` on `PATH` and handing it the rest of
//! the command line and the environment.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Cluster, binary};

/// How a `kubectl navique` run ended.
#[derive(Debug)]
pub struct PluginRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `kubectl navique <args>` with `KUBECONFIG=<kubeconfig>` (kubectl
/// does not pass its own flags on to a plugin, and takes none before the
/// plugin's name) and the plugin's folder first on `PATH`.
pub fn kubectl_navique(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> PluginRun {
    let plugin = binary("kubectl-navique");
    let folder = plugin.parent().expect("the plugin is in a folder");
    let path: Vec<_> = std::iter::once(folder.to_path_buf())
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .collect();
    let (kubectl, _cache) = cluster.kubectl_command();
    let output = Command::new(kubectl.get_program())
        .arg("navique")
        .args(args)
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env("KUBECONFIG", kubeconfig)
        .env_remove("NAVIQUE_APPROVALS_URL")
        .env_remove("NAVIQUE_APPROVALS_CA_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("run kubectl navique");
    PluginRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// [`kubectl_navique`] as the cluster's admin; asserts success and returns
/// stdout.
pub fn kubectl_navique_ok(cluster: &Cluster, args: &[&str]) -> String {
    let run = kubectl_navique(cluster, cluster.kubeconfig(), args);
    assert_eq!(
        run.code,
        Some(0),
        "kubectl navique {} failed:\n{}{}",
        args.join(" "),
        run.stdout,
        run.stderr
    );
    run.stdout
}
