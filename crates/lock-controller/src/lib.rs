//! lock-controller: reconciles Locks. It stamps each Lock's target with the
//! `core.navique.com/locked` annotation and label naming the Locks that
//! protect it, clears them when the last Lock goes, re-stamps a target that
//! was tampered with, and reports `status.active` and `Ready` on every Lock.
//! It also stamps the namespaces holding active Locks and the CRDs of
//! locked kinds, so that those cannot be deleted from under a Lock either.
//!
//! `decision` holds the rules as pure functions, `reconcile` the kube-rs
//! controller, `watches` discovery and what wakes a Lock besides itself, `index` which
//! Locks point at an object, `superseded` the Lock versions already written
//! over.
#![forbid(unsafe_code)]

mod decision;
mod index;
mod reconcile;
mod superseded;
mod watches;

use navique_api::constants::DEFAULT_ENFORCEABLE_GROUPS;
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

    /// API groups whose objects a Lock may protect, comma-separated. Locks
    /// on objects of other groups are refused as InvalidTarget.
    #[arg(
        long,
        env = "NAVIQUE_ENFORCEABLE_GROUPS",
        value_delimiter = ',',
        default_values_t = DEFAULT_ENFORCEABLE_GROUPS.map(String::from),
        value_parser = parse_group,
        value_name = "GROUPS"
    )]
    pub enforceable_groups: Vec<String>,
}

/// An API group name: the core group (`""`) holds nothing a Lock can protect.
fn parse_group(value: &str) -> Result<String, String> {
    let group = value.trim();
    if group.is_empty() || group.contains('/') {
        return Err(format!("{value:?} is not an API group name"));
    }
    Ok(group.to_owned())
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut groups = args.enforceable_groups.clone();
    let mut seen = std::collections::HashSet::new();
    groups.retain(|group| seen.insert(group.clone()));
    Component::run(NAME, &args.common, async |component, client| {
        let metrics = reconcile::Metrics::register(component);
        component
            .run_as_leader(
                client.clone(),
                &args.leader_election,
                async move |leadership| {
                    reconcile::run(client, groups, metrics, leadership.token().clone()).await
                },
            )
            .await
    })
    .await?;
    Ok(())
}
