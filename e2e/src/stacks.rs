//! The Stacks environment: the Locks environment (CRDs, the Lock guard as
//! ValidatingAdmissionPolicies, the lock-controller) plus the real
//! service-lifecycle-controller, its ApprovalEvents gRPC server, the
//! chart's approval-identity ValidatingAdmissionPolicy, and an HTTP
//! endpoint that records the approval notifications it posts.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Cluster;
use crate::locks::{GuardMode, LockEnv, helm_template};
use crate::services::{CONTROLLER_REPLICA, CONTROLLER_USER};
use crate::{Process, free_port};

const WAIT: Duration = Duration::from_secs(30);

/// The ServiceAccount a Stack acts as by default (the chart's
/// `serviceLifecycleController.stackServiceAccount`).
pub const STACK_ACCOUNT: &str = "navique-stack";

/// Creates ServiceAccount `account` in `ns` (if missing) and binds it to
/// ClusterRole `role` there: what a Stack acting as it may do.
pub fn bind_service_account(cluster: &Cluster, ns: &str, account: &str, role: &str) {
    let objects = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {account}, namespace: {ns}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {account}-{role}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects:\n- {{kind: ServiceAccount, name: {account}, namespace: {ns}}}\n"
    );
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&objects));
}

/// A cluster whose Stacks are reconciled.
pub struct StackEnv {
    pub locks: LockEnv,
    pub controller_admin: SocketAddr,
    /// The controller's ApprovalEvents gRPC server.
    pub approvals_addr: SocketAddr,
    pub notifications: Notifications,
    _controller: Process,
    _dir: tempfile::TempDir,
}

impl StackEnv {
    pub fn start() -> Self {
        let locks = LockEnv::start(GuardMode::Policy);
        let dir = tempfile::tempdir().expect("temp dir");
        // The chart's Project roles (edit and admin extended with Navique's
        // kinds): what the tests bind Stacks' ServiceAccounts to.
        let roles = helm_template(&["--show-only", "templates/project-roles.yaml"]);
        locks
            .cluster
            .kubectl_in(&["apply", "-f", "-"], Some(&roles));
        // Who approved is what the API server authenticated, as the chart
        // installs it.
        let identity = helm_template(&["--show-only", "templates/approval-identity-policy.yaml"]);
        locks
            .cluster
            .kubectl_in(&["apply", "-f", "-"], Some(&identity));
        locks.cluster.add_user(
            CONTROLLER_USER,
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:navique-system",
                "system:authenticated",
            ],
        );
        let kubeconfig = locks
            .cluster
            .kubeconfig_for(&format!("{CONTROLLER_USER}-token"), dir.path());
        let notifications = Notifications::start();
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let approvals = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let controller = Process::spawn_tied(
            "service-lifecycle-controller",
            &[
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--admin-addr",
                &admin.to_string(),
                "--approvals-listen-addr",
                &approvals.to_string(),
                "--approval-notification-url",
                &notifications.url(),
                "--lease-namespace",
                "navique-system",
                "--lease-identity",
                CONTROLLER_REPLICA,
                "--lease-duration",
                "6",
                "--lease-grace",
                "2",
                "--grpc-dns-names",
                "127.0.0.1",
            ],
        );
        Self {
            locks,
            controller_admin: admin,
            approvals_addr: approvals,
            notifications,
            _controller: controller,
            _dir: dir,
        }
    }

    /// The ApprovalEvents server's URL: TLS, its certificate issued by the
    /// gRPC CA.
    pub fn approvals_url(&self) -> String {
        format!("https://{}", self.approvals_addr)
    }

    /// The gRPC CA bundle, in a file, that ApprovalEvents' clients verify
    /// the server with (once the controller created the CA).
    pub async fn approvals_ca_file(&self) -> std::path::PathBuf {
        crate::services::grpc_ca_file(&self.locks.cluster, self._dir.path()).await
    }

    /// Waits until both controllers lead.
    pub async fn ready(&self) {
        self.locks.ready().await;
        crate::until_leading(self.controller_admin, "service-lifecycle-controller", WAIT).await;
    }

    /// A counter or gauge of the controller's metrics, 0 when absent.
    pub async fn controller_metric(&self, line_prefix: &str) -> f64 {
        crate::services::metric(self.controller_admin, line_prefix).await
    }

    /// The controller's log so far, for failure messages.
    pub fn controller_log(&self) -> String {
        self._controller.stdout() + &self._controller.stderr()
    }
}

/// JSON bodies POSTed to an HTTP endpoint, served from a thread of its own
/// so that it outlives any one test's runtime. It answers 200, or 500 to
/// the notifications about the namespaces told to [`Notifications::fail`].
#[derive(Clone)]
pub struct Notifications {
    addr: SocketAddr,
    /// Every POST, when it came and whether it was answered 200.
    received: Arc<Mutex<Vec<Received>>>,
    /// Per namespace, how many more of its notifications to refuse.
    failing: Arc<Mutex<BTreeMap<String, u32>>>,
}

struct Received {
    at: Instant,
    body: Value,
    delivered: bool,
}

fn namespace_of(body: &Value) -> &str {
    body["stack"]["namespace"].as_str().unwrap_or_default()
}

impl Notifications {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let received = Arc::<Mutex<Vec<Received>>>::default();
        let failing = Arc::<Mutex<BTreeMap<String, u32>>>::default();
        let (sink, refusals) = (received.clone(), failing.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut delivered = true;
                if let Some(body) = read_post(&stream) {
                    let mut refusals = refusals.lock().unwrap();
                    if let Some(left) = refusals.get_mut(namespace_of(&body)).filter(|n| **n > 0) {
                        *left -= 1;
                        delivered = false;
                    }
                    sink.lock().unwrap().push(Received {
                        at: Instant::now(),
                        body,
                        delivered,
                    });
                }
                let answer: &[u8] = if delivered {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\ndown"
                };
                let mut stream = stream;
                let _ = stream.write_all(answer);
            }
        });
        Self {
            addr,
            received,
            failing,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks/approvals", self.addr)
    }

    /// Answers the next `times` notifications about Stacks of `namespace`
    /// with 500 (`u32::MAX`: all of them).
    pub fn fail(&self, namespace: &str, times: u32) {
        self.failing
            .lock()
            .unwrap()
            .insert(namespace.to_owned(), times);
    }

    /// The `approval-required` notifications delivered about Stacks of
    /// `namespace`.
    pub fn about(&self, namespace: &str) -> Vec<Value> {
        self.of(namespace, "approval-required")
    }

    /// The notifications of `trigger` delivered (answered 200) about Stacks
    /// of `namespace`.
    pub fn of(&self, namespace: &str, trigger: &str) -> Vec<Value> {
        self.matching(namespace, trigger, |r| r.delivered.then(|| r.body.clone()))
    }

    /// When each POST of `trigger` about Stacks of `namespace` came, and
    /// whether it was answered 200, in order.
    pub fn attempts(&self, namespace: &str, trigger: &str) -> Vec<(Instant, bool)> {
        self.matching(namespace, trigger, |r| Some((r.at, r.delivered)))
    }

    fn matching<T>(
        &self,
        namespace: &str,
        trigger: &str,
        f: impl Fn(&Received) -> Option<T>,
    ) -> Vec<T> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| namespace_of(&r.body) == namespace && r.body["trigger"] == trigger)
            .filter_map(f)
            .collect()
    }
}

/// The JSON body of one HTTP/1.1 request.
fn read_post(stream: &std::net::TcpStream) -> Option<Value> {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}
