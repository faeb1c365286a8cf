//! backup-runner: serves `SnapshotService` over gRPC. It streams `pg_dump`
//! of a service's database into object storage, verifies what it stored,
//! records each backup on its `ServiceBackup`, takes manual backups, and
//! restores verified archives into services of the same Project.
//!
//! [`snapshots`] decides per idempotency key; [`engine`] does the work
//! ([`transfer`] moves and hashes the bytes, [`pg`] runs the tools); a
//! [`manifest`] next to an archive is what makes it a backup.
#![forbid(unsafe_code)]

mod args;
pub mod bounds;
pub mod compression;
pub mod directory;
pub mod engine;
mod error;
pub mod expiry;
pub mod grpc;
pub mod layout;
pub mod manifest;
pub mod manual;
mod metrics;
pub mod parts;
pub mod pg;
pub mod progress;
pub mod snapshots;
pub mod status;
pub mod store;
pub mod test_restore;
pub mod transfer;

use std::sync::Arc;

pub use args::Args;
pub use error::Error;
pub use metrics::Metrics;
use navique_runtime::Component;
use navique_runtime::controller::ReconcileMetrics;
use navique_runtime::grpc_tls;

use crate::engine::Engine;
use crate::grpc::Api;
use crate::pg::PgTools;
use crate::snapshots::Snapshots;
use crate::store::Store;

pub const NAME: &str = "backup-runner";

/// The readiness check that passes once the gRPC server listens.
const GRPC_CHECK: &str = "grpc";

pub async fn run(args: Args) -> Result<(), Error> {
    // What no retry fixes fails before anything starts.
    let tls = args.grpc_tls.settings()?;
    let store = Store::from_url(&args.store_url)?;
    let tools = PgTools::locate(args.pg_bin_dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind(args.listen_addr)
        .await
        .map_err(|e| Error::Serve {
            addr: args.listen_addr,
            reason: e.to_string(),
        })?;

    Component::run(NAME, &args.common, async |component, client| {
        let addr = listener.local_addr().unwrap_or(args.listen_addr);
        let shutdown = component.shutdown().clone();
        let component_error = |e: Error| navique_runtime::Error::Component(e.into());
        let Some(tls) = grpc_tls::start(tls, &client, NAME, &shutdown)
            .await
            .map_err(|e| component_error(e.into()))?
        else {
            return Ok(());
        };
        tracing::info!(
            %addr,
            allowed_clients = ?args.allowed_clients,
            store = %args.store_url,
            pg_bin_dir = %tools.bin_dir().display(),
            "serving SnapshotService"
        );
        let metrics = Metrics::default();
        component.register_metrics(|registry| metrics.register(registry));
        let engine = Arc::new(
            Engine::new(client.clone(), store, tools, metrics)
                .with_provider_namespace(&args.provider_namespace)
                .with_zstd_workers(args.zstd_workers)
                .with_jobs(
                    args.jobs,
                    args.work_dir
                        .clone()
                        .unwrap_or_else(|| std::env::temp_dir().join(NAME)),
                )
                .with_progress_interval(args.progress_interval),
        );
        let snapshots = Snapshots::new(engine, shutdown.child_token());
        let manual_metrics =
            ReconcileMetrics::register(component, "manual_backup", "ServiceBackup");
        component.readiness().register(GRPC_CHECK);
        let serving = async {
            let served = grpc::serve(
                listener,
                &tls,
                Api::new(snapshots.clone()),
                args.allowed_clients.clone(),
                shutdown.clone(),
            )
            .await;
            // A server that stopped by itself takes the component down.
            shutdown.cancel();
            served
        };
        component.readiness().set(GRPC_CHECK, true);
        let (served, (), ()) = tokio::join!(
            serving,
            manual::run(
                client.clone(),
                snapshots.clone(),
                manual_metrics,
                shutdown.clone()
            ),
            expiry::run(
                client,
                snapshots.engine().clone(),
                args.expiry_interval,
                args.orphaned_backup_grace,
                shutdown.clone()
            )
        );
        snapshots.drain().await;
        served.map_err(component_error)
    })
    .await?;
    Ok(())
}
