//! SnapshotService over real gRPC with mutual TLS, against the
//! "unauthenticated inside" attack class (ATTACKS.md): reaching the port is
//! not enough. Without a client certificate a call is Unauthenticated; with
//! a certificate of the same CA but another component's identity it is
//! PermissionDenied, naming the identity; a certificate of another CA and
//! plaintext never get a TLS session; oversized fields are InvalidArgument
//! before any work; the lifecycle controller's own certificate gets through.

mod common;

use backup_runner::NAME;
use common::{CONTROLLER, Pki, request, serve_without_cluster, service_ref};
use navique_api::grpc::snapshot::v1::GetSnapshotRequest;
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

fn unknown() -> GetSnapshotRequest {
    GetSnapshotRequest {
        idempotency_key: "unknown".into(),
    }
}

#[tokio::test]
async fn only_the_lifecycle_controllers_certificate_may_call() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new();
    let shutdown = CancellationToken::new();
    let (addr, server) = serve_without_cluster(pki.tls(NAME), &shutdown).await;

    // The lifecycle controller: through to the service (which knows no
    // such key).
    let mut controller = pki.client(CONTROLLER, addr).await;
    let status = controller.get_snapshot(unknown()).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    // (c) Oversized fields: refused before any work, naming the field.
    let uid = "0b6f5d5e-6a3c-4d2e-9f1a-2b3c4d5e6f70";
    let oversized = request(&"k".repeat(10_000), service_ref("p", "s", uid), "b");
    let status = controller.request_snapshot(oversized).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains("idempotency_key is 10000 bytes long"),
        "{status:?}"
    );
    let status = controller
        .get_snapshot(GetSnapshotRequest {
            idempotency_key: "k".repeat(257),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // A 100 KB key: larger than the server decodes at all.
    let huge = request(&"k".repeat(100_000), service_ref("p", "s", uid), "b");
    let status = controller.request_snapshot(huge).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");

    // (a) TLS without a client certificate: Unauthenticated, every RPC.
    let anonymous = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca.bundle)))
        .unwrap()
        .connect()
        .await
        .expect("TLS without a client certificate connects");
    let mut anonymous = SnapshotServiceClient::new(anonymous);
    let status = anonymous.get_snapshot(unknown()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = anonymous
        .request_snapshot(request("key", service_ref("p", "s", uid), "b"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // (b) Another component's certificate of the same CA: PermissionDenied.
    for other in ["lock-controller", "webhook", NAME] {
        let mut client = pki.client(other, addr).await;
        let status = client.get_snapshot(unknown()).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{other}: {status:?}");
        assert!(
            status
                .message()
                .contains(&format!("spiffe://navique/component/{other} may not call")),
            "{status:?}"
        );
    }

    // A certificate of another CA naming the controller: no TLS session.
    let forged = Pki::new();
    let tls = forged.tls(CONTROLLER);
    let channel = navique_runtime::grpc_tls::channel(
        "test",
        &format!("https://{addr}"),
        &tls,
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    let status = SnapshotServiceClient::new(channel)
        .get_snapshot(unknown())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");

    // (d) Plaintext: refused.
    let plaintext = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let status = SnapshotServiceClient::new(plaintext)
        .get_snapshot(unknown())
        .await
        .unwrap_err();
    assert_ne!(status.code(), Code::NotFound, "{status:?}");
    assert!(
        std::error::Error::source(&status).is_some(),
        "a transport failure: {status:?}"
    );

    shutdown.cancel();
    server.await.unwrap().unwrap();
}
