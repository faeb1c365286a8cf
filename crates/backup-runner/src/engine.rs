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
use crate::layout::BackupKey;
use crate::manifest::{self, Manifest, ServiceRecord};
use crate::pg::{self, Connection, PgTools};
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
    progress_interval: std::time::Duration,
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
            let key = backup.archive();
            report.phase(
                Phase::Verifying,
                format!(
                    "reading back {} ({} bytes), found in the store",
                    found.location, found.size_bytes
                ),
            );
            let expected = Digested {
                size: found.size_bytes,
                sha256: found.sha256.clone(),
            };
            self.verify(&key, &expected, found.compression, cancel)
                .await?;
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
                    &key,
                    &expected,
                    found.compression,
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
            format!("pg_dump of {} is streaming", connection.describe()),
        );
        let key = backup.archive();
        let location = self.store.location(&key);
        let dumping = self.dump_into_store(
            connection,
            source.as_ref().map(|s| s.id.as_str()),
            &key,
            report,
            cancel,
        );
        let (digested, row_counts) = match &source {
            Some(source) => {
                let (digested, counts) = tokio::join!(dumping, source.count(connection));
                (digested?, Some(counts?))
            }
            None => (dumping.await?, None),
        };
        drop(source);
        tracing::info!(%location, size = digested.size, sha256 = %digested.sha256, "archive uploaded");

        report.phase(
            Phase::Verifying,
            format!("reading back {location} ({} bytes)", digested.size),
        );
        let verified = async {
            let entries = self
                .verify(&key, &digested, Compression::Zstd, cancel)
                .await?;
            let restored = match &row_counts {
                Some(counts) => Some(
                    self.test_restore(
                        connection,
                        &request.idempotency_key,
                        &key,
                        &digested,
                        Compression::Zstd,
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
                if let Err(delete) = self.store.inner().delete(&self.store.path(&key)).await {
                    tracing::warn!(%location, error = %delete, "cannot delete the unverified archive");
                }
                return Err(e);
            }
        };
        let manifest = Manifest {
            version: manifest::VERSION,
            idempotency_key: request.idempotency_key.clone(),
            backup_name: backup.backup_name.clone(),
            origin: origin_name(request.origin).to_owned(),
            service: ServiceRecord {
                namespace: backup.namespace.clone(),
                name: backup.service.clone(),
                uid: backup.uid.clone(),
            },
            location,
            format: manifest::FORMAT.to_owned(),
            compression: Compression::Zstd,
            size_bytes: digested.size,
            sha256: digested.sha256,
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
        key: &str,
        expected: &Digested,
        compression: Compression,
        counts: &RowCounts,
        report: &dyn Report,
        cancel: &CancellationToken,
    ) -> Result<manifest::TestRestoreRecord, Error> {
        let location = self.store.location(key);
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
            self.restore_scratch(&into, key, expected, compression, cancel)
                .await?;
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

    /// Streams the archive into pg_restore of the scratch database; the
    /// stored bytes must match `expected`.
    async fn restore_scratch(
        &self,
        into: &Connection,
        key: &str,
        expected: &Digested,
        compression: Compression,
        cancel: &CancellationToken,
    ) -> Result<(), Error> {
        let location = self.store.location(key);
        let restore = self.tools.restore_scratch(into);
        let (status, stderr) = self
            .feed_pg_restore(restore, key, expected, compression, cancel)
            .await?;
        if !status.success() {
            return Err(Error::TestRestore {
                location,
                reason: format!(
                    "pg_restore into {} failed ({status}): {}",
                    into.describe(),
                    pg::summarize(&stderr)
                ),
            });
        }
        Ok(())
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
        let mut compressed = compression::compress(BufReader::new(stdout), self.zstd_workers);
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
    /// expected, and `pg_restore --list` reads the whole (decompressed)
    /// archive and lists entries. Returns their count.
    async fn verify(
        &self,
        key: &str,
        uploaded: &Digested,
        compression: Compression,
        cancel: &CancellationToken,
    ) -> Result<u64, Error> {
        let location = self.store.location(key);
        let failed = |reason: String| Error::Verification {
            location: location.clone(),
            reason,
        };
        let mut child = self.tools.list().spawn().map_err(|source| Error::Spawn {
            program: self.tools.bin_dir().join("pg_restore"),
            source,
        })?;
        let mut stdin = stdin_of(&mut child, compression);
        let counting = tokio::spawn(count_entries(child.stdout.take().expect("stdout is piped")));
        let stderr = tokio::spawn(pg::read_stderr(child.stderr.take()));
        let (read, last) = transfer::read_back(&self.store, key, &mut stdin, cancel).await?;
        if read != *uploaded {
            return Err(failed(format!(
                "read back {} bytes with sha256 {}, but {} bytes with sha256 {} were stored",
                read.size, read.sha256, uploaded.size, uploaded.sha256
            )));
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
        let archive = backup.archive();
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
        if target.spec.deletion_protection != Some(false) && connection.holds_data().await? {
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
        let key = source.archive();
        let location = self.store.location(&key);
        // What the manifest says was stored, and what the restore read.
        let stored = Digested {
            size: manifest.size_bytes,
            sha256: manifest.sha256.clone(),
        };
        let restore = self.tools.restore(connection);
        let (status, stderr) = self
            .feed_pg_restore(restore, &key, &stored, manifest.compression, cancel)
            .await?;
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
            digested: stored,
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
            ..request
        };
        assert!(SnapshotRequest::from_proto(bad_origin).is_err());
    }

    #[test]
    fn a_restore_into_another_namespace_is_refused() {
        let request = RestoreSnapshotRequest {
            source_service: service("team-a", "db", "u1"),
            backup_name: "b".into(),
            target: service("team-b", "db2", "u2"),
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
        };
        let parsed = RestoreRequest::from_proto(request.clone()).unwrap();
        assert_eq!(parsed.source.archive(), "team-a/db-u1/b.dump");
        assert_eq!(parsed.target_uid, "u2");
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
