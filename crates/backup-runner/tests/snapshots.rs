//! Snapshots end to end against a real PostgreSQL, the dev API server and
//! two stores (a folder, and S3 over HTTP): stored, verified, recorded,
//! idempotent, cleaned up on failure, restorable only within a Project.

mod common;

use std::path::PathBuf;

use backup_runner::store::Store;
use common::{
    Env, Runner, TIMEOUT, files, request, restore_list, service_ref, sha256_file, watch_to_end,
};
use kube::api::{Api as KubeApi, Patch, PatchParams};
use navique_api::grpc::snapshot::v1::{
    GetSnapshotRequest, Phase, RestoreSnapshotRequest, ServiceRef,
};
use navique_api::services::{BackupPhase, ManagedService};
use navique_testkit::eventually;
use navique_testkit::s3::{BUCKET, S3Server};

const NS: &str = "my-project";

/// Where a test's archives land on disk, whichever the store.
enum Backend {
    Folder(tempfile::TempDir),
    S3(S3Server),
}

impl Backend {
    async fn folder() -> (Backend, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::from_url_opts(&format!("file://{}/archives", dir.path().display()), []).unwrap();
        (Backend::Folder(dir), store)
    }

    async fn s3() -> (Backend, Store) {
        let server = S3Server::start().await;
        let store = Store::from_url_opts(&format!("s3://{BUCKET}/navique"), server.env()).unwrap();
        (Backend::S3(server), store)
    }

    /// The folder whose files are the store's objects.
    fn objects(&self) -> PathBuf {
        match self {
            Backend::Folder(dir) => dir.path().join("archives"),
            Backend::S3(server) => server.bucket_dir().join("navique"),
        }
    }

    fn url_prefix(&self) -> String {
        match self {
            Backend::Folder(dir) => format!("file://{}/archives", dir.path().display()),
            Backend::S3(_) => format!("s3://{BUCKET}/navique"),
        }
    }
}

/// A database with rows is dumped, stored, verified and recorded on its
/// ServiceBackup; asking again (also concurrently) never makes a second
/// object; the archive restores into a fresh service of the same Project
/// and is refused for another Project.
async fn snapshot_round_trip(backend: Backend, store: Store) {
    let env = Env::start(&[NS, "other-project"]).await;
    let uid = env.service(NS, "orders-db", "orders", None).await;
    let orders = Env::database(NS, "orders");
    env.fill(&orders, 2000, 40).await;
    env.record(NS, "orders-db-final", "orders-db", "Final")
        .await;
    let runner = Runner::start(&env.client, store, false).await;
    let mut client = runner.client().await;
    let key = format!("{uid}/final");
    let service = service_ref(NS, "orders-db", &uid);

    // Duplicates, concurrent and sequential, land on one snapshot.
    let requests = (0..4).map(|_| {
        let mut client = client.clone();
        let request = request(&key, service.clone(), "orders-db-final");
        async move { client.request_snapshot(request).await.unwrap().into_inner() }
    });
    let first = futures::future::join_all(requests).await;
    assert!(
        first.iter().all(|s| s.started_at == first[0].started_at),
        "{first:?}"
    );
    let snapshot = watch_to_end(&mut client, &key).await;
    assert_eq!(snapshot.phase(), Phase::Completed, "{}", snapshot.message);
    let again = client
        .request_snapshot(request(&key, service.clone(), "orders-db-final"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again, snapshot);
    assert_eq!(
        client
            .get_snapshot(GetSnapshotRequest {
                idempotency_key: key.clone(),
            })
            .await
            .unwrap()
            .into_inner(),
        snapshot
    );
    assert_eq!(runner.metrics.started.get(), 1);
    assert_eq!(runner.metrics.completed.get(), 1);

    // The object: one archive and its manifest, with the recorded size and
    // sha256 recomputed from the stored bytes, readable by pg_restore.
    let stem = format!("{NS}/orders-db-{uid}/orders-db-final");
    assert_eq!(
        files(&backend.objects()),
        [format!("{stem}.dump"), format!("{stem}.json")]
    );
    let archive = backend.objects().join(format!("{stem}.dump"));
    assert_eq!(
        snapshot.location,
        format!("{}/{stem}.dump", backend.url_prefix())
    );
    assert_eq!(
        snapshot.size_bytes,
        std::fs::metadata(&archive).unwrap().len()
    );
    assert_eq!(snapshot.sha256, sha256_file(&archive));
    let entries = restore_list(&archive).await;
    assert!(
        entries
            .iter()
            .any(|e| e.contains("TABLE DATA public items")),
        "{entries:?}"
    );
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(backend.objects().join(format!("{stem}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["sha256"], snapshot.sha256.as_str());
    assert_eq!(manifest["sizeBytes"], snapshot.size_bytes);
    assert_eq!(manifest["origin"], "Final");
    assert_eq!(manifest["service"]["uid"], uid.as_str());

    // The ServiceBackup record.
    let status = eventually(TIMEOUT, "the ServiceBackup to be Completed", || async {
        env.backup(NS, "orders-db-final")
            .await
            .status
            .filter(|s| s.phase == Some(BackupPhase::Completed))
    })
    .await;
    assert_eq!(status.location.as_deref(), Some(snapshot.location.as_str()));
    assert_eq!(status.size_bytes, Some(snapshot.size_bytes as i64));
    assert_eq!(status.checksum, Some(format!("sha256:{}", snapshot.sha256)));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let stored = env.backup(NS, "orders-db-final").await;
    assert!(
        stored
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .any(|f| f.manager.as_deref() == Some("backup-runner")
                && f.subresource.as_deref() == Some("status")),
        "status is applied by the field manager backup-runner"
    );

    // Another key for the same backup name is refused.
    let error = client
        .request_snapshot(request("another-key", service.clone(), "orders-db-final"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::AlreadyExists, "{error:?}");

    // Restore into a fresh service of the same Project: the same rows, and
    // again (a retry) with the same result.
    let copy_uid = env
        .service(NS, "orders-copy", "orders_copy", Some("orders-db-final"))
        .await;
    let copy = Env::database(NS, "orders_copy");
    let restore = RestoreSnapshotRequest {
        source_service: Some(service.clone()),
        backup_name: "orders-db-final".to_owned(),
        target: Some(service_ref(NS, "orders-copy", &copy_uid)),
        jobs: 0,
    };
    for _ in 0..2 {
        let restored = client
            .restore_snapshot(restore.clone())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(restored.sha256, snapshot.sha256);
        assert_eq!(restored.database, copy);
        let original = env.items(&orders).await;
        assert_eq!(original.len(), 2000);
        assert_eq!(env.items(&copy).await, original);
    }

    // unauthenticated inside: whatever the caller asks, the stored objects
    // decide. A service that does not ask for this restore is not written.
    let error = client
        .restore_snapshot(RestoreSnapshotRequest {
            target: Some(service.clone()),
            ..restore.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        error.message(),
        format!(
            "ManagedService {NS}/orders-db does not ask for a restore of orders-db-final: its \
             spec.restoreFrom.backupName must name it"
        )
    );
    // A protected service holding data is never restored over, even when
    // it asks (the webhook refuses that update; this is the second lock).
    let live_uid = env
        .service(NS, "orders-live", "orders_live", Some("orders-db-final"))
        .await;
    let live = Env::database(NS, "orders_live");
    env.fill(&live, 3, 10).await;
    KubeApi::<ManagedService>::namespaced(env.client.clone(), NS)
        .patch(
            "orders-live",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"deletionProtection": true}})),
        )
        .await
        .unwrap();
    let error = client
        .restore_snapshot(RestoreSnapshotRequest {
            target: Some(service_ref(NS, "orders-live", &live_uid)),
            ..restore.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        error.message(),
        format!(
            "ManagedService {NS}/orders-live holds data: spec.restoreFrom: an in-place restore \
             replaces this service's data; set spec.deletionProtection=false first"
        )
    );
    assert_eq!(env.items(&live).await.len(), 3);
    // The restore of a protected new service is retried safely: the
    // database holds what that restore wrote.
    KubeApi::<ManagedService>::namespaced(env.client.clone(), NS)
        .patch(
            "orders-copy",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"deletionProtection": true}})),
        )
        .await
        .unwrap();
    client.restore_snapshot(restore.clone()).await.unwrap();
    // A snapshot needs a record that describes it.
    let error = client
        .request_snapshot(request("no-record", service.clone(), "no-such-record"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
    assert_eq!(
        error.message(),
        format!(
            "ServiceBackup {NS}/no-such-record does not exist: a snapshot is taken only for a \
             record that describes it"
        )
    );
    let error = client
        .request_snapshot(request(
            "copy-key",
            service_ref(NS, "orders-copy", &copy_uid),
            "orders-db-final",
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        error.message(),
        format!(
            "ServiceBackup {NS}/orders-db-final is not a Final backup of {NS}/orders-copy: it \
             describes service orders-db"
        )
    );

    // Never into another Project.
    let foreign_uid = env
        .service("other-project", "thief-db", "thief", None)
        .await;
    let error = client
        .restore_snapshot(RestoreSnapshotRequest {
            target: Some(service_ref("other-project", "thief-db", &foreign_uid)),
            ..restore.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
    assert!(
        error
            .message()
            .starts_with("a backup can only be restored into a service of the same Project"),
        "{}",
        error.message()
    );
    // A backup that was never taken.
    let error = client
        .restore_snapshot(RestoreSnapshotRequest {
            backup_name: "never-taken".to_owned(),
            ..restore
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound, "{}", error.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_round_trip_in_a_folder() {
    let (backend, store) = Backend::folder().await;
    snapshot_round_trip(backend, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_round_trip_in_s3() {
    let (backend, store) = Backend::s3().await;
    snapshot_round_trip(backend, store).await;
}

/// pg_dump fails (the database takes no connections): FAILED with
/// pg_dump's reason, the record says so, and the store holds nothing; once
/// it does again, the same key starts a new attempt that completes.
async fn failing_dump_leaves_nothing(backend: Backend, store: Store) {
    let env = Env::start(&[NS]).await;
    let uid = env.service(NS, "orders-db", "orders", None).await;
    let orders = Env::database(NS, "orders");
    env.fill(&orders, 10, 10).await;
    env.pg
        .admin()
        .await
        .batch_execute(&format!("ALTER DATABASE {orders} ALLOW_CONNECTIONS false"))
        .await
        .unwrap();
    env.record(NS, "orders-db-final", "orders-db", "Final")
        .await;
    let runner = Runner::start(&env.client, store, false).await;
    let mut client = runner.client().await;
    let key = format!("{uid}/final");
    let service = service_ref(NS, "orders-db", &uid);
    client
        .request_snapshot(request(&key, service.clone(), "orders-db-final"))
        .await
        .unwrap();
    let snapshot = watch_to_end(&mut client, &key).await;
    assert_eq!(snapshot.phase(), Phase::Failed);
    assert!(
        snapshot
            .message
            .starts_with(&format!("pg_dump of database {orders} on 127.0.0.1:"))
            && snapshot.message.contains(&format!(
                "database \"{orders}\" is not currently accepting connections"
            )),
        "{}",
        snapshot.message
    );
    assert!(
        !snapshot
            .message
            .contains(navique_testkit::postgres::ADMIN_PASSWORD)
    );
    assert_eq!(files(&backend.objects()), Vec::<String>::new());
    if let Backend::S3(server) = &backend {
        // No multipart upload left behind either.
        assert!(
            !files(server.root()).iter().any(|f| f.contains("upload")),
            "{:?}",
            files(server.root())
        );
    }
    let status = eventually(TIMEOUT, "the ServiceBackup to be Failed", || async {
        env.backup(NS, "orders-db-final")
            .await
            .status
            .filter(|s| s.phase == Some(BackupPhase::Failed))
    })
    .await;
    assert_eq!(status.message.as_deref(), Some(snapshot.message.as_str()));
    assert_eq!(status.location, None);

    // Fixed: the FAILED key starts again.
    env.pg
        .admin()
        .await
        .batch_execute(&format!("ALTER DATABASE {orders} ALLOW_CONNECTIONS true"))
        .await
        .unwrap();
    let retried = client
        .request_snapshot(request(&key, service, "orders-db-final"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(retried.phase(), Phase::Failed);
    assert_eq!(
        watch_to_end(&mut client, &key).await.phase(),
        Phase::Completed
    );
    assert_eq!(files(&backend.objects()).len(), 2);
    assert_eq!(runner.metrics.failed.get(), 1);
    assert_eq!(runner.metrics.completed.get(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_dump_leaves_nothing_in_a_folder() {
    let (backend, store) = Backend::folder().await;
    failing_dump_leaves_nothing(backend, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_dump_leaves_nothing_in_s3() {
    let (backend, store) = Backend::s3().await;
    failing_dump_leaves_nothing(backend, store).await;
}

/// A Manual ServiceBackup gets its snapshot from the controller; one whose
/// service does not exist fails with `service not found: <name>`; malformed
/// requests are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_backups_are_taken_by_the_controller() {
    let env = Env::start(&[NS]).await;
    let uid = env.service(NS, "orders-db", "orders", None).await;
    env.fill(&Env::database(NS, "orders"), 100, 20).await;
    let (backend, store) = Backend::folder().await;
    let runner = Runner::start(&env.client, store, true).await;
    env.record(NS, "before-upgrade", "orders-db", "Manual")
        .await;
    env.record(NS, "of-a-ghost", "ghost-db", "Manual").await;

    let status = eventually(TIMEOUT, "the manual backup to complete", || async {
        env.backup(NS, "before-upgrade")
            .await
            .status
            .filter(|s| s.phase == Some(BackupPhase::Completed))
    })
    .await;
    let record = env.backup(NS, "before-upgrade").await;
    let key = format!("{uid}/manual/{}", record.metadata.uid.unwrap());
    let snapshot = runner.snapshots.get(&key).expect("the manual key");
    assert_eq!(snapshot.phase(), Phase::Completed);
    assert_eq!(status.checksum, Some(format!("sha256:{}", snapshot.sha256)));
    let archive = backend
        .objects()
        .join(format!("{NS}/orders-db-{uid}/before-upgrade.dump"));
    assert_eq!(sha256_file(&archive), snapshot.sha256);

    let ghost = eventually(TIMEOUT, "the ghost's backup to fail", || async {
        env.backup(NS, "of-a-ghost")
            .await
            .status
            .filter(|s| s.phase == Some(BackupPhase::Failed))
    })
    .await;
    assert_eq!(
        ghost.message.as_deref(),
        Some("service not found: ghost-db")
    );

    // Requests that cannot name a backup are refused before anything starts.
    let mut client = runner.client().await;
    let error = client
        .request_snapshot(request(
            "k",
            ServiceRef {
                namespace: NS.into(),
                name: "../etc".into(),
                uid: "u".into(),
            },
            "b",
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument, "{error:?}");
    let error = client
        .get_snapshot(GetSnapshotRequest {
            idempotency_key: "never-asked".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
}
