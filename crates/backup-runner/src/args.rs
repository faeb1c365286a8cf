//! backup-runner's flags, besides those every component takes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use navique_runtime::CommonArgs;
use navique_runtime::grpc_tls::GrpcTlsArgs;

use crate::NAME;

/// Takes final and manual backups of managed services into object storage,
/// verifies them, and restores them into services of the same Project.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Address of the gRPC server (SnapshotService).
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_LISTEN_ADDR",
        default_value = "0.0.0.0:9090"
    )]
    pub listen_addr: SocketAddr,

    /// TLS of the gRPC server: self-managed mutual TLS by default.
    #[command(flatten)]
    pub grpc_tls: GrpcTlsArgs,

    /// The components that may call SnapshotService, comma-separated, by
    /// the identity in their client certificate
    /// (spiffe://navique/component/<name>). Every other caller is refused.
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_ALLOWED_CLIENTS",
        value_delimiter = ',',
        default_value = "service-lifecycle-controller",
        value_name = "COMPONENTS"
    )]
    pub allowed_clients: Vec<String>,

    /// Where archives go: `file:///path`, `s3://bucket/prefix`,
    /// `gs://bucket/prefix` or `az://container/prefix`. Credentials, region
    /// and endpoint come from the stores' usual variables (AWS_*, GOOGLE_*,
    /// AZURE_*), e.g. AWS_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_ALLOW_HTTP.
    #[arg(long, env = "NAVIQUE_BACKUP_STORE_URL", value_name = "URL")]
    pub store_url: String,

    /// How often backups whose `spec.retention` ended are looked for and
    /// removed (archive, then record), as a duration such as `5m`.
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_EXPIRY_INTERVAL",
        default_value = "5m",
        value_name = "DURATION",
        value_parser = expiry_interval
    )]
    pub expiry_interval: Duration,

    /// How long the archives of a Project that is gone (deleted with its
    /// records) are kept before the sweep removes them, as a duration such
    /// as `168h`: time to copy what a Project deleted by mistake held.
    #[arg(
        long,
        env = "NAVIQUE_ORPHANED_BACKUP_GRACE",
        default_value = "168h",
        value_name = "DURATION",
        value_parser = orphaned_backup_grace
    )]
    pub orphaned_backup_grace: Duration,

    /// The provider's namespace: backup-runner connects to a ProviderShared
    /// service's database only with the admin Secret its ServiceClass names
    /// here, never with anything a Project can write.
    #[arg(
        long,
        env = "NAVIQUE_PROVIDER_NAMESPACE",
        default_value = navique_provider_postgres::catalogue::DEFAULT_PROVIDER_NAMESPACE,
        value_name = "NAMESPACE"
    )]
    pub provider_namespace: String,

    /// Folder holding pg_dump and pg_restore. Default: PATH, then the newest
    /// /usr/lib/postgresql/<version>/bin. They must be at least as new as
    /// the servers they dump.
    #[arg(long, env = "NAVIQUE_PG_BIN_DIR", value_name = "PATH")]
    pub pg_bin_dir: Option<PathBuf>,

    /// Threads compressing each archive with zstd, besides pg_dump. Default:
    /// the cores beyond the first, at least 1, at most 8.
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_ZSTD_WORKERS",
        default_value_t = crate::compression::default_workers(),
        value_parser = clap::value_parser!(u32).range(1..=64),
        value_name = "N"
    )]
    pub zstd_workers: u32,

    /// pg_dump and pg_restore jobs when a request sets none (a plan's
    /// `spec.backup.jobs` does). 1 streams one custom-format archive; more
    /// dump the directory format in parallel into --work-dir, stored as
    /// one object per file, and restore it in parallel into services that
    /// hold no data.
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_JOBS",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::directory::MAX_JOBS)),
        value_name = "N"
    )]
    pub jobs: u32,

    /// Local folder for parallel dumps and restores, which need the
    /// uncompressed dump on disk (about the database's size without
    /// indexes) while they run; one backup-runner per folder (it removes
    /// what a killed one left at start-up). Default: backup-runner in the
    /// system's temporary folder.
    #[arg(long, env = "NAVIQUE_BACKUP_WORK_DIR", value_name = "PATH")]
    pub work_dir: Option<PathBuf>,

    /// How often a running backup's progress is written to its
    /// ServiceBackup's status, as a duration such as `5s` (phase changes
    /// are written at once).
    #[arg(
        long,
        env = "NAVIQUE_BACKUP_PROGRESS_INTERVAL",
        default_value = "5s",
        value_name = "DURATION",
        value_parser = progress_interval
    )]
    pub progress_interval: Duration,
}

fn expiry_interval(text: &str) -> Result<Duration, navique_api::Error> {
    navique_api::duration::parse("--expiry-interval", text)
}

fn progress_interval(text: &str) -> Result<Duration, navique_api::Error> {
    navique_api::duration::parse("--progress-interval", text)
}

fn orphaned_backup_grace(text: &str) -> Result<Duration, navique_api::Error> {
    navique_api::duration::parse("--orphaned-backup-grace", text)
}
