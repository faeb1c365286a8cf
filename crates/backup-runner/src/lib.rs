//! backup-runner: serves `SnapshotService` over gRPC. It streams `pg_dump`
//! of a service's database into object storage, verifies what it stored,
//! records each backup as a `ServiceBackup`, and restores into new services.
#![forbid(unsafe_code)]

use navique_runtime::{CommonArgs, Component};

pub const NAME: &str = "backup-runner";

/// Takes final and manual backups of managed services into object storage.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    Component::run(NAME, &args.common, async |component, _client| {
        // The SnapshotService server lands with the backup-runner issue.
        component.shutdown().cancelled().await;
        Ok(())
    })
    .await?;
    Ok(())
}
