//! `preview delete` and `preview sync`: what a delete or a Stack change
//! would do, computed from live objects read with the user's own
//! credentials, never changing anything.
//!
//! Three steps, as the controllers do: the commands gather what is live
//! (`commands/preview.rs`), the modules here decide, purely, what would be
//! removed, what would stay and what would stop it ([`tree`] for the
//! garbage collector and namespaces, [`stack`] for Stacks, [`service`]
//! for ManagedServices), and [`outcome`] says it in one line. The page
//! (`kubectl navique ui`) shows the same [`Preview`].

pub mod outcome;
pub mod service;
pub mod stack;
pub mod tree;

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use kube::api::ObjectMeta;
use navique_api::constants::annotations;
use serde::Serialize;

pub use outcome::{Outcome, Verdict};

/// `preview`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct PreviewArgs {
    #[command(subcommand)]
    pub what: PreviewCommand,
}

/// What to preview.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum PreviewCommand {
    /// What `kubectl delete KIND/NAME` would remove, and what would stop it
    /// (a namespace, a Stack, a ManagedService or any kind), without deleting.
    Delete(DeleteArgs),
    /// What applying a new version of a Stack would prune, and which of those
    /// would wait for approval, without applying it.
    Sync(SyncArgs),
}

/// `preview delete`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct DeleteArgs {
    /// The object, as kubectl names it: `stack/forge`, `namespace/forge`,
    /// `managedservice/orders-db`, `configmap/settings`.
    #[arg(value_name = "KIND/NAME")]
    pub target: String,
    /// The propagation policy of the delete, as kubectl's `--cascade` names it.
    #[arg(long, value_enum, default_value_t = Cascade::Background)]
    pub cascade: Cascade,
}

/// `preview sync`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct SyncArgs {
    /// The live Stack: `stack/NAME`.
    #[arg(value_name = "stack/NAME")]
    pub target: String,
    /// The new version of the Stack (a YAML or JSON manifest; `-` for stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
}

/// A delete's propagation policy (kubectl's `--cascade` values).
#[derive(ValueEnum, Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Cascade {
    /// The object goes at once; the garbage collector then deletes its dependents.
    Background,
    /// The dependents go first; the object waits for those that block it.
    Foreground,
    /// Only the object goes; its dependents lose their owner reference.
    Orphan,
}

/// One object, as the preview names it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl Object {
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// `Kind name`, as outcomes say it.
    pub fn display(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// Something the delete or sync removes.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    #[serde(flatten)]
    pub object: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i32>,
    /// How: `deleted`, `garbage-collected`, `pruned`, ...
    pub how: String,
}

/// Something that stays, without stopping anything.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    #[serde(flatten)]
    pub object: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i32>,
    pub why: String,
}

/// What stops or pauses the delete or sync at one object.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Active Locks: the API server refuses the object's delete.
    Locked,
    /// The namespace holds active Locks: its delete is refused.
    NamespaceLocked,
    /// `spec.deletionProtection: true` on a ManagedService.
    DeletionProtection,
    /// `Prune=confirm` or `Delete=confirm` without a counted approval.
    ApprovalRequired,
    /// `deletionPolicy: Delete` without `services.kube-dc.com/confirm-delete=<name>`.
    ConfirmationMissing,
    /// `Delete=false` on an engine object a deletion must remove.
    DeleteDisabled,
    /// `cd.hanzo.ai/sync-options` not understood: held.
    SyncOptionsNotUnderstood,
    /// A finalizer no Navique or Kubernetes controller is known to run.
    Finalizer,
    /// The object is already being deleted and not gone yet.
    BeingDeleted,
    /// What decides could not be read with the user's credentials.
    Unreadable,
}

impl Cause {
    /// Whether the API server refuses the delete request itself.
    pub fn refuses(self) -> bool {
        matches!(
            self,
            Self::Locked | Self::NamespaceLocked | Self::DeletionProtection
        )
    }
}

/// A stop: the object, why, in short (for the outcome line) and in full.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Stop {
    #[serde(flatten)]
    pub object: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i32>,
    pub cause: Cause,
    /// e.g. `locked by keep-inner`.
    pub summary: String,
    /// e.g. the guard's denial, with the Locks' reasons.
    pub message: String,
}

/// A ServiceBackup record and what becomes of it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupFate {
    pub name: String,
    pub origin: String,
    /// `kept`, `taken first`, `removed`.
    pub fate: String,
}

/// What a decision module found: the preview without its outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub removed: Vec<Removed>,
    pub kept: Vec<Kept>,
    pub stops: Vec<Stop>,
    pub backups: Vec<BackupFate>,
    pub notes: Vec<String>,
    /// What `allowed:` says when nothing stops it.
    pub allowed: String,
}

impl Plan {
    pub fn remove(&mut self, object: Object, wave: Option<i32>, how: &str) {
        self.removed.push(Removed {
            object,
            wave,
            how: how.to_owned(),
        });
    }

    pub fn keep(&mut self, object: Object, wave: Option<i32>, why: impl Into<String>) {
        self.kept.push(Kept {
            object,
            wave,
            why: why.into(),
        });
    }

    pub fn stop(
        &mut self,
        object: Object,
        wave: Option<i32>,
        cause: Cause,
        summary: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.stops.push(Stop {
            object,
            wave,
            cause,
            summary: summary.into(),
            message: message.into(),
        });
    }
}

/// The preview of one delete or sync.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// `delete` or `sync`.
    pub operation: String,
    pub target: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade: Option<Cascade>,
    pub outcome: Outcome,
    pub removed: Vec<Removed>,
    pub stops: Vec<Stop>,
    pub kept: Vec<Kept>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backups: Vec<BackupFate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Preview {
    /// The preview of `plan`, with its outcome decided.
    pub fn of(operation: &str, target: Object, cascade: Option<Cascade>, plan: Plan) -> Self {
        let outcome = outcome::decide(&target, &plan);
        Self {
            operation: operation.to_owned(),
            target,
            cascade,
            outcome,
            removed: plan.removed,
            stops: plan.stops,
            kept: plan.kept,
            backups: plan.backups,
            notes: plan.notes,
        }
    }
}

/// The Locks an object's markers name, if it is locked: what the guard
/// refuses its delete with (`core.navique.com/locked`, non-empty), and the
/// guard's denial, reasons included.
pub fn lock_stop(meta: &ObjectMeta) -> Option<(String, String)> {
    let get = |key| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    };
    let locked = get(annotations::LOCKED).filter(|v| !v.trim().is_empty())?;
    let names = locked.split(',').collect::<Vec<_>>().join(", ");
    Some((
        format!("locked by {names}"),
        navique_api::messages::lock_denied_by_markers(locked, get(annotations::LOCK_REASONS)),
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    pub(crate) fn meta(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("shop".to_owned()),
            uid: Some(format!("uid-{name}")),
            annotations: (!annotations.is_empty()).then(|| {
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>()
            }),
            ..ObjectMeta::default()
        }
    }

    fn parse(args: &[&str]) -> Result<crate::cli::Cli, clap::Error> {
        use clap::Parser;
        crate::cli::Cli::try_parse_from(
            std::iter::once("kubectl-navique").chain(args.iter().copied()),
        )
    }

    fn preview(args: &[&str]) -> PreviewCommand {
        match parse(args).unwrap().command {
            crate::cli::Command::Preview(PreviewArgs { what }) => what,
            other => panic!("not preview: {other:?}"),
        }
    }

    #[test]
    fn preview_delete_takes_kubectls_cascade_values_defaulting_to_background() {
        assert_eq!(
            preview(&[
                "preview",
                "delete",
                "stack/forge",
                "-n",
                "shop",
                "-o",
                "json"
            ]),
            PreviewCommand::Delete(DeleteArgs {
                target: "stack/forge".into(),
                cascade: Cascade::Background
            })
        );
        for (value, cascade) in [
            ("foreground", Cascade::Foreground),
            ("orphan", Cascade::Orphan),
            ("background", Cascade::Background),
        ] {
            assert_eq!(
                preview(&["preview", "delete", "cm/x", "--cascade", value]),
                PreviewCommand::Delete(DeleteArgs {
                    target: "cm/x".into(),
                    cascade
                })
            );
        }
        // kubectl's old boolean forms and anything else are refused.
        for bad in ["true", "false", "Foreground", ""] {
            assert!(
                parse(&["preview", "delete", "cm/x", "--cascade", bad]).is_err(),
                "{bad}"
            );
        }
        assert!(parse(&["preview", "delete"]).is_err());
    }

    #[test]
    fn preview_sync_needs_the_new_manifest() {
        assert_eq!(
            preview(&["preview", "sync", "stack/app", "-f", "new.yaml"]),
            PreviewCommand::Sync(SyncArgs {
                target: "stack/app".into(),
                file: "new.yaml".into()
            })
        );
        assert!(parse(&["preview", "sync", "stack/app"]).is_err());
    }

    #[test]
    fn an_object_is_locked_while_its_marker_names_a_lock() {
        let (summary, message) = lock_stop(&meta(
            "forge",
            &[
                ("core.navique.com/locked", "a,b"),
                ("core.navique.com/lock-reasons", "a: production"),
            ],
        ))
        .unwrap();
        assert_eq!(summary, "locked by a, b");
        assert_eq!(
            message,
            "resource is protected by Lock(s) [a, b]; delete the Lock(s) before deleting this resource (reasons: a: production)"
        );
        assert_eq!(
            lock_stop(&meta("x", &[("core.navique.com/locked", "")])),
            None
        );
        assert_eq!(lock_stop(&meta("x", &[])), None);
    }
}
