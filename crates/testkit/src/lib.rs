//! What the workspace's integration and end-to-end tests start and share,
//! kept in one place so that the test crates cannot drift apart: a
//! throwaway PostgreSQL ([`postgres`]), the dev API server ([`apiserver`]),
//! the workspace binaries as processes ([`Process`]), an S3 protocol server
//! ([`s3`]) and small helpers.
#![forbid(unsafe_code)]

pub mod apiserver;
pub mod postgres;
mod process;
pub mod s3;

pub use apiserver::DevApiServer;
pub use process::{Process, binary};

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("no free port on 127.0.0.1")
        .port()
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

/// A finished command's status and output, for a failure message.
pub fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The documents of a YAML file (a manifest of several objects), without
/// empty ones.
pub fn yaml_documents(path: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).expect("YAML"))
        .filter(|value: &serde_yaml::Value| !value.is_null())
        .collect()
}
