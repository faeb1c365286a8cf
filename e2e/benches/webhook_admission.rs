//! Admission latency and throughput of the real webhook for ManagedService
//! DELETE reviews over TLS, and its memory and CPU while serving them.
//!
//! The webhook (release build) runs against a dev API server holding the
//! CRDs, a Namespace and a ServicePlan, so that its caches are synced and a
//! protected delete takes the full path: parse, namespace lookup, denial,
//! log line, metrics. Reviews are posted straight to `/validate/services`,
//! half of them protected (denied), half not (allowed), by 16 concurrent
//! clients: once over HTTP/2 on one connection, as kube-apiserver calls
//! webhooks, and once over 16 HTTP/1.1 connections.
//!
//! The floor, in the same run: a bare TLS server (rustls and hyper, as the
//! webhook uses, on a runtime of its own) answering every request with one
//! fixed AdmissionReview, to the same clients over the same protocols. The
//! ratio is the webhook's p99 over the floor's.
//!
//! Run: `make bench-webhook` (`cargo bench -p navique-e2e --bench
//! webhook_admission`; needs the workspace binaries built in release:
//! `cargo build --release --bins`). Figures are recorded in
//! docs/managed-services.md.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use navique_api::messages::{DELETION_PROTECTION_ENABLED, deletion_warning};
use navique_api::services::DeletionPolicy;
use navique_e2e::{Cluster, Process, free_port, repo_root, wait_for_status};
use serde_json::{Value, json};

const CLIENTS: usize = 16;
const WARM_UP: usize = 2_000;
const REQUESTS: usize = 40_000;
/// The name of the floor server's threads.
const FLOOR_THREAD: &str = "floor";

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

#[derive(Clone, Copy)]
enum Protocol {
    /// One connection, the clients' requests multiplexed on it.
    Http2,
    /// One connection per client.
    Http1,
}

/// What the bench needs of the running webhook.
struct Webhook {
    url: String,
    admin: SocketAddr,
    pid: u32,
    tls: rustls::ClientConfig,
    namespace: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir()?;
    let cluster = Cluster::dev(&[]);
    cluster.install_crds();
    let catalogue = repo_root().join("deploy/examples/catalogue.yaml");
    cluster.kubectl_ok(&["apply", "-f", catalogue.to_str().unwrap()]);
    let namespace = cluster.namespace("bench");

    let (tls, server_tls, cert_file, key_file) = certificate(dir.path())?;
    let floor_url = format!(
        "https://{}/validate/services?timeout=10s",
        bare_tls_server(server_tls)?
    );
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
    // A direct child, so that dropping it (on any exit, error or panic)
    // kills the webhook itself rather than a watchdog shell.
    let process = Process::spawn(
        "webhook",
        &[
            "--kubeconfig",
            cluster.kubeconfig().to_str().unwrap(),
            "--admin-addr",
            &admin.to_string(),
            "--listen-addr",
            &listen.to_string(),
            "--tls-cert-file",
            &cert_file,
            "--tls-key-file",
            &key_file,
        ],
    );
    // Ready means listening with both caches synced.
    wait_for_status(admin, "/readyz", 200, Duration::from_secs(30)).await;
    let pid = webhook_pid(&cert_file)
        .ok_or_else(|| anyhow::anyhow!("webhook process not found:\n{}", process.stderr()))?;
    let webhook = Webhook {
        url: format!("https://{listen}/validate/services?timeout=10s"),
        admin,
        pid,
        tls,
        namespace,
    };

    let idle = memory(webhook.admin).await?;
    println!(
        "webhook idle (caches synced): resident {:.1} MiB",
        mib(idle.resident)
    );
    let mut reviews = 0;
    for (protocol, name) in [
        (Protocol::Http2, "HTTP/2, 1 connection"),
        (Protocol::Http1, "HTTP/1.1, 16 connections"),
    ] {
        // Clones of one client share its connection; separate clients do not.
        let clients: Vec<HttpsClient> = match protocol {
            Protocol::Http2 => vec![https_client(&webhook.tls, protocol); CLIENTS],
            Protocol::Http1 => (0..CLIENTS)
                .map(|_| https_client(&webhook.tls, protocol))
                .collect(),
        };
        run(&webhook.url, &webhook.namespace, &clients, WARM_UP, true).await?;
        let cpu = cpu_time(webhook.pid)?;
        let (mut latencies, elapsed) =
            run(&webhook.url, &webhook.namespace, &clients, REQUESTS, true).await?;
        let cpu = cpu_time(webhook.pid)? - cpu;
        reviews += WARM_UP + REQUESTS;
        latencies.sort();
        let after = memory(webhook.admin).await?;
        println!(
            "{name}, {CLIENTS} concurrent clients, {REQUESTS} DELETE reviews (half denied): \
             {:.0} reviews/s; latency p50 {:.2?}, p99 {:.2?}, max {:.2?}; \
             webhook CPU {:.0} µs/review; resident {:.1} MiB (peak {:.1} MiB)",
            REQUESTS as f64 / elapsed.as_secs_f64(),
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            latencies.last().copied().unwrap_or_default(),
            cpu.as_secs_f64() * 1e6 / REQUESTS as f64,
            mib(after.resident),
            mib(after.peak),
        );

        // Fresh clients, so that the floor's connections are its own.
        let clients: Vec<HttpsClient> = match protocol {
            Protocol::Http2 => vec![https_client(&webhook.tls, protocol); CLIENTS],
            Protocol::Http1 => (0..CLIENTS)
                .map(|_| https_client(&webhook.tls, protocol))
                .collect(),
        };
        run(&floor_url, &webhook.namespace, &clients, WARM_UP, false).await?;
        let cpu = floor_cpu_time()?;
        let (mut floor, elapsed) =
            run(&floor_url, &webhook.namespace, &clients, REQUESTS, false).await?;
        let cpu = floor_cpu_time()? - cpu;
        floor.sort();
        println!(
            "  floor (bare TLS server, fixed answer), {name}: {:.0} reviews/s; latency p50 {:.2?}, \
             p99 {:.2?}; server CPU {:.0} µs/review; webhook p99 / floor p99 = {:.2}x",
            REQUESTS as f64 / elapsed.as_secs_f64(),
            percentile(&floor, 0.50),
            percentile(&floor, 0.99),
            cpu.as_secs_f64() * 1e6 / REQUESTS as f64,
            percentile(&latencies, 0.99).as_secs_f64() / percentile(&floor, 0.99).as_secs_f64(),
        );
    }

    // The webhook's own count agrees: every review reached the guard.
    let metrics = navique_e2e::http_get(webhook.admin, "/metrics")
        .await
        .map_err(anyhow::Error::msg)?
        .body;
    for (allowed, expected) in [("false", reviews / 2), ("true", reviews - reviews / 2)] {
        let line = format!(
            "navique_webhook_admission_requests_total{{path=\"/validate/services\",operation=\"DELETE\",allowed=\"{allowed}\"}} {expected}"
        );
        anyhow::ensure!(
            metrics.lines().any(|l| l == line),
            "{line} not in the webhook's metrics:\n{metrics}"
        );
    }
    let (sum, count) = handler_time(&metrics);
    println!(
        "time in the handler (parse, decide, log, encode), mean: {:.1} µs",
        sum / count * 1e6
    );
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// Posts `total` reviews to `url`, spread over the clients, each client
/// sending its next one when the last is answered; with `verify`, every
/// answer is checked once all are in, so that the check's CPU (the clients
/// share the cores with the server) is not timed for the webhook alone.
/// Returns the latencies and the time from the first request to the last
/// answer.
async fn run(
    url: &str,
    namespace: &str,
    clients: &[HttpsClient],
    total: usize,
    verify: bool,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let started = Instant::now();
    let tasks = clients.iter().enumerate().map(|(worker, client)| {
        let client = client.clone();
        let url = url.to_owned();
        let namespace = namespace.to_owned();
        tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(total / CLIENTS);
            let mut answers = Vec::with_capacity(if verify { total / CLIENTS } else { 0 });
            for i in (worker..total).step_by(CLIENTS) {
                let protected = i % 2 == 0;
                let uid = format!("00000000-0000-4000-8000-{i:012}");
                let body = review(&uid, &namespace, &format!("db-{i}"), protected);
                let request = http::Request::post(&url)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))?;
                let started = Instant::now();
                let response = client.request(request).await?;
                let status = response.status();
                let body = response.into_body().collect().await?.to_bytes();
                latencies.push(started.elapsed());
                anyhow::ensure!(status == 200, "status {status}: {body:?}");
                if verify {
                    answers.push((uid, protected, body));
                }
            }
            anyhow::Ok((latencies, answers))
        })
    });
    let mut all = Vec::with_capacity(total);
    let mut answers = Vec::with_capacity(if verify { total } else { 0 });
    for done in futures::future::try_join_all(tasks).await? {
        let (latencies, checks) = done?;
        all.extend(latencies);
        answers.extend(checks);
    }
    let elapsed = started.elapsed();
    for (uid, protected, body) in answers {
        check(&serde_json::from_slice(&body)?, &uid, protected)?;
    }
    Ok((all, elapsed))
}

/// A protected delete is denied with the seed's exact answer; any other is
/// allowed, with the warning of what Retain does. Both echo the uid.
fn check(answer: &Value, uid: &str, protected: bool) -> anyhow::Result<()> {
    let expected = if protected {
        json!({
            "uid": uid,
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 403,
                "reason": "Forbidden",
                "message": DELETION_PROTECTION_ENABLED,
            }
        })
    } else {
        json!({
            "uid": uid,
            "allowed": true,
            "status": {},
            "warnings": [deletion_warning(DeletionPolicy::Retain, "", false)],
        })
    };
    anyhow::ensure!(
        answer["response"] == expected,
        "unexpected answer for protected={protected}: {answer}"
    );
    Ok(())
}

/// An AdmissionReview of a DELETE of ManagedService `name`, by a Project
/// user, as kube-apiserver sends it.
fn review(uid: &str, namespace: &str, name: &str, protected: bool) -> String {
    let gvk =
        json!({"group": "services.kube-dc.com", "version": "v1alpha1", "kind": "ManagedService"});
    let gvr = json!({"group": "services.kube-dc.com", "version": "v1alpha1", "resource": "managedservices"});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name,
            "namespace": namespace,
            "operation": "DELETE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": null,
            "oldObject": {
                "apiVersion": "services.kube-dc.com/v1alpha1",
                "kind": "ManagedService",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": "7c1e2d3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f",
                    "resourceVersion": "2048",
                    "generation": 1,
                    "creationTimestamp": "2026-11-30T10:00:00Z",
                    "finalizers": ["services.kube-dc.com/deletion-policy"],
                },
                "spec": {
                    "classRef": {"name": "postgresql"},
                    "planRef": {"name": "postgresql-platform-ha"},
                    "placement": {"mode": "ProviderShared"},
                    "deletionPolicy": "Retain",
                    "deletionProtection": protected,
                },
            },
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"},
        }
    })
    .to_string()
}

/// A CA and a certificate for 127.0.0.1 it signed, written to `dir`; the
/// client configuration trusting only that CA, and a server configuration
/// with the certificate, for the floor.
fn certificate(
    dir: &std::path::Path,
) -> anyhow::Result<(rustls::ClientConfig, rustls::ServerConfig, String, String)> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?.signed_by(&key, &issuer)?;
    let cert_file = dir.join("tls.crt");
    let key_file = dir.join("tls.key");
    std::fs::write(&cert_file, cert.pem())?;
    std::fs::write(&key_file, key.serialize_pem())?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone())?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    Ok((config, server, path(cert_file), path(key_file)))
}

/// The floor's server, on a thread and runtime of its own as the webhook
/// has a process of its own: reads each request and answers one fixed
/// AdmissionReview, over whichever protocol the client chose.
fn bare_tls_server(config: rustls::ServerConfig) -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let answer = Bytes::from(
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "00000000-0000-4000-8000-000000000000", "allowed": true, "status": {}},
        })
        .to_string(),
    );
    // Its threads are named, so that their CPU time can be told apart
    // from the clients'.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name(FLOOR_THREAD)
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(FLOOR_THREAD.to_owned())
        .spawn(move || -> anyhow::Result<()> {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                loop {
                    let (stream, _) = listener.accept().await?;
                    stream.set_nodelay(true)?;
                    let (acceptor, answer) = (acceptor.clone(), answer.clone());
                    tokio::spawn(async move {
                        let Ok(stream) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(
                            move |request: hyper::Request<hyper::body::Incoming>| {
                                let answer = answer.clone();
                                async move {
                                    request.into_body().collect().await?;
                                    let mut response = hyper::Response::new(Full::new(answer));
                                    response.headers_mut().insert(
                                        "content-type",
                                        http::HeaderValue::from_static("application/json"),
                                    );
                                    Ok::<_, hyper::Error>(response)
                                }
                            },
                        );
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        })?;
    Ok(addr)
}

fn https_client(tls: &rustls::ClientConfig, protocol: Protocol) -> HttpsClient {
    // As kube-apiserver's (Go's) connections: no Nagle delay on writes.
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_only();
    let connector = match protocol {
        Protocol::Http2 => builder.enable_http2().wrap_connector(http),
        Protocol::Http1 => builder.enable_http1().wrap_connector(http),
    };
    let mut client = Client::builder(TokioExecutor::new());
    if matches!(protocol, Protocol::Http2) {
        client.http2_only(true);
    }
    client.build(connector)
}

/// The webhook's pid: the process whose program is `webhook` and whose
/// arguments name this run's certificate.
fn webhook_pid(cert_file: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let mut args = cmdline.split(|b| *b == 0).map(String::from_utf8_lossy);
            let program = args.next()?;
            (program.ends_with("/webhook") && args.any(|a| a == cert_file)).then_some(pid)
        })
}

/// User and system CPU time of the process so far, all threads.
fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let ticks = stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)?;
    Ok(ticks_to_time(ticks))
}

/// CPU time so far of this process's threads named [`FLOOR_THREAD`]. The
/// floor's runtime keeps its threads; another that ends while it is read
/// is not one of them.
fn floor_cpu_time() -> anyhow::Result<Duration> {
    let mut ticks = 0;
    for task in std::fs::read_dir("/proc/self/task")? {
        let task = task?.path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(task.join("comm")),
            std::fs::read_to_string(task.join("stat")),
        ) else {
            continue;
        };
        if comm.trim_end() == FLOOR_THREAD {
            ticks += stat_ticks(&stat)?;
        }
    }
    Ok(ticks_to_time(ticks))
}

/// The user and system CPU time in a `/proc/.../stat` line, in clock ticks.
fn stat_ticks(stat: &str) -> anyhow::Result<u64> {
    // Fields after the command name, which is in parentheses: utime and
    // stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    fields.get(11).zip(fields.get(12)).map_or(Ok(0), |(u, s)| {
        anyhow::Ok(u.parse::<u64>()? + s.parse::<u64>()?)
    })
}

fn ticks_to_time(ticks: u64) -> Duration {
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100)
}

struct Memory {
    resident: f64,
    peak: f64,
}

/// Resident and peak memory, from the webhook's metrics.
async fn memory(admin: SocketAddr) -> anyhow::Result<Memory> {
    let metrics = navique_e2e::http_get(admin, "/metrics")
        .await
        .map_err(anyhow::Error::msg)?
        .body;
    let gauge = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .ok_or_else(|| anyhow::anyhow!("{name} not in the webhook's metrics"))
    };
    Ok(Memory {
        resident: gauge("process_resident_memory_bytes")?,
        peak: gauge("navique_process_peak_resident_memory_bytes")?,
    })
}

/// Sum and count of the services route's admission duration histogram.
fn handler_time(metrics: &str) -> (f64, f64) {
    let value = |suffix: &str| {
        let prefix = format!(
            "navique_webhook_admission_duration_seconds_{suffix}{{path=\"/validate/services\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (value("sum"), value("count"))
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}
