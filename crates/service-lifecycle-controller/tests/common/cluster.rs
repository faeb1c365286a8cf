//! A dev API server (the `dev-apiserver` binary next to the test
//! executable: `cargo build -p dev-apiserver` first; `make test` builds
//! every binary) with the CRDs and the catalogue from `deploy/`, a
//! throwaway PostgreSQL as the provider's server, and the controllers
//! running in-process; shared by `tests/controller.rs` and
//! `tests/bindings.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use navique_api::services::{ManagedService, ServiceClass, ServicePhase, ServicePlan};
use navique_runtime::Leadership;
use service_lifecycle_controller::{binding, credential_policy, reconcile};
use tokio_util::sync::CancellationToken;

use super::{ADMIN_PASSWORD, ADMIN_USER, Server};

pub const TIMEOUT: Duration = Duration::from_secs(60);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The dev API server, stopped when dropped.
pub struct ApiServer {
    child: Child,
    dir: tempfile::TempDir,
}

impl ApiServer {
    pub fn start() -> ApiServer {
        let exe = std::env::current_exe().expect("test executable path");
        let binary = exe
            .parent()
            .and_then(Path::parent)
            .expect("test executable lives in <target>/<profile>/deps")
            .join("dev-apiserver");
        assert!(
            binary.exists(),
            "{} is missing: run `cargo build -p dev-apiserver` (make test builds it) first",
            binary.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let stdout = fs::File::create(dir.path().join("stdout")).expect("stdout file");
        let stderr = fs::File::create(dir.path().join("stderr")).expect("stderr file");
        let child = Command::new(binary)
            .arg("--dir")
            .arg(dir.path())
            .args(["--addr", "127.0.0.1:0", "--parent-pid"])
            .arg(std::process::id().to_string())
            .args(["--bookmark-interval", "2"])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("cannot start dev-apiserver");
        let server = ApiServer { child, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.log("stdout").contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "dev-apiserver did not start; stderr:\n{}",
                server.log("stderr")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn log(&self, name: &str) -> String {
        fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    pub async fn client(&self) -> Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.path().join("kubeconfig"))
            .expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kubeconfig");
        Client::try_from(config).expect("client")
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it returns Some, or fails with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn yaml_documents(path: &Path) -> Vec<serde_yaml::Value> {
    let text = fs::read_to_string(path).expect("read YAML");
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).expect("YAML"))
        .filter(|value: &serde_yaml::Value| !value.is_null())
        .collect()
}

pub async fn install_crds(client: &Client) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for entry in fs::read_dir(repo_root().join("deploy/crds")).expect("deploy/crds") {
        let path = entry.expect("entry").path();
        for document in yaml_documents(&path) {
            let crd: CustomResourceDefinition = serde_yaml::from_value(document).expect("a CRD");
            api.create(&PostParams::default(), &crd)
                .await
                .expect("create CRD");
        }
    }
    let services = Api::<ManagedService>::all(client.clone());
    eventually("the ManagedService CRD to be served", || async {
        services.list(&Default::default()).await.ok()
    })
    .await;
}

pub async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
}

pub async fn phase_and_reason(
    api: &Api<ManagedService>,
    name: &str,
) -> Option<(ServicePhase, String, String)> {
    let service = api.get_opt(name).await.ok()??;
    let status = service.status?;
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((status.phase?, ready.reason.clone(), ready.message.clone()))
}

/// A dev API server with the CRDs, the namespaces, the provider's admin
/// Secret and the catalogue, a PostgreSQL, and the three controllers
/// running.
pub struct Env {
    pub pg: Server,
    pub client: Client,
    token: CancellationToken,
    controllers: Vec<tokio::task::JoinHandle<Result<(), std::convert::Infallible>>>,
    _apiserver: ApiServer,
}

impl Env {
    pub async fn start() -> Env {
        let pg = Server::start().await;
        let apiserver = ApiServer::start();
        let client = apiserver.client().await;
        install_crds(&client).await;
        create_namespace(&client, "navique-system").await;
        create_namespace(&client, "my-project").await;

        // The provider's admin Secret, named as deploy/examples/catalogue.yaml says.
        let admin: BTreeMap<String, ByteString> = pg
            .secret(ADMIN_USER, ADMIN_PASSWORD)
            .into_iter()
            .map(|(k, v)| (k, ByteString(v.into_bytes())))
            .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("provider-postgresql-admin".to_owned()),
                ..Default::default()
            },
            data: Some(admin),
            ..Default::default()
        };
        Api::<Secret>::namespaced(client.clone(), "navique-system")
            .create(&PostParams::default(), &secret)
            .await
            .expect("create the admin Secret");
        for document in yaml_documents(&repo_root().join("deploy/examples/catalogue.yaml")) {
            match document["kind"].as_str() {
                Some("ServiceClass") => {
                    let class: ServiceClass = serde_yaml::from_value(document).unwrap();
                    Api::<ServiceClass>::all(client.clone())
                        .create(&PostParams::default(), &class)
                        .await
                        .expect("create the ServiceClass");
                }
                Some("ServicePlan") => {
                    let plan: ServicePlan = serde_yaml::from_value(document).unwrap();
                    Api::<ServicePlan>::all(client.clone())
                        .create(&PostParams::default(), &plan)
                        .await
                        .expect("create the ServicePlan");
                }
                other => panic!("unexpected kind {other:?} in catalogue.yaml"),
            }
        }
        let token = CancellationToken::new();
        let leadership = Leadership::unelected(token.clone());
        let controllers = vec![
            tokio::spawn(reconcile::run(reconcile::Context::new(
                client.clone(),
                Default::default(),
                leadership.clone(),
            ))),
            tokio::spawn(binding::run(binding::Context::new(
                client.clone(),
                Default::default(),
                leadership.clone(),
            ))),
            tokio::spawn(credential_policy::run(credential_policy::Context::new(
                client.clone(),
                Default::default(),
                leadership,
            ))),
        ];
        Env {
            pg,
            client,
            token,
            controllers,
            _apiserver: apiserver,
        }
    }

    pub async fn stop(self) {
        self.token.cancel();
        for controller in self.controllers {
            controller.await.unwrap().unwrap();
        }
    }
}

/// deploy/examples/orders-db.yaml, without its annotations.
pub fn orders_db() -> ManagedService {
    let mut documents = yaml_documents(&repo_root().join("deploy/examples/orders-db.yaml"));
    let mut service: ManagedService = serde_yaml::from_value(documents.remove(0)).unwrap();
    service.annotations_mut().clear();
    service
}
