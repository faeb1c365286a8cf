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

/// Where [`free_port`] looks: below the kernel's ephemeral range (Linux:
/// 32768 and up), from which every outgoing connection (each kubectl call
/// opens some) takes its local port. A port from that range can be taken
/// by one between the test choosing it and the server binding it, and the
/// server then fails with "address in use".
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A port nobody listens on right now, never handed out before by this
/// process, and outside the ephemeral range ([`TEST_PORTS`]).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    for _ in 0..10_000 {
        let random = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            Instant::now(),
        );
        let port = TEST_PORTS.start + u16::try_from(random % span).expect("within the span");
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {TEST_PORTS:?}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: std::collections::BTreeSet<u16> = (0..200).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 200);
        for port in ports {
            assert!(TEST_PORTS.contains(&port), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("bindable");
        }
    }
}
