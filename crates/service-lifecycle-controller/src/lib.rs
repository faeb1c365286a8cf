//! service-lifecycle-controller: reconciles ManagedServices (provisioning and
//! the deletion-policy machine), ServiceBindings, ServiceCredentialPolicies,
//! Project deletion, and Stacks with their deletion-approval gate; serves the
//! `ApprovalEvents` gRPC stream.
#![forbid(unsafe_code)]

use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};

pub mod binding;
pub mod credential_policy;
pub mod deletion;
pub mod dependents;
pub mod engine;
mod error;
pub mod final_backup;
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
    #[command(flatten)]
    pub backup_runner: final_backup::BackupRunnerArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let backup_runner = final_backup::BackupRunner::from_args(&args.backup_runner)?;
    Component::run(NAME, &args.common, async |component, client| {
        let metrics = reconcile::Metrics::register(component);
        let binding_metrics = binding::Metrics::register(component);
        let policy_metrics = credential_policy::Metrics::register(component);
        component
            .run_as_leader(
                client.clone(),
                &args.leader_election,
                async move |leadership| {
                    let services =
                        reconcile::Context::new(client.clone(), metrics, leadership.clone())
                            .with_postgres_image(&args.postgres_image)
                            .with_backup_runner(backup_runner);
                    let bindings =
                        binding::Context::new(client.clone(), binding_metrics, leadership.clone());
                    let policies =
                        credential_policy::Context::new(client, policy_metrics, leadership);
                    // One leadership for all three: each ends when it does.
                    let (services, bindings, policies) = tokio::join!(
                        reconcile::run(services),
                        binding::run(bindings),
                        credential_policy::run(policies),
                    );
                    services.and(bindings).and(policies)
                },
            )
            .await
    })
    .await?;
    Ok(())
}
