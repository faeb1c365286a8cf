//! What deleting a ManagedService does, decided from what is known: the
//! requested policy, the one last applied, the plan, the confirmation
//! annotation, protection, whether the Project is going, and whether the
//! engine still exists. Pure, so that every rule of the "Status and Deletion" guide is a
//! unit test, and so that a controller restarted at any point decides the
//! same again. The service-lifecycle-controller decides with it, and the
//! kubectl plugin's `preview delete` predicts with it.

use crate::constants::reasons;
use crate::messages;
use crate::services::{DeletionPolicy, PolicyRefusal, plan_refusal};

/// Everything the decision depends on.
#[derive(Clone, Debug)]
pub struct Facts<'a> {
    pub name: &'a str,
    /// `spec.deletionPolicy` as stored.
    pub requested: DeletionPolicy,
    /// `status.appliedDeletionPolicy`: the policy in force before.
    pub applied: Option<DeletionPolicy>,
    pub plan: &'a str,
    /// The plan's `allowedDeletionPolicies` (None: the plan is gone).
    pub allowed: Option<&'a [DeletionPolicy]>,
    pub backup_enabled: bool,
    /// The `services.kube-dc.com/confirm-delete` annotation.
    pub confirmation: Option<&'a str>,
    /// `spec.deletionProtection: true` on the stored object: turned on
    /// after the delete request came in, it holds the deletion.
    pub protected: bool,
    /// The Project (namespace) is being deleted.
    pub project_deleting: bool,
    /// The engine (database, StatefulSet) still exists.
    pub engine_exists: bool,
    /// The service's final ServiceBackup is recorded `Completed`: what a
    /// `SnapshotAndDelete` interrupted after its backup goes on from, even
    /// once the engine is gone.
    pub final_backup_completed: bool,
}

/// What the controller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing is touched until the confirmation annotation is right.
    AwaitConfirmation,
    /// Nothing is touched while `deletionProtection` is on.
    AwaitProtectionOff,
    /// Stop managing: leave engine, data, Secrets and Services, unowned,
    /// marked retained.
    Retain,
    /// Take a final backup, then remove engine and data.
    SnapshotThenRemove,
    /// No engine to back up: keep data volumes and credential Secrets.
    RetainData,
    /// Remove engine and data.
    Remove,
}

/// The decision, with the status and events it is reported with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The policy in force for this deletion.
    pub policy: DeletionPolicy,
    pub step: Step,
    /// The `Ready=False` reason and message while deleting.
    pub reason: &'static str,
    pub message: String,
    /// The `DeletionPolicyDowngraded` Warning event's message, when the
    /// requested policy could not be applied.
    pub downgraded: Option<String>,
    /// The Project is going: record `ProjectDeleted`.
    pub project_deleted: bool,
}

/// Why `policy` cannot be applied, if it cannot.
fn refusal(policy: DeletionPolicy, facts: &Facts<'_>) -> Option<String> {
    if policy == DeletionPolicy::Retain {
        return None;
    }
    let Some(allowed) = facts.allowed else {
        return Some(format!("plan {} no longer exists", facts.plan));
    };
    match plan_refusal(allowed, facts.backup_enabled, policy)? {
        PolicyRefusal::NotAllowed => Some(format!("plan {} does not allow {policy}", facts.plan)),
        PolicyRefusal::BackupsDisabled => Some(format!("plan {} has backups disabled", facts.plan)),
    }
}

/// Decides the deletion of a service.
pub fn decide(facts: &Facts<'_>) -> Decision {
    if facts.project_deleting {
        return Decision {
            policy: DeletionPolicy::Delete,
            step: Step::Remove,
            reason: reasons::RETAINED,
            message: "the Project is being deleted: the service and its data are removed"
                .to_owned(),
            downgraded: None,
            project_deleted: true,
        };
    }
    if facts.protected {
        return Decision {
            policy: facts.applied.unwrap_or(DeletionPolicy::Retain),
            step: Step::AwaitProtectionOff,
            reason: reasons::DELETION_BLOCKED,
            message: messages::DELETION_PROTECTION_ENABLED.to_owned(),
            downgraded: None,
            project_deleted: false,
        };
    }
    let requested = facts.requested;
    let (policy, downgraded) = match refusal(requested, facts) {
        None => (requested, None),
        Some(cause) => {
            let fallback = facts
                .applied
                .unwrap_or(DeletionPolicy::Retain)
                .least_destructive(requested);
            let policy = if refusal(fallback, facts).is_none() {
                fallback
            } else {
                DeletionPolicy::Retain
            };
            (
                policy,
                Some(messages::deletion_policy_downgraded(
                    requested, policy, &cause,
                )),
            )
        }
    };
    let (step, reason, message) = match policy {
        DeletionPolicy::Retain => (
            Step::Retain,
            reasons::RETAINED,
            "retaining the engine, its data volumes, credential Secrets and Services".to_owned(),
        ),
        DeletionPolicy::SnapshotAndDelete if facts.final_backup_completed => (
            Step::Remove,
            reasons::RETAINED,
            "the final backup is complete: removing the engine and its data".to_owned(),
        ),
        DeletionPolicy::SnapshotAndDelete if !facts.engine_exists => (
            Step::RetainData,
            reasons::RETAINED,
            "the engine no longer exists, so no final backup can be taken: the data volumes and credential Secrets are retained".to_owned(),
        ),
        DeletionPolicy::SnapshotAndDelete => (
            Step::SnapshotThenRemove,
            reasons::RETAINED,
            "taking the final backup before removing the engine and its data".to_owned(),
        ),
        DeletionPolicy::Delete if facts.confirmation != Some(facts.name) => (
            Step::AwaitConfirmation,
            reasons::DELETION_CONFIRMATION_NEEDED,
            messages::deletion_confirmation_needed(facts.name),
        ),
        DeletionPolicy::Delete => (
            Step::Remove,
            reasons::RETAINED,
            "removing the engine and its data".to_owned(),
        ),
    };
    Decision {
        policy,
        step,
        reason,
        message,
        downgraded,
        project_deleted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeletionPolicy::*;

    const ALL: &[DeletionPolicy] = &[Retain, SnapshotAndDelete, Delete];

    fn facts(requested: DeletionPolicy) -> Facts<'static> {
        Facts {
            name: "orders-db",
            requested,
            applied: Some(requested),
            plan: "postgresql-platform-ha",
            allowed: Some(ALL),
            backup_enabled: true,
            confirmation: Some("orders-db"),
            protected: false,
            project_deleting: false,
            engine_exists: true,
            final_backup_completed: false,
        }
    }

    // stale authorisation: protection is read from the stored object at
    // every pass, not only when the delete request came in.
    #[test]
    fn protection_turned_on_while_deleting_holds_every_policy_with_the_seed_message() {
        for policy in [Retain, SnapshotAndDelete, Delete] {
            let decision = decide(&Facts {
                protected: true,
                final_backup_completed: true,
                ..facts(policy)
            });
            assert_eq!(decision.step, Step::AwaitProtectionOff, "{policy}");
            assert_eq!(decision.reason, "DeletionBlocked");
            assert_eq!(
                decision.message,
                "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
            );
        }
    }

    #[test]
    fn a_deleted_project_removes_a_protected_service_too() {
        let decision = decide(&Facts {
            protected: true,
            project_deleting: true,
            ..facts(Retain)
        });
        assert_eq!(decision.step, Step::Remove);
    }

    #[test]
    fn retain_keeps_everything() {
        let decision = decide(&facts(Retain));
        assert_eq!(
            (decision.policy, decision.step, decision.reason),
            (Retain, Step::Retain, "Retained")
        );
        assert_eq!(decision.downgraded, None);
    }

    #[test]
    fn delete_waits_for_the_confirmation_with_the_seed_message() {
        for confirmation in [None, Some("other-db")] {
            let decision = decide(&Facts {
                confirmation,
                ..facts(Delete)
            });
            assert_eq!(decision.step, Step::AwaitConfirmation);
            assert_eq!(decision.reason, "DeletionConfirmationNeeded");
            assert_eq!(
                decision.message,
                "deletionPolicy Delete destroys data; annotate services.kube-dc.com/confirm-delete=orders-db to confirm, or the instance stays retained"
            );
        }
    }

    #[test]
    fn confirmed_delete_removes() {
        assert_eq!(decide(&facts(Delete)).step, Step::Remove);
    }

    #[test]
    fn snapshot_and_delete_backs_up_first_or_retains_data_without_an_engine() {
        assert_eq!(
            decide(&facts(SnapshotAndDelete)).step,
            Step::SnapshotThenRemove
        );
        let gone = decide(&Facts {
            engine_exists: false,
            ..facts(SnapshotAndDelete)
        });
        assert_eq!(gone.step, Step::RetainData);
        // Gone because this deletion removed it after its final backup.
        for engine_exists in [true, false] {
            let backed_up = decide(&Facts {
                engine_exists,
                final_backup_completed: true,
                ..facts(SnapshotAndDelete)
            });
            assert_eq!(backed_up.step, Step::Remove);
        }
        assert!(
            gone.message
                .contains("data volumes and credential Secrets are retained"),
            "{}",
            gone.message
        );
    }

    #[test]
    fn a_policy_the_plan_no_longer_allows_falls_back_to_the_less_destructive() {
        let decision = decide(&Facts {
            applied: Some(SnapshotAndDelete),
            allowed: Some(&[Retain, SnapshotAndDelete]),
            ..facts(Delete)
        });
        assert_eq!(
            (decision.policy, decision.step),
            (SnapshotAndDelete, Step::SnapshotThenRemove)
        );
        assert_eq!(
            decision.downgraded.as_deref(),
            Some(
                "deletionPolicy Delete cannot be applied (plan postgresql-platform-ha does not allow Delete); deleting under SnapshotAndDelete, the less destructive policy in force"
            )
        );
    }

    #[test]
    fn a_downgrade_to_retain_says_the_engine_keeps_consuming_capacity() {
        let decision = decide(&Facts {
            applied: Some(Retain),
            allowed: Some(&[Retain]),
            ..facts(Delete)
        });
        assert_eq!((decision.policy, decision.step), (Retain, Step::Retain));
        assert!(
            decision
                .downgraded
                .unwrap()
                .ends_with("the engine and its volumes are retained and keep consuming capacity")
        );
    }

    #[test]
    fn snapshots_need_backups_enabled() {
        let decision = decide(&Facts {
            backup_enabled: false,
            applied: Some(Retain),
            ..facts(SnapshotAndDelete)
        });
        assert_eq!(decision.policy, Retain);
        assert!(
            decision
                .downgraded
                .unwrap()
                .contains("has backups disabled")
        );
    }

    #[test]
    fn a_fallback_the_plan_refuses_too_becomes_retain() {
        let decision = decide(&Facts {
            applied: Some(SnapshotAndDelete),
            allowed: Some(&[Retain]),
            ..facts(Delete)
        });
        assert_eq!(decision.policy, Retain);
    }

    #[test]
    fn a_missing_plan_retains() {
        let decision = decide(&Facts {
            allowed: None,
            applied: None,
            ..facts(Delete)
        });
        assert_eq!(decision.policy, Retain);
        assert!(
            decision
                .downgraded
                .unwrap()
                .contains("plan postgresql-platform-ha no longer exists")
        );
    }

    #[test]
    fn a_deleted_project_removes_the_service_whatever_its_policy() {
        for requested in [Retain, SnapshotAndDelete, Delete] {
            let decision = decide(&Facts {
                project_deleting: true,
                confirmation: None,
                ..facts(requested)
            });
            assert_eq!(
                (decision.policy, decision.step, decision.project_deleted),
                (Delete, Step::Remove, true)
            );
        }
    }
}
