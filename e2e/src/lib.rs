//! The end-to-end harness: starts the workspace's real binaries as processes
//! and talks to them over the network, as a cluster would.
#![forbid(unsafe_code)]

pub mod browser;
mod cluster;
pub mod lock_scenarios;
pub mod locks;
pub mod plugin;
pub mod readable;
pub mod services;
pub mod stacks;
mod webhook;
pub use cluster::{Cluster, PROJECT_MEMBERS, cluster};
// The harness shared with the crates' integration tests, where the tests
// here have always found it.
pub use navique_testkit::{Process, binary, eventually, free_port, repo_root, s3};
pub use webhook::WebhookServer;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// A kubeconfig that points at `server` with a bearer token.
pub fn write_kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let body = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\nusers:\n- name: e2e\n  user:\n    token: e2e-token\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n    namespace: default\ncurrent-context: e2e\n"
    );
    std::fs::write(&path, body).expect("write kubeconfig");
    path
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
