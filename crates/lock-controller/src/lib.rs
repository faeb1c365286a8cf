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
//! over, `namespace_wide` the Locks on their own Namespace (opt-in),
//! `resync` the hourly safety net, `coalesced` the Namespace and CRD marker
//! writes that concurrent reconciles share, `marked_here` those of them
//! the watches may not show yet, `orphaned` what counts as a marker no
//! Lock would clear, and `orphans` their repair.
#![forbid(unsafe_code)]

mod coalesced;
mod decision;
mod index;
mod marked_here;
mod namespace_wide;
mod orphaned;
mod orphans;
mod reconcile;
mod resync;
mod superseded;
mod suspension;
mod watches;

use navique_api::constants::{CORE_GROUP_ALIAS, DEFAULT_ENFORCEABLE_GROUPS};
use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};

use crate::decision::Enforceable;

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

    /// API groups whose objects a Lock may protect, comma-separated; `core`
    /// names the core group (v1: PersistentVolumeClaims, Secrets...). Locks
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

    /// Limits an enforceable group to the resources listed, as
    /// `<group>/<plural>`, comma-separated, e.g.
    /// `core/persistentvolumeclaims,apps/deployments`: the controller then
    /// watches only those (its RBAC grants no others), and a Lock on another
    /// kind of the group is InvalidTarget. A group listed nowhere here: all
    /// of its resources.
    #[arg(
        long,
        env = "NAVIQUE_ENFORCEABLE_RESOURCES",
        value_delimiter = ',',
        value_parser = parse_resource,
        value_name = "GROUP/RESOURCE"
    )]
    pub enforceable_resources: Vec<(String, String)>,

    /// Let a Lock whose target is its own Namespace (apiVersion v1, kind
    /// Namespace) protect every enforceable object in it, through the
    /// Namespace's core.navique.com/namespace-locked annotation; the guard
    /// must be installed for it (Helm value lockGuard.namespaceLocks). Off,
    /// such a Lock is InvalidTarget, saying how to turn this on.
    #[arg(
        long,
        env = "NAVIQUE_NAMESPACE_LOCKS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub namespace_locks: bool,
    /// The longest break-glass suspension of a Lock (from when the
    /// controller first sees it), as `1h`, `30m` or `90s`; a longer one is
    /// refused and the Lock stays active.
    #[arg(
        long,
        env = "NAVIQUE_MAX_SUSPENSION",
        default_value = "1h",
        value_parser = suspension::Limit::parse,
        value_name = "DURATION"
    )]
    pub max_suspension: suspension::Limit,
    /// Reconciles at once. Each holds an HTTP/1.1 connection to the API
    /// server while it writes, with its buffers: more use more memory,
    /// and activate a burst of Locks no sooner once the API server is
    /// busy (docs/locks.md, Performance).
    #[arg(
        long,
        env = "NAVIQUE_MAX_CONCURRENT_RECONCILES",
        default_value_t = 64,
        value_parser = clap::value_parser!(u16).range(1..),
        value_name = "N"
    )]
    pub max_concurrent_reconciles: u16,
}

/// `<group>/<plural>`, the group as [`parse_group`] reads it.
fn parse_resource(value: &str) -> Result<(String, String), String> {
    let (group, resource) = value
        .trim()
        .rsplit_once('/')
        .ok_or_else(|| format!("{value:?} is not <group>/<resource>"))?;
    let group = parse_group(group)?;
    if resource.is_empty()
        || !resource
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Err(format!(
            "{value:?}: {resource:?} is not a resource's plural name"
        ));
    }
    Ok((group, resource.to_owned()))
}

impl Args {
    /// What Locks may protect; a resource of a group that is not
    /// enforceable is refused, since the guard would not match it.
    pub fn enforceable(&self) -> Result<Enforceable, String> {
        let mut groups = self.enforceable_groups.clone();
        let mut seen = std::collections::HashSet::new();
        groups.retain(|group| seen.insert(group.clone()));
        let mut enforceable = Enforceable::groups(groups);
        enforceable.namespace_locks = self.namespace_locks;
        for (group, resource) in &self.enforceable_resources {
            if !enforceable.groups.contains(group) {
                return Err(format!(
                    "--enforceable-resources names {resource} of {}, which --enforceable-groups does not list",
                    if group.is_empty() {
                        CORE_GROUP_ALIAS
                    } else {
                        group
                    }
                ));
            }
            enforceable
                .resources
                .entry(group.clone())
                .or_default()
                .insert(resource.clone());
        }
        Ok(enforceable)
    }
}

/// An API group name, `core` standing for the core group (`""`, which a
/// comma-separated flag cannot spell). An empty value is refused rather
/// than read as the core group: a stray comma must not widen what can be
/// locked.
fn parse_group(value: &str) -> Result<String, String> {
    let group = value.trim();
    if group == CORE_GROUP_ALIAS {
        return Ok(String::new());
    }
    if group.is_empty() || group.contains('/') {
        return Err(format!(
            "{value:?} is not an API group name (the core group is {CORE_GROUP_ALIAS:?})"
        ));
    }
    Ok(group.to_owned())
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let enforceable = args.enforceable().map_err(anyhow::Error::msg)?;
    Component::run(NAME, &args.common, async |component, client| {
        let metrics = reconcile::Metrics::register(component);
        component
            .run_as_leader(
                client.clone(),
                &args.leader_election,
                async move |leadership| {
                    reconcile::run(
                        client,
                        enforceable,
                        args.max_suspension.clone(),
                        args.max_concurrent_reconciles,
                        metrics,
                        leadership.token().clone(),
                    )
                    .await
                },
            )
            .await
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn groups(flag: &str) -> Result<Vec<String>, String> {
        Args::try_parse_from(["lock-controller", flag])
            .map(|args| args.enforceable_groups)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn core_names_the_core_group_and_the_default_stays_the_operators() {
        assert_eq!(
            groups("--enforceable-groups=core,apps").unwrap(),
            ["", "apps"]
        );
        assert_eq!(
            Args::try_parse_from(["lock-controller"])
                .unwrap()
                .enforceable_groups,
            DEFAULT_ENFORCEABLE_GROUPS
        );
    }

    #[test]
    fn resources_limit_their_group_and_need_it_enforceable() {
        let args = Args::try_parse_from([
            "lock-controller",
            "--enforceable-groups=core.navique.com,core,apps",
            "--enforceable-resources=core/persistentvolumeclaims,core/secrets,apps/deployments",
        ])
        .unwrap();
        let enforceable = args.enforceable().unwrap();
        assert_eq!(enforceable.groups, ["core.navique.com", "", "apps"]);
        assert_eq!(
            enforceable.resources[""],
            ["persistentvolumeclaims", "secrets"]
                .map(String::from)
                .into()
        );
        assert_eq!(
            enforceable.resources["apps"],
            ["deployments".to_owned()].into()
        );
        assert!(!enforceable.resources.contains_key("core.navique.com"));

        let args =
            Args::try_parse_from(["lock-controller", "--enforceable-resources=core/secrets"])
                .unwrap();
        assert_eq!(
            args.enforceable().unwrap_err(),
            "--enforceable-resources names secrets of core, which --enforceable-groups does not list"
        );
        let error = Args::try_parse_from(["lock-controller", "--enforceable-resources=secrets"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("\"secrets\" is not <group>/<resource>"),
            "{error}"
        );
    }

    #[test]
    fn namespace_locks_are_off_unless_asked_for() {
        let enforceable = |args: &[&str]| {
            Args::try_parse_from([&["lock-controller"], args].concat())
                .unwrap()
                .enforceable()
                .unwrap()
                .namespace_locks
        };
        assert!(!enforceable(&[]));
        assert!(enforceable(&["--namespace-locks"]));
        assert!(enforceable(&["--namespace-locks=true"]));
        assert!(!enforceable(&["--namespace-locks=false"]));
        assert!(Args::try_parse_from(["lock-controller", "--namespace-locks=yes"]).is_err());
    }

    #[test]
    fn reconciles_at_once_default_to_64_and_never_to_none() {
        let concurrency = |args: &[&str]| {
            Args::try_parse_from([&["lock-controller"], args].concat())
                .map(|args| args.max_concurrent_reconciles)
        };
        assert_eq!(concurrency(&[]).unwrap(), 64);
        assert_eq!(
            concurrency(&["--max-concurrent-reconciles=16"]).unwrap(),
            16
        );
        // Zero would mean unbounded to kube's controller.
        assert!(concurrency(&["--max-concurrent-reconciles=0"]).is_err());
    }

    #[test]
    fn an_empty_group_is_refused_not_read_as_core() {
        let error = groups("--enforceable-groups=apps,").unwrap_err();
        assert!(
            error.contains("\"\" is not an API group name (the core group is \"core\")"),
            "{error}"
        );
    }
}
