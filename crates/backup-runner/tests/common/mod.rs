//! What backup-runner's integration tests run against: a throwaway
//! PostgreSQL (passwords required over TCP), the dev API server with the
//! CRDs from deploy/crds (both navique_testkit's), and backup-runner itself,
//! in-process or as its binary. The S3 protocol server is navique_testkit::s3.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use backup_runner::engine::Engine;
use backup_runner::grpc::Api;
use backup_runner::pg::PgTools;
use backup_runner::snapshots::Snapshots;
use backup_runner::store::Store;
use backup_runner::{Metrics, grpc, manual};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api as KubeApi, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_api::grpc::snapshot::v1::{
    GetSnapshotRequest, Origin, Phase, RequestSnapshotRequest, ServiceRef, Snapshot,
    WatchSnapshotRequest,
};
use navique_api::services::{ManagedService, RestoreFrom, ServiceBackup, ServiceClass};
use navique_provider_postgres::{
    AdminConnection, Engine as ProviderEngine, MAX_NAME_LEN, Owner, names,
};
use navique_runtime::grpc_tls::ca::{self, Ca};
use navique_runtime::grpc_tls::{self, Credentials, GrpcTls};
use navique_runtime::pki::{self, Lifetimes};
use navique_testkit::postgres::{ADMIN_PASSWORD, Auth, Postgres};
use navique_testkit::{DevApiServer, describe, eventually, repo_root, yaml_documents};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub const TIMEOUT: Duration = Duration::from_secs(60);
/// Where the provider's catalogue Secrets are, as in the chart.
pub const PROVIDER_NAMESPACE: &str = "navique-system";

/// PostgreSQL, the API server with the CRDs and the given namespaces.
pub struct Env {
    pub pg: Postgres,
    pub client: Client,
    pub apiserver: DevApiServer,
}

impl Env {
    pub async fn start(namespaces: &[&str]) -> Env {
        // kube uses ring, object_store's client takes the process default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pg = Postgres::start(Auth::Scram);
        let apiserver = DevApiServer::start(&[]);
        let client = apiserver.client().await;
        apiserver.install_crds().await;
        for name in namespaces.iter().chain(&[PROVIDER_NAMESPACE]) {
            let namespace = Namespace {
                metadata: ObjectMeta {
                    name: Some((*name).to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            };
            KubeApi::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &namespace)
                .await
                .unwrap();
        }
        // The provider's catalogue: the class's admin Secret points at pg.
        let admin: BTreeMap<String, ByteString> = [
            ("host", "127.0.0.1".to_owned()),
            ("port", pg.port.to_string()),
            ("user", "postgres".to_owned()),
            ("password", ADMIN_PASSWORD.to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("provider-postgresql-admin".to_owned()),
                ..Default::default()
            },
            data: Some(admin),
            ..Default::default()
        };
        KubeApi::<Secret>::namespaced(client.clone(), PROVIDER_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let class: ServiceClass = serde_yaml::from_value(
            yaml_documents(&repo_root().join("deploy/examples/catalogue.yaml")).remove(0),
        )
        .unwrap();
        KubeApi::<ServiceClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        Env {
            pg,
            client,
            apiserver,
        }
    }

    /// The name `database` of a service in `namespace` gets on the server
    /// (its database and its owner role, password `<name>-pw`).
    pub fn database(namespace: &str, database: &str) -> String {
        names::physical(namespace, database, MAX_NAME_LEN)
    }

    /// The provider's engine, as the lifecycle controller uses it.
    pub fn engine(&self) -> ProviderEngine {
        ProviderEngine::new(
            AdminConnection::from_secret(
                &[
                    ("host", "127.0.0.1".to_owned()),
                    ("port", self.pg.port.to_string()),
                    ("user", "postgres".to_owned()),
                    ("password", ADMIN_PASSWORD.to_owned()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            )
            .unwrap(),
        )
    }

    /// A ProviderShared ManagedService `name` in `namespace` asking for
    /// database `database` (owned by the role of the same name), provisioned
    /// as the lifecycle controller does: recorded as the service's own on
    /// the server ([`Env::database`] names it). `restore_from` is its
    /// `spec.restoreFrom.backupName`. Returns the service's uid.
    pub async fn service(
        &self,
        namespace: &str,
        name: &str,
        database: &str,
        restore_from: Option<&str>,
    ) -> String {
        let mut service: ManagedService = serde_yaml::from_value(
            yaml_documents(&repo_root().join("deploy/examples/orders-db.yaml")).remove(0),
        )
        .unwrap();
        service.annotations_mut().clear();
        service.metadata.name = Some(name.to_owned());
        service.metadata.namespace = Some(namespace.to_owned());
        service.spec.parameters = Some(
            serde_json::from_value(serde_json::json!({"database": database, "owner": database}))
                .unwrap(),
        );
        service.spec.restore_from = restore_from.map(|backup| RestoreFrom {
            backup_name: backup.to_owned(),
            namespace: None,
        });
        let created = KubeApi::<ManagedService>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let physical = names::of_service(&created).unwrap();
        self.engine()
            .ensure(
                &Owner::of(&created).unwrap(),
                &physical,
                &format!("{}-pw", physical.owner),
            )
            .await
            .unwrap();
        created.uid().unwrap()
    }

    /// Logs in to database `name` as its owner.
    pub async fn owner(&self, name: &str) -> tokio_postgres::Client {
        self.pg
            .login(name, &format!("{name}-pw"), name)
            .await
            .expect("log in as the owner")
    }

    /// The rows of `items` in database `name`, in order.
    pub async fn items(&self, name: &str) -> Vec<(i32, String)> {
        self.owner(name)
            .await
            .query("SELECT id, label FROM items ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    }

    /// Fills `items` in `database` with `rows` rows of `width` random hex
    /// characters (which pg_dump compresses to about half).
    pub async fn fill(&self, database: &str, rows: i32, width: usize) {
        let random = vec!["md5(random()::text)"; width / 32 + 1].join(" || ");
        self.owner(database)
            .await
            .batch_execute(&format!(
                "CREATE TABLE items (id integer PRIMARY KEY, label text NOT NULL);
                 CREATE INDEX items_label ON items (label);
                 INSERT INTO items
                   SELECT i, left({random}, {width})
                   FROM generate_series(1, {rows}) AS i;"
            ))
            .await
            .unwrap();
    }

    /// A ServiceBackup record `name` of `service`.
    pub async fn record(&self, namespace: &str, name: &str, service: &str, origin: &str) {
        let record: ServiceBackup = serde_json::from_value(serde_json::json!({
            "apiVersion": "services.kube-dc.com/v1alpha1",
            "kind": "ServiceBackup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"serviceRef": {"name": service}, "origin": origin},
        }))
        .unwrap();
        KubeApi::<ServiceBackup>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &record)
            .await
            .unwrap();
    }

    pub async fn backup(&self, namespace: &str, name: &str) -> ServiceBackup {
        KubeApi::<ServiceBackup>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .unwrap()
    }
}

/// The lifecycle controller, the one component SnapshotService answers.
pub const CONTROLLER: &str = "service-lifecycle-controller";

fn lifetimes() -> Lifetimes {
    Lifetimes {
        ca: Duration::from_secs(10 * 86_400),
        certificate: Duration::from_secs(2 * 86_400),
        renew_before: Duration::from_secs(86_400),
    }
}

/// A gRPC CA, and the certificates of it the self-managed mode issues.
pub struct Pki {
    pub ca: Ca,
}

impl Pki {
    pub fn new() -> Pki {
        let (ca, _) = ca::next_ca(&Ca::default(), &lifetimes(), pki::unix_now())
            .unwrap()
            .unwrap();
        Pki { ca }
    }

    /// The CA of the Secret `namespace/name` that a backup-runner in
    /// self-managed mode created, once it exists.
    pub async fn from_secret(client: &Client, namespace: &str, name: &str) -> Pki {
        let secrets = KubeApi::<Secret>::namespaced(client.clone(), namespace);
        let secret = eventually(TIMEOUT, "the gRPC CA Secret", || async {
            secrets.get_opt(name).await.ok().flatten()
        })
        .await;
        let text =
            |key: &str| String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap();
        Pki {
            ca: Ca {
                bundle: text(ca::CA_BUNDLE),
                key: text(ca::CA_KEY),
            },
        }
    }

    /// `component`'s certificate (for 127.0.0.1), as PEM and key PEM.
    pub fn issue(&self, component: &str) -> (String, String) {
        let names = ["127.0.0.1".to_owned()];
        ca::issue(&self.ca, component, &names, &lifetimes(), pki::unix_now()).unwrap()
    }

    /// TLS as `component`.
    pub fn tls(&self, component: &str) -> GrpcTls {
        let (certificate, key) = self.issue(component);
        GrpcTls::Tls(Credentials::new(&certificate, &key, &self.ca.bundle).unwrap())
    }

    /// A client of the server at `addr` as `component`, once it answers.
    pub async fn client(
        &self,
        component: &str,
        addr: SocketAddr,
    ) -> SnapshotServiceClient<Channel> {
        client_with(&self.tls(component), addr).await
    }
}

/// A client of the server at `addr` with `tls`, once it answers.
pub async fn client_with(tls: &GrpcTls, addr: SocketAddr) -> SnapshotServiceClient<Channel> {
    let channel = grpc_tls::channel(
        "test",
        &format!("https://{addr}"),
        tls,
        Duration::from_secs(5),
    )
    .unwrap();
    let client = SnapshotServiceClient::new(channel);
    eventually(TIMEOUT, "backup-runner's gRPC server", || async {
        let probe = GetSnapshotRequest {
            idempotency_key: "probe".to_owned(),
        };
        let status = client.clone().get_snapshot(probe).await.err()?;
        (status.code() != tonic::Code::Unavailable).then_some(())
    })
    .await;
    client
}

/// backup-runner's gRPC server in this process with `tls`, and an engine
/// whose API server is never reached (enough to answer GetSnapshot): its
/// address; it stops on `shutdown`.
pub async fn serve_without_cluster(
    tls: GrpcTls,
    shutdown: &CancellationToken,
) -> (
    SocketAddr,
    tokio::task::JoinHandle<Result<(), backup_runner::Error>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store =
        Store::from_url_opts(&format!("file://{}/store", dir.path().display()), []).unwrap();
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let engine = Engine::new(
        Client::try_from(config).unwrap(),
        store,
        PgTools::locate(None).unwrap(),
        Metrics::default(),
    );
    let snapshots = Snapshots::new(Arc::new(engine), shutdown.child_token());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = shutdown.clone();
    let server = tokio::spawn(async move {
        let _dir = dir;
        grpc::serve(
            listener,
            &tls,
            Api::new(snapshots),
            vec![CONTROLLER.to_owned()],
            serving,
        )
        .await
    });
    (addr, server)
}

/// backup-runner's server (and manual-backup controller) in this process,
/// with mutual TLS as it runs in a cluster.
pub struct Runner {
    pub addr: SocketAddr,
    pub snapshots: Arc<Snapshots>,
    pub metrics: Metrics,
    pub pki: Pki,
    shutdown: CancellationToken,
}

impl Runner {
    pub async fn start(client: &Client, store: Store, with_manual_controller: bool) -> Runner {
        let metrics = Metrics::default();
        let tools = PgTools::locate(None).expect("pg_dump and pg_restore");
        let engine = Arc::new(Engine::new(client.clone(), store, tools, metrics.clone()));
        let shutdown = CancellationToken::new();
        let snapshots = Snapshots::new(engine, shutdown.child_token());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pki = Pki::new();
        let tls = pki.tls(backup_runner::NAME);
        let api = Api::new(snapshots.clone());
        let serving = shutdown.clone();
        tokio::spawn(async move {
            grpc::serve(listener, &tls, api, vec![CONTROLLER.to_owned()], serving).await
        });
        if with_manual_controller {
            tokio::spawn(manual::run(
                client.clone(),
                snapshots.clone(),
                Default::default(),
                shutdown.clone(),
            ));
        }
        Runner {
            addr,
            snapshots,
            metrics,
            pki,
            shutdown,
        }
    }

    /// A client with the lifecycle controller's certificate.
    pub async fn client(&self) -> SnapshotServiceClient<Channel> {
        self.pki.client(CONTROLLER, self.addr).await
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn service_ref(namespace: &str, name: &str, uid: &str) -> ServiceRef {
    ServiceRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
    }
}

pub fn request(key: &str, service: ServiceRef, backup_name: &str) -> RequestSnapshotRequest {
    RequestSnapshotRequest {
        idempotency_key: key.to_owned(),
        service: Some(service),
        origin: Origin::Final as i32,
        backup_name: backup_name.to_owned(),
        ..Default::default()
    }
}

/// Follows the snapshot to its end; the final Snapshot.
pub async fn watch_to_end(client: &mut SnapshotServiceClient<Channel>, key: &str) -> Snapshot {
    let mut stream = client
        .watch_snapshot(WatchSnapshotRequest {
            idempotency_key: key.to_owned(),
        })
        .await
        .expect("WatchSnapshot")
        .into_inner();
    let mut last = None;
    let deadline = tokio::time::sleep(TIMEOUT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            () = &mut deadline => panic!("snapshot {key} did not finish in time"),
            message = stream.message() => match message.expect("stream") {
                Some(progress) => last = Some(progress),
                None => break,
            },
        }
    }
    let last = last.expect("at least one progress message");
    let snapshot = last
        .snapshot
        .expect("the last message carries the snapshot");
    assert!(
        matches!(snapshot.phase(), Phase::Completed | Phase::Failed),
        "{snapshot:?}"
    );
    snapshot
}

/// `pg_restore --list` of an archive file (a zstd frame, as backup-runner
/// stores them): its entries.
pub async fn restore_list(archive: &Path) -> Vec<String> {
    use tokio::io::AsyncReadExt;
    let stored = fs::read(archive).unwrap();
    assert_eq!(&stored[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let mut dump = Vec::new();
    async_compression::tokio::bufread::ZstdDecoder::new(&stored[..])
        .read_to_end(&mut dump)
        .await
        .unwrap();
    let listed = std::env::temp_dir().join(format!("navique-list-{}.dump", std::process::id()));
    fs::write(&listed, &dump).unwrap();
    let tools = PgTools::locate(None).unwrap();
    let output = Command::new(tools.bin_dir().join("pg_restore"))
        .arg("--list")
        .arg(&listed)
        .output()
        .unwrap();
    fs::remove_file(&listed).unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| backup_runner::pg::is_list_entry(l))
        .map(str::to_owned)
        .collect()
}

/// The files under `dir`, relative, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

pub fn sha256_file(path: &Path) -> String {
    use sha2::Digest;
    backup_runner::transfer::hex(&sha2::Sha256::digest(fs::read(path).unwrap()))
}
