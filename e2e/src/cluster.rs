//! The cluster end-to-end tests run against: the one `NAVIQUE_E2E_KUBECONFIG`
//! names (a real cluster, such as kind), else a dev API server this test
//! binary starts once and that exits with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use navique_testkit::DevApiServer;

use crate::repo_root;

/// A Project's usual members: alice admin, bob editor, carol viewer (dave,
/// in tests, is bound to nothing).
pub const PROJECT_MEMBERS: [(&str, &str); 3] =
    [("alice", "admin"), ("bob", "edit"), ("carol", "view")];

/// A cluster and the clients to drive it.
pub struct Cluster {
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    /// The dev API server, when this binary started one.
    dev: Option<DevApiServer>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// The shared cluster of this test binary.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(Cluster::start)
}

impl Cluster {
    fn start() -> Self {
        let kubectl = pinned_kubectl();
        if let Ok(kubeconfig) = std::env::var("NAVIQUE_E2E_KUBECONFIG") {
            return Self {
                kubeconfig: kubeconfig.into(),
                kubectl,
                dev: None,
            };
        }
        Self::dev(&[])
    }

    /// A dev API server of the caller's own, started with `args` (e.g.
    /// `--authorization rbac`), stopped when the Cluster is dropped.
    pub fn dev(args: &[&str]) -> Self {
        let kubectl = pinned_kubectl();
        let mut all = vec!["--bookmark-interval", "2"];
        all.extend_from_slice(args);
        let server = DevApiServer::start(&all);
        Self {
            kubeconfig: server.kubeconfig(),
            kubectl,
            dev: Some(server),
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Whether this is the dev API server (which has test-only endpoints).
    pub fn is_dev(&self) -> bool {
        self.dev.is_some()
    }

    /// The dev API server's process id, when this binary started one.
    pub fn dev_pid(&self) -> Option<u32> {
        self.dev.as_ref().map(DevApiServer::pid)
    }

    /// The dev API server's log so far.
    pub fn dev_log(&self) -> String {
        self.dev.as_ref().map(DevApiServer::log).unwrap_or_default()
    }

    /// A kubectl command for this cluster, with a cache directory of its own
    /// so that discovery is never stale: tests add CRDs as they go.
    pub fn kubectl_command(&self) -> (Command, tempfile::TempDir) {
        let cache = tempfile::tempdir().expect("kubectl cache dir");
        let mut command = Command::new(&self.kubectl);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(cache.path());
        (command, cache)
    }

    /// Runs the pinned kubectl against this cluster.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let (mut command, _cache) = self.kubectl_command();
        let mut child = command
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write kubectl stdin");
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs kubectl, asserts success, returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_in(args, None)
    }

    /// Runs kubectl with `stdin`, asserts success, returns stdout.
    pub fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.kubectl(args, stdin);
        assert!(
            output.status.success(),
            "kubectl {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl, asserts failure, returns stderr.
    pub fn kubectl_err(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.kubectl(args, stdin);
        assert!(
            !output.status.success(),
            "kubectl {} succeeded but should have failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// POSTs `body` to a path of the API server (its /debug endpoints).
    pub fn post_raw(&self, path: &str, body: &str) -> String {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), body).expect("write body");
        self.kubectl_ok(&[
            "create",
            "--raw",
            path,
            "-f",
            file.path().to_str().expect("utf-8 path"),
        ])
    }

    /// Adds a user with `groups` and the token `<name>-token`.
    pub fn add_user(&self, name: &str, groups: &[&str]) {
        let user =
            serde_json::json!({"token": format!("{name}-token"), "name": name, "groups": groups});
        self.post_raw("/debug/users", &user.to_string());
    }

    /// Binds `user` to the ClusterRole `role` (`admin`, `edit`, `view`) in
    /// namespace `ns`, with a RoleBinding named `<user>-<role>`.
    pub fn bind_role(&self, ns: &str, user: &str, role: &str) {
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {user}-{role}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}\n"
        );
        self.kubectl_in(&["apply", "-f", "-"], Some(&binding));
    }

    /// A new Project namespace named `<prefix>-<random>` in which each
    /// `(user, role)` of `members` is bound to the standard ClusterRole
    /// `role` (`admin`, `edit`, `view`), e.g. [`PROJECT_MEMBERS`].
    pub fn project(&self, prefix: &str, members: &[(&str, &str)]) -> String {
        let ns = self.namespace(prefix);
        for (user, role) in members {
            self.bind_role(&ns, user, role);
        }
        ns
    }

    /// The bearer token of this cluster's kubeconfig (the admin's).
    pub fn token(&self) -> String {
        let text = std::fs::read_to_string(&self.kubeconfig).expect("read kubeconfig");
        text.lines()
            .find_map(|line| line.trim_start().strip_prefix("token: "))
            .expect("the kubeconfig has a token")
            .trim()
            .to_owned()
    }

    /// A kubeconfig for this cluster that authenticates with `token`,
    /// written into `dir`.
    pub fn kubeconfig_for(&self, token: &str, dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig).expect("read kubeconfig");
        let mut out = String::new();
        for line in text.lines() {
            let indent = &line[..line.len() - line.trim_start().len()];
            if line.trim_start().starts_with("token: ") {
                out.push_str(&format!("{indent}token: {token}\n"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        let path = dir.join(format!("kubeconfig-{}", token.replace(':', "-")));
        std::fs::write(&path, out).expect("write kubeconfig");
        path
    }

    /// A ValidatingAdmissionPolicy and binding, both named `name`, that
    /// refuse (Forbidden, `message`) deleting ConfigMaps labelled `label` in
    /// namespace `ns`.
    pub fn deny_labelled_configmap_deletes(
        &self,
        name: &str,
        ns: &str,
        label: &str,
        message: &str,
    ) {
        let manifest = format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["DELETE"]}}
  validations:
  - expression: "!has(oldObject.metadata.labels) || !('{label}' in oldObject.metadata.labels)"
    message: {message}
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec:
  policyName: {name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}
"#
        );
        self.kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    }

    /// Event types and messages of `reason` in `ns`, one per line.
    pub fn event_messages(&self, ns: &str, reason: &str) -> String {
        self.kubectl_ok(&[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            &format!("reason={reason}"),
            "-o",
            "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}",
        ])
    }

    /// Applies the CRDs of `deploy/crds` and waits until they are served.
    pub fn install_crds(&self) {
        let crds = repo_root().join("deploy/crds");
        self.kubectl_ok(&["apply", "-f", crds.to_str().expect("utf-8 path")]);
        self.wait_for_crds();
    }

    /// Waits until every CRD is established.
    pub fn wait_for_crds(&self) {
        self.kubectl_ok(&[
            "wait",
            "--for",
            "condition=established",
            "crd",
            "--all",
            "--timeout",
            "20s",
        ]);
    }

    /// Installs what the chart grants each component, and nothing else: its
    /// ServiceAccount and its (Cluster)Roles and bindings, rendered from
    /// the chart's defaults. With `--authorization rbac` each component then
    /// runs with exactly the chart's least privilege.
    pub fn install_component_rbac(&self) {
        self.install_component_rbac_with(&[]);
    }

    /// [`Cluster::install_component_rbac`] from the chart rendered with
    /// `chart` (`--set` arguments).
    pub fn install_component_rbac_with(&self, chart: &[&str]) {
        const KINDS: [&str; 5] = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ];
        let rendered = crate::locks::helm_template(chart);
        let rbac: Vec<&str> = rendered
            .split("\n---")
            .filter(|doc| {
                KINDS
                    .iter()
                    .any(|kind| doc.contains(&format!("\nkind: {kind}\n")))
            })
            .collect();
        assert!(!rbac.is_empty(), "the chart renders no RBAC");
        self.kubectl_in(&["apply", "-f", "-"], Some(&rbac.join("\n---\n")));
    }

    /// A new namespace for one test, named `<prefix>-<random>`.
    pub fn namespace(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{}", &uuid_like()[..8]);
        self.kubectl_ok(&["create", "namespace", &name]);
        name
    }

    /// A kube-rs client for this cluster.
    pub async fn client(&self) -> kube::Client {
        navique_testkit::apiserver::client(&self.kubeconfig).await
    }
}

/// The pinned kubectl; a missing one fails the test, never skips it.
fn pinned_kubectl() -> PathBuf {
    let kubectl = repo_root().join(".tools/bin/kubectl");
    assert!(
        kubectl.exists(),
        "{} is missing: run scripts/tools.sh (make test does) to install the pinned kubectl",
        kubectl.display()
    );
    kubectl
}

/// A random lowercase hex string.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(
        &(nanos, std::process::id(), std::thread::current().id()),
        &mut hasher,
    );
    format!("{:016x}", std::hash::Hasher::finish(&hasher))
}
