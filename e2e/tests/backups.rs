//! Backups end to end: the real service-lifecycle-controller, webhook and
//! backup-runner (over gRPC, storing into a local directory) on the dev API
//! server, with a real PostgreSQL. `SnapshotAndDelete` leaves one verified
//! Final backup that restores into a new service; a Project user takes a
//! manual backup; with backup-runner down nothing is deleted until it is
//! back, and then exactly one backup is taken.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use navique_e2e::services::{ALICE, ServiceEnv};
use navique_e2e::{eventually, free_port};

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

fn sha256(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.split(' ').next().unwrap().to_owned()
}

/// A service with 1,000 rows in a table its owner role owns.
async fn service_with_rows(env: &ServiceEnv, ns: &str, db: &str) {
    env.apply(&env.orders_db(ns, db, "SnapshotAndDelete", false))
        .await;
    env.until_state(ns, "orders-db", "Ready Available").await;
    env.postgres.query_in(
        db,
        &format!(
            "set role {db}; create table items (id int primary key, name text); insert into items select g, 'item ' || g from generate_series(1, 1000) g"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_delete_leaves_one_verified_final_backup_that_restores() {
    let port = free_port();
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("http://127.0.0.1:{port}")]);
    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    env.controller_ready().await;
    let ns = env.cluster.namespace("final");
    let db = "final_orders";
    service_with_rows(&env, &ns, db).await;

    // A Project user asks for a backup now.
    let manual = format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: before-delete, namespace: {ns}}}\nspec:\n  serviceRef: {{name: orders-db}}\n"
    );
    env.cluster
        .kubectl_in(&["create", "-f", "-", "--as", ALICE], Some(&manual));
    eventually(WAIT, "the manual backup to complete", || async {
        backups(&env, &ns)
            .iter()
            .any(|b| b[0] == "before-delete" && b[1] == "Manual" && b[2] == "Completed")
            .then_some(())
    })
    .await;

    env.cluster.kubectl_ok(&[
        "delete",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--wait=false",
    ]);
    env.until_gone(&ns, "orders-db").await;
    assert!(
        !env.postgres.database_exists(db),
        "removed after the backup"
    );

    let all = backups(&env, &ns);
    let finals: Vec<&Vec<String>> = all.iter().filter(|b| b[1] == "Final").collect();
    assert_eq!(finals.len(), 1, "{all:?}");
    let record = finals[0];
    assert!(record[0].starts_with("orders-db-final-"), "{record:?}");
    assert_eq!(record[2], "Completed");
    assert_eq!(record[6], "owners=", "a record has no owner");
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
    assert_eq!(
        stored(store.path(), "dump").len(),
        2,
        "the manual and the final backup"
    );

    // A new service restored from the final backup holds the same rows.
    let restored = env
        .orders_db(&ns, "restored_orders", "Retain", false)
        .replace("name: orders-db", "name: orders-restored")
        .replace(
            "  deletionPolicy: Retain",
            &format!(
                "  deletionPolicy: Retain\n  restoreFrom:\n    backupName: {}",
                record[0]
            ),
        );
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
    assert_eq!(
        env.postgres
            .query_in("restored_orders", "select count(*), sum(id) from items"),
        "1000|500500"
    );

    // The Project user's manual backup restores too.
    let from_manual = env
        .orders_db(&ns, "manual_orders", "Retain", false)
        .replace("name: orders-db", "name: orders-from-manual")
        .replace(
            "  deletionPolicy: Retain",
            "  deletionPolicy: Retain\n  restoreFrom:\n    backupName: before-delete",
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
        env.postgres
            .query_in("manual_orders", "select count(*) from items"),
        "1000"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_deleted_while_backup_runner_is_down_and_one_backup_is_taken_after() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let env = ServiceEnv::start(&["--backup-runner-url", &url]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("runner-down");
    let db = "blocked_orders";
    service_with_rows(&env, &ns, db).await;

    env.cluster.kubectl_ok(&[
        "delete",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--wait=false",
    ]);
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
    assert!(env.postgres.database_exists(db), "nothing removed");
    assert_eq!(
        env.postgres.query_in(db, "select count(*) from items"),
        "1000"
    );

    let store = tempfile::tempdir().unwrap();
    let _runner = env
        .start_backup_runner(port, &format!("file://{}", store.path().display()))
        .await;
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(db));
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
    let env = ServiceEnv::start(&["--backup-runner-url", &format!("http://127.0.0.1:{port}")]);
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
    env.postgres.query_in(
        db,
        &format!(
            "set role {db}; create table blob as select g as id, md5(random()::text) || md5(random()::text) as a from generate_series(1, 1000000) g"
        ),
    );

    env.cluster.kubectl_ok(&[
        "delete",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--wait=false",
    ]);
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
    assert!(env.postgres.database_exists(db));
    assert!(env.state(&ns, "orders-db").starts_with("Deleting"));

    let _runner = env.start_backup_runner(port, &store_url).await;
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(db));
    let all = backups(&env, &ns);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0][1].as_str(), all[0][2].as_str()),
        ("Final", "Completed")
    );
    assert_eq!(stored(store.path(), "json").len(), 1, "exactly one backup");
    assert_eq!(stored(store.path(), "dump").len(), 1);
}
