//! The snapshot engine: pg_dump of a service's database streamed into the
//! store, read back and checked, then recorded by a manifest; and restores
//! of verified archives.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::{Client, ResourceExt};
use navique_api::grpc::snapshot::v1::{
    DumpProgress, Origin, Phase, RequestSnapshotRequest, RestoreSnapshotRequest, ServiceRef,
    TestRestore, Verification,
};
use navique_api::services::{
    BackupPhase, IN_PROJECT_PORT, ManagedService, PlacementMode, ServiceBackup, in_project_host,
};
use navique_provider_postgres::{Owner, catalogue, names};
use object_store::{ObjectStoreExt, PutPayload};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::compression::{self, Compression};
use crate::directory;
use crate::layout::BackupKey;
use crate::manifest::{self, Layout, Manifest, Part, ServiceRecord};
use crate::pg::{self, Connection, Input, PgTools};
use crate::progress;
use crate::store::Store;
use crate::test_restore::{self, RowCounts};
use crate::transfer::{self, Digested};
use crate::{Error, Metrics};

/// A validated RequestSnapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub idempotency_key: String,
    pub backup: BackupKey,
    pub origin: Origin,
    pub verification: Verification,
    /// pg_dump jobs, 1 to 16; 0 leaves them to `--jobs`.
    pub jobs: u32,
}

impl SnapshotRequest {
    pub fn from_proto(request: RequestSnapshotRequest) -> Result<Self, Error> {
        if request.idempotency_key.trim().is_empty() {
            return Err(Error::InvalidRequest("idempotency_key is empty".to_owned()));
        }
        let service = request
            .service
            .ok_or_else(|| Error::InvalidRequest("service is missing".to_owned()))?;
        let origin = Origin::try_from(request.origin).map_err(|_| {
            Error::InvalidRequest(format!("origin {} is not a known Origin", request.origin))
        })?;
        // An unknown value never means less proof: refused.
        let verification = Verification::try_from(request.verification).map_err(|_| {
            Error::InvalidRequest(format!(
                "verification {} is not a known Verification",
                request.verification
            ))
        })?;
        Ok(Self {
            idempotency_key: request.idempotency_key,
            backup: BackupKey::new(
                &service.namespace,
                &service.name,
                &service.uid,
                &request.backup_name,
            )?,
            origin,
            verification,
            jobs: directory::jobs(request.jobs, 0)?,
        })
    }

    pub fn service_ref(&self) -> ServiceRef {
        ServiceRef {
            namespace: self.backup.namespace.clone(),
            name: self.backup.service.clone(),
            uid: self.backup.uid.clone(),
        }
    }
}

/// Where a snapshot attempt is, for watchers and ServiceBackup status.
pub trait Report: Send + Sync {
    fn phase(&self, phase: Phase, message: String);
    fn bytes(&self, written: u64);
    fn test_restore(&self, result: TestRestore);
    fn progress(&self, progress: DumpProgress);
}

/// The source's side of a test restore: a read-only repeatable-read
/// transaction whose snapshot pg_dump dumps (`--snapshot`), held open
/// until the dump ends, in which the rows are counted.
struct SourceSnapshot {
    client: tokio_postgres::Client,
    id: String,
}

impl SourceSnapshot {
    async fn open(connection: &Connection) -> Result<Self, Error> {
        let failed = |e| pg::sql_failed("a snapshot", format!("of {}", connection.describe()), e);
        let client = connection.connect().await.map_err(failed)?;
        client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(failed)?;
        let row = client
            .query_one("SELECT pg_catalog.pg_export_snapshot()", &[])
            .await
            .map_err(failed)?;
        Ok(Self {
            id: row.get(0),
            client,
        })
    }

    async fn count(&self, connection: &Connection) -> Result<RowCounts, Error> {
        test_restore::count_rows(&self.client).await.map_err(|e| {
            pg::sql_failed(
                "a count",
                format!("of the rows in {}", connection.describe()),
                e,
            )
        })
    }
}

/// `pg_database_size` and the tables pg_dump will dump, for progress;
/// zeros (unknown) when they cannot be read, which does not stop a backup.
async fn estimate(connection: &Connection) -> (u64, u64) {
    let query = format!(
        "SELECT pg_catalog.pg_database_size(pg_catalog.current_database()), \
         (SELECT count(*) FROM ({}) t)",
        test_restore::TABLES
    );
    let read = async {
        let client = connection.connect().await?;
        let row = client.query_one(&query, &[]).await?;
        Ok::<_, tokio_postgres::Error>((row.get::<_, i64>(0), row.get::<_, i64>(1)))
    };
    match read.await {
        Ok((size, tables)) => (
            u64::try_from(size).unwrap_or_default(),
            u64::try_from(tables).unwrap_or_default(),
        ),
        Err(e) => {
            tracing::warn!(database = %connection.describe(), error = %e, "cannot estimate the dump's size");
            (0, 0)
        }
    }
}

/// Drops the scratch database, with any session still in it.
async fn drop_scratch(admin: &tokio_postgres::Client, scratch: &str) -> Result<(), Error> {
    let statement = format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        test_restore::quote_ident(scratch)
    );
    admin
        .batch_execute(&statement)
        .await
        .map_err(|e| pg::sql_failed("a test restore", statement.clone(), e))
}

/// A validated RestoreSnapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreRequest {
    pub source: BackupKey,
    pub target_namespace: String,
    pub target_name: String,
    pub target_uid: String,
    /// pg_restore jobs, 1 to 16; 0 leaves them to `--jobs`.
    pub jobs: u32,
}

impl RestoreRequest {
    /// Refuses a target in another namespace: a Project's data never moves
    /// to another Project.
    pub fn from_proto(request: RestoreSnapshotRequest) -> Result<Self, Error> {
        let source = request
            .source_service
            .ok_or_else(|| Error::InvalidRequest("source_service is missing".to_owned()))?;
        let target = request
            .target
            .ok_or_else(|| Error::InvalidRequest("target is missing".to_owned()))?;
        if target.name.is_empty() {
            return Err(Error::InvalidRequest("target.name is empty".to_owned()));
        }
        if target.uid.is_empty() {
            return Err(Error::InvalidRequest("target.uid is empty".to_owned()));
        }
        if target.namespace != source.namespace {
            return Err(Error::CrossNamespace {
                source_namespace: source.namespace,
                source_name: source.name,
                target_namespace: target.namespace,
            });
        }
        Ok(Self {
            source: BackupKey::new(
                &source.namespace,
                &source.name,
                &source.uid,
                &request.backup_name,
            )?,
            target_namespace: target.namespace,
            target_name: target.name,
            target_uid: target.uid,
            jobs: directory::jobs(request.jobs, 0)?,
        })
    }
}

/// A service's database, as backup-runner reaches it.
struct Reached {
    connection: Connection,
    /// The provider's record of it, for `ProviderShared` services.
    provider: Option<ProviderDatabase>,
}

/// A `ProviderShared` service's database on the provider's server.
struct ProviderDatabase {
    engine: navique_provider_postgres::Engine,
    owner: Owner,
    db: navique_provider_postgres::Database,
}

impl ProviderDatabase {
    async fn restored_from(&self) -> Result<Option<String>, Error> {
        self.engine
            .restored_from(&self.owner, &self.db)
            .await
            .map_err(Error::engine)
    }

    async fn record_restore(&self, tag: &str) -> Result<(), Error> {
        self.engine
            .record_restore(&self.owner, &self.db, tag)
            .await
            .map_err(Error::engine)
    }
}

/// What a restore did.
#[derive(Clone, Debug)]
pub struct Restored {
    pub location: String,
    pub digested: Digested,
    pub database: String,
    pub started_at: Timestamp,
    pub completed_at: Timestamp,
}

pub struct Engine {
    client: Client,
    store: Store,
    tools: PgTools,
    metrics: Metrics,
    provider_namespace: String,
    zstd_workers: u32,
    jobs: u32,
    work_dir: std::path::PathBuf,
    progress_interval: std::time::Duration,
}

/// A stored archive, as its manifest (or the upload just done) describes it.
#[derive(Clone, Debug)]
pub enum Archive {
    /// One object: `<backup>.dump`.
    Single {
        key: String,
        stored: Digested,
        compression: Compression,
    },
    /// pg_dump's directory format: `<backup>.d/<file>.zst` per part.
    Directory { backup: BackupKey, parts: Vec<Part> },
}

impl Archive {
    /// What the manifest of `backup` describes (its layout already checked
    /// when it was read).
    pub fn of(manifest: &Manifest, backup: &BackupKey) -> Self {
        match manifest.layout() {
            Ok(Layout::Directory) => Self::Directory {
                backup: backup.clone(),
                parts: manifest.parts.clone(),
            },
            _ => Self::Single {
                key: backup.archive(),
                stored: Digested {
                    size: manifest.size_bytes,
                    sha256: manifest.sha256.clone(),
                },
                compression: manifest.compression,
            },
        }
    }

    /// The object that shows the archive is there: the archive itself, or
    /// a directory archive's table of contents.
    fn marker(&self) -> String {
        match self {
            Self::Single { key, .. } => key.clone(),
            Self::Directory { backup, .. } => backup.part(manifest::TOC),
        }
    }

    /// The archive's location: a directory archive's ends with `/`.
    pub fn location(&self, store: &Store) -> String {
        match self {
            Self::Single { key, .. } => store.location(key),
            Self::Directory { backup, .. } => format!("{}/", store.location(&backup.directory())),
        }
    }

    /// Size and checksum as the manifest records them.
    pub fn digested(&self) -> Digested {
        match self {
            Self::Single { stored, .. } => stored.clone(),
            Self::Directory { parts, .. } => Digested {
                size: parts.iter().map(|p| p.size_bytes).sum(),
                sha256: transfer::hex(&<sha2::Sha256 as sha2::Digest>::digest(
                    manifest::parts_digest_input(parts),
                )),
            },
        }
    }
}

impl Engine {
    pub fn new(client: Client, store: Store, tools: PgTools, metrics: Metrics) -> Self {
        Self {
            client,
            store,
            tools,
            metrics,
            provider_namespace: catalogue::DEFAULT_PROVIDER_NAMESPACE.to_owned(),
            zstd_workers: compression::default_workers(),
            jobs: 1,
            work_dir: std::env::temp_dir(),
            progress_interval: std::time::Duration::from_secs(5),
        }
    }

    /// How often progress reaches ServiceBackup status (`--progress-interval`).
    pub fn with_progress_interval(mut self, interval: std::time::Duration) -> Self {
        self.progress_interval = interval;
        self
    }

    pub fn progress_interval(&self) -> std::time::Duration {
        self.progress_interval
    }

    /// Threads compressing each archive (`--zstd-workers`).
    pub fn with_zstd_workers(mut self, workers: u32) -> Self {
        self.zstd_workers = workers;
        self
    }

    /// pg_dump and pg_restore jobs when a request sets none (`--jobs`), and
    /// where parallel dumps and restores hold their files (`--work-dir`);
    /// what a killed process left there goes now.
    pub fn with_jobs(mut self, jobs: u32, work_dir: std::path::PathBuf) -> Self {
        directory::remove_stale(&work_dir);
        self.jobs = jobs;
        self.work_dir = work_dir;
        self
    }

    /// Where the ServiceClasses' admin Secrets are read from.
    pub fn with_provider_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.provider_namespace = namespace.into();
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Takes the snapshot, or finds it completed in the store (an earlier
    /// process finished it). Returns its manifest once it is verified, with
    /// a test restore when the request asks for one.
    pub async fn snapshot(
        &self,
        request: &SnapshotRequest,
        started_at: Timestamp,
        report: &dyn Report,
        cancel: &CancellationToken,
    ) -> Result<Manifest, Error> {
        let backup = &request.backup;
        let test_restore = request.verification == Verification::Restore;
        let jobs = directory::jobs(request.jobs, self.jobs)?;
        if let Some(found) = self.find_completed(backup).await? {
            if found.idempotency_key != request.idempotency_key {
                return Err(Error::BackupNameTaken {
                    backup: backup.backup_name.clone(),
                    service: backup.service_display(),
                    other: found.idempotency_key,
                });
            }
            // Found after a restart: verified again before anyone relies on
            // it, since the store may have changed it since. A failure is
            // kept (nothing deleted): the manifest says a backup was there.
            tracing::info!(location = %found.location, "found the completed snapshot in the store; verifying it again");
            report.phase(
                Phase::Verifying,
                format!(
                    "reading back {} ({} bytes), found in the store",
                    found.location, found.size_bytes
                ),
            );
            let archive = Archive::of(&found, backup);
            self.verify(&archive, false, cancel).await?;
            if test_restore {
                let counts = found.row_counts.as_ref().ok_or_else(|| Error::TestRestore {
                    location: found.location.clone(),
                    reason: format!(
                        "the backup was taken without row counts to compare with; remove {} to take it again",
                        self.store.location(&backup.manifest())
                    ),
                })?;
                let service = self
                    .service(&backup.namespace, &backup.service, Some(&backup.uid))
                    .await?;
                let reached = self.reach_for_test_restore(&service).await?;
                self.test_restore(
                    &reached.connection,
                    &request.idempotency_key,
                    &archive,
                    jobs,
                    counts,
                    report,
                    cancel,
                )
                .await?;
            }
            return Ok(found);
        }
        let service = self
            .service(&backup.namespace, &backup.service, Some(&backup.uid))
            .await?;
        self.check_record(backup, request.origin).await?;
        let reached = if test_restore {
            self.reach_for_test_restore(&service).await?
        } else {
            self.reach(&service).await?
        };
        let connection = &reached.connection;
        // For a test restore, the rows are counted in a repeatable-read
        // transaction whose snapshot pg_dump dumps, while it dumps.
        let source = match test_restore {
            true => Some(SourceSnapshot::open(connection).await?),
            false => None,
        };
        report.phase(
            Phase::Running,
            match jobs {
                1 => format!("pg_dump of {} is streaming", connection.describe()),
                _ => format!(
                    "pg_dump of {} is running {jobs} jobs",
                    connection.describe()
                ),
            },
        );
        let snapshot = source.as_ref().map(|s| s.id.as_str());
        let dumping = async {
            match jobs {
                1 => {
                    let key = backup.archive();
                    let stored = self
                        .dump_into_store(connection, snapshot, &key, report, cancel)
                        .await?;
                    Ok(Archive::Single {
                        key,
                        stored,
                        compression: Compression::Zstd,
                    })
                }
                _ => {
                    self.dump_directory(connection, snapshot, jobs, backup, report, cancel)
                        .await
                }
            }
        };
        let (archive, row_counts) = match &source {
            Some(source) => {
                let (archive, counts) = tokio::join!(dumping, source.count(connection));
                (archive?, Some(counts?))
            }
            None => (dumping.await?, None),
        };
        drop(source);
        let location = archive.location(&self.store);
        let digested = archive.digested();
        tracing::info!(%location, size = digested.size, sha256 = %digested.sha256, "archive uploaded");

        report.phase(
            Phase::Verifying,
            format!("reading back {location} ({} bytes)", digested.size),
        );
        let verified = async {
            // The compressor decompressed the one-job archive as it wrote it.
            let entries = self.verify(&archive, true, cancel).await?;
            let restored = match &row_counts {
                Some(counts) => Some(
                    self.test_restore(
                        connection,
                        &request.idempotency_key,
                        &archive,
                        jobs,
                        counts,
                        report,
                        cancel,
                    )
                    .await?,
                ),
                None => None,
            };
            Ok::<_, Error>((entries, restored))
        };
        let (entries, restored) = match verified.await {
            Ok(verified) => verified,
            Err(e) => {
                // Not a backup without a manifest, but do not leave it about.
                if let Err(delete) = self.remove_archive(&archive).await {
                    tracing::warn!(%location, error = %delete, "cannot delete the unverified archive");
                }
                return Err(e);
            }
        };
        let (version, format, parts) = match archive {
            Archive::Single { .. } => (manifest::VERSION_SINGLE, manifest::FORMAT, Vec::new()),
            Archive::Directory { parts, .. } => (
                manifest::VERSION_DIRECTORY,
                manifest::FORMAT_DIRECTORY,
                parts,
            ),
        };
        let manifest = Manifest {
            version,
            idempotency_key: request.idempotency_key.clone(),
            backup_name: backup.backup_name.clone(),
            origin: origin_name(request.origin).to_owned(),
            service: ServiceRecord {
                namespace: backup.namespace.clone(),
                name: backup.service.clone(),
                uid: backup.uid.clone(),
            },
            location,
            format: format.to_owned(),
            compression: Compression::Zstd,
            size_bytes: digested.size,
            sha256: digested.sha256,
            parts,
            entries,
            row_counts,
            test_restore: restored,
            started_at: started_at.to_string(),
            completed_at: Timestamp::now().to_string(),
        };
        let manifest_key = backup.manifest();
        self.store
            .inner()
            .put(
                &self.store.path(&manifest_key),
                PutPayload::from(manifest.to_json()),
            )
            .await
            .map_err(Error::store("write", self.store.location(&manifest_key)))?;
        Ok(manifest)
    }

    /// Deletes an archive that is not a backup (no manifest names it).
    async fn remove_archive(&self, archive: &Archive) -> Result<(), Error> {
        match archive {
            Archive::Single { key, .. } => {
                match self.store.inner().delete(&self.store.path(key)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(Error::store("delete", self.store.location(key))(e)),
                }
            }
            Archive::Directory { backup, .. } => directory::remove_parts(&self.store, backup).await,
        }
    }

    /// How a test restore reaches the service's server: as the provider,
    /// which can create and drop a scratch database there.
    async fn reach_for_test_restore(&self, service: &ManagedService) -> Result<Reached, Error> {
        if service.spec.placement.mode != PlacementMode::ProviderShared {
            return Err(Error::TestRestoreUnsupported {
                service: format!(
                    "{}/{}",
                    service.namespace().unwrap_or_default(),
                    service.name_any()
                ),
            });
        }
        self.reach(service).await
    }

    /// Restores the archive `key` into a scratch database on the server of
    /// `source` (the provider's connection), compares its row counts with
    /// `counts`, and drops it again, whatever happened. The result is
    /// reported either way.
    #[allow(clippy::too_many_arguments)]
    async fn test_restore(
        &self,
        source: &Connection,
        idempotency_key: &str,
        archive: &Archive,
        jobs: u32,
        counts: &RowCounts,
        report: &dyn Report,
        cancel: &CancellationToken,
    ) -> Result<manifest::TestRestoreRecord, Error> {
        let location = archive.location(&self.store);
        let scratch = test_restore::scratch_name(idempotency_key);
        report.phase(
            Phase::Verifying,
            format!("test restore of {location} into the scratch database {scratch}"),
        );
        let admin = source.connect().await.map_err(|e| {
            pg::sql_failed("a test restore", format!("on {}", source.describe()), e)
        })?;
        let outcome = async {
            drop_scratch(&admin, &scratch).await?;
            for statement in [
                format!("CREATE DATABASE {}", test_restore::quote_ident(&scratch)),
                // No Project role may even connect while it holds their data.
                format!(
                    "REVOKE ALL ON DATABASE {} FROM PUBLIC",
                    test_restore::quote_ident(&scratch)
                ),
            ] {
                admin.batch_execute(&statement).await.map_err(|e| {
                    pg::sql_failed("a test restore", format!("of {location}: {statement}"), e)
                })?;
            }
            let into = source.with_database(&scratch);
            self.restore_scratch(&into, archive, jobs, cancel).await?;
            let client = into.connect().await.map_err(|e| {
                pg::sql_failed("a test restore", format!("on {}", into.describe()), e)
            })?;
            let restored = test_restore::count_rows(&client).await.map_err(|e| {
                pg::sql_failed("a count", format!("of the rows in {}", into.describe()), e)
            })?;
            drop(client);
            test_restore::compare(counts, &restored).map_err(|reason| Error::TestRestore {
                location: location.clone(),
                reason,
            })
        }
        .await;
        if let Err(e) = drop_scratch(&admin, &scratch).await {
            // The next attempt drops it first; say so meanwhile.
            tracing::warn!(%scratch, error = %e, "cannot drop the scratch database");
        }
        let completed_at = Timestamp::now();
        let tables = counts.len() as u64;
        let rows = counts.values().sum();
        report.test_restore(TestRestore {
            passed: outcome.is_ok(),
            tables,
            rows,
            message: match &outcome {
                Ok(_) => {
                    format!("{tables} tables with {rows} rows restored as counted at dump time")
                }
                Err(e) => e.to_string(),
            },
            completed_at: Some(prost_types::Timestamp {
                seconds: completed_at.as_second(),
                nanos: completed_at.subsec_nanosecond(),
            }),
        });
        outcome?;
        Ok(manifest::TestRestoreRecord {
            tables,
            rows,
            completed_at: completed_at.to_string(),
        })
    }

    /// Runs `restore` (a pg_restore) on the archive at `key`, streamed and
    /// decompressed into it; the stored bytes must be `expected`, or
    /// pg_restore is killed before it has the end of the archive, which
    /// rolls its transaction back. Its exit status and standard error.
    async fn feed_pg_restore(
        &self,
        mut restore: tokio::process::Command,
        key: &str,
        expected: &Digested,
        compression: Compression,
        cancel: &CancellationToken,
    ) -> Result<(std::process::ExitStatus, String), Error> {
        let mut child = restore.spawn().map_err(|source| Error::Spawn {
            program: self.tools.bin_dir().join("pg_restore"),
            source,
        })?;
        let mut stdin = stdin_of(&mut child, compression);
        let stderr = tokio::spawn(pg::read_stderr(child.stderr.take()));
        let (read, last) = transfer::read_back(&self.store, key, &mut stdin, cancel).await?;
        if read != *expected {
            let _ = child.kill().await;
            return Err(Error::Corrupt {
                location: self.store.location(key),
                reason: format!(
                    "read {} bytes with sha256 {}, expected {} bytes with sha256 {}",
                    read.size, read.sha256, expected.size, expected.sha256
                ),
            });
        }
        transfer::finish_sink(stdin, last).await;
        let status = child
            .wait()
            .await
            .map_err(Error::io("cannot wait for pg_restore"))?;
        Ok((status, stderr.await.unwrap_or_default()))
    }

    /// Restores the archive into the scratch database: streamed (one
    /// object) or, for a directory archive, fetched whole and checked into
    /// a work folder first, then restored with `jobs` parallel jobs (the
    /// scratch database is dropped whatever happened, so no transaction
    /// needs to undo a failure).
    async fn restore_scratch(
        &self,
        into: &Connection,
        archive: &Archive,
        jobs: u32,
        cancel: &CancellationToken,
    ) -> Result<(), Error> {
        let location = archive.location(&self.store);
        let failed = |reason: String| Error::TestRestore {
            location: location.clone(),
            reason,
        };
        let (status, stderr) = match archive {
            Archive::Single {
                key,
                stored,
                compression,
            } => {
                let restore = self.tools.restore_scratch(into, &Input::Stdin);
                self.feed_pg_restore(restore, key, stored, *compression, cancel)
                    .await?
            }
            Archive::Directory { backup, parts } => {
                let work = directory::work_dir(&self.work_dir)?;
                let dir = directory::dump_dir(&work);
                directory::fetch(&self.store, backup, parts, &dir, |_| true, cancel)
                    .await?
                    .map_err(failed)?;
                let input = Input::Directory { dir, jobs };
                self.run_pg_restore(self.tools.restore_scratch(into, &input))
                    .await?
            }
        };
        if !status.success() {
            return Err(failed(format!(
                "pg_restore into {} failed ({status}): {}",
                into.describe(),
                pg::summarize(&stderr)
            )));
        }
        Ok(())
    }

    /// Runs a pg_restore that reads a local folder: its exit status and
    /// standard error.
    async fn run_pg_restore(
        &self,
        mut restore: tokio::process::Command,
    ) -> Result<(std::process::ExitStatus, String), Error> {
        let mut child = restore.spawn().map_err(|source| Error::Spawn {
            program: self.tools.bin_dir().join("pg_restore"),
            source,
        })?;
        let stderr = tokio::spawn(pg::read_stderr(child.stderr.take()));
        let status = child
            .wait()
            .await
            .map_err(Error::io("cannot wait for pg_restore"))?;
        Ok((status, stderr.await.unwrap_or_default()))
    }

    /// `pg_dump --jobs` of the directory format into a work folder, inside
    /// `snapshot` when given, each file compressed into its own object
    /// while pg_dump writes it (what an earlier attempt left under the
    /// folder is removed first). Progress is the bytes pg_dump wrote and
    /// those stored. On failure, the parts stored so far are removed.
    async fn dump_directory(
        &self,
        connection: &Connection,
        snapshot: Option<&str>,
        jobs: u32,
        backup: &BackupKey,
        report: &dyn Report,
        cancel: &CancellationToken,
    ) -> Result<Archive, Error> {
        directory::remove_parts(&self.store, backup).await?;
        let work = directory::work_dir(&self.work_dir)?;
        let dir = directory::dump_dir(&work);
        let (database_bytes, tables) = estimate(connection).await;
        let counters = Arc::new(progress::Counters::default());
        let mut child = self
            .tools
            .dump_directory(connection, snapshot, jobs, &dir)
            .spawn()
            .map_err(|source| Error::Spawn {
                program: self.tools.bin_dir().join("pg_dump"),
                source,
            })?;
        let stderr = tokio::spawn(progress::read_verbose_stderr(
            child.stderr.take(),
            counters.clone(),
        ));
        let progress = |stored| {
            report.bytes(stored);
            report.progress(counters.progress(stored, database_bytes, tables, false));
        };
        // On any early return `child` is dropped, which kills pg_dump.
        let uploaded = directory::upload_while_dumping(
            &self.store,
            backup,
            &dir,
            &mut child,
            &counters,
            &self.metrics,
            &progress,
            cancel,
        )
        .await;
        let failed = match uploaded {
            Ok(Ok(parts)) => {
                let stored = parts.iter().map(|p| p.size_bytes).sum();
                report.progress(counters.progress(stored, database_bytes, tables, true));
                return Ok(Archive::Directory {
                    backup: backup.clone(),
                    parts,
                });
            }
            Ok(Err(status)) => {
                let stderr = stderr.await.unwrap_or_default();
                Error::ToolFailed {
                    tool: "pg_dump",
                    context: format!("of {}", connection.describe()),
                    status: status.to_string(),
                    stderr: pg::summarize(&stderr),
                }
            }
            Err(e) => e,
        };
        drop(child);
        if let Err(delete) = directory::remove_parts(&self.store, backup).await {
            tracing::warn!(error = %delete, "cannot delete the parts of a failed upload");
        }
        Err(failed)
    }

    async fn dump_into_store(
        &self,
        connection: &Connection,
        snapshot: Option<&str>,
        key: &str,
        report: &dyn Report,
        cancel: &CancellationToken,
    ) -> Result<Digested, Error> {
        let (database_bytes, tables) = estimate(connection).await;
        let counters = Arc::new(progress::Counters::default());
        let mut command = self.tools.dump(connection, snapshot);
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: self.tools.bin_dir().join("pg_dump"),
            source,
        })?;
        let stdout = progress::Counting::new(
            child.stdout.take().expect("stdout is piped"),
            counters.clone(),
        );
        let mut compressed = compression::compress(stdout, self.zstd_workers);
        let stderr = tokio::spawn(progress::read_verbose_stderr(
            child.stderr.take(),
            counters.clone(),
        ));
        let progress = |written| {
            report.bytes(written);
            report.progress(counters.progress(written, database_bytes, tables, false));
        };
        // On any early return `child` is dropped, which kills pg_dump.
        let digested = transfer::upload(
            &self.store,
            key,
            &mut compressed,
            &transfer::Parts::stream(),
            &progress,
            &self.metrics,
            cancel,
            || async {
                let status = child
                    .wait()
                    .await
                    .map_err(Error::io("cannot wait for pg_dump"))?;
                let stderr = stderr.await.unwrap_or_default();
                if status.success() {
                    Ok(())
                } else {
                    Err(Error::ToolFailed {
                        tool: "pg_dump",
                        context: format!("of {}", connection.describe()),
                        status: status.to_string(),
                        stderr: pg::summarize(&stderr),
                    })
                }
            },
        )
        .await?;
        report.progress(counters.progress(digested.size, database_bytes, tables, true));
        Ok(digested)
    }

    /// Reads the archive back: the stored bytes have the size and sha256
    /// expected (every part's, for a directory archive), and `pg_restore
    /// --list` reads the whole (decompressed) table of contents and lists
    /// entries. Returns their count. Every zstd frame must decompress whole
    /// too: a directory archive's parts are decompressed here; a one-job
    /// archive is, unless `decompressed_on_upload` (the stored bytes are
    /// then those that [`compression::compress`] decompressed as it wrote
    /// them, which their sha256 proves); `pg_restore --list` reads only the
    /// archive's head.
    async fn verify(
        &self,
        archive: &Archive,
        decompressed_on_upload: bool,
        cancel: &CancellationToken,
    ) -> Result<u64, Error> {
        let location = archive.location(&self.store);
        let failed = |reason: String| Error::Verification {
            location: location.clone(),
            reason,
        };
        let (key, uploaded, compression) = match archive {
            Archive::Single {
                key,
                stored,
                compression,
            } => (key, stored, *compression),
            Archive::Directory { backup, parts } => {
                // Every part read back and decompressed; only the table of
                // contents is kept, for pg_restore --list.
                let work = directory::work_dir(&self.work_dir)?;
                let dir = directory::dump_dir(&work);
                directory::fetch(
                    &self.store,
                    backup,
                    parts,
                    &dir,
                    |name| name == manifest::TOC,
                    cancel,
                )
                .await?
                .map_err(failed)?;
                let mut child =
                    self.tools
                        .list_directory(&dir)
                        .spawn()
                        .map_err(|source| Error::Spawn {
                            program: self.tools.bin_dir().join("pg_restore"),
                            source,
                        })?;
                let counting =
                    tokio::spawn(count_entries(child.stdout.take().expect("stdout is piped")));
                let stderr = tokio::spawn(pg::read_stderr(child.stderr.take()));
                let status = child
                    .wait()
                    .await
                    .map_err(Error::io("cannot wait for pg_restore --list"))?;
                let stderr = stderr.await.unwrap_or_default();
                let entries = counting.await.unwrap_or_default();
                if !status.success() {
                    return Err(failed(format!(
                        "pg_restore --list failed ({status}): {}",
                        pg::summarize(&stderr)
                    )));
                }
                return Ok(entries);
            }
        };
        let mismatch = |read: &Digested| {
            failed(format!(
                "read back {} bytes with sha256 {}, but {} bytes with sha256 {} were stored",
                read.size, read.sha256, uploaded.size, uploaded.sha256
            ))
        };
        if compression == Compression::Zstd && !decompressed_on_upload {
            let (read, undecompressed) =
                transfer::fetch_decompressed(&self.store, key, None, cancel).await?;
            if read != *uploaded {
                return Err(mismatch(&read));
            }
            if let Some(e) = undecompressed {
                return Err(failed(format!("the archive does not decompress: {e}")));
            }
        }
        let mut child = self.tools.list().spawn().map_err(|source| Error::Spawn {
            program: self.tools.bin_dir().join("pg_restore"),
            source,
        })?;
        let mut stdin = stdin_of(&mut child, compression);
        let counting = tokio::spawn(count_entries(child.stdout.take().expect("stdout is piped")));
        let stderr = tokio::spawn(pg::read_stderr(child.stderr.take()));
        let (read, last) = transfer::read_back(&self.store, key, &mut stdin, cancel).await?;
        if read != *uploaded {
            return Err(mismatch(&read));
        }
        transfer::finish_sink(stdin, last).await;
        let status = child
            .wait()
            .await
            .map_err(Error::io("cannot wait for pg_restore --list"))?;
        let entries = counting.await.unwrap_or_default();
        let stderr = stderr.await.unwrap_or_default();
        if !status.success() {
            return Err(failed(format!(
                "pg_restore --list failed ({status}): {}",
                pg::summarize(&stderr)
            )));
        }
        // No entries is an empty database, a valid backup: pg_restore read
        // the whole table of contents, and the read-back checksum proved the
        // archive whole.
        Ok(entries)
    }

    /// The manifest of `backup` when the manifest exists and so does the
    /// archive it describes (whether it is whole is for `verify` to say).
    /// An archive without a manifest, or a manifest without its archive, is
    /// not a backup (the attempt is taken again).
    pub async fn find_completed(&self, backup: &BackupKey) -> Result<Option<Manifest>, Error> {
        let Some(manifest) = self.read_manifest(backup).await? else {
            return Ok(None);
        };
        let archive = Archive::of(&manifest, backup).marker();
        match self.store.inner().head(&self.store.path(&archive)).await {
            Ok(_) => Ok(Some(manifest)),
            Err(object_store::Error::NotFound { .. }) => {
                tracing::warn!(
                    location = %self.store.location(&archive),
                    "the manifest's archive is missing; taking the snapshot again"
                );
                Ok(None)
            }
            Err(e) => Err(Error::store("read", self.store.location(&archive))(e)),
        }
    }

    async fn read_manifest(&self, backup: &BackupKey) -> Result<Option<Manifest>, Error> {
        let key = backup.manifest();
        let location = self.store.location(&key);
        let bytes = match self.store.inner().get(&self.store.path(&key)).await {
            Ok(result) => result
                .bytes()
                .await
                .map_err(Error::store("read", &location))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Error::store("read", &location)(e)),
        };
        Manifest::from_json(&bytes)
            .map(Some)
            .map_err(|reason| Error::Manifest { location, reason })
    }

    /// The ManagedService, which must exist (with `uid` when given).
    pub async fn service(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<ManagedService, Error> {
        let service = Api::<ManagedService>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(Error::kube(format!(
                "read ManagedService {namespace}/{name}"
            )))?
            .ok_or_else(|| Error::ServiceNotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })?;
        let actual = service.uid().unwrap_or_default();
        match uid {
            Some(expected) if expected != actual => Err(Error::ServiceUidMismatch {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                expected: expected.to_owned(),
                actual,
            }),
            _ => Ok(service),
        }
    }

    /// The ServiceBackup the snapshot is taken for: it must exist and
    /// describe this service and origin, so that no archive is written that
    /// no record accounts for.
    pub async fn check_record(&self, backup: &BackupKey, origin: Origin) -> Result<(), Error> {
        let record = self.record(&backup.namespace, &backup.backup_name).await?;
        let described = &record.spec.service_ref;
        let problem = if described.name != backup.service
            || described
                .uid
                .as_deref()
                .is_some_and(|uid| uid != backup.uid)
        {
            Some(format!(
                "it describes service {}{}",
                described.name,
                described
                    .uid
                    .as_deref()
                    .map(|uid| format!(" (uid {uid})"))
                    .unwrap_or_default()
            ))
        } else if record.spec.origin.as_str() != origin_name(origin) {
            Some(format!("its origin is {}", record.spec.origin.as_str()))
        } else {
            None
        };
        match problem {
            Some(problem) => Err(Error::RecordMismatch {
                namespace: backup.namespace.clone(),
                name: backup.backup_name.clone(),
                expected: format!(
                    "a {} backup of {}",
                    origin_name(origin),
                    backup.service_display()
                ),
                problem,
            }),
            None => Ok(()),
        }
    }

    /// The ServiceBackup `namespace/name`, which must exist.
    async fn record(&self, namespace: &str, name: &str) -> Result<ServiceBackup, Error> {
        Api::<ServiceBackup>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(Error::kube(format!(
                "read ServiceBackup {namespace}/{name}"
            )))?
            .ok_or_else(|| Error::RecordMissing {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
    }

    /// What admission checked, again on the stored objects: the target asks
    /// for this restore (`spec.restoreFrom`), and the backup's record is
    /// Completed and describes the archive's service.
    async fn check_restore(
        &self,
        target: &ManagedService,
        request: &RestoreRequest,
    ) -> Result<(), Error> {
        let source = &request.source;
        let asked = target.spec.restore_from.as_ref().filter(|r| {
            r.backup_name == source.backup_name
                && r.namespace
                    .as_deref()
                    .is_none_or(|n| n == request.target_namespace)
        });
        if asked.is_none() {
            return Err(Error::RestoreNotRequested {
                namespace: request.target_namespace.clone(),
                name: request.target_name.clone(),
                backup: source.backup_name.clone(),
            });
        }
        let record = self.record(&source.namespace, &source.backup_name).await?;
        let described = &record.spec.service_ref;
        let completed =
            record.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed);
        let problem = if described.name != source.service
            || described
                .uid
                .as_deref()
                .is_some_and(|uid| uid != source.uid)
        {
            Some(format!("it describes service {}", described.name))
        } else if !completed {
            Some("it is not Completed".to_owned())
        } else {
            None
        };
        match problem {
            Some(problem) => Err(Error::RecordMismatch {
                namespace: source.namespace.clone(),
                name: source.backup_name.clone(),
                expected: format!("a Completed backup of {}", source.service_display()),
                problem,
            }),
            None => Ok(()),
        }
    }

    /// How the service's database is reached, never with anything a
    /// Project can write: `ProviderShared` as the provider (the class's
    /// admin Secret in the provider namespace), into the database recorded
    /// as the service's own; `InProject` at the engine's own Service, as
    /// its owner, with only the password read from the credential Secret.
    async fn reach(&self, service: &ManagedService) -> Result<Reached, Error> {
        let db = names::of_service(service).map_err(Error::engine)?;
        match service.spec.placement.mode {
            PlacementMode::ProviderShared => {
                let engine = catalogue::engine_of_class(
                    &self.client,
                    &service.spec.class_ref.name,
                    &self.provider_namespace,
                )
                .await?;
                let owner = Owner::of(service).ok_or_else(|| {
                    Error::InvalidRequest("the ManagedService has no uid".to_owned())
                })?;
                engine
                    .check_owned(&owner, &db)
                    .await
                    .map_err(Error::engine)?;
                Ok(Reached {
                    connection: Connection::as_provider(engine.admin(), &db),
                    provider: Some(ProviderDatabase { engine, owner, db }),
                })
            }
            PlacementMode::InProject => {
                let namespace = service.namespace().unwrap_or_default();
                let name = format!("{}-credentials", service.name_any());
                let secret = Api::<Secret>::namespaced(self.client.clone(), &namespace)
                    .get_opt(&name)
                    .await
                    .map_err(Error::kube(format!("read Secret {namespace}/{name}")))?
                    .ok_or_else(|| Error::SecretMissing {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    })?;
                let password =
                    pg::password_of(&secret.data.unwrap_or_default(), &namespace, &name)?;
                Ok(Reached {
                    connection: Connection::in_project(
                        in_project_host(&service.name_any(), &namespace),
                        IN_PROJECT_PORT,
                        &db,
                        password,
                    ),
                    provider: None,
                })
            }
        }
    }

    /// Restores a verified archive into the target service's database.
    pub async fn restore(
        &self,
        request: &RestoreRequest,
        cancel: &CancellationToken,
    ) -> Result<Restored, Error> {
        let started_at = Timestamp::now();
        let source = &request.source;
        let manifest = self
            .read_manifest(source)
            .await?
            .ok_or_else(|| Error::BackupNotFound {
                backup: source.backup_name.clone(),
                service: format!("{} (uid {})", source.service_display(), source.uid),
                manifest: self.store.location(&source.manifest()),
            })?;
        let target = self
            .service(
                &request.target_namespace,
                &request.target_name,
                Some(&request.target_uid),
            )
            .await?;
        self.check_restore(&target, request).await?;
        let reached = self.reach(&target).await?;
        let connection = &reached.connection;
        // An in-place restore of a protected service would replace its
        // data; a retry of the restore that wrote it does not.
        let tag = format!("{}/{}", source.uid, source.backup_name);
        let holds_data = connection.holds_data().await?;
        if target.spec.deletion_protection != Some(false) && holds_data {
            let retried = match &reached.provider {
                Some(provider) => provider.restored_from().await? == Some(tag.clone()),
                None => false,
            };
            if !retried {
                return Err(Error::InPlaceRestoreProtected {
                    namespace: request.target_namespace.clone(),
                    name: request.target_name.clone(),
                });
            }
        }
        let archive = Archive::of(&manifest, source);
        let location = archive.location(&self.store);
        let jobs = directory::jobs(request.jobs, self.jobs)?;
        let (status, stderr) = match &archive {
            // What the manifest says was stored, checked as it streams.
            Archive::Single {
                key,
                stored,
                compression,
            } => {
                let restore = self.tools.restore(connection, &Input::Stdin);
                self.feed_pg_restore(restore, key, stored, *compression, cancel)
                    .await?
            }
            // Fetched whole and checked before pg_restore starts.
            Archive::Directory { backup, parts } => {
                let work = directory::work_dir(&self.work_dir)?;
                let dir = directory::dump_dir(&work);
                directory::fetch(&self.store, backup, parts, &dir, |_| true, cancel)
                    .await?
                    .map_err(|reason| Error::Corrupt {
                        location: location.clone(),
                        reason,
                    })?;
                let retry_allowed =
                    reached.provider.is_some() || target.spec.deletion_protection == Some(false);
                let parallel = directory::restores_in_parallel(
                    jobs,
                    Layout::Directory,
                    holds_data,
                    retry_allowed,
                );
                if parallel && let Some(provider) = &reached.provider {
                    // Recorded first: whatever a failed parallel restore
                    // leaves is this restore's, so its retry may replace it.
                    provider.record_restore(&tag).await?;
                }
                let input = Input::Directory {
                    dir,
                    jobs: if parallel { jobs } else { 1 },
                };
                self.run_pg_restore(self.tools.restore(connection, &input))
                    .await?
            }
        };
        if !status.success() {
            return Err(Error::ToolFailed {
                tool: "pg_restore",
                context: format!("of {location} into {}", connection.describe()),
                status: status.to_string(),
                stderr: pg::summarize(&stderr),
            });
        }
        if let Some(provider) = &reached.provider {
            provider.record_restore(&tag).await?;
        }
        Ok(Restored {
            location,
            digested: archive.digested(),
            database: connection.database.clone(),
            started_at,
            completed_at: Timestamp::now(),
        })
    }
}

/// The child's stdin, fed the stored bytes of an archive of `compression`.
fn stdin_of(
    child: &mut Child,
    compression: Compression,
) -> std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>> {
    compression::decompressing(child.stdin.take().expect("stdin is piped"), compression)
}

async fn count_entries(stdout: impl AsyncRead + Unpin) -> u64 {
    let mut lines = BufReader::new(stdout).lines();
    let mut entries = 0;
    while let Ok(Some(line)) = lines.next_line().await {
        if pg::is_list_entry(&line) {
            entries += 1;
        }
    }
    entries
}

/// ServiceBackup's spelling of an origin.
pub fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Unspecified => "Unspecified",
        Origin::Manual => "Manual",
        Origin::Scheduled => "Scheduled",
        Origin::Final => "Final",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str, name: &str, uid: &str) -> Option<ServiceRef> {
        Some(ServiceRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        })
    }

    #[test]
    fn a_snapshot_request_needs_a_key_and_a_whole_service() {
        let request = RequestSnapshotRequest {
            idempotency_key: "u1/final".into(),
            service: service("ns", "db", "u1"),
            origin: Origin::Final as i32,
            backup_name: "db-final".into(),
            ..Default::default()
        };
        let parsed = SnapshotRequest::from_proto(request.clone()).unwrap();
        assert_eq!(parsed.backup.archive(), "ns/db-u1/db-final.dump");
        assert_eq!(parsed.origin, Origin::Final);

        let no_key = RequestSnapshotRequest {
            idempotency_key: " ".into(),
            ..request.clone()
        };
        assert!(SnapshotRequest::from_proto(no_key).is_err());
        let no_uid = RequestSnapshotRequest {
            service: service("ns", "db", ""),
            ..request.clone()
        };
        assert!(SnapshotRequest::from_proto(no_uid).is_err());
        let bad_origin = RequestSnapshotRequest {
            origin: 42,
            ..request.clone()
        };
        assert!(SnapshotRequest::from_proto(bad_origin).is_err());
        // An unknown number of jobs is refused, not clamped.
        let too_many = RequestSnapshotRequest {
            jobs: 64,
            ..request
        };
        let error = SnapshotRequest::from_proto(too_many).unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn a_restore_into_another_namespace_is_refused() {
        let request = RestoreSnapshotRequest {
            source_service: service("team-a", "db", "u1"),
            backup_name: "b".into(),
            target: service("team-b", "db2", "u2"),
            jobs: 0,
        };
        let error = RestoreRequest::from_proto(request).unwrap_err();
        assert_eq!(error.code(), tonic::Code::FailedPrecondition);
        assert!(
            error
                .to_string()
                .starts_with("a backup can only be restored into a service of the same Project"),
            "{error}"
        );
    }

    #[test]
    fn a_restore_in_the_same_namespace_names_the_archive() {
        let request = RestoreSnapshotRequest {
            source_service: service("team-a", "db", "u1"),
            backup_name: "b".into(),
            target: service("team-a", "db2", "u2"),
            jobs: 4,
        };
        let parsed = RestoreRequest::from_proto(request.clone()).unwrap();
        assert_eq!(parsed.source.archive(), "team-a/db-u1/b.dump");
        assert_eq!(parsed.target_uid, "u2");
        assert_eq!(parsed.jobs, 4);
        let too_many = RestoreSnapshotRequest {
            jobs: 17,
            ..request.clone()
        };
        let error = RestoreRequest::from_proto(too_many).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid request: jobs 17 is not between 1 and 16"
        );
        // identity by name: a restore always names the target's uid.
        let unpinned = RestoreSnapshotRequest {
            target: service("team-a", "db2", ""),
            ..request
        };
        let error = RestoreRequest::from_proto(unpinned).unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(error.to_string(), "invalid request: target.uid is empty");
    }
}
