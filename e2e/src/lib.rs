//! The end-to-end harness: starts the workspace's real binaries as processes
//! and talks to them over the network, as a cluster would.
#![forbid(unsafe_code)]

mod cluster;
pub mod lock_scenarios;
pub mod locks;
pub mod plugin;
pub mod readable;
pub mod s3;
pub mod services;
pub mod stacks;
mod webhook;
pub use cluster::{Cluster, PROJECT_MEMBERS, cluster, repo_root};
pub use webhook::WebhookServer;

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The components, as their binaries are named.
pub const COMPONENTS: [&str; 4] = [
    "lock-controller",
    "service-lifecycle-controller",
    "backup-runner",
    "webhook",
];

/// The components that elect a leader.
pub const CONTROLLERS: [&str; 2] = ["lock-controller", "service-lifecycle-controller"];

/// Path of a workspace binary, next to the test executable's `deps/` folder.
/// `make test` builds them first.
pub fn binary(name: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("test executable path");
    let profile_dir = test_exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in <target>/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` (make test does) before the end-to-end tests",
        path.display()
    );
    path
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// A kubeconfig that points at `server` with a bearer token.
pub fn write_kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let body = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\nusers:\n- name: e2e\n  user:\n    token: e2e-token\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n    namespace: default\ncurrent-context: e2e\n"
    );
    std::fs::write(&path, body).expect("write kubeconfig");
    path
}

/// A running binary whose output goes to files; killed when dropped.
pub struct Process {
    name: String,
    child: Option<Child>,
    /// Started by [`Process::spawn_tied`]: `child` is the watching shell.
    tied: bool,
    dir: tempfile::TempDir,
}

impl Process {
    /// Starts `name` with `args`.
    pub fn spawn(name: &str, args: &[&str]) -> Self {
        Self::spawn_command(binary(name), name, args, &[])
    }

    /// Kills the binary with SIGKILL (no shutdown of any kind, as when a
    /// node dies) and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("process already reaped");
        if self.tied {
            // The binary is the shell's child; the shell exits once it is gone.
            let status = Command::new("pkill")
                .args(["-KILL", "-P", &child.id().to_string()])
                .status()
                .expect("run pkill");
            if !status.success() {
                // The binary already exited: the shell follows.
                let _ = child.kill();
            }
        } else {
            let _ = child.kill();
        }
        let _ = child.wait();
    }

    fn spawn_command(
        program: impl AsRef<std::ffi::OsStr>,
        name: &str,
        args: &[&str],
        env: &[(String, String)],
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let stdout = std::fs::File::create(dir.path().join("stdout")).expect("stdout file");
        let stderr = std::fs::File::create(dir.path().join("stderr")).expect("stderr file");
        let child = Command::new(program)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Self {
            name: name.to_owned(),
            child: Some(child),
            tied: false,
            dir,
        }
    }

    /// Starts `name` with `args` so that it ends when this test process
    /// does, even if it is never dropped (a process shared by a test
    /// binary's tests): a shell watches both and stops the child.
    pub fn spawn_tied(name: &str, args: &[&str]) -> Self {
        Self::spawn_tied_env(name, args, &[])
    }

    /// [`Process::spawn_tied`] with `env` added to the environment.
    pub fn spawn_tied_env(name: &str, args: &[&str], env: &[(String, String)]) -> Self {
        let watchdog = format!(
            r#""$0" "$@" & child=$!
trap 'kill -TERM $child 2>/dev/null; wait $child; exit' TERM
while kill -0 {parent} 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.5; done
kill -TERM $child 2>/dev/null; wait $child"#,
            parent = std::process::id()
        );
        let binary = binary(name);
        let mut all = vec![
            "-c",
            watchdog.as_str(),
            binary.to_str().expect("utf-8 path"),
        ];
        all.extend_from_slice(args);
        let mut process = Self::spawn_command("/bin/sh", name, &all, env);
        process.tied = true;
        process
    }

    /// The binary's process id: for a process started by
    /// [`Process::spawn_tied`], that of the binary the watching shell started.
    pub fn pid(&self) -> u32 {
        let child = self.child.as_ref().expect("process already reaped").id();
        if !self.tied {
            return child;
        }
        let binary = binary(&self.name);
        std::fs::read_to_string(format!("/proc/{child}/task/{child}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .find(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == binary))
            .unwrap_or_else(|| panic!("{} is not running", self.name))
    }

    /// What the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stdout")).unwrap_or_default()
    }

    /// What the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Waits for the process to exit on its own.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("process already reaped");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("poll child") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {timeout:?}; stdout:\n{}\nstderr:\n{}",
                self.name,
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        let pid = self.child.as_ref().expect("process already reaped").id();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        self.wait(timeout)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.is_some() {
            if self.tied {
                // Killing the watching shell alone would orphan the binary.
                self.kill();
            } else if let Some(child) = self.child.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// An HTTP response as the tests look at it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// `GET http://<addr><path>`.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<Response, String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri = format!("http://{addr}{path}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let response = client.get(uri).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Response {
        status,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Polls `probe` until it returns `Some`, failing the test with `what` after
/// `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the component whose admin server is `admin` is ready and
/// leads (its `navique_<component>_leader` gauge is 1).
pub async fn until_leading(admin: SocketAddr, component: &str, wait: Duration) {
    wait_for_status(admin, "/readyz", 200, wait).await;
    let gauge = format!("navique_{}_leader 1\n", component.replace('-', "_"));
    eventually(wait, &format!("the {component} to lead"), || async {
        let metrics = http_get(admin, "/metrics").await.ok()?;
        metrics.body.contains(&gauge).then_some(())
    })
    .await;
}

/// Polls `GET <path>` until it answers `status`; returns that response.
pub async fn wait_for_status(
    addr: SocketAddr,
    path: &str,
    status: u16,
    timeout: Duration,
) -> Response {
    eventually(
        timeout,
        &format!("GET {path} on {addr} to answer {status}"),
        || async {
            http_get(addr, path)
                .await
                .ok()
                .filter(|r| r.status == status)
        },
    )
    .await
}
