//! The `webhook` binary as a process: start-up failures, admission served
//! while the API server is not answering yet, readiness, metrics, SIGTERM.

mod common;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Pki, Versions, client, fixture, locked_stack_denial, send};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use navique_testkit::free_port;

/// The binary, its output in files; killed when dropped.
struct Process {
    child: Child,
    dir: tempfile::TempDir,
}

impl Process {
    fn spawn(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_webhook"))
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        Self { child, dir }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap()
    }

    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {timeout:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.wait(timeout)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\nusers:\n- name: test\n  user:\n    token: test\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\n"
        ),
    )
    .unwrap();
    path
}

/// `GET http://addr/path`: status and body, or None when nothing answers.
async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client
        .get(format!("http://{addr}{path}").parse().unwrap())
        .await
        .ok()?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Polls `GET addr/path` until it answers `status` and `body`.
async fn wait_for(process: &Process, addr: &str, path: &str, status: u16, body: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = None;
    while Instant::now() < deadline {
        last = get(addr, path).await;
        if last
            .as_ref()
            .is_some_and(|(s, b)| *s == status && b == body)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{path} answered {last:?}, not {status} {body:?}; stderr:\n{}",
        process.stderr()
    );
}

/// Answers as an API server does: `GET /version`, empty lists of Namespaces
/// (metadata) and ServicePlans, and watches that never send an event; 404 to
/// anything else.
async fn serve_api(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |request: hyper::Request<hyper::body::Incoming>| async move {
                    let watch = request
                        .uri()
                        .query()
                        .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
                    let (status, body) = match request.uri().path() {
                        "/version" => (
                            200,
                            r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#,
                        ),
                        "/api/v1/namespaces"
                        | "/apis/services.kube-dc.com/v1alpha1/serviceplans"
                            if watch =>
                        {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            (200, "")
                        }
                        "/api/v1/namespaces" => (
                            200,
                            r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"1"},"items":[]}"#,
                        ),
                        "/apis/services.kube-dc.com/v1alpha1/serviceplans" => (
                            200,
                            r#"{"apiVersion":"services.kube-dc.com/v1alpha1","kind":"ServicePlanList","metadata":{"resourceVersion":"1"},"items":[]}"#,
                        ),
                        _ => (404, "{}"),
                    };
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(body.as_bytes())))
                            .unwrap(),
                    )
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[test]
fn a_missing_certificate_file_stops_the_webhook_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let certificate = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    let mut process = Process::spawn(&[
        "--admin-addr",
        "127.0.0.1:0",
        "--listen-addr",
        "127.0.0.1:0",
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
    ]);
    assert_eq!(process.wait(Duration::from_secs(10)).code(), Some(1));
    assert_eq!(
        process.stderr(),
        format!(
            "error: cannot read TLS certificate file {}: No such file or directory (os error 2)\n",
            certificate.display()
        )
    );
}

#[test]
fn self_managed_tls_that_cannot_work_stops_the_webhook_with_one_line() {
    // Without a kubeconfig: it stops before looking for a cluster.
    let mut process = Process::spawn(&[
        "--admin-addr",
        "127.0.0.1:0",
        "--tls-secret",
        "navique-webhook-tls",
        "--tls-dns-names",
        "navique-webhook.navique-system.svc",
        "--cert-validity-days",
        "30",
        "--cert-renew-before-days",
        "30",
    ]);
    assert_eq!(process.wait(Duration::from_secs(10)).code(), Some(1));
    assert_eq!(
        process.stderr(),
        "error: self-managed TLS (--tls-secret navique-webhook-tls): the renewal before expiry (30 days) must be shorter than the certificate validity (30 days)\n"
    );
}

#[test]
fn a_taken_listen_port_stops_the_webhook_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (certificate, key) = Pki::generate().write(dir.path());
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{}", free_port()));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut process = Process::spawn(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--admin-addr",
        "127.0.0.1:0",
        "--listen-addr",
        &addr,
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--log-format",
        "json",
        "--log-level",
        "off",
    ]);
    assert_eq!(process.wait(Duration::from_secs(10)).code(), Some(1));
    assert_eq!(
        process.stderr(),
        format!(
            "error: cannot listen on webhook address {addr}: Address already in use (os error 98)\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_is_served_before_the_api_server_answers_and_stops_on_sigterm() {
    let pki = Pki::generate();
    let dir = tempfile::tempdir().unwrap();
    let (certificate, key) = pki.write(dir.path());
    let api_port = free_port();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{api_port}"));
    let admin = format!("127.0.0.1:{}", free_port());
    let listen = format!("127.0.0.1:{}", free_port());
    let mut process = Process::spawn(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--admin-addr",
        &admin,
        "--listen-addr",
        &listen,
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
    ]);

    // Listening, not connected yet: the tls check passed, kube-api and the
    // caches not.
    wait_for(
        &process,
        &admin,
        "/readyz",
        503,
        "not ready: caches, kube-api\n",
    )
    .await;
    let client = client(&pki.ca_pem, Versions::Http1AndHttp2);
    let answer = send(
        &client,
        "POST",
        &format!("https://{listen}/validate/locks"),
        fixture("delete-locked-stack"),
    )
    .await
    .unwrap();
    assert_eq!(answer.json(), locked_stack_denial());
    // A delete of a protected service needs the namespace cache: refused
    // until it is synced, never allowed.
    let services = format!("https://{listen}/validate/services");
    let answer = send(
        &client,
        "POST",
        &services,
        fixture("delete-protected-service"),
    )
    .await
    .unwrap();
    assert_eq!(
        answer.json()["response"],
        serde_json::json!({
            "uid": "c3b1e5a2-2d2e-4b66-8c1f-7d8e9fa0b101",
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 500,
                "reason": "InternalError",
                "message": "cannot look up namespace \"shop\": the webhook's caches of Namespaces and ServicePlans are not synced yet; the request is refused until it can be checked"
            }
        })
    );

    let api = tokio::net::TcpListener::bind(("127.0.0.1", api_port))
        .await
        .unwrap();
    tokio::spawn(serve_api(api));
    wait_for(&process, &admin, "/readyz", 200, "ok\n").await;
    // Synced: namespace shop is not being deleted, so the protection holds;
    // and no ServicePlan exists.
    let answer = send(
        &client,
        "POST",
        &services,
        fixture("delete-protected-service"),
    )
    .await
    .unwrap();
    assert_eq!(
        answer.json()["response"]["status"]["message"],
        "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
    );
    let answer = send(&client, "POST", &services, fixture("create-service"))
        .await
        .unwrap();
    assert_eq!(
        answer.json()["response"]["status"]["message"],
        "spec.planRef.name: ServicePlan \"postgresql-platform-ha\" not found"
    );

    let (_, metrics) = get(&admin, "/metrics").await.unwrap();
    assert!(
        metrics.lines().any(|l| l
            == r#"navique_webhook_admission_requests_total{path="/validate/locks",operation="DELETE",allowed="false"} 1"#),
        "{metrics}"
    );

    assert!(
        process.terminate(Duration::from_secs(15)).success(),
        "{}",
        process.stderr()
    );
    assert!(
        !process.stderr().contains("panicked"),
        "{}",
        process.stderr()
    );
}
