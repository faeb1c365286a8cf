//! navique_testkit's dev API server with the CRDs and the catalogue from
//! `deploy/`, a throwaway PostgreSQL as the provider's server, and the
//! controllers running in-process; shared by `tests/controller.rs` and
//! `tests/bindings.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use navique_api::services::{ManagedService, ServiceClass, ServicePhase, ServicePlan};
use navique_runtime::Leadership;
use navique_testkit::postgres::{ADMIN_PASSWORD, ADMIN_USER, Auth, Postgres};
use navique_testkit::{DevApiServer, repo_root, yaml_documents};
use service_lifecycle_controller::managed_service::reconcile;
use service_lifecycle_controller::{binding, credential_policy};
use tokio_util::sync::CancellationToken;

use super::Provider;

pub const TIMEOUT: Duration = Duration::from_secs(60);

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
    pub pg: Postgres,
    pub client: Client,
    token: CancellationToken,
    controllers: Vec<tokio::task::JoinHandle<Result<(), std::convert::Infallible>>>,
    _apiserver: DevApiServer,
}

impl Env {
    pub async fn start() -> Env {
        let pg = Postgres::start(Auth::Scram);
        let apiserver = DevApiServer::start(&["--bookmark-interval", "2"]);
        let client = apiserver.client().await;
        apiserver.install_crds().await;
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
