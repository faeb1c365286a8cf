//! The admission server over real TLS: a certificate from a throwaway CA,
//! AdmissionReviews posted with hyper-util's client over HTTP/1.1 and
//! HTTP/2, certificate rotation, graceful shutdown.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{Pki, Versions, client, fixture, locked_stack_denial, send};
use tokio_util::sync::CancellationToken;
use webhook::locks::{self, LockGuard};
use webhook::metrics::AdmissionMetrics;
use webhook::server::{Route, Server, router};
use webhook::services::{self, Cluster, DEFAULT_PROVIDER_GROUPS, ServiceGuard, Unavailable};
use webhook::tls::{CertificateFiles, ReloadingCertificate};

struct Running {
    addr: SocketAddr,
    certificate: Arc<ReloadingCertificate>,
    metrics: AdmissionMetrics,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    dir: tempfile::TempDir,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }
}

/// A cluster where namespace `closing` is being deleted and no plan exists.
struct FakeCluster;

impl Cluster for FakeCluster {
    fn namespace_terminating(&self, namespace: &str) -> Result<bool, Unavailable> {
        Ok(namespace == "closing")
    }

    fn plan(
        &self,
        _: &str,
    ) -> Result<Option<Arc<navique_api::services::ServicePlan>>, Unavailable> {
        Ok(None)
    }
}

async fn start(pki: &Pki) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let (certificate, key) = pki.write(dir.path());
    let certificate = ReloadingCertificate::load(CertificateFiles { certificate, key }).unwrap();
    let metrics = AdmissionMetrics::default();
    let routes = vec![
        Route {
            path: locks::PATH,
            validator: Arc::new(LockGuard {
                protect_namespaces: true,
                protect_marker: true,
                lock_controller_username:
                    "system:serviceaccount:navique-system:navique-lock-controller".to_owned(),
            }),
        },
        Route {
            path: services::PATH,
            validator: Arc::new(ServiceGuard {
                provider_groups: DEFAULT_PROVIDER_GROUPS.map(str::to_owned).to_vec(),
                cluster: Arc::new(FakeCluster),
            }),
        },
    ];
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        certificate.server_config().unwrap(),
        router(routes, metrics.clone()),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.serve(shutdown.clone()));
    Running {
        addr,
        certificate,
        metrics,
        shutdown,
        task,
        dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_delete_is_denied_over_http1_and_http2() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    for (versions, expected) in [
        (Versions::Http1, http::Version::HTTP_11),
        (Versions::Http1AndHttp2, http::Version::HTTP_2),
    ] {
        let client = client(&pki.ca_pem, versions);
        // As the API server calls it: with a timeout query parameter.
        let answer = send(
            &client,
            "POST",
            &server.url("/validate/locks?timeout=10s"),
            fixture("delete-locked-stack"),
        )
        .await
        .unwrap();
        assert_eq!(answer.version, expected);
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.content_type, "application/json");
        assert_eq!(answer.json(), locked_stack_denial());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_service_delete_is_denied_unless_its_project_goes() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    let client = client(&pki.ca_pem, Versions::Http1AndHttp2);
    let answer = send(
        &client,
        "POST",
        &server.url("/validate/services?timeout=10s"),
        fixture("delete-protected-service"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json(),
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": "c3b1e5a2-2d2e-4b66-8c1f-7d8e9fa0b101",
                "allowed": false,
                "status": {
                    "status": "Failure",
                    "code": 403,
                    "reason": "Forbidden",
                    "message": "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
                }
            }
        })
    );
    let closing = fixture("delete-protected-service").replace("\"shop\"", "\"closing\"");
    let answer = send(&client, "POST", &server.url(services::PATH), closing)
        .await
        .unwrap();
    assert_eq!(answer.json()["response"]["allowed"], true);

    let mut registry = prometheus_client::registry::Registry::with_prefix("navique_webhook");
    server.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"navique_webhook_admission_requests_total{path="/validate/services",operation="DELETE",allowed="false"} 1"#,
        r#"navique_webhook_admission_requests_total{path="/validate/services",operation="DELETE",allowed="true"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlocked_delete_is_allowed_with_its_uid() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    let client = client(&pki.ca_pem, Versions::Http1AndHttp2);
    let answer = send(
        &client,
        "POST",
        &server.url(locks::PATH),
        fixture("delete-unlocked-stack"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    let json = answer.json();
    assert_eq!(
        json["response"]["uid"],
        "b2a0d5b4-1c1e-4a55-9b0e-6c7d8e9f0a03"
    );
    assert_eq!(json["response"]["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_wrong_paths_and_methods_are_refused() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    let client = client(&pki.ca_pem, Versions::Http1);
    let answer = send(&client, "POST", &server.url(locks::PATH), "{")
        .await
        .unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (
            400,
            "the request body is not an AdmissionReview: EOF while parsing an object at line 1 column 1\n"
        )
    );
    // A review whose object cannot be read, but whose uid can, is denied
    // (fail closed whatever the failurePolicy), not failed with 400.
    let mut unreadable: serde_json::Value =
        serde_json::from_str(&fixture("delete-protected-service")).unwrap();
    unreadable["request"]["oldObject"]["metadata"]["annotations"] = serde_json::json!("zzz");
    let answer = send(
        &client,
        "POST",
        &server.url(services::PATH),
        unreadable.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(
        json["response"]["uid"],
        "c3b1e5a2-2d2e-4b66-8c1f-7d8e9fa0b101"
    );
    assert_eq!(json["response"]["allowed"], false);
    assert_eq!(json["response"]["status"]["code"], 400);
    // A DELETE without oldObject is denied on every route.
    for path in [locks::PATH, services::PATH] {
        let mut review: serde_json::Value =
            serde_json::from_str(&fixture("delete-protected-service")).unwrap();
        review["request"]["oldObject"] = serde_json::Value::Null;
        let answer = send(&client, "POST", &server.url(path), review.to_string())
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(
            json["response"]["status"]["message"],
            "malformed admission request: a DELETE without oldObject; the request is refused",
            "{path}"
        );
    }
    let answer = send(
        &client,
        "POST",
        &server.url("/validate/nothing"),
        fixture("delete-locked-stack"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 404);
    let answer = send(&client, "GET", &server.url(locks::PATH), "")
        .await
        .unwrap();
    assert_eq!(answer.status, 405);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_counted_and_timed() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    let client = client(&pki.ca_pem, Versions::Http1);
    for name in [
        "delete-locked-stack",
        "delete-locked-stack",
        "delete-unlocked-stack",
    ] {
        send(&client, "POST", &server.url(locks::PATH), fixture(name))
            .await
            .unwrap();
    }
    send(&client, "POST", &server.url(locks::PATH), "{")
        .await
        .unwrap();
    let mut registry = prometheus_client::registry::Registry::with_prefix("navique_webhook");
    server.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"navique_webhook_admission_requests_total{path="/validate/locks",operation="DELETE",allowed="false"} 2"#,
        r#"navique_webhook_admission_requests_total{path="/validate/locks",operation="DELETE",allowed="true"} 1"#,
        r#"navique_webhook_admission_duration_seconds_count{path="/validate/locks"} 3"#,
        "# TYPE navique_webhook_admission_duration_seconds histogram",
        "# UNIT navique_webhook_admission_duration_seconds seconds",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_to_new_connections() {
    let first = Pki::generate();
    let server = start(&first).await;
    let rotated = Pki::generate();
    rotated.write(server.dir.path());
    assert!(server.certificate.reload().unwrap());

    let answer = send(
        &client(&rotated.ca_pem, Versions::Http1AndHttp2),
        "POST",
        &server.url(locks::PATH),
        fixture("delete-locked-stack"),
    )
    .await
    .unwrap();
    assert_eq!(answer.json(), locked_stack_denial());
    // A client that trusts only the old CA no longer connects.
    let error = send(
        &client(&first.ca_pem, Versions::Http1AndHttp2),
        "POST",
        &server.url(locks::PATH),
        fixture("delete-locked-stack"),
    )
    .await
    .unwrap_err();
    let chain = std::iter::successors(Some(&error as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .map(ToString::to_string)
    .collect::<Vec<_>>()
    .join(": ");
    assert!(chain.contains("invalid peer certificate"), "{chain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_accepting_and_returns() {
    let pki = Pki::generate();
    let server = start(&pki).await;
    let client = client(&pki.ca_pem, Versions::Http1);
    // A kept-alive idle connection does not hold up the shutdown.
    send(
        &client,
        "POST",
        &server.url(locks::PATH),
        fixture("delete-unlocked-stack"),
    )
    .await
    .unwrap();
    server.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("the server stops within 5 s")
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(server.addr).await.is_err(),
        "still accepting"
    );
}
