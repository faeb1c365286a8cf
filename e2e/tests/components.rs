//! Every component, started as its real binary: flags, start-up failures,
//! the admin server, retrying an API server that is not there yet, logs,
//! traces and graceful shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use navique_e2e::{
    COMPONENTS, CONTROLLERS, Process, eventually, free_port, http_get, wait_for_status,
    write_kubeconfig,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

const START: Duration = Duration::from_secs(20);
const EXIT: Duration = Duration::from_secs(10);

fn admin_args(admin: SocketAddr, kubeconfig: &std::path::Path) -> Vec<String> {
    vec![
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--admin-addr".into(),
        admin.to_string(),
    ]
}

/// Starts a component with `args` and the flags it cannot run without:
/// backup-runner needs a store, and listens on a free port here. The
/// stand-in API server here has no Secrets, so the gRPC components run
/// with explicitly configured plaintext.
fn spawn(component: &str, args: &[&str]) -> Process {
    let mut all = args.to_vec();
    match component {
        "backup-runner" => {
            all.extend(["--store-url", "file:///tmp", "--listen-addr", "127.0.0.1:0"]);
            all.push("--grpc-insecure-plaintext");
        }
        "service-lifecycle-controller" => {
            all.extend(["--approvals-listen-addr", "127.0.0.1:0"]);
            all.push("--grpc-insecure-plaintext");
        }
        _ => {}
    }
    Process::spawn(component, &all)
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn admin_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Answers `GET /version` as an API server does and 404 to anything else:
/// just enough for a component to know the cluster is reachable.
async fn serve_version(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |request: Request<hyper::body::Incoming>| async move {
                    let (status, body) = if request.uri().path() == "/version" {
                        (
                            200,
                            r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#,
                        )
                    } else {
                        (
                            404,
                            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404}"#,
                        )
                    };
                    Ok::<_, Infallible>(
                        Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(body)))
                            .expect("response"),
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
fn every_component_documents_its_flags_in_help() {
    for component in COMPONENTS {
        let mut process = Process::spawn(component, &["--help"]);
        assert!(process.wait(EXIT).success(), "{component} --help failed");
        let help = process.stdout();
        for flag in [
            "--kubeconfig",
            "--context",
            "--admin-addr",
            "--log-format",
            "--log-level",
            "--otlp-endpoint",
        ] {
            assert!(
                help.contains(flag),
                "{component} --help does not document {flag}:\n{help}"
            );
        }
        let elects = CONTROLLERS.contains(&component);
        for flag in ["--leader-elect", "--lease-namespace", "--lease-duration"] {
            assert_eq!(
                help.contains(flag),
                elects,
                "{component} --help and {flag}:\n{help}"
            );
        }
    }
}

#[test]
fn a_missing_kubeconfig_stops_every_component_with_one_line_naming_it() {
    for component in COMPONENTS {
        let mut process = spawn(component, &["--kubeconfig", "/nonexistent/kubeconfig"]);
        assert_eq!(process.wait(EXIT).code(), Some(1), "{component} exit code");
        assert_eq!(
            process.stderr(),
            "error: cannot load kubeconfig /nonexistent/kubeconfig: failed to read kubeconfig from '\"/nonexistent/kubeconfig\"': No such file or directory (os error 2)\n",
            "{component} stderr"
        );
    }
}

#[test]
fn a_malformed_kubeconfig_stops_every_component_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, "clusters: [\n").unwrap();
    for component in COMPONENTS {
        let mut process = spawn(component, &["--kubeconfig", path.to_str().unwrap()]);
        assert_eq!(process.wait(EXIT).code(), Some(1), "{component} exit code");
        let stderr = process.stderr();
        assert_eq!(stderr.lines().count(), 1, "{component} stderr: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: cannot load kubeconfig {}: failed to parse kubeconfig YAML",
                path.display()
            )),
            "{component} stderr: {stderr}"
        );
        assert!(
            !stderr.contains("panicked"),
            "{component} panicked: {stderr}"
        );
    }
}

/// Internal gRPC is never plaintext by default: without TLS flags the gRPC
/// components are in self-managed mode, and without the names their
/// certificate needs they stop at once, saying what to give.
#[test]
fn without_grpc_tls_flags_the_grpc_components_refuse_to_start_in_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{}", free_port()));
    let kubeconfig = kubeconfig.to_str().unwrap();
    for (component, extra) in [
        (
            "backup-runner",
            &["--store-url", "file:///tmp", "--listen-addr", "127.0.0.1:0"][..],
        ),
        (
            "service-lifecycle-controller",
            &["--approvals-listen-addr", "127.0.0.1:0"][..],
        ),
    ] {
        let mut args = vec!["--kubeconfig", kubeconfig, "--admin-addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut process = Process::spawn(component, &args);
        assert_eq!(process.wait(EXIT).code(), Some(1), "{component} exit code");
        let stderr = process.stderr();
        assert_eq!(stderr.lines().count(), 1, "{component} stderr: {stderr}");
        assert!(
            stderr.starts_with(
                "error: self-managed gRPC TLS: --grpc-dns-names is required: the names clients dial this component's gRPC server at"
            ),
            "{component} stderr: {stderr}"
        );
    }
}

#[test]
fn a_taken_admin_port_stops_the_component_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{}", free_port()));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let mut process = Process::spawn("webhook", &as_strs(&admin_args(addr, &kubeconfig)));
    assert_eq!(process.wait(EXIT).code(), Some(1));
    assert_eq!(
        process.stderr(),
        format!(
            "error: cannot listen on admin address {addr}: Address already in use (os error 98)\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_retries_an_unreachable_api_server_and_turns_ready_when_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{api_port}"));
    let mut running: Vec<(&str, SocketAddr, Process)> = COMPONENTS
        .iter()
        .map(|&component| {
            let admin = admin_addr();
            let process = spawn(component, &as_strs(&admin_args(admin, &kubeconfig)));
            (component, admin, process)
        })
        .collect();

    // Nothing listens on the API port: alive, not ready, retrying.
    for (component, admin, _) in &running {
        wait_for_status(*admin, "/healthz", 200, START).await;
        let ready = http_get(*admin, "/readyz").await.unwrap();
        assert_eq!(
            (ready.status, ready.body.as_str()),
            (503, "not ready: kube-api\n"),
            "{component}"
        );
        let failures = format!(
            "navique_{}_kube_connect_failures_total ",
            component.replace('-', "_")
        );
        eventually(START, &format!("{component} to retry twice"), || async {
            let metrics = http_get(*admin, "/metrics").await.ok()?;
            let count: u64 = metrics
                .body
                .lines()
                .find_map(|l| l.strip_prefix(&failures))?
                .parse()
                .ok()?;
            (count >= 2).then_some(())
        })
        .await;
    }

    // The API server appears: every component connects and turns ready.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", api_port))
        .await
        .unwrap();
    tokio::spawn(serve_version(listener));
    for (component, admin, process) in &running {
        let ready = wait_for_status(*admin, "/readyz", 200, Duration::from_secs(45)).await;
        assert_eq!(ready.body, "ok\n", "{component}");
        assert!(
            process.stdout().contains("connected to the Kubernetes API"),
            "{component}"
        );

        let metrics = http_get(*admin, "/metrics").await.unwrap();
        let prefix = format!("navique_{}", component.replace('-', "_"));
        assert_eq!(
            metrics.content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(
            metrics.body.contains(&format!(
                "navique_build_info{{component=\"{component}\",version=\"{}\"}} 1\n",
                env!("CARGO_PKG_VERSION")
            )),
            "{component} metrics:\n{}",
            metrics.body
        );
        // Prometheus' standard process metrics, unprefixed: the scrape's
        // job and instance labels say whose they are.
        for standard in [
            "process_cpu_seconds_total",
            "process_start_time_seconds",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
        ] {
            let value: f64 = metrics
                .body
                .lines()
                .find_map(|l| l.strip_prefix(standard)?.strip_prefix(' ')?.parse().ok())
                .unwrap_or_else(|| panic!("{component}: no {standard}:\n{}", metrics.body));
            assert!(
                value > 0.0 || standard == "process_cpu_seconds_total",
                "{component} {standard} {value}"
            );
        }
        assert!(
            !metrics.body.contains(&format!("{prefix}_process_")),
            "{component}: prefixed process metrics remain"
        );
        assert!(metrics.body.ends_with("# EOF\n"));
        if CONTROLLERS.contains(component) {
            // This API server has no Lease API, so no replica may lead.
            assert!(
                metrics.body.contains(&format!("{prefix}_leader 0\n")),
                "{component} metrics:\n{}",
                metrics.body
            );
            // Said once the election is tried, which may follow readiness.
            eventually(
                START,
                &format!("{component} to say it cannot take part in leader election"),
                || async {
                    process
                        .stdout()
                        .contains("cannot take part in leader election")
                        .then_some(())
                },
            )
            .await;
        }
    }

    for (component, _, process) in &mut running {
        let status = process.terminate(EXIT);
        assert!(
            status.success(),
            "{component} exited with {status} on SIGTERM:\n{}",
            process.stderr()
        );
        assert!(process.stdout().contains("stopped"), "{component}");
    }
}

#[tokio::test]
async fn a_component_that_never_reaches_the_api_server_still_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{}", free_port()));
    let admin = admin_addr();
    let mut process = Process::spawn("lock-controller", &as_strs(&admin_args(admin, &kubeconfig)));
    wait_for_status(admin, "/readyz", 503, START).await;
    assert!(process.terminate(EXIT).success());
    assert_eq!(process.stderr(), "");
}

#[tokio::test]
async fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://127.0.0.1:{}", free_port()));
    let admin = admin_addr();
    let mut args = admin_args(admin, &kubeconfig);
    args.extend(["--log-format".into(), "json".into()]);
    let mut process = spawn("backup-runner", &as_strs(&args));
    wait_for_status(admin, "/healthz", 200, START).await;
    eventually(START, "a retry to be logged", || async {
        process
            .stdout()
            .contains("cannot reach the Kubernetes API")
            .then_some(())
    })
    .await;
    process.terminate(EXIT);

    let lines: Vec<serde_json::Value> = process
        .stdout()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let started = lines
        .iter()
        .find(|l| l["message"] == "started")
        .expect("a start line");
    assert_eq!(started["level"], "INFO");
    assert_eq!(started["component"], "backup-runner");
    assert_eq!(started["admin"], admin.to_string());
    let retry = lines
        .iter()
        .find(|l| l["message"] == "cannot reach the Kubernetes API")
        .expect("a retry line");
    assert_eq!(retry["level"], "WARN");
    assert_eq!(retry["span"]["name"], "connect");
}

/// Collects exported spans as (service name, span name).
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<(String, String)>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push((service.clone(), span.name));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_exported_over_otlp_when_an_endpoint_is_set() {
    let collector = Collector::default();
    let otlp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp_addr = otlp.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(otlp)),
    );
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_addr = api.local_addr().unwrap();
    tokio::spawn(serve_version(api));

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &format!("http://{api_addr}"));
    let admin = admin_addr();
    let mut args = admin_args(admin, &kubeconfig);
    args.extend(["--otlp-endpoint".into(), format!("http://{otlp_addr}")]);
    let mut process = Process::spawn("webhook", &as_strs(&args));
    wait_for_status(admin, "/readyz", 200, START).await;
    // Spans are batched; shutdown flushes them.
    assert!(process.terminate(EXIT).success(), "{}", process.stderr());

    let spans = collector.0.lock().unwrap().clone();
    assert!(
        spans.contains(&("webhook".to_owned(), "connect".to_owned())),
        "exported spans: {spans:?}"
    );
}
