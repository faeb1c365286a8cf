//! lock-controller: reconciles Locks. It stamps each Lock's target with the
//! `core.navique.com/locked` annotation and label naming the Locks that
//! protect it, clears them when the last Lock goes, re-stamps a target that
//! was tampered with, and reports `status.active` and `Ready` on every Lock.
#![forbid(unsafe_code)]

use std::convert::Infallible;

use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};

pub const NAME: &str = "lock-controller";

/// Reconciles Locks: stamps and clears `core.navique.com/locked` on their
/// targets, so that the admission guard denies deletes of locked objects.
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
                // The Lock reconciler lands with the Locks issue.
                token.cancelled().await;
                Ok::<(), Infallible>(())
            })
            .await
    })
    .await?;
    Ok(())
}
