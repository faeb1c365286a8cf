//! The kubectl plugin as a user runs it: `kubectl navique ...`, kubectl
//! finding the built `kubectl-navique` on `PATH` and handing it the rest of
//! the command line and the environment.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

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
    let output = command(cluster, kubeconfig, args)
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

pub(crate) fn command(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> Command {
    let plugin = binary("kubectl-navique");
    let folder = plugin.parent().expect("the plugin is in a folder");
    let path: Vec<_> = std::iter::once(folder.to_path_buf())
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .collect();
    let (kubectl, _cache) = cluster.kubectl_command();
    let mut command = Command::new(kubectl.get_program());
    command
        .arg("navique")
        .args(args)
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env("KUBECONFIG", kubeconfig);
    command
}

/// A running `kubectl navique approvals --watch` and the lines it printed.
pub struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    /// Starts `kubectl navique approvals --watch <args>` as the admin,
    /// following the ApprovalEvents server at `url`, whose certificate
    /// `ca_file` verifies.
    pub fn start(cluster: &Cluster, url: &str, ca_file: &Path, args: &[&str]) -> Self {
        Self::start_as(cluster, cluster.kubeconfig(), url, ca_file, args)
    }

    /// [`Watch::start`] as the user of `kubeconfig`.
    pub fn start_as(
        cluster: &Cluster,
        kubeconfig: &Path,
        url: &str,
        ca_file: &Path,
        args: &[&str],
    ) -> Self {
        Self::spawn(cluster, kubeconfig, Some((url, ca_file)), args)
    }

    /// `kubectl navique approvals --watch <args>` as the admin, without the
    /// service's address: through the API server.
    pub fn through_api_server(cluster: &Cluster, args: &[&str]) -> Self {
        Self::spawn(cluster, cluster.kubeconfig(), None, args)
    }

    fn spawn(
        cluster: &Cluster,
        kubeconfig: &Path,
        service: Option<(&str, &Path)>,
        args: &[&str],
    ) -> Self {
        let all: Vec<&str> = ["approvals", "--watch"]
            .iter()
            .copied()
            .chain(args.iter().copied())
            .collect();
        let mut command = command(cluster, kubeconfig, &all);
        match service {
            Some((url, ca_file)) => command
                .env("NAVIQUE_APPROVALS_URL", url)
                .env("NAVIQUE_APPROVALS_CA_FILE", ca_file),
            None => command
                .env_remove("NAVIQUE_APPROVALS_URL")
                .env_remove("NAVIQUE_APPROVALS_CA_FILE"),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubectl navique approvals --watch");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line printed, within `wait`.
    pub fn next_line(&self, wait: Duration) -> String {
        self.lines
            .recv_timeout(wait)
            .expect("kubectl navique approvals --watch printed a line in time")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
