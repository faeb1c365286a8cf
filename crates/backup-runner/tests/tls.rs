//! The gRPC server with TLS and mutual TLS: a client with a certificate of
//! the configured CA gets through, one without is turned away.

use std::path::Path;
use std::sync::Arc;

use backup_runner::Metrics;
use backup_runner::engine::Engine;
use backup_runner::grpc::{self, Api, TlsFiles};
use backup_runner::pg::PgTools;
use backup_runner::snapshots::Snapshots;
use backup_runner::store::Store;
use navique_api::grpc::snapshot::v1::GetSnapshotRequest;
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// PEM certificate and key signed by `issuer`.
fn leaf(issuer: &Issuer<'_, KeyPair>, names: &[&str]) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn ca() -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

fn write(dir: &Path, name: &str, pem: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path
}

#[tokio::test]
async fn mutual_tls_admits_only_clients_with_a_certificate_of_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, issuer) = ca();
    let (server_cert, server_key) = leaf(&issuer, &["localhost"]);
    let (client_cert, client_key) = leaf(&issuer, &["service-lifecycle-controller"]);
    let tls = TlsFiles {
        certificate: write(dir.path(), "tls.crt", &server_cert),
        key: write(dir.path(), "tls.key", &server_key),
        client_ca: Some(write(dir.path(), "ca.crt", &ca_pem)),
    }
    .load()
    .unwrap();

    // No API server is needed to answer GetSnapshot: a client that is
    // never used will do.
    let store =
        Store::from_url_opts(&format!("file://{}/store", dir.path().display()), []).unwrap();
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let engine = Engine::new(
        client,
        store,
        PgTools::locate(None).unwrap(),
        Metrics::default(),
    );
    let shutdown = CancellationToken::new();
    let snapshots = Snapshots::new(Arc::new(engine), shutdown.child_token());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(grpc::serve(
        listener,
        Some(tls),
        Api::new(snapshots).into_server(),
        shutdown.clone(),
    ));

    let endpoint = |identity: Option<Identity>| {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca_pem))
            .domain_name("localhost");
        if let Some(identity) = identity {
            tls = tls.identity(identity);
        }
        Endpoint::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
    };
    let ask = GetSnapshotRequest {
        idempotency_key: "unknown".into(),
    };

    let channel = endpoint(Some(Identity::from_pem(&client_cert, &client_key)))
        .connect()
        .await
        .expect("a client with a certificate connects");
    let status = SnapshotServiceClient::new(channel)
        .get_snapshot(ask.clone())
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");

    let refused = match endpoint(None).connect().await {
        Err(e) => e.to_string(),
        Ok(channel) => SnapshotServiceClient::new(channel)
            .get_snapshot(ask)
            .await
            .unwrap_err()
            .to_string(),
    };
    assert!(!refused.contains("unknown idempotency key"), "{refused}");

    shutdown.cancel();
    server.await.unwrap().unwrap();
}
