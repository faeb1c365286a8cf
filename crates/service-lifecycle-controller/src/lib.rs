//! service-lifecycle-controller: reconciles ManagedServices (provisioning and
//! the deletion-policy machine), ServiceBindings, ServiceCredentialPolicies,
//! Project deletion, and Stacks with their deletion-approval gate; serves the
//! `ApprovalEvents` gRPC stream.
#![forbid(unsafe_code)]

use std::convert::Infallible;

use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};

pub mod deletion;
pub mod postgres;

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
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    Component::run(NAME, &args.common, async |component, client| {
        component
            .run_as_leader(client, &args.leader_election, async |token| {
                // Reconcilers land with the managed-services and Stacks issues.
                token.cancelled().await;
                Ok::<(), Infallible>(())
            })
            .await
    })
    .await?;
    Ok(())
}
