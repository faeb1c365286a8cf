//! service-lifecycle-controller: reconciles ManagedServices (provisioning and
//! the deletion-policy machine), ServiceBindings, ServiceCredentialPolicies,
//! Project deletion, and Stacks with their deletion-approval gate; serves the
//! `ApprovalEvents` gRPC stream.
#![forbid(unsafe_code)]

use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};

pub mod deletion;
pub mod engine;
mod error;
pub mod instance;
pub mod objects;
pub mod postgres;
pub mod reconcile;
pub mod service;

pub use error::Error;

pub const NAME: &str = "service-lifecycle-controller";

/// Reconciles ManagedServices, bindings, credential policies and Stacks, and
/// carries out deletion policies and approvals.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
    /// The container image of `InProject` PostgreSQL engines.
    #[arg(long, env = "NAVIQUE_POSTGRES_IMAGE", default_value = reconcile::DEFAULT_POSTGRES_IMAGE)]
    pub postgres_image: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    Component::run(NAME, &args.common, async |component, client| {
        let metrics = reconcile::Metrics::register(component);
        component
            .run_as_leader(
                client.clone(),
                &args.leader_election,
                async move |leadership| {
                    let services = reconcile::Context::new(client, metrics, leadership)
                        .with_postgres_image(&args.postgres_image);
                    reconcile::run(services).await
                },
            )
            .await
    })
    .await?;
    Ok(())
}
