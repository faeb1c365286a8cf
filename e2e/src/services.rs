//! The managed-services environment: a dev API server with the CRDs, the
//! catalogue and the services webhook; a throwaway PostgreSQL as the
//! provider's server (`scripts/postgres.sh`); and the real
//! service-lifecycle-controller, which a test may kill and start again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_testkit::postgres::Auth;
pub use navique_testkit::postgres::Postgres;

use crate::locks::{helm_template, start_webhook};
use crate::{Cluster, Process, eventually, free_port, repo_root, wait_for_status};

/// The controller's identity, a ServiceAccount of the provider's namespace
/// (so the webhook counts it among the provider identities).
pub const CONTROLLER_USER: &str =
    "system:serviceaccount:navique-system:navique-service-lifecycle-controller";
/// backup-runner's identity.
pub const BACKUP_RUNNER_USER: &str = "system:serviceaccount:navique-system:navique-backup-runner";
/// The controller replica's name in its Lease.
pub const CONTROLLER_REPLICA: &str = "service-lifecycle-controller-0";
/// A Project user.
pub const ALICE: &str = "alice";
/// How long a managed-services test waits for a state.
pub const WAIT: Duration = Duration::from_secs(30);

/// The gRPC CA Secret the components create in self-managed mode.
pub const GRPC_CA_SECRET: &str = "navique-grpc-ca";

/// The gRPC CA bundle and key (PEM) of the Secret the components created,
/// once it exists, read as the cluster's admin.
pub async fn grpc_ca(cluster: &Cluster) -> (String, String) {
    use base64::Engine;
    let read = |key: &str| {
        let output = cluster.kubectl(
            &[
                "get",
                "secret",
                GRPC_CA_SECRET,
                "-n",
                "navique-system",
                "--ignore-not-found",
                "-o",
                &format!("jsonpath={{.data.ca\\.{key}}}"),
            ],
            None,
        );
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?;
        String::from_utf8(decoded).ok().filter(|t| !t.is_empty())
    };
    eventually(WAIT, "the gRPC CA Secret", || async {
        Some((read("crt")?, read("key")?))
    })
    .await
}

/// [`grpc_ca`]'s bundle written into `dir`: what a client of
/// ApprovalEvents verifies the server with.
pub async fn grpc_ca_file(cluster: &Cluster, dir: &std::path::Path) -> PathBuf {
    let path = dir.join("grpc-ca.crt");
    std::fs::write(&path, grpc_ca(cluster).await.0).expect("write the gRPC CA");
    path
}

/// A SnapshotService client at `port` (on 127.0.0.1) with a certificate of
/// `ca` naming `component`, as that component's own would.
pub fn snapshot_client(
    ca: &navique_runtime::grpc_tls::ca::Ca,
    component: &str,
    port: u16,
) -> SnapshotServiceClient<tonic::transport::Channel> {
    use navique_runtime::grpc_tls::{self, Credentials, GrpcTls, ca};
    use navique_runtime::pki::{Lifetimes, unix_now};
    let day = Duration::from_secs(86_400);
    let lifetimes = Lifetimes {
        ca: 10 * day,
        certificate: 2 * day,
        renew_before: day,
    };
    let names = ["127.0.0.1".to_owned()];
    let (certificate, key) = ca::issue(ca, component, &names, &lifetimes, unix_now())
        .expect("a certificate of the gRPC CA");
    let tls = GrpcTls::Tls(Credentials::new(&certificate, &key, &ca.bundle).expect("credentials"));
    let url = format!("https://127.0.0.1:{port}");
    SnapshotServiceClient::new(grpc_tls::channel("test", &url, &tls, WAIT).expect("a channel"))
}

/// The name a ProviderShared service of Project `ns` asking for database
/// (or owner) `db` gets on the shared PostgreSQL server.
pub fn on_server(ns: &str, db: &str) -> String {
    navique_provider_postgres::names::physical(ns, db, navique_provider_postgres::MAX_NAME_LEN)
}

/// The value of the metric line at `admin`'s `/metrics` that starts with
/// `line_prefix` (0 when absent or unreachable).
pub(crate) async fn metric(admin: SocketAddr, line_prefix: &str) -> f64 {
    let Ok(metrics) = crate::http_get(admin, "/metrics").await else {
        return 0.0;
    };
    metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Everything the managed-services tests drive.
pub struct ServiceEnv {
    pub cluster: Cluster,
    pub postgres: Postgres,
    pub controller_admin: SocketAddr,
    /// The controller's ApprovalEvents gRPC server.
    pub approvals_addr: SocketAddr,
    controller: Mutex<Option<Process>>,
    /// The admin server of the backup-runner started last.
    backup_runner_admin: Mutex<Option<SocketAddr>>,
    controller_kubeconfig: PathBuf,
    _webhook: Process,
    _dir: tempfile::TempDir,
}

impl ServiceEnv {
    /// Starts everything; the controller runs with `controller_args` added.
    pub fn start(controller_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let cluster = Cluster::dev(&[
            &format!("--webhook-service=navique-system/navique-webhook=127.0.0.1:{port}"),
            "--authorization",
            "rbac",
        ]);
        let postgres = Postgres::start(Auth::Trust);
        cluster.install_crds();
        cluster.kubectl_ok(&["create", "namespace", "navique-system"]);
        // Each component runs as its ServiceAccount with the chart's RBAC.
        cluster.install_component_rbac();
        // Trust authentication: the password is not checked.
        cluster.kubectl_ok(&[
            "create",
            "secret",
            "generic",
            "provider-postgresql-admin",
            "-n",
            "navique-system",
            "--from-literal=host=127.0.0.1",
            &format!("--from-literal=port={}", postgres.port),
            "--from-literal=user=postgres",
            "--from-literal=password=unused",
        ]);
        cluster.kubectl_ok(&[
            "apply",
            "-f",
            repo_root()
                .join("deploy/examples/catalogue.yaml")
                .to_str()
                .unwrap(),
        ]);
        cluster.add_user(
            CONTROLLER_USER,
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:navique-system",
                "system:authenticated",
            ],
        );
        cluster.add_user(
            BACKUP_RUNNER_USER,
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:navique-system",
                "system:authenticated",
            ],
        );
        cluster.add_user(ALICE, &["system:authenticated"]);
        // alice administers every test's Project (the chart's Project roles
        // extend admin with Navique's kinds).
        let roles = helm_template(&["--show-only", "templates/project-roles.yaml"]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&roles));
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {ALICE}-admin}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}}\nsubjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {ALICE}}}\n"
        );
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&binding));
        let (webhook, ca_bundle) = start_webhook(&cluster, &dir, port);
        let configuration = helm_template(&[
            "--set",
            &format!("webhook.caBundle={ca_bundle}"),
            "--show-only",
            "templates/services-webhook.yaml",
        ]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&configuration));
        let controller_kubeconfig =
            cluster.kubeconfig_for(&format!("{CONTROLLER_USER}-token"), dir.path());
        let env = Self {
            cluster,
            postgres,
            controller_admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            approvals_addr: SocketAddr::from(([127, 0, 0, 1], free_port())),
            controller: Mutex::new(None),
            backup_runner_admin: Mutex::new(None),
            controller_kubeconfig,
            _webhook: webhook,
            _dir: dir,
        };
        env.start_controller(controller_args);
        env
    }

    /// Starts backup-runner serving SnapshotService on `port` (self-managed
    /// mutual TLS, as the controller calls it) over the store at
    /// `store_url`; waits until it is ready.
    pub async fn start_backup_runner(&self, port: u16, store_url: &str) -> Process {
        self.start_backup_runner_with(port, store_url, &[], &[])
            .await
    }

    /// [`Self::start_backup_runner`] with more flags and environment
    /// variables (an S3 store's AWS_*).
    pub async fn start_backup_runner_with(
        &self,
        port: u16,
        store_url: &str,
        extra: &[&str],
        env: &[(String, String)],
    ) -> Process {
        let kubeconfig = self
            .cluster
            .kubeconfig_for(&format!("{BACKUP_RUNNER_USER}-token"), self._dir.path());
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin_addr = admin.to_string();
        let listen_addr = format!("127.0.0.1:{port}");
        // Its own work folder: backup-runner clears stale work at start-up,
        // and other environments' backup-runners share /tmp.
        let work_dir = self._dir.path().join("backup-runner-work");
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--admin-addr",
            &admin_addr,
            "--listen-addr",
            &listen_addr,
            "--store-url",
            store_url,
            "--work-dir",
            work_dir.to_str().unwrap(),
            // Self-managed mutual TLS (the default), for the address dialled.
            "--grpc-dns-names",
            "127.0.0.1",
        ];
        args.extend_from_slice(extra);
        let process = Process::spawn_tied_env("backup-runner", &args, env);
        wait_for_status(admin, "/readyz", 200, WAIT).await;
        *self.backup_runner_admin.lock().unwrap() = Some(admin);
        process
    }

    /// The value of the last started backup-runner's metric line that
    /// starts with `line_prefix` (0 when absent).
    pub async fn backup_runner_metric(&self, line_prefix: &str) -> f64 {
        let admin = self
            .backup_runner_admin
            .lock()
            .unwrap()
            .expect("a backup-runner was started");
        metric(admin, line_prefix).await
    }

    /// Starts the controller (again), as the same replica: a restarted pod
    /// keeps its name, so it takes its Lease back at once.
    pub fn start_controller(&self, extra: &[&str]) {
        let admin = self.controller_admin.to_string();
        let approvals = self.approvals_addr.to_string();
        let mut args = vec![
            "--kubeconfig",
            self.controller_kubeconfig.to_str().unwrap(),
            "--admin-addr",
            &admin,
            "--approvals-listen-addr",
            &approvals,
            "--lease-namespace",
            "navique-system",
            "--lease-identity",
            CONTROLLER_REPLICA,
            // Self-managed TLS (the default) for ApprovalEvents and its calls.
            "--grpc-dns-names",
            "127.0.0.1",
        ];
        if !extra.contains(&"--lease-duration") {
            args.extend_from_slice(&["--lease-duration", "6", "--lease-grace", "2"]);
        }
        args.extend_from_slice(extra);
        let process = Process::spawn_tied("service-lifecycle-controller", &args);
        let previous = self.controller.lock().unwrap().replace(process);
        assert!(previous.is_none(), "the controller already runs");
    }

    /// Kills the controller with SIGKILL, wherever it is.
    pub fn kill_controller(&self) {
        let mut process = self
            .controller
            .lock()
            .unwrap()
            .take()
            .expect("the controller runs");
        process.kill();
    }

    /// The controller's log so far.
    pub fn controller_log(&self) -> String {
        self.controller
            .lock()
            .unwrap()
            .as_ref()
            .map(|p| p.stdout() + &p.stderr())
            .unwrap_or_default()
    }

    /// Waits until the controller leads (and so reconciles).
    pub async fn controller_ready(&self) {
        crate::until_leading(self.controller_admin, "service-lifecycle-controller", WAIT).await;
    }

    /// A counter or gauge of the controller's metrics, 0 when absent.
    pub async fn controller_metric(&self, line_prefix: &str) -> f64 {
        metric(self.controller_admin, line_prefix).await
    }

    /// Fails the controller's requests that match `fault` (the dev API
    /// server's fault fields, `user` set to the controller).
    pub fn fail_controller_requests(&self, mut fault: serde_json::Value) {
        fault["user"] = CONTROLLER_USER.into();
        fault["code"] = 500.into();
        fault["message"] = "injected by the e2e test".into();
        self.cluster.post_raw(
            "/debug/faults",
            &serde_json::json!({"faults": [fault]}).to_string(),
        );
    }

    pub fn clear_faults(&self) {
        self.cluster
            .kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    }

    /// The example orders-db manifest in `ns`, with its database and owner
    /// renamed `db` (the PostgreSQL server is shared by the tests), and the
    /// given policy, protection and placement.
    pub fn orders_db(&self, ns: &str, db: &str, policy: &str, protected: bool) -> String {
        std::fs::read_to_string(repo_root().join("deploy/examples/orders-db.yaml"))
            .expect("example")
            .replace("namespace: my-project", &format!("namespace: {ns}"))
            .replace("database: orders", &format!("database: {db}"))
            .replace("owner: orders", &format!("owner: {db}"))
            .replace(
                "deletionPolicy: Delete",
                &format!("deletionPolicy: {policy}"),
            )
            .replace(
                "deletionProtection: false",
                &format!("deletionProtection: {protected}"),
            )
    }

    /// `manifest` (an orders-db) placed `InProject`, with a 10Gi volume and a
    /// server setting, as the seed's manifest asks.
    pub fn in_project(manifest: &str) -> String {
        let owner = manifest
            .lines()
            .find(|l| l.trim_start().starts_with("owner: "))
            .expect("an owner line")
            .to_owned();
        manifest
            .replace("mode: ProviderShared", "mode: InProject")
            .replacen(
                &format!("{owner}\n"),
                &format!(
                    "{owner}\n    storage:\n      size: 10Gi\n    postgresql:\n      parameters:\n        work_mem: 8MB\n"
                ),
                1,
            )
    }

    /// `kubectl apply` of a manifest, retried while the webhook's caches
    /// are still syncing.
    pub async fn apply(&self, manifest: &str) {
        eventually(WAIT, "the manifest to be admitted", || async {
            let output = self.cluster.kubectl(&["apply", "-f", "-"], Some(manifest));
            output.status.success().then_some(())
        })
        .await;
    }

    /// `kubectl delete managedservice <name> --wait=false`: the deletion
    /// starts, the test follows it.
    pub fn start_deleting(&self, ns: &str, name: &str) {
        self.cluster
            .kubectl_ok(&["delete", "managedservice", name, "-n", ns, "--wait=false"]);
    }

    /// `kubectl get <what> -n <ns> -o jsonpath=<path>`; empty when missing.
    pub fn get(&self, ns: &str, what: &str, path: &str) -> String {
        let output = self.cluster.kubectl(
            &[
                "get",
                what,
                "-n",
                ns,
                "--ignore-not-found",
                "-o",
                &format!("jsonpath={path}"),
            ],
            None,
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A field of a ManagedService by JSONPath; empty when it is gone.
    pub fn field(&self, ns: &str, name: &str, path: &str) -> String {
        let output = self.cluster.kubectl(
            &[
                "get",
                "managedservice",
                name,
                "-n",
                ns,
                "-o",
                &format!("jsonpath={path}"),
                "--ignore-not-found",
            ],
            None,
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `phase reason: message` of a ManagedService.
    pub fn state(&self, ns: &str, name: &str) -> String {
        self.field(
            ns,
            name,
            r#"{.status.phase} {.status.conditions[?(@.type=="Ready")].reason}: {.status.conditions[?(@.type=="Ready")].message}"#,
        )
    }

    /// Waits until the service's state starts with `prefix`.
    pub async fn until_state(&self, ns: &str, name: &str, prefix: &str) -> String {
        eventually(WAIT, &format!("{ns}/{name} to be {prefix:?}"), || async {
            let state = self.state(ns, name);
            state.starts_with(prefix).then_some(state)
        })
        .await
    }

    /// Waits until the ManagedService no longer exists (a final backup may
    /// be taken first).
    pub async fn until_gone(&self, ns: &str, name: &str) {
        eventually(2 * WAIT, &format!("{ns}/{name} to be gone"), || async {
            let output = self.cluster.kubectl(
                &[
                    "get",
                    "managedservice",
                    name,
                    "-n",
                    ns,
                    "--ignore-not-found",
                    "-o",
                    "name",
                ],
                None,
            );
            (output.status.success() && output.stdout.is_empty()).then_some(())
        })
        .await;
    }
}
