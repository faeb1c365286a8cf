//! The real binary, killed (SIGKILL) in the middle of an upload to S3 and
//! started again: nothing of the interrupted attempt is visible, and the
//! same request then makes exactly one complete, verified backup, which a
//! later process finds in the store. Stopped with SIGTERM mid-upload, it
//! aborts the upload.

mod common;

use std::fs;
use std::net::SocketAddr;

use backup_runner::parts::BASE_PART;
use common::{
    CONTROLLER, Env, Pki, TIMEOUT, files, request, restore_list, service_ref, sha256_file,
    watch_to_end,
};
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_api::grpc::snapshot::v1::{Phase, WatchSnapshotRequest};
use navique_api::services::BackupPhase;
use navique_testkit::s3::{BUCKET, S3Server};
use navique_testkit::{Process, eventually, free_port};
use tonic::transport::Channel;

const NS: &str = "my-project";

/// A client with the lifecycle controller's certificate, issued from the
/// CA Secret the binary created (as the controller issues its own).
async fn grpc_client(env: &Env, addr: SocketAddr) -> SnapshotServiceClient<Channel> {
    Pki::from_secret(&env.client, NS, "navique-grpc-ca")
        .await
        .client(CONTROLLER, addr)
        .await
}

/// `backup-runner` as a process, killed when dropped.
struct Binary {
    process: Process,
    addr: SocketAddr,
}

impl Binary {
    fn start(env: &Env, s3: &S3Server) -> Binary {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let kubeconfig = env.apiserver.kubeconfig();
        let listen = addr.to_string();
        let store = format!("s3://{BUCKET}/navique");
        let ca_secret = format!("{NS}/navique-grpc-ca");
        let args = [
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--admin-addr",
            "127.0.0.1:0",
            "--listen-addr",
            &listen,
            "--store-url",
            &store,
            // Self-managed mutual TLS, its CA Secret in the test's Project.
            "--grpc-dns-names",
            "127.0.0.1",
            "--grpc-ca-secret",
            &ca_secret,
        ];
        let process = Process::spawn_env("backup-runner", &args, &s3.env());
        Binary { process, addr }
    }

    fn logs(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.process.stdout(),
            self.process.stderr()
        )
    }

    /// SIGKILL: no chance to abort anything.
    fn kill(mut self) {
        self.process.kill();
    }

    /// SIGTERM, as Kubernetes stops a pod; waits for the exit.
    fn terminate(mut self) {
        let status = self.process.terminate(TIMEOUT);
        assert!(status.success(), "{status}\n{}", self.logs());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_mid_upload_leaves_no_backup_and_the_retry_makes_one() {
    let env = Env::start(&[NS]).await;
    let uid = env.service(NS, "big-db", "big", None).await;
    // Random text pg_dump cannot squeeze much: an archive of tens of MiB,
    // several upload parts and a moment to kill the runner in.
    env.fill(&Env::database(NS, "big"), 300_000, 120).await;
    env.record(NS, "big-db-final", "big-db", "Final").await;
    let s3 = S3Server::start().await;
    let objects = s3.bucket_dir().join("navique");
    let key = format!("{uid}/final");
    let service = service_ref(NS, "big-db", &uid);

    let first = Binary::start(&env, &s3);
    let mut client = grpc_client(&env, first.addr).await;
    client
        .request_snapshot(request(&key, service.clone(), "big-db-final"))
        .await
        .unwrap();
    wait_until_uploading(&mut client, &key).await;
    first.kill();
    assert_eq!(
        files(&objects),
        Vec::<String>::new(),
        "an interrupted upload is not visible"
    );
    assert!(
        files(s3.root()).iter().any(|f| f.starts_with(".upload-")),
        "the interrupted multipart upload is still open in the store: {:?}",
        files(s3.root())
    );
    assert_eq!(
        env.backup(NS, "big-db-final")
            .await
            .status
            .and_then(|s| s.phase),
        Some(BackupPhase::Running)
    );

    // Started again, the same request starts over and completes once.
    let second = Binary::start(&env, &s3);
    let mut client = grpc_client(&env, second.addr).await;
    client
        .request_snapshot(request(&key, service.clone(), "big-db-final"))
        .await
        .unwrap();
    let snapshot = watch_to_end(&mut client, &key).await;
    assert_eq!(
        snapshot.phase(),
        Phase::Completed,
        "{}\n{}",
        snapshot.message,
        second.logs()
    );
    let stem = format!("{NS}/big-db-{uid}/big-db-final");
    assert_eq!(
        files(&objects),
        [format!("{stem}.dump"), format!("{stem}.json")]
    );
    let archive = objects.join(format!("{stem}.dump"));
    assert_eq!(sha256_file(&archive), snapshot.sha256);
    assert_eq!(fs::metadata(&archive).unwrap().len(), snapshot.size_bytes);
    assert!(
        snapshot.size_bytes > 16 * 1024 * 1024,
        "{} bytes",
        snapshot.size_bytes
    );
    assert!(!restore_list(&archive).await.is_empty());
    eventually(TIMEOUT, "the ServiceBackup to be Completed", || async {
        env.backup(NS, "big-db-final")
            .await
            .status
            .filter(|s| s.phase == Some(BackupPhase::Completed))
    })
    .await;

    // And once more after another restart: found in the store, not taken again.
    drop(second);
    let third = Binary::start(&env, &s3);
    let mut client = grpc_client(&env, third.addr).await;
    let found = client
        .request_snapshot(request(&key, service.clone(), "big-db-final"))
        .await
        .unwrap()
        .into_inner();
    let found = if found.phase() == Phase::Completed {
        found
    } else {
        watch_to_end(&mut client, &key).await
    };
    assert_eq!(found.phase(), Phase::Completed);
    assert_eq!(found.sha256, snapshot.sha256);
    assert_eq!(
        found.started_at, snapshot.started_at,
        "the original attempt's times"
    );
    assert_eq!(files(&objects).len(), 2);

    // SIGTERM mid-upload: the runner aborts its upload (not even the open
    // upload stays) and leaves the record for whoever asked to ask again.
    let open_uploads = || {
        files(s3.root())
            .iter()
            .filter(|f| f.starts_with(".upload-"))
            .count()
    };
    let before = open_uploads();
    env.record(NS, "big-db-second", "big-db", "Final").await;
    let second_key = format!("{uid}/second");
    client
        .request_snapshot(request(&second_key, service, "big-db-second"))
        .await
        .unwrap();
    wait_until_uploading(&mut client, &second_key).await;
    third.terminate();
    assert_eq!(files(&objects).len(), 2, "{:?}", files(&objects));
    assert_eq!(open_uploads(), before, "the upload was aborted");
    assert_eq!(
        env.backup(NS, "big-db-second")
            .await
            .status
            .and_then(|s| s.phase),
        Some(BackupPhase::Running)
    );
}

/// Returns once the snapshot has sent its first part on its way.
async fn wait_until_uploading(
    client: &mut SnapshotServiceClient<tonic::transport::Channel>,
    key: &str,
) {
    let mut progress = client
        .watch_snapshot(WatchSnapshotRequest {
            idempotency_key: key.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let message = progress
            .message()
            .await
            .unwrap()
            .expect("the stream ended early");
        assert!(
            !matches!(message.phase(), Phase::Completed | Phase::Failed),
            "finished before it could be stopped: {message:?}"
        );
        if message.phase() == Phase::Running && message.bytes_written > BASE_PART {
            return;
        }
    }
}
