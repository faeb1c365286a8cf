//! The Locks environment: CRDs, the Lock guard (as ValidatingAdmissionPolicies
//! or through the webhook) and a lock-controller running as its own
//! service-account identity, once per test binary; and the seed's scenarios,
//! run by both guard modes' test binaries.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::{Cluster, Process, eventually, free_port, repo_root};

/// The identity the guard lets change lock markers.
pub const LOCK_CONTROLLER_USER: &str =
    "system:serviceaccount:navique-system:navique-lock-controller";
const WAIT: Duration = Duration::from_secs(20);

/// How the guard is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardMode {
    Policy,
    Webhook,
}

/// A cluster with Locks working on it.
pub struct LockEnv {
    pub cluster: Cluster,
    pub mode: GuardMode,
    pub controller_admin: SocketAddr,
    _controller: Process,
    _webhook: Option<Process>,
    _dir: tempfile::TempDir,
}

impl LockEnv {
    /// Starts a dev API server, installs CRDs and the guard in `mode`, and
    /// starts the lock-controller (and, in webhook mode, the webhook with the
    /// guard's and the Lock finalizer's configurations).
    pub fn start(mode: GuardMode) -> Self {
        Self::start_with(mode, &[])
    }

    /// [`LockEnv::start`] with the chart rendered with `chart` (e.g.
    /// `--set lockGuard.groups=...`): its guard, its RBAC, and the
    /// lock-controller's `--enforceable-*` flags from its Deployment.
    pub fn start_with(mode: GuardMode, chart: &[&str]) -> Self {
        Self::start_full(mode, chart, mode == GuardMode::Webhook)
    }

    /// [`LockEnv::start_with`], with the webhook's Lock finalizer rule
    /// (`templates/lock-finalizer-webhook.yaml`) when `finalizer_webhook`,
    /// in either mode (the webhook is started for it in policy mode).
    pub fn start_full(mode: GuardMode, chart: &[&str], finalizer_webhook: bool) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let webhook_port = free_port();
        let service =
            format!("--webhook-service=navique-system/navique-webhook=127.0.0.1:{webhook_port}");
        let cluster = Cluster::dev(&[service.as_str(), "--authorization", "rbac"]);
        cluster.install_crds();
        cluster.kubectl_ok(&["create", "namespace", "navique-system"]);
        // Each component runs as its ServiceAccount with the chart's RBAC.
        cluster.install_component_rbac_with(chart);
        cluster.add_user(
            LOCK_CONTROLLER_USER,
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:navique-system",
            ],
        );

        match mode {
            // The committed manifest for the defaults, so that it is tested too.
            GuardMode::Policy if chart.is_empty() => {
                let guard = repo_root().join("deploy/lock-guard.yaml");
                cluster.kubectl_ok(&["apply", "-f", guard.to_str().unwrap()]);
            }
            GuardMode::Policy => {
                let guard = helm_template(
                    &[
                        chart,
                        &["--show-only", "templates/lock-guard-policy.yaml"],
                        &["--show-only", "templates/lock-suspension-policy.yaml"],
                    ]
                    .concat(),
                );
                cluster.kubectl_in(&["apply", "-f", "-"], Some(&guard));
            }
            GuardMode::Webhook => {}
        }
        let webhook = (mode == GuardMode::Webhook || finalizer_webhook).then(|| {
            let mode_flag: &[&str] = match mode {
                GuardMode::Webhook => &["--set", "lockGuard.mode=webhook"],
                GuardMode::Policy => &[],
            };
            // What the chart tells the webhook about namespace-wide Locks.
            let deployment = helm_template(
                &[chart, mode_flag, &["--show-only", "templates/webhook.yaml"]].concat(),
            );
            let flags = chart_flags(&deployment, &["--namespace-locks"]);
            let (webhook, ca_bundle) = start_webhook_with(&cluster, &dir, webhook_port, &flags);
            let ca_bundle = format!("webhook.caBundle={ca_bundle}");
            let mut templates = Vec::new();
            if mode == GuardMode::Webhook {
                templates.extend([
                    "--show-only",
                    "templates/lock-guard-webhook.yaml",
                    "--show-only",
                    "templates/lock-suspension-webhook.yaml",
                ]);
            }
            if finalizer_webhook {
                templates.extend(["--show-only", "templates/lock-finalizer-webhook.yaml"]);
            }
            let configurations =
                helm_template(&[chart, mode_flag, &["--set", &ca_bundle], &templates].concat());
            cluster.kubectl_in(&["apply", "-f", "-"], Some(&configurations));
            webhook
        });

        let kubeconfig =
            cluster.kubeconfig_for(&format!("{LOCK_CONTROLLER_USER}-token"), dir.path());
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin_addr = admin.to_string();
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--admin-addr",
            &admin_addr,
            "--lease-namespace",
            "navique-system",
            "--lease-duration",
            "6",
            "--lease-grace",
            "2",
        ];
        // What the chart tells the controller may be locked, and for how
        // long a Lock may be suspended.
        let deployment =
            helm_template(&[chart, &["--show-only", "templates/lock-controller.yaml"]].concat());
        let enforceable = chart_flags(
            &deployment,
            &["--enforceable-", "--namespace-locks", "--max-suspension"],
        );
        args.extend(&enforceable);
        let controller = Process::spawn_tied("lock-controller", &args);
        Self {
            cluster,
            mode,
            controller_admin: admin,
            _controller: controller,
            _webhook: webhook,
            _dir: dir,
        }
    }

    /// The webhook's process id, when it was started.
    pub fn webhook_pid(&self) -> Option<u32> {
        self._webhook.as_ref().map(Process::pid)
    }

    /// The lock-controller's log so far, for failure messages.
    pub fn controller_log(&self) -> String {
        self._controller.stdout() + &self._controller.stderr()
    }

    /// Waits until the lock-controller leads (and so reconciles).
    pub async fn ready(&self) {
        crate::until_leading(self.controller_admin, "lock-controller", WAIT).await;
    }

    /// A Lock's status field by JSONPath, e.g. `{.status.active}`.
    pub fn lock_field(&self, ns: &str, lock: &str, path: &str) -> String {
        self.cluster.kubectl_ok(&[
            "get",
            "lock",
            lock,
            "-n",
            ns,
            "-o",
            &format!("jsonpath={path}"),
        ])
    }

    /// Waits until the Lock reports `active` with the Ready `reason`.
    pub async fn until_lock(&self, ns: &str, lock: &str, active: bool, reason: &str) {
        eventually(
            WAIT,
            &format!("Lock {ns}/{lock} to be active={active} reason={reason}"),
            || async {
                let got_active = self.lock_field(ns, lock, "{.status.active}");
                let got_reason = self.lock_field(
                    ns,
                    lock,
                    r#"{.status.conditions[?(@.type=="Ready")].reason}"#,
                );
                (got_active == active.to_string() && got_reason == reason).then_some(())
            },
        )
        .await;
    }

    /// The `core.navique.com/locked` annotation of an object ("" if none).
    pub fn marker(&self, args: &[&str]) -> String {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend([
            "-o",
            r#"jsonpath={.metadata.annotations.core\.navique\.com/locked}"#,
        ]);
        self.cluster.kubectl_ok(&all)
    }
}

/// The flags of a rendered Deployment's container that start with one of
/// `prefixes`.
fn chart_flags<'a>(deployment: &'a str, prefixes: &[&str]) -> Vec<&'a str> {
    deployment
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter(|flag| prefixes.iter().any(|p| flag.starts_with(p)))
        .collect()
}

/// Starts the webhook on `port` with a certificate for its Service name
/// (`navique-webhook.navique-system.svc`); returns it, once it listens, and
/// the base64 CA bundle that trusts it.
pub fn start_webhook(cluster: &Cluster, dir: &tempfile::TempDir, port: u16) -> (Process, String) {
    start_webhook_with(cluster, dir, port, &[])
}

/// [`start_webhook`] with `extra` flags.
pub fn start_webhook_with(
    cluster: &Cluster,
    dir: &tempfile::TempDir,
    port: u16,
    extra: &[&str],
) -> (Process, String) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("key");
    let names = vec![
        "navique-webhook.navique-system.svc".to_owned(),
        "127.0.0.1".to_owned(),
    ];
    let cert = rcgen::CertificateParams::new(names)
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();

    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin = admin.to_string();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--kubeconfig",
        cluster.kubeconfig().to_str().unwrap(),
        "--admin-addr",
        &admin,
        "--listen-addr",
        &listen,
        "--tls-cert-file",
        cert_file.to_str().unwrap(),
        "--tls-key-file",
        key_file.to_str().unwrap(),
    ];
    args.extend(extra);
    let webhook = Process::spawn_tied("webhook", &args);
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());
    // Calls fail until the webhook listens: wait before it is installed.
    let deadline = std::time::Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "webhook did not listen:\n{}",
            webhook.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (webhook, ca_bundle)
}

/// `helm template` of the project's chart with `args`.
pub fn helm_template(args: &[&str]) -> String {
    let helm: PathBuf = repo_root().join(".tools/bin/helm");
    let output = Command::new(helm)
        .args([
            "template",
            "navique",
            "charts/navique",
            "--namespace",
            "navique-system",
        ])
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("run helm");
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// The seed's Stack and Lock, in namespace `ns`.
pub fn seed_manifest(file: &str, ns: &str) -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples").join(file))
        .expect("example")
        .replace("namespace: forge", &format!("namespace: {ns}"))
}

/// A Stack named `name` with no resources.
pub fn stack(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: core.navique.com/v1alpha1\nkind: Stack\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  resources: []\n"
    )
}

/// A Lock on `kind`/`name` of `api_version`.
pub fn lock(
    ns: &str,
    name: &str,
    api_version: &str,
    kind: &str,
    target: &str,
    reason: &str,
) -> String {
    format!(
        "apiVersion: core.navique.com/v1alpha1\nkind: Lock\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  targetRef:\n    apiVersion: {api_version}\n    kind: {kind}\n    name: {target}\n  reason: \"{reason}\"\n"
    )
}

/// The names in a JSON list from `kubectl get -o json`, as `namespace/name`.
pub fn names(list: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(list).expect("JSON list");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap_or_default(),
                i["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}
