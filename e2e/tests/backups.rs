//! Backups end to end: the real service-lifecycle-controller, webhook and
//! backup-runner (over gRPC, storing into a local directory or an S3
//! protocol server) on the dev API server, with a real PostgreSQL.
//! `SnapshotAndDelete` leaves one verified Final backup that restores into a
//! new service; a Project user takes a manual backup; with backup-runner
//! down nothing is deleted until it is back, and then exactly one backup is
//! taken; a backup's retention removes its archive, then its record.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_api::grpc::snapshot::v1::{
    GetSnapshotRequest, RequestSnapshotRequest, RestoreSnapshotRequest, ServiceRef,
};
use navique_e2e::readable::assert_readable;
use navique_e2e::s3::{BUCKET, S3Server};
use navique_e2e::services::{ALICE, ServiceEnv, grpc_ca, on_server, snapshot_client};
use navique_e2e::{Process, eventually, free_port};
use navique_runtime::grpc_tls::ca::Ca;
use tonic::Code;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

const WAIT: Duration = Duration::from_secs(60);

/// One line per ServiceBackup in `ns`: name, origin, phase, location, size,
/// checksum, owners.
fn backups(env: &ServiceEnv, ns: &str) -> Vec<Vec<String>> {
    let out = env.cluster.kubectl_ok(&[
        "get",
        "servicebackups",
        "-n",
        ns,
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.spec.origin} {.status.phase} {.status.location} {.status.sizeBytes} {.status.checksum} owners={.metadata.ownerReferences}{"\n"}{end}"#,
    ]);
    out.lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect()
}

/// The files under the store directory with extension `extension`: `dump`
/// for archives, `json` for the manifests that make them backups.
fn stored(store: &Path, extension: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![store.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                found.push(path);
            }
        }
    }
    found
}

/// The first bytes of a zstd frame, and of pg_dump's custom format.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const PG_DUMP_MAGIC: &[u8] = b"PGDMP";

/// The manifest next to the archive `archive` (`x.dump` → `x.json`).
fn manifest_of(archive: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(archive.with_extension("json")).unwrap()).unwrap()
}

fn sha256(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.split(' ').next().unwrap().to_owned()
}

/// The environment with backup-runner storing into a local directory,
/// and the controller leading.
async fn with_backup_runner() -> (ServiceEnv, Process, tempfile::TempDir) {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    env.controller_ready().await;
    (env, runner, store)
}

/// A service with 1,000 rows in a table its owner role owns; `spec` is
/// added to the example's spec.
async fn service_with_rows(env: &ServiceEnv, ns: &str, db: &str, spec: &str) {
    let manifest = env.orders_db(ns, db, "SnapshotAndDelete", false).replace(
        "  deletionPolicy: SnapshotAndDelete",
        &format!("  deletionPolicy: SnapshotAndDelete\n{spec}"),
    );
    env.apply(&manifest).await;
    env.until_state(ns, "orders-db", "Ready Available").await;
    env.postgres.query_in(&on_server(ns, db),
        &format!(
            "set role {}; create table items (id int primary key, name text); insert into items select g, 'item ' || g from generate_series(1, 1000) g",
            on_server(ns, db)
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_delete_leaves_one_verified_final_backup_that_restores() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("final");
    let db = "final_orders";
    service_with_rows(&env, &ns, db, "").await;

    // A Project user asks for a backup now, and waits for it as for any
    // Kubernetes object: its Ready condition turns True once Completed.
    manual_backup(&env, &ns, "before-delete", None);
    assert_eq!(
        env.cluster.kubectl_ok(&[
            "wait",
            "--for=condition=Ready",
            "servicebackup/before-delete",
            "-n",
            &ns,
            "--timeout=30s",
        ]),
        "servicebackup.services.kube-dc.com/before-delete condition met\n"
    );
    assert!(
        backups(&env, &ns)
            .iter()
            .any(|b| b[0] == "before-delete" && b[1] == "Manual" && b[2] == "Completed")
    );
    // SIZE reads in binary units; the Ready reason is the phase.
    let table = env
        .cluster
        .kubectl_ok(&["get", "sbk", "before-delete", "-n", &ns, "-o", "wide"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "SERVICE",
            "ORIGIN",
            "PHASE",
            "SIZE",
            "PROGRESS",
            "COMPLETED",
            "AGE",
            "MESSAGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["before-delete", "orders-db", "Manual", "Completed"]
    );
    assert!(
        row[5] == "KiB" || row[5] == "MiB",
        "a human size such as 24.1 KiB: {table}"
    );
    assert!(row[4].parse::<f64>().is_ok(), "{table}");
    assert_eq!(&row[6..8], ["100%", "1/1"], "the dump's progress: {table}");
    assert_eq!(
        env.cluster.kubectl_ok(&[
            "get",
            "sbk",
            "before-delete",
            "-n",
            &ns,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].reason}"#,
        ]),
        "Completed"
    );

    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(
        !env.postgres.database_exists(&on_server(&ns, db)),
        "removed after the backup"
    );

    let all = backups(&env, &ns);
    let finals: Vec<&Vec<String>> = all.iter().filter(|b| b[1] == "Final").collect();
    assert_eq!(finals.len(), 1, "{all:?}");
    let record = finals[0];
    assert!(record[0].starts_with("orders-db-final-"), "{record:?}");
    assert_eq!(record[2], "Completed");
    assert_eq!(
        env.cluster.event_messages(&ns, "FinalBackupStarted"),
        format!(
            "Normal taking the final backup, recorded as ServiceBackup {}\n",
            record[0]
        )
    );
    assert_eq!(
        env.cluster.event_messages(&ns, "FinalBackupCompleted"),
        format!(
            "Normal the final backup ServiceBackup {} is stored and verified at {}\n",
            record[0], record[3]
        )
    );
    assert_eq!(record[6], "owners=", "a record has no owner");
    assert_readable(&env.cluster, &ns);
    // The stored archive is the one recorded: its size and checksum.
    let path = record[3]
        .strip_prefix("file://")
        .unwrap_or_else(|| panic!("{record:?}"));
    let path = Path::new(path);
    assert_eq!(
        std::fs::metadata(path).unwrap().len().to_string(),
        record[4]
    );
    assert_eq!(record[5], format!("sha256:{}", sha256(path)));
    // Compressed by backup-runner: a zstd frame, and the manifest says so.
    assert_eq!(&std::fs::read(path).unwrap()[..4], ZSTD_MAGIC);
    let manifest = manifest_of(path);
    assert_eq!(manifest["version"], 2);
    assert_eq!(manifest["compression"], "zstd");
    assert_eq!(
        stored(store.path(), "dump").len(),
        2,
        "the manual and the final backup"
    );

    // A new service restored from the final backup holds the same rows.
    let restored = restored_service(&env, &ns, "orders-restored", "restored_orders", &record[0]);
    env.apply(&restored).await;
    eventually(WAIT, "the restored service to be Ready", || async {
        env.state(&ns, "orders-restored")
            .starts_with("Ready Available")
            .then_some(())
    })
    .await;
    assert_eq!(
        env.field(&ns, "orders-restored", "{.status.restoredFrom}"),
        record[0]
    );
    assert!(
        env.cluster
            .event_messages(&ns, "Restored")
            .starts_with(&format!(
                "Normal restored ServiceBackup {} from {}",
                record[0], record[3]
            )),
        "{}",
        env.cluster.event_messages(&ns, "Restored")
    );
    assert_eq!(
        env.postgres.query_in(
            &on_server(&ns, "restored_orders"),
            "select count(*), sum(id) from items"
        ),
        "1000|500500"
    );

    // The Project user's manual backup restores too.
    let from_manual = restored_service(
        &env,
        &ns,
        "orders-from-manual",
        "manual_orders",
        "before-delete",
    );
    env.apply(&from_manual).await;
    eventually(
        WAIT,
        "the service restored from the manual backup",
        || async {
            env.state(&ns, "orders-from-manual")
                .starts_with("Ready Available")
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        env.postgres.query_in(
            &on_server(&ns, "manual_orders"),
            "select count(*) from items"
        ),
        "1000"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_deleted_while_backup_runner_is_down_and_one_backup_is_taken_after() {
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let env = ServiceEnv::start(&["--backup-runner-url", &url]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("runner-down");
    let db = "blocked_orders";
    service_with_rows(&env, &ns, db, "").await;

    env.start_deleting(&ns, "orders-db");
    let blocked = env
        .until_state(&ns, "orders-db", "Deleting DeletionBlocked")
        .await;
    assert!(
        blocked.starts_with(&format!(
            "Deleting DeletionBlocked: backup-runner at {url} cannot take the final backup: Unavailable"
        )),
        "{blocked}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "nothing removed"
    );
    assert_eq!(
        env.postgres
            .query_in(&on_server(&ns, db), "select count(*) from items"),
        "1000"
    );

    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));
    let all = backups(&env, &ns);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0][1].as_str(), all[0][2].as_str()),
        ("Final", "Completed")
    );
    assert_eq!(stored(store.path(), "dump").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_runner_killed_mid_snapshot_records_no_half_backup_and_drops_only_after_one() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let store_url = format!("file://{}", store.path().display());
    let mut runner = env.start_backup_runner(port, &store_url).await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("killed");
    let db = "killed_orders";
    env.apply(&env.orders_db(&ns, db, "SnapshotAndDelete", false))
        .await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    // Enough data (about 60 MB dumped) for the snapshot to take seconds.
    env.postgres.query_in(&on_server(&ns, db),
        &format!(
            "set role {}; create table blob as select g as id, md5(random()::text) || md5(random()::text) as a from generate_series(1, 1000000) g",
            on_server(&ns, db)
        ),
    );

    env.start_deleting(&ns, "orders-db");
    eventually(WAIT, "the final backup to be running", || async {
        backups(&env, &ns)
            .iter()
            .any(|b| b[1] == "Final" && b[2] == "Running")
            .then_some(())
    })
    .await;
    runner.kill();

    // Nothing half-done counts as a backup, and nothing was dropped.
    let all = backups(&env, &ns);
    assert!(all.iter().all(|b| b[2] != "Completed"), "{all:?}");
    assert_eq!(stored(store.path(), "json").len(), 0);
    assert_eq!(stored(store.path(), "dump").len(), 0);
    assert!(env.postgres.database_exists(&on_server(&ns, db)));
    assert!(env.state(&ns, "orders-db").starts_with("Deleting"));

    let _runner = env.start_backup_runner(port, &store_url).await;
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));
    let all = backups(&env, &ns);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0][1].as_str(), all[0][2].as_str()),
        ("Final", "Completed")
    );
    assert_eq!(stored(store.path(), "json").len(), 1, "exactly one backup");
    assert_eq!(stored(store.path(), "dump").len(), 1);
}

/// A Retain service `name` (database `db`) restored from the ServiceBackup
/// `backup`.
fn restored_service(env: &ServiceEnv, ns: &str, name: &str, db: &str, backup: &str) -> String {
    env.orders_db(ns, db, "Retain", false)
        .replace("name: orders-db", &format!("name: {name}"))
        .replace(
            "  deletionPolicy: Retain",
            &format!("  deletionPolicy: Retain\n  restoreFrom:\n    backupName: {backup}"),
        )
}

/// A manual backup record of orders-db, created as the Project user.
fn manual_backup(env: &ServiceEnv, ns: &str, name: &str, retention: Option<&str>) {
    let retention = retention
        .map(|r| format!("  retention: {r}\n"))
        .unwrap_or_default();
    let manifest = format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  serviceRef: {{name: orders-db}}\n{retention}"
    );
    env.cluster
        .kubectl_in(&["create", "-f", "-", "--as", ALICE], Some(&manifest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_store_keeps_each_backup_until_its_retention_ends() {
    let s3 = S3Server::start().await;
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let _runner = env
        .start_backup_runner_with(
            port,
            &format!("s3://{BUCKET}/navique"),
            &["--expiry-interval", "1s"],
            &s3.env(),
        )
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("s3");
    let db = "s3_orders";
    service_with_rows(&env, &ns, db, "  finalBackup:\n    retention: 45s\n").await;

    // A manual backup kept for 2 s goes, archive and record, while the
    // service runs; one without a retention stays.
    manual_backup(&env, &ns, "short-lived", Some("2s"));
    manual_backup(&env, &ns, "kept", None);
    eventually(WAIT, "the kept manual backup to complete", || async {
        backups(&env, &ns)
            .iter()
            .any(|b| b[0] == "kept" && b[2] == "Completed")
            .then_some(())
    })
    .await;
    eventually(WAIT, "the short-lived backup to expire", || async {
        backups(&env, &ns)
            .iter()
            .all(|b| b[0] != "short-lived")
            .then_some(())
    })
    .await;
    assert!(
        env.cluster
            .event_messages(&ns, "BackupExpired")
            .contains("Normal retention 2s ended: deleted the archive s3://backups/navique/"),
        "{}",
        env.cluster.event_messages(&ns, "BackupExpired")
    );
    assert_eq!(
        stored(&s3.bucket_dir(), "dump").len(),
        1,
        "only the kept one"
    );
    assert_eq!(stored(&s3.bucket_dir(), "json").len(), 1);

    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));

    // The Final backup is in the bucket, as recorded, with its expiry.
    let all = backups(&env, &ns);
    let record = all
        .iter()
        .find(|b| b[1] == "Final")
        .unwrap_or_else(|| panic!("{all:?}"));
    assert_eq!(record[2], "Completed");
    let key = record[3]
        .strip_prefix(&format!("s3://{BUCKET}/navique/"))
        .unwrap_or_else(|| panic!("{record:?}"));
    let object = s3.bucket_dir().join("navique").join(key);
    assert_eq!(
        std::fs::metadata(&object).unwrap().len().to_string(),
        record[4]
    );
    assert_eq!(record[5], format!("sha256:{}", sha256(&object)));
    let completed = env.get(
        &ns,
        &format!("servicebackup/{}", record[0]),
        "{.status.completionTime}",
    );
    let expires = env.get(
        &ns,
        &format!("servicebackup/{}", record[0]),
        "{.status.expirationTime}",
    );
    assert!(
        !completed.is_empty() && !expires.is_empty(),
        "{completed} {expires}"
    );
    assert!(expires > completed, "{completed} {expires}");

    // It restores while it lasts.
    let restored = restored_service(&env, &ns, "orders-restored", "s3_restored", &record[0]);
    env.apply(&restored).await;
    env.until_state(&ns, "orders-restored", "Ready Available")
        .await;
    assert_eq!(
        env.postgres.query_in(
            &on_server(&ns, "s3_restored"),
            "select count(*), sum(id) from items"
        ),
        "1000|500500"
    );

    // Then it goes: the archive and manifest, then the record.
    eventually(
        Duration::from_secs(90),
        "the final backup to expire",
        || async {
            backups(&env, &ns)
                .iter()
                .all(|b| b[1] != "Final")
                .then_some(())
        },
    )
    .await;
    assert!(!object.exists(), "{} is still stored", object.display());
    assert_eq!(
        stored(&s3.bucket_dir(), "dump").len(),
        1,
        "only the kept one"
    );
    assert_eq!(stored(&s3.bucket_dir(), "json").len(), 1);
    let kept: Vec<String> = backups(&env, &ns)
        .into_iter()
        .map(|b| b[0].clone())
        .collect();
    assert_eq!(kept, ["kept"]);
    assert!(
        env.cluster
            .event_messages(&ns, "BackupExpired")
            .contains(&format!(
                "Normal retention 45s ended: deleted the archive {} and this record",
                record[3]
            )),
        "{}",
        env.cluster.event_messages(&ns, "BackupExpired")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plans_schedule_records_scheduled_backups_that_backup_runner_takes() {
    let (env, _runner, store) = with_backup_runner().await;
    // Every 10 seconds (six fields start with seconds), each kept an hour.
    let plan = "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServicePlan\nmetadata: {name: e2e-scheduled}\nspec:\n  classRef: {name: postgresql}\n  allowedDeletionPolicies: [Retain, SnapshotAndDelete]\n  backup: {enabled: true, schedule: \"*/10 * * * * *\", retention: 1h}\n";
    env.cluster.kubectl_in(&["apply", "-f", "-"], Some(plan));
    let ns = env.cluster.namespace("scheduled");
    let manifest = env
        .orders_db(&ns, "scheduled_orders", "Retain", false)
        .replace("name: postgresql-platform-ha", "name: e2e-scheduled");
    env.apply(&manifest).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    // The database stays empty: an empty database backs up too.

    let scheduled = || async {
        let completed: Vec<String> = backups(&env, &ns)
            .into_iter()
            .filter(|b| b[1] == "Scheduled" && b[2] == "Completed")
            .map(|b| b[0].clone())
            .collect();
        (completed.len() >= 2).then_some(completed)
    };
    let completed = eventually(Duration::from_secs(60), "two scheduled backups", scheduled).await;
    for name in &completed {
        assert!(name.starts_with("orders-db-scheduled-"), "{name}");
        assert_eq!(
            env.get(&ns, &format!("servicebackup/{name}"), "{.spec.retention}"),
            "1h"
        );
    }
    // The status remembers the last tick recorded, which names a record.
    let last = env.field(&ns, "orders-db", "{.status.lastScheduledBackupTime}");
    let tick: k8s_openapi::jiff::Timestamp = last.parse().unwrap_or_else(|e| panic!("{last}: {e}"));
    let names: Vec<String> = backups(&env, &ns)
        .into_iter()
        .map(|b| b[0].clone())
        .collect();
    assert!(
        names.contains(&format!(
            "orders-db-scheduled-{}",
            tick.strftime("%Y%m%d-%H%M%S")
        )),
        "{last} {names:?}"
    );
    assert!(stored(store.path(), "json").len() >= 2);
    // The manual-backup controller reports what every controller does.
    let prefix = "navique_backup_runner_manual_backup_";
    assert!(
        env.backup_runner_metric(&format!("{prefix}reconciles_total "))
            .await
            >= 2.0
    );
    assert!(
        env.backup_runner_metric(&format!("{prefix}reconcile_duration_seconds_count "))
            .await
            >= 2.0
    );
}

/// A final backup is taken as the provider: it holds the tables of every
/// owner (the service's role, another role, the superuser), whatever a
/// Project admin writes into the credential Secret, and restores them all
/// into a new service, owned by its role.
// tenant-writable configuration: the Secret never says where to connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_backup_holds_every_owners_tables_and_restores_them_all() {
    let (env, _runner, _store) = with_backup_runner().await;
    let ns = env.cluster.namespace("owners");
    let db = "owners_orders";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    let other = on_server(&ns, "other_role");
    env.postgres.query(&format!("create role {other}"));
    env.postgres.query_in(
        &database,
        &format!(
            "create table others (id int); insert into others select generate_series(1, 20); \
             alter table others owner to {other}; \
             create table platform (id int); insert into platform select generate_series(1, 30)"
        ),
    );
    // The service's own role could not have dumped these.
    let refused = env.postgres.query_in_err(
        &database,
        &format!("set role {database}; select count(*) from others"),
    );
    assert!(
        refused.contains("permission denied for table others"),
        "{refused}"
    );

    // A Project admin points the credential Secret elsewhere.
    env.cluster.kubectl_ok(&[
        "patch",
        "secret",
        "orders-db-credentials",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"stringData":{"host":"203.0.113.9","port":"1","user":"postgres","database":"postgres"}}"#,
        "--token",
        &format!("{ALICE}-token"),
    ]);

    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    let finals: Vec<Vec<String>> = backups(&env, &ns)
        .into_iter()
        .filter(|b| b[1] == "Final")
        .collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert_eq!(finals[0][2], "Completed", "{finals:?}");
    assert!(!env.postgres.database_exists(&database));

    let restored = restored_service(
        &env,
        &ns,
        "orders-restored",
        "owners_restored",
        &finals[0][0],
    );
    env.apply(&restored).await;
    env.until_state(&ns, "orders-restored", "Ready Available")
        .await;
    let copy = on_server(&ns, "owners_restored");
    assert_eq!(
        env.postgres.query_in(
            &copy,
            "select (select count(*) from items), (select count(*) from others), \
             (select count(*) from platform)"
        ),
        "1000|20|30"
    );
    // Every restored table belongs to the new service's role.
    assert_eq!(
        env.postgres.query_in(
            &copy,
            "select string_agg(distinct tableowner, ',') from pg_tables where schemaname = 'public'"
        ),
        copy
    );
}

fn get(key: &str) -> GetSnapshotRequest {
    GetSnapshotRequest {
        idempotency_key: key.to_owned(),
    }
}

/// The "unauthenticated inside" attack class: anyone on the pod network
/// reaches backup-runner's port, and a component of the operator other than
/// the lifecycle controller holds a certificate of the same CA. The real
/// binary, in its default self-managed mutual TLS, answers neither, every
/// RPC; bounds hold before any work; plaintext gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_service_answers_only_the_lifecycle_controller() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    let (bundle, key) = grpc_ca(&env.cluster).await;
    let ca = Ca { bundle, key };
    let ns = env.cluster.namespace("inside");
    let protected = ServiceRef {
        namespace: ns.clone(),
        name: "orders-db".to_owned(),
        uid: "0b6f5d5e-6a3c-4d2e-9f1a-2b3c4d5e6f70".to_owned(),
    };
    let restore = RestoreSnapshotRequest {
        source_service: Some(protected.clone()),
        backup_name: "orders-db-final".to_owned(),
        target: Some(protected.clone()),
        jobs: 0,
    };
    let snapshot = RequestSnapshotRequest {
        idempotency_key: format!("{}/final", protected.uid),
        service: Some(protected.clone()),
        origin: 3,
        backup_name: "orders-db-final".to_owned(),
        ..Default::default()
    };

    // (a) TLS, but no client certificate: Unauthenticated.
    let anonymous = Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca.bundle)))
        .unwrap()
        .connect()
        .await
        .expect("TLS without a client certificate connects");
    let mut anonymous = SnapshotServiceClient::new(anonymous);
    let status = anonymous
        .restore_snapshot(restore.clone())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = anonymous
        .request_snapshot(snapshot.clone())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = anonymous.get_snapshot(get("any")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // (b) Another component's certificate of the same CA: PermissionDenied,
    // naming it.
    for other in ["lock-controller", "webhook"] {
        let mut client = snapshot_client(&ca, other, port);
        let status = client.restore_snapshot(restore.clone()).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{other}: {status:?}");
        assert!(
            status.message().contains(&format!(
                "spiffe://navique/component/{other} may not call this service"
            )),
            "{status:?}"
        );
        let status = client.get_snapshot(get("any")).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    }

    // (c) The controller's identity, oversized fields: InvalidArgument
    // naming the field, before any work; 100 KB is not even decoded.
    let mut controller = snapshot_client(&ca, "service-lifecycle-controller", port);
    let status = controller
        .get_snapshot(get(&"k".repeat(300)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains("idempotency_key is 300 bytes long"),
        "{status:?}"
    );
    let long_name = RestoreSnapshotRequest {
        target: Some(ServiceRef {
            name: "n".repeat(254),
            ..protected.clone()
        }),
        ..restore.clone()
    };
    let status = controller.restore_snapshot(long_name).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("target.name is 254 bytes long"),
        "{status:?}"
    );
    let status = controller
        .get_snapshot(get(&"k".repeat(100_000)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    // ...and gets through with sane ones (no such snapshot here).
    let status = controller.get_snapshot(get("unknown")).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    // (d) Plaintext: refused by the TLS layer, so no gRPC answer at all:
    // the failure is the client's transport's.
    let plaintext = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_lazy();
    let status = SnapshotServiceClient::new(plaintext)
        .get_snapshot(get("unknown"))
        .await
        .unwrap_err();
    assert_ne!(status.code(), Code::NotFound, "{status:?}");
    assert!(
        std::error::Error::source(&status).is_some(),
        "a transport failure: {status:?}"
    );

    // Nothing was written for any of them.
    assert!(stored(store.path(), "dump").is_empty());
}

/// A final backup that fails (the database takes no connections) shows its
/// cause on the service within seconds, with one Warning event, and is
/// tried again only after a wait that doubles from 1 s: a handful of
/// attempts, counted as pg_dump runs, RequestSnapshot calls and ServiceBackup
/// writes. Once the cause is gone it completes, with exactly one Final
/// backup.
// hot loop: a failing step backs off, and its cause reaches the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_final_backup_shows_its_cause_backs_off_and_completes_once_fixed() {
    let (env, runner, _store) = with_backup_runner().await;
    let ns = env.cluster.namespace("failing");
    let db = "failing_orders";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    env.postgres.query(&format!(
        "alter database {database} allow_connections false"
    ));
    // Every change of the Project's ServiceBackups, as a watch sees it.
    let (mut watch, _cache) = env.cluster.kubectl_command();
    let mut watch = watch
        .args([
            "get",
            "servicebackups",
            "-n",
            &ns,
            "-w",
            "--output-watch-events",
            "-o",
            "name",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl get -w");
    let started = "navique_backup_runner_snapshots_started_total ";
    let before = env.backup_runner_metric(started).await;

    env.start_deleting(&ns, "orders-db");
    let state = eventually(
        Duration::from_secs(10),
        "the cause on the service",
        || async {
            let state = env.state(&ns, "orders-db");
            state
                .starts_with("Deleting DeletionBlocked: the final backup failed: ")
                .then_some(state)
        },
    )
    .await;
    assert!(
        state.contains(&format!(
            "database \"{database}\" is not currently accepting connections"
        )),
        "{state}"
    );
    // Twenty seconds of a lasting failure.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let attempts = env.backup_runner_metric(started).await - before;
    let requests = runner.stderr().matches("snapshot requested").count()
        + runner.stdout().matches("snapshot requested").count();
    watch.kill().ok();
    let output = watch.wait_with_output().expect("the watch's output");
    let writes = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("MODIFIED"))
        .count();
    // Attempts at about 0, 1, 3, 7 and 15 s.
    assert!((3.0..=6.0).contains(&attempts), "{attempts} pg_dump runs");
    assert!(
        (3..=6).contains(&requests),
        "{requests} RequestSnapshot calls"
    );
    assert!(writes <= 3 * 6, "{writes} ServiceBackup writes");
    let warnings = env.cluster.event_messages(&ns, "FinalBackupFailed");
    assert_eq!(
        warnings.lines().count(),
        1,
        "one Warning per cause: {warnings}"
    );
    assert!(
        warnings.starts_with("Warning the final backup failed: "),
        "{warnings}"
    );
    assert!(env.postgres.database_exists(&database), "nothing removed");
    assert_eq!(
        env.controller_metric("navique_service_lifecycle_controller_final_backup_failures_total ")
            .await,
        1.0
    );

    // The cause goes: the next attempt (at about 31 s) completes.
    env.postgres
        .query(&format!("alter database {database} allow_connections true"));
    env.until_gone(&ns, "orders-db").await;
    let finals: Vec<Vec<String>> = backups(&env, &ns)
        .into_iter()
        .filter(|b| b[1] == "Final")
        .collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert_eq!(finals[0][2], "Completed", "{finals:?}");
    assert!(!env.postgres.database_exists(&database));
}

/// When a Project goes, its records go with it, and nothing would ever
/// expire its archives: backup-runner marks the Project's folder in the
/// store and removes it once the grace (here 1 s) has passed.
// orphaned data: no archive outlives its Project with no trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archives_of_a_deleted_project_go_after_the_grace() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner_with(
            port,
            &format!("file://{}", store.path().display()),
            &["--expiry-interval", "1s", "--orphaned-backup-grace", "1s"],
            &[],
        )
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("gone");
    let kept = env.cluster.namespace("kept");
    for project in [&ns, &kept] {
        service_with_rows(&env, project, "gone_orders", "").await;
        manual_backup(&env, project, "before-delete", None);
        eventually(WAIT, "the manual backup to complete", || async {
            backups(&env, project)
                .iter()
                .any(|b| b[0] == "before-delete" && b[2] == "Completed")
                .then_some(())
        })
        .await;
    }
    let folder = store.path().join(&ns);
    let objects = || {
        let mut all = stored(&folder, "dump");
        all.extend(stored(&folder, "json"));
        all
    };
    assert_eq!(objects().len(), 2, "{:?}", objects());
    env.cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    eventually(WAIT, "the Project's archives to go", || async {
        let left = objects();
        (left.is_empty() && !folder.join(".project-gone").exists()).then_some(())
    })
    .await;
    // Another Project's archive stays.
    assert_eq!(stored(&store.path().join(&kept), "dump").len(), 1);
}

/// The archive and manifest of backup `backup` of the service `orders-db`
/// with uid `uid`, as backup-runner lays them out under `store`.
fn backup_paths(
    store: &Path,
    ns: &str,
    uid: &str,
    backup: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let folder = store.join(ns).join(format!("orders-db-{uid}"));
    (
        folder.join(format!("{backup}.dump")),
        folder.join(format!("{backup}.json")),
    )
}

/// An archive written before backup-runner compressed with zstd (pg_dump's
/// own zlib inside the custom format, manifest version 1, no
/// `compression`) still restores, every row of it.
// upgrade: backups taken by the previous release stay restorable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_from_before_zstd_still_restores_every_row() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("old-format");
    let db = "old_orders";
    service_with_rows(&env, &ns, db, "").await;
    manual_backup(&env, &ns, "old-format", None);
    env.cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "servicebackup/old-format",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    // What the previous release stored: pg_dump -Fc as it compresses by
    // default, under a version 1 manifest.
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, "old-format");
    let old = env
        .postgres
        .pg_dump(&on_server(&ns, db), &["--format=custom"]);
    assert!(old.starts_with(PG_DUMP_MAGIC));
    std::fs::write(&archive, &old).unwrap();
    let mut manifest = manifest_of(&archive);
    let fields = manifest.as_object_mut().unwrap();
    fields.insert("version".into(), 1.into());
    fields.remove("compression");
    fields.insert("sizeBytes".into(), old.len().into());
    fields.insert("sha256".into(), sha256(&archive).into());
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    // The rows change after the backup: the restore must bring back the
    // backup's, not these.
    env.postgres
        .query_in(&on_server(&ns, db), "delete from items where id > 10");

    let restored = restored_service(&env, &ns, "orders-restored", "restored_old", "old-format");
    env.apply(&restored).await;
    env.until_state(&ns, "orders-restored", "Ready Available")
        .await;
    assert_eq!(
        env.postgres.query_in(
            &on_server(&ns, "restored_old"),
            "select count(*), sum(id) from items"
        ),
        "1000|500500"
    );
    assert!(
        env.cluster
            .event_messages(&ns, "Restored")
            .starts_with("Normal restored ServiceBackup old-format from file://"),
        "{}",
        env.cluster.event_messages(&ns, "Restored")
    );
}

/// A final backup whose archive was altered, then truncated (its manifest
/// too, then), after it was stored (found in the store by the deletion, as
/// after a restart) fails
/// verification: the deletion is blocked with the cause on the service, in
/// a Warning event and on the record, and nothing is dropped. Once the
/// damaged backup is removed, the next attempt takes a new one.
// fail closed: a deletion never proceeds on an archive that does not verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_or_truncated_final_backup_fails_verification_and_blocks_the_deletion() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("damaged");
    let db = "damaged_orders";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    manual_backup(&env, &ns, "healthy", None);
    env.cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "servicebackup/healthy",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    // The final backup as an earlier attempt stored and recorded it, with
    // one byte of the archive changed since.
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);
    let (healthy, _) = backup_paths(store.path(), &ns, &uid, "healthy");
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, &record);
    let mut bytes = std::fs::read(&healthy).unwrap();
    let mut manifest = manifest_of(&healthy);
    let fields = manifest.as_object_mut().unwrap();
    fields.insert("idempotencyKey".into(), format!("{uid}/final").into());
    fields.insert("backupName".into(), record.clone().into());
    fields.insert("origin".into(), "Final".into());
    fields.insert(
        "location".into(),
        format!("file://{}", archive.display()).into(),
    );
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let stored_sha = manifest["sha256"].as_str().unwrap().to_owned();
    let size = bytes.len();
    bytes[size / 2] ^= 0x01;
    std::fs::write(&archive, &bytes).unwrap();
    let altered_sha = sha256(&archive);

    env.start_deleting(&ns, "orders-db");
    let location = format!("file://{}", archive.display());
    let altered = format!(
        "Deleting DeletionBlocked: the final backup failed: verification of {location} failed: read back {size} bytes with sha256 {altered_sha}, but {size} bytes with sha256 {stored_sha} were stored"
    );
    env.until_state(&ns, "orders-db", &altered).await;
    assert_eq!(
        env.cluster.event_messages(&ns, "FinalBackupFailed"),
        format!(
            "Warning {}\n",
            altered.strip_prefix("Deleting DeletionBlocked: ").unwrap()
        )
    );
    let failed = env.get(
        &ns,
        &format!("servicebackup/{record}"),
        "{.status.phase} {.status.message}",
    );
    assert!(failed.starts_with("Failed verification of "), "{failed}");
    assert!(env.postgres.database_exists(&database), "nothing dropped");

    // Truncated: the next attempt (after the back-off) says so.
    std::fs::write(&archive, &bytes[..size / 2]).unwrap();
    let truncated = format!(
        "Deleting DeletionBlocked: the final backup failed: verification of {location} failed: read back {} bytes with sha256 {}, but {size} bytes with sha256 {stored_sha} were stored",
        size / 2,
        sha256(&archive)
    );
    env.until_state(&ns, "orders-db", &truncated).await;
    assert!(env.postgres.database_exists(&database), "nothing dropped");

    // Cut, and the manifest altered to match the cut bytes: only the
    // decompression of the whole frame catches it.
    let fields = manifest.as_object_mut().unwrap();
    fields.insert("sizeBytes".into(), (size / 2).into());
    fields.insert("sha256".into(), sha256(&archive).into());
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let cut = format!(
        "Deleting DeletionBlocked: the final backup failed: verification of {location} failed: the archive does not decompress: incomplete frame"
    );
    env.until_state(&ns, "orders-db", &cut).await;
    assert!(env.postgres.database_exists(&database), "nothing dropped");
    assert!(
        archive.exists() && manifest_path.exists(),
        "the evidence is kept"
    );

    // The provider removes the damaged backup: a new one is taken, and only
    // then is the database dropped.
    std::fs::remove_file(&manifest_path).unwrap();
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&database));
    assert_eq!(&std::fs::read(&archive).unwrap()[..4], ZSTD_MAGIC);
    assert_eq!(
        manifest_of(&archive)["sizeBytes"],
        std::fs::metadata(&archive).unwrap().len()
    );
    let finals: Vec<Vec<String>> = backups(&env, &ns)
        .into_iter()
        .filter(|b| b[1] == "Final")
        .collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert_eq!(finals[0][2], "Completed", "{finals:?}");
}

/// The scratch databases of test restores left on the server.
fn scratch_databases(env: &ServiceEnv) -> String {
    env.postgres
        .query("select string_agg(datname, ',') from pg_database where datname like '\\_navique\\_verify\\_%'")
}

/// `finalBackup.verify: Restore`: before the database is dropped, the
/// final backup is restored into a scratch database whose row counts, table
/// by table, equal those read inside the dump's snapshot. The result is on
/// the record and in the manifest, and the scratch database is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_restore_proves_the_final_backup_before_the_database_is_dropped() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("proven");
    let db = "proven_orders";
    service_with_rows(&env, &ns, db, "  finalBackup:\n    verify: Restore").await;
    let database = on_server(&ns, db);
    env.postgres.query_in(
        &database,
        &format!(
            "set role {database}; create schema shop; create table shop.notes as select g as id from generate_series(1, 250) g; create table shop.empty (id int)"
        ),
    );
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);

    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&database));
    assert_eq!(
        env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.phase} {.status.testRestore.result} {.status.testRestore.tables} {.status.testRestore.rows} {.status.testRestore.message}"
        ),
        "Completed Passed 3 1250 3 tables with 1250 rows restored as counted at dump time"
    );
    let (archive, _) = backup_paths(store.path(), &ns, &uid, &record);
    let manifest = manifest_of(&archive);
    assert_eq!(
        manifest["rowCounts"],
        serde_json::json!({"public.items": 1000, "shop.empty": 0, "shop.notes": 250})
    );
    assert_eq!(manifest["testRestore"]["rows"], 1250);
    assert_eq!(
        scratch_databases(&env),
        "",
        "the scratch database is dropped"
    );
}

/// A test restore that does not bring back the rows counted when the
/// backup was taken (here the store holds an archive with 10 rows fewer
/// than its manifest counted) blocks the deletion with the difference, on
/// the service, in a Warning event and on the record; nothing is dropped,
/// and the scratch database is gone.
// fail closed: a deletion never proceeds on a backup whose restore loses rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_restore_that_brings_back_other_row_counts_blocks_the_deletion() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("mismatch");
    let db = "mismatch_orders";
    service_with_rows(&env, &ns, db, "  finalBackup:\n    verify: Restore").await;
    let database = on_server(&ns, db);
    env.postgres
        .query_in(&database, "delete from items where id > 990");
    manual_backup(&env, &ns, "fewer", None);
    env.cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "servicebackup/fewer",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    // The final backup as an earlier attempt recorded it, 1000 rows counted,
    // whose archive now holds the 990 of another backup.
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);
    let (fewer, _) = backup_paths(store.path(), &ns, &uid, "fewer");
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, &record);
    std::fs::copy(&fewer, &archive).unwrap();
    let mut manifest = manifest_of(&fewer);
    let fields = manifest.as_object_mut().unwrap();
    fields.insert("idempotencyKey".into(), format!("{uid}/final").into());
    fields.insert("backupName".into(), record.clone().into());
    fields.insert("origin".into(), "Final".into());
    let location = format!("file://{}", archive.display());
    fields.insert("location".into(), location.clone().into());
    fields.insert(
        "rowCounts".into(),
        serde_json::json!({"public.items": 1000}),
    );
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();

    env.start_deleting(&ns, "orders-db");
    let cause = format!(
        "the final backup failed: test restore of {location} failed: row counts differ: public.items: 1000 rows at dump time, 990 restored"
    );
    env.until_state(
        &ns,
        "orders-db",
        &format!("Deleting DeletionBlocked: {cause}"),
    )
    .await;
    assert_eq!(
        env.cluster.event_messages(&ns, "FinalBackupFailed"),
        format!("Warning {cause}\n")
    );
    eventually(WAIT, "the test restore's result on the record", || async {
        let status = env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.phase} {.status.testRestore.result} {.status.testRestore.message}",
        );
        (status
            == format!(
                "Failed Failed test restore of {location} failed: row counts differ: public.items: 1000 rows at dump time, 990 restored"
            ))
        .then_some(())
    })
    .await;
    assert!(env.postgres.database_exists(&database), "nothing dropped");
    assert_eq!(
        env.postgres
            .query_in(&database, "select count(*) from items"),
        "990"
    );
    // Attempts come back after a growing wait; between two, no scratch
    // database is left.
    eventually(WAIT, "the scratch database to be dropped", || async {
        scratch_databases(&env).is_empty().then_some(())
    })
    .await;
}

/// While a final backup runs, its ServiceBackup shows how far pg_dump is:
/// bytes dumped and stored, tables done of the tables, and a percent of
/// `pg_database_size`, also as the PROGRESS column of `kubectl get sbk`;
/// once done, 100% and every table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_backup_shows_its_progress_in_status_and_in_kubectl() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner_with(
            port,
            &format!("file://{}", store.path().display()),
            &["--progress-interval", "1s"],
            &[],
        )
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("progress");
    let db = "progress_orders";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    // Enough (about 60 MB dumped) for the dump to take seconds.
    env.postgres.query_in(
        &database,
        &format!(
            "set role {database}; create table blob as select g as id, md5(random()::text) || md5(random()::text) as a from generate_series(1, 1000000) g"
        ),
    );
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);
    let database_bytes: i64 = env
        .postgres
        .query(&format!("select pg_database_size('{database}')"))
        .parse()
        .unwrap();

    env.start_deleting(&ns, "orders-db");
    let running = eventually(WAIT, "progress while the dump runs", || async {
        let fields = env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.phase} {.status.progress.dumpedBytes} {.status.progress.storedBytes} {.status.progress.databaseBytes} {.status.progress.tablesDone} {.status.progress.tables} {.status.progress.summary}",
        );
        let fields: Vec<String> = fields.split(' ').map(str::to_owned).collect();
        (fields.len() == 9 && fields[0] == "Running" && fields[1] != "0").then_some(fields)
    })
    .await;
    let dumped: i64 = running[1].parse().unwrap();
    let stored: i64 = running[2].parse().unwrap();
    assert!(stored < dumped, "stored after compression: {running:?}");
    assert_eq!(running[3], database_bytes.to_string(), "{running:?}");
    assert_eq!(running[5], "2", "items and blob: {running:?}");
    let percent: i64 = running[6].trim_end_matches('%').parse().unwrap();
    assert_eq!(percent, dumped * 100 / database_bytes, "{running:?}");
    assert!(percent < 100, "{running:?}");
    assert_eq!(running[7], format!("{}/2", running[4]), "{running:?}");
    assert_eq!(running[8], "tables", "{running:?}");
    let table = env.cluster.kubectl_ok(&["get", "sbk", &record, "-n", &ns]);
    assert!(
        table.lines().next().unwrap().contains(" PROGRESS "),
        "{table}"
    );
    assert!(
        table.contains("% 0/2 tables") || table.contains("% 1/2 tables"),
        "{table}"
    );

    env.until_gone(&ns, "orders-db").await;
    assert_eq!(
        env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.phase} {.status.progress.tablesDone} {.status.progress.tables} {.status.progress.summary}",
        ),
        "Completed 2 2 100% 2/2 tables"
    );
}

/// A plan `name` allowing SnapshotAndDelete, whose backups run `jobs`
/// pg_dump and pg_restore jobs.
fn plan_with_jobs(env: &ServiceEnv, name: &str, jobs: u32) {
    let plan = format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServicePlan\nmetadata: {{name: {name}}}\nspec:\n  classRef: {{name: postgresql}}\n  allowedDeletionPolicies: [Retain, SnapshotAndDelete]\n  backup: {{enabled: true, jobs: {jobs}}}\n"
    );
    env.cluster.kubectl_in(&["apply", "-f", "-"], Some(&plan));
}

/// The parts of the directory archive `folder` as stored: name (without
/// `.zst`), size and sha256, sorted by name.
fn stored_parts(folder: &Path) -> Vec<serde_json::Value> {
    let mut parts: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            serde_json::json!({
                "name": name.strip_suffix(".zst").unwrap_or_else(|| panic!("{name}")),
                "sizeBytes": std::fs::metadata(&path).unwrap().len(),
                "sha256": sha256(&path),
            })
        })
        .collect();
    parts.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    parts
}

/// A plan with `backup.jobs: 3`: the final backup is pg_dump's directory
/// format dumped by three jobs inside the snapshot the rows were counted
/// in, stored as one zstd object per file under `<backup>.d/` and listed
/// in a version 3 manifest; its test restore (three pg_restore jobs into
/// the scratch database) passes; and the backup restores, in parallel,
/// every row into a new service. A plan asking for 17 jobs is refused,
/// naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_final_backup_is_test_restored_and_restores_every_row() {
    let (env, _runner, store) = with_backup_runner().await;
    plan_with_jobs(&env, "e2e-parallel", 3);
    let refused = env.cluster.kubectl(
        &[
            "patch",
            "serviceplan",
            "e2e-parallel",
            "--type=merge",
            "-p",
            r#"{"spec":{"backup":{"jobs":17}}}"#,
        ],
        None,
    );
    let error = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        !refused.status.success() && error.contains("spec.backup.jobs"),
        "{error}"
    );
    let ns = env.cluster.namespace("parallel");
    let db = "parallel_orders";
    let manifest = env
        .orders_db(&ns, db, "SnapshotAndDelete", false)
        .replace("name: postgresql-platform-ha", "name: e2e-parallel")
        .replace(
            "  deletionPolicy: SnapshotAndDelete",
            "  deletionPolicy: SnapshotAndDelete\n  finalBackup:\n    verify: Restore",
        );
    env.apply(&manifest).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    let database = on_server(&ns, db);
    env.postgres.query_in(
        &database,
        &format!(
            "set role {database}; create table items (id int primary key, name text); \
             insert into items select g, 'item ' || g from generate_series(1, 1000) g; \
             create schema shop; create table shop.notes as select g as id from generate_series(1, 250) g"
        ),
    );
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);

    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&database));
    assert_eq!(
        env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.phase} {.status.testRestore.result} {.status.testRestore.message}"
        ),
        "Completed Passed 2 tables with 1250 rows restored as counted at dump time"
    );
    assert_eq!(
        scratch_databases(&env),
        "",
        "the scratch database is dropped"
    );
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, &record);
    assert!(!archive.exists(), "no single-object archive");
    let folder = archive.with_extension("d");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert_eq!(manifest["version"], 3);
    assert_eq!(manifest["format"], "pg_dump-directory");
    assert_eq!(manifest["compression"], "zstd");
    let location = format!("file://{}/", folder.display());
    assert_eq!(manifest["location"], location.as_str());
    assert_eq!(
        env.get(
            &ns,
            &format!("servicebackup/{record}"),
            "{.status.location}"
        ),
        location
    );
    // Every file pg_dump wrote, each a zstd frame, listed with the size and
    // sha256 stored; the table of contents and one file per table's data.
    let parts = stored_parts(&folder);
    assert_eq!(manifest["parts"], serde_json::Value::Array(parts.clone()));
    assert!(parts.iter().any(|p| p["name"] == "toc.dat"), "{parts:?}");
    assert!(parts.len() >= 3, "{parts:?}");
    for part in &parts {
        let path = folder.join(format!("{}.zst", part["name"].as_str().unwrap()));
        assert_eq!(&std::fs::read(&path).unwrap()[..4], ZSTD_MAGIC);
    }
    let total: u64 = parts.iter().map(|p| p["sizeBytes"].as_u64().unwrap()).sum();
    assert_eq!(manifest["sizeBytes"], total);
    assert_eq!(
        manifest["rowCounts"],
        serde_json::json!({"public.items": 1000, "shop.notes": 250})
    );

    let restored = restored_service(&env, &ns, "orders-restored", "parallel_restored", &record)
        .replace("name: postgresql-platform-ha", "name: e2e-parallel");
    env.apply(&restored).await;
    env.until_state(&ns, "orders-restored", "Ready Available")
        .await;
    let target = on_server(&ns, "parallel_restored");
    assert_eq!(
        env.postgres
            .query_in(&target, "select count(*), sum(id) from items"),
        "1000|500500"
    );
    assert_eq!(
        env.postgres
            .query_in(&target, "select count(*) from shop.notes"),
        "250"
    );
    // Owned by the target's owner, as a one-transaction restore makes them.
    assert_eq!(
        env.postgres.query_in(
            &target,
            "select tableowner from pg_tables where tablename = 'items'"
        ),
        target
    );
}

/// A directory archive (backup-runner's `--jobs 2`) one of whose parts was
/// altered after it was stored fails verification, naming the part: the
/// deletion is blocked, nothing is dropped. A truncated part too.
// fail closed: every part is read back before a deletion proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_part_of_a_parallel_backup_fails_verification_and_blocks_the_deletion() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner_with(
            port,
            &format!("file://{}", store.path().display()),
            &["--jobs", "2"],
            &[],
        )
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("damaged-part");
    let db = "damaged_part";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    manual_backup(&env, &ns, "healthy", None);
    env.cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "servicebackup/healthy",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    // The final backup as an earlier attempt stored and recorded it: the
    // healthy backup's parts and manifest, one part altered since.
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);
    let (healthy, healthy_manifest) = backup_paths(store.path(), &ns, &uid, "healthy");
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, &record);
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&healthy_manifest).unwrap()).unwrap();
    assert_eq!(manifest["version"], 3, "{manifest}");
    let folder = archive.with_extension("d");
    std::fs::create_dir(&folder).unwrap();
    for part in manifest["parts"].as_array().unwrap() {
        let file = format!("{}.zst", part["name"].as_str().unwrap());
        std::fs::copy(healthy.with_extension("d").join(&file), folder.join(&file)).unwrap();
    }
    let location = format!("file://{}/", folder.display());
    let fields = manifest.as_object_mut().unwrap();
    fields.insert("idempotencyKey".into(), format!("{uid}/final").into());
    fields.insert("backupName".into(), record.clone().into());
    fields.insert("origin".into(), "Final".into());
    fields.insert("location".into(), location.clone().into());
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    // The largest part holds the rows of items.
    let data = manifest["parts"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|p| p["sizeBytes"].as_u64())
        .unwrap()
        .clone();
    let name = format!("{}.zst", data["name"].as_str().unwrap());
    let part = folder.join(&name);
    let mut bytes = std::fs::read(&part).unwrap();
    let size = bytes.len();
    bytes[size / 2] ^= 0x01;
    std::fs::write(&part, &bytes).unwrap();

    env.start_deleting(&ns, "orders-db");
    let stored_sha = data["sha256"].as_str().unwrap();
    let altered = format!(
        "Deleting DeletionBlocked: the final backup failed: verification of {location} failed: part {name}: read back {size} bytes with sha256 {}, but {size} bytes with sha256 {stored_sha} were stored",
        sha256(&part)
    );
    env.until_state(&ns, "orders-db", &altered).await;
    assert_eq!(
        env.cluster.event_messages(&ns, "FinalBackupFailed"),
        format!(
            "Warning {}\n",
            altered.strip_prefix("Deleting DeletionBlocked: ").unwrap()
        )
    );
    assert!(env.postgres.database_exists(&database), "nothing dropped");

    std::fs::write(&part, &bytes[..size / 2]).unwrap();
    let truncated = format!(
        "Deleting DeletionBlocked: the final backup failed: verification of {location} failed: part {name}: read back {} bytes with sha256 {}, but {size} bytes with sha256 {stored_sha} were stored",
        size / 2,
        sha256(&part)
    );
    env.until_state(&ns, "orders-db", &truncated).await;
    assert!(env.postgres.database_exists(&database), "nothing dropped");
    assert!(
        manifest_path.exists() && part.exists(),
        "the evidence is kept"
    );

    // Removing the damaged backup lets a new one be taken, then the drop.
    std::fs::remove_file(&manifest_path).unwrap();
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&database));
    assert_eq!(manifest_of(&archive)["version"], 3);
}

/// A single-object archive (backup-runner's default one job, manifest
/// version 2) still restores every row, in one transaction, into a service
/// whose plan asks for parallel jobs: the jobs apply to directory archives.
// upgrade: archives taken before parallel dumps stay restorable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_object_archive_still_restores_every_row_on_a_parallel_plan() {
    let (env, _runner, store) = with_backup_runner().await;
    let ns = env.cluster.namespace("single");
    let db = "single_orders";
    service_with_rows(&env, &ns, db, "").await;
    manual_backup(&env, &ns, "single", None);
    env.cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "servicebackup/single",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let (archive, _) = backup_paths(store.path(), &ns, &uid, "single");
    let manifest = manifest_of(&archive);
    assert_eq!(
        (manifest["version"].as_u64(), manifest["format"].as_str()),
        (Some(2), Some("pg_dump-custom"))
    );
    assert_eq!(&std::fs::read(&archive).unwrap()[..4], ZSTD_MAGIC);
    env.postgres
        .query_in(&on_server(&ns, db), "delete from items where id > 10");

    plan_with_jobs(&env, "e2e-parallel", 4);
    let restored = restored_service(&env, &ns, "orders-restored", "single_restored", "single")
        .replace("name: postgresql-platform-ha", "name: e2e-parallel");
    env.apply(&restored).await;
    env.until_state(&ns, "orders-restored", "Ready Available")
        .await;
    assert_eq!(
        env.postgres.query_in(
            &on_server(&ns, "single_restored"),
            "select count(*), sum(id) from items"
        ),
        "1000|500500"
    );
}

/// A parallel pg_dump that writes every file and then fails (a wrapper
/// around the real one exits 1 while a marker file exists): the table's
/// part, stored while pg_dump ran, is deleted again, no manifest is
/// written, and the deletion stays blocked with pg_dump's error; once the
/// marker goes, the next attempt stores every part and the drop goes on.
// fail closed: a dump that fails after its parts were stored claims nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_dump_that_fails_after_storing_parts_leaves_no_backup() {
    let tools = backup_runner::pg::PgTools::locate(None).expect("PostgreSQL's client tools");
    let bin = tempfile::tempdir().unwrap();
    let marker = bin.path().join("fail");
    std::fs::write(&marker, "").unwrap();
    let wrapper = bin.path().join("pg_dump");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\"{real}/pg_dump\" \"$@\" || exit $?\nif [ -e {marker} ]; then sleep 1; echo 'pg_dump: error: failed by the test after the dump' >&2; exit 1; fi\n",
            real = tools.bin_dir().display(),
            marker = marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        tools.bin_dir().join("pg_restore"),
        bin.path().join("pg_restore"),
    )
    .unwrap();

    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("https://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner_with(
            port,
            &format!("file://{}", store.path().display()),
            &["--jobs", "2", "--pg-bin-dir", bin.path().to_str().unwrap()],
            &[],
        )
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("failed-parts");
    let db = "failed_parts";
    service_with_rows(&env, &ns, db, "").await;
    let database = on_server(&ns, db);
    let uid = env.field(&ns, "orders-db", "{.metadata.uid}");
    let record = format!("orders-db-final-{}", &uid[..8]);
    let (archive, manifest_path) = backup_paths(store.path(), &ns, &uid, &record);
    let folder = archive.with_extension("d");

    env.start_deleting(&ns, "orders-db");
    let failed = "Deleting DeletionBlocked: the final backup failed: pg_dump of ";
    let state = eventually(Duration::from_secs(30), "pg_dump's failure", || async {
        let state = env.state(&ns, "orders-db");
        state.starts_with(failed).then_some(state)
    })
    .await;
    assert!(
        state.contains("failed by the test after the dump"),
        "{state}"
    );
    // The table's part was stored while pg_dump ran, before it failed...
    let uploaded = env
        .backup_runner_metric("navique_backup_runner_uploaded_bytes_total ")
        .await;
    assert!(uploaded > 0.0, "nothing was stored during the dump");
    // ...and is gone: nothing of the attempt is left, nothing claims it.
    let left: Vec<_> = std::fs::read_dir(&folder)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(!manifest_path.exists(), "a manifest for a failed dump");
    let finals: Vec<Vec<String>> = backups(&env, &ns)
        .into_iter()
        .filter(|b| b[1] == "Final")
        .collect();
    assert!(finals.iter().all(|b| b[2] != "Completed"), "{finals:?}");
    assert!(env.postgres.database_exists(&database), "nothing dropped");

    std::fs::remove_file(&marker).unwrap();
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&database));
    let manifest = manifest_of(&archive);
    assert_eq!(manifest["version"], 3, "{manifest}");
    assert_eq!(manifest["parts"], serde_json::json!(stored_parts(&folder)));
}
