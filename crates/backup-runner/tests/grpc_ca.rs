//! The self-managed gRPC CA on the dev API server: components and replicas
//! that start at once race to create the CA Secret; they end up with one CA
//! and certificates that each trusts, so the controller's call reaches
//! backup-runner.

mod common;

use std::time::Duration;

use common::{client_with, serve_without_cluster};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use navique_api::grpc::snapshot::v1::GetSnapshotRequest;
use navique_runtime::grpc_tls::GrpcTls;
use navique_runtime::grpc_tls::ca::{CA_BUNDLE, SelfManaged};
use navique_runtime::pki::{self, Lifetimes};
use navique_testkit::DevApiServer;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn components_racing_to_create_the_ca_agree_on_one() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let apiserver = DevApiServer::start(&[]);
    let client = apiserver.client().await;
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some("navique-system".to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let day = Duration::from_secs(86_400);
    let settings = SelfManaged {
        namespace: "navique-system".to_owned(),
        name: "navique-grpc-ca".to_owned(),
        dns_names: vec!["127.0.0.1".to_owned()],
        lifetimes: Lifetimes {
            ca: 100 * day,
            certificate: 10 * day,
            renew_before: 3 * day,
        },
        check_interval: Duration::from_secs(60),
    };
    let shutdown = CancellationToken::new();
    let components = [
        "backup-runner",
        "service-lifecycle-controller",
        "backup-runner",
        "service-lifecycle-controller",
    ];
    let started = futures::future::join_all(
        components.map(|component| settings.clone().start(client.clone(), component, &shutdown)),
    )
    .await;
    let credentials: Vec<GrpcTls> = started
        .into_iter()
        .map(|c| GrpcTls::Tls(c.unwrap().expect("not shut down")))
        .collect();

    let secret = Api::<Secret>::namespaced(client.clone(), "navique-system")
        .get("navique-grpc-ca")
        .await
        .unwrap();
    let bundle = String::from_utf8(secret.data.unwrap()[CA_BUNDLE].0.clone()).unwrap();
    assert_eq!(pki::certificates(&bundle).len(), 1, "one CA");

    // Every backup-runner replica answers every controller replica.
    for server in [&credentials[0], &credentials[2]] {
        let (addr, serving) = serve_without_cluster(server.clone(), &shutdown).await;
        for caller in [&credentials[1], &credentials[3]] {
            let status = client_with(caller, addr)
                .await
                .get_snapshot(GetSnapshotRequest {
                    idempotency_key: "unknown".to_owned(),
                })
                .await
                .unwrap_err();
            assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
        }
        drop(serving);
    }
    shutdown.cancel();
}
