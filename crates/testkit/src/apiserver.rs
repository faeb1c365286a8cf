//! The dev API server, as its binary (`cargo build -p dev-apiserver` first;
//! `make test` builds every binary), and kube clients.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::{Process, eventually, repo_root, yaml_documents};

/// A dev API server of this test's own; stopped when dropped, and exits
/// with this test process when never dropped (`--parent-pid`).
pub struct DevApiServer {
    // Declared first, so dropped (killed) before its folder goes.
    process: Process,
    dir: tempfile::TempDir,
}

impl DevApiServer {
    /// Starts it on a free port with `args` added (e.g. `--authorization
    /// rbac`); returns once it listens.
    pub fn start(args: &[&str]) -> DevApiServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid = std::process::id().to_string();
        let mut all = vec![
            "--dir",
            dir.path().to_str().expect("utf-8 temp dir"),
            "--addr",
            "127.0.0.1:0",
            "--parent-pid",
            &pid,
        ];
        all.extend_from_slice(args);
        let process = Process::spawn("dev-apiserver", &all);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !process.stdout().contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "dev-apiserver did not start; stderr:\n{}",
                process.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        DevApiServer { process, dir }
    }

    /// The admin's kubeconfig, which the server wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The server's process id, for benchmarks that read its CPU time.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.process.stdout() + &self.process.stderr()
    }

    /// A client as the admin.
    pub async fn client(&self) -> kube::Client {
        client(&self.kubeconfig()).await
    }

    /// Creates the CRDs of `deploy/crds` and waits until each is served.
    pub async fn install_crds(&self) {
        let client = self.client().await;
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        let mut served = Vec::new();
        for entry in std::fs::read_dir(repo_root().join("deploy/crds")).expect("deploy/crds") {
            for document in yaml_documents(&entry.expect("deploy/crds entry").path()) {
                let crd: CustomResourceDefinition =
                    serde_yaml::from_value(document).expect("a CRD");
                crds.create(&PostParams::default(), &crd)
                    .await
                    .expect("create CRD");
                served.push(crd);
            }
        }
        for crd in served {
            let spec = &crd.spec;
            let version = &spec
                .versions
                .iter()
                .find(|v| v.served)
                .expect("a served version");
            let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &spec.names.plural);
            let objects = Api::<DynamicObject>::all_with(client.clone(), &resource);
            eventually(
                Duration::from_secs(60),
                &format!("the {} CRD to be served", spec.names.kind),
                || async { objects.list(&Default::default()).await.ok() },
            )
            .await;
        }
    }
}

/// A client of the cluster `kubeconfig` names.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    // The workspace's TLS is ring's (kube's rustls takes the process default).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kubeconfig");
    kube::Client::try_from(config).expect("client")
}
