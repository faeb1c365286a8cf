//! The workspace's binaries as processes, their output in files, killed
//! when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
        "{} is missing: run `cargo build --workspace --bins` (make test does) before these tests",
        path.display()
    );
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
        Self::spawn_env(name, args, &[])
    }

    /// [`Process::spawn`] with `env` added to the environment.
    pub fn spawn_env(name: &str, args: &[&str], env: &[(String, String)]) -> Self {
        Self::spawn_command(binary(name), name, args, env)
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
