//! A ManagedService's deletion, predicted with the controller's own
//! decision (`navique_api::services::deletion::decide`): refused while
//! locked or protected; under the effective policy, the final backup
//! taken or not, the engine's objects and data removed or retained; the
//! backup records that stay.

use kube::ResourceExt;
use navique_api::constants::annotations;
use navique_api::messages;
use navique_api::services::deletion::{self, Facts, Step};
use navique_api::services::{ManagedService, PlacementMode, ServiceBackup, ServicePlan};
use navique_api::sync_options::{Gate, SyncOptions};

use super::{BackupFate, Cause, Object, Plan, lock_stop, tree::Node};

/// What the deletion of one service depends on, read with the user's
/// credentials.
pub struct ServiceFacts<'a> {
    pub service: &'a ManagedService,
    /// The plan; `Err` with why it cannot be read.
    pub plan: Result<Option<&'a ServicePlan>, String>,
    /// The service's own objects in its Project (labelled with its name and
    /// owned by its uid): StatefulSet, data volumes, Secrets, Services.
    pub objects: &'a [Node],
    pub backups: &'a [ServiceBackup],
}

fn target(service: &ManagedService) -> Object {
    Object::new(
        "services.kube-dc.com/v1alpha1",
        "ManagedService",
        service.namespace().as_deref(),
        &service.name_any(),
    )
}

/// The service's records: each kept (they have no owner), and the final
/// backup when one is taken first.
fn backups(facts: &ServiceFacts<'_>, plan: &mut Plan, final_backup: Option<String>) {
    let service = facts.service;
    for backup in facts.backups.iter().filter(|b| {
        b.spec.service_ref.name == service.name_any()
            && b.spec
                .service_ref
                .uid
                .as_ref()
                .is_none_or(|u| Some(u) == service.uid().as_ref())
    }) {
        if Some(backup.name_any()) == final_backup {
            continue;
        }
        plan.backups.push(BackupFate {
            name: backup.name_any(),
            origin: backup.spec.origin.as_str().to_owned(),
            fate: "kept".to_owned(),
        });
    }
    if let Some(name) = final_backup {
        plan.backups.push(BackupFate {
            name,
            origin: "Final".to_owned(),
            fate: "taken first".to_owned(),
        });
    }
}

/// The engine objects a removal deletes, each by its sync options.
fn remove_objects(plan: &mut Plan, objects: &[Node], after: &str) {
    for node in objects {
        if let Some((summary, message)) = lock_stop(&node.meta) {
            plan.stop(node.object.clone(), None, Cause::Locked, summary, message);
            continue;
        }
        let annotations = node.meta.annotations.as_ref();
        let options = SyncOptions::of(annotations);
        let approved = annotations
            .and_then(|a| a.get(annotations::DELETION_APPROVED))
            .is_some_and(|v| v == "true");
        let display = format!(
            "{} {}/{}",
            node.object.kind,
            node.object.namespace.as_deref().unwrap_or_default(),
            node.object.name
        );
        match options.gate(navique_api::grpc::approvals::v1::Operation::Delete) {
            Some(Gate::Allow) => plan.remove(node.object.clone(), None, after),
            Some(Gate::Confirm) if approved => plan.remove(node.object.clone(), None, after),
            Some(Gate::Confirm) => plan.stop(
                node.object.clone(),
                None,
                Cause::ApprovalRequired,
                "waiting for deletion approval",
                "Delete=confirm: annotate cd.hanzo.ai/deletion-approved=true to let the deletion policy delete it",
            ),
            Some(Gate::Never) => plan.stop(
                node.object.clone(),
                None,
                Cause::DeleteDisabled,
                "Delete=false",
                format!("{display} is not deleted: it is marked cd.hanzo.ai/sync-options: Delete=false; remove Delete=false to let the deletion policy delete it"),
            ),
            None => {
                let value = navique_api::sync_options::value(annotations).unwrap_or_default();
                plan.stop(
                    node.object.clone(),
                    None,
                    Cause::SyncOptionsNotUnderstood,
                    "sync options not understood",
                    options.problem(value).unwrap_or_default(),
                );
            }
        }
    }
}

/// The deletion of a service.
pub fn delete(facts: &ServiceFacts<'_>) -> Plan {
    let service = facts.service;
    let name = service.name_any();
    let me = target(service);
    let mut plan = Plan::default();
    if let Some((summary, message)) = lock_stop(&service.metadata) {
        plan.stop(me, None, Cause::Locked, summary, message);
        return plan;
    }
    if service.spec.deletion_protection == Some(true) {
        plan.stop(
            me,
            None,
            Cause::DeletionProtection,
            "deletionProtection is enabled",
            messages::DELETION_PROTECTION_ENABLED,
        );
        return plan;
    }
    if service.metadata.deletion_timestamp.is_some() {
        plan.notes
            .push(format!("ManagedService {name} is already being deleted"));
    }
    let plan_name = &service.spec.plan_ref.name;
    let requested = service.spec.deletion_policy;
    let applied = service
        .status
        .as_ref()
        .and_then(|s| s.applied_deletion_policy);
    // A Project identity may not read plans. The policy last applied was
    // allowed by the plan when it was applied; a plan changed since can only
    // make the deletion less destructive (a downgrade), so the preview
    // never says less than happens.
    let assumed;
    let (allowed, backup_enabled) = match &facts.plan {
        Ok(Some(plan)) => (
            Some(plan.spec.allowed_deletion_policies.as_slice()),
            plan.spec.backup.enabled,
        ),
        Ok(None) => (None, false),
        Err(why) if applied == Some(requested) => {
            plan.notes.push(format!(
                "ServicePlan {plan_name} cannot be read with your credentials ({why}): the preview takes it to allow {requested}, as it did when that policy was applied; a plan changed since can only make the deletion less destructive"
            ));
            assumed = [requested];
            (Some(&assumed[..]), true)
        }
        Err(why) => {
            plan.stop(
                me,
                None,
                Cause::Unreadable,
                format!("cannot read ServicePlan {plan_name}, which decides the policy in force: {why}"),
                format!("the policy {requested} has not been applied yet, and without the plan the preview does not guess what the deletion does; ask your provider which policies plan {plan_name} allows"),
            );
            return plan;
        }
    };
    let in_project = service.spec.placement.mode == PlacementMode::InProject;
    let engine_exists = if in_project {
        facts
            .objects
            .iter()
            .any(|n| n.object.kind == "StatefulSet" && n.object.name == name)
    } else {
        plan.notes.push(
            "the database and role are on the provider's server, which the plugin cannot see: it assumes they exist, as the controller does when it cannot tell".to_owned(),
        );
        true
    };
    let final_backup = service.final_backup_name();
    let final_backup_completed = facts.backups.iter().any(|b| {
        b.name_any() == final_backup
            && b.status.as_ref().and_then(|s| s.phase)
                == Some(navique_api::services::BackupPhase::Completed)
    });
    let decision = deletion::decide(&Facts {
        name: &name,
        requested,
        applied,
        plan: plan_name,
        allowed,
        backup_enabled,
        confirmation: service
            .annotations()
            .get(annotations::CONFIRM_DELETE)
            .map(String::as_str),
        protected: false,
        project_deleting: false,
        engine_exists,
        final_backup_completed,
    });
    if let Some(downgraded) = &decision.downgraded {
        plan.notes
            .push(format!("DeletionPolicyDowngraded: {downgraded}"));
    }
    let policy = decision.policy;
    let engine = if in_project {
        "its engine and data volumes"
    } else {
        "its database and role on the provider's server"
    };
    match decision.step {
        Step::AwaitConfirmation => {
            plan.stop(
                me,
                None,
                Cause::ConfirmationMissing,
                format!("needs {}={name}", annotations::CONFIRM_DELETE),
                decision.message.clone(),
            );
            backups(facts, &mut plan, None);
            return plan;
        }
        // Refused at admission above; the decision holds it too.
        Step::AwaitProtectionOff => {
            plan.stop(
                me,
                None,
                Cause::DeletionProtection,
                "deletionProtection is enabled",
                decision.message.clone(),
            );
            return plan;
        }
        Step::Retain => {
            for node in facts.objects {
                plan.keep(
                    node.object.clone(),
                    None,
                    "retained (services.kube-dc.com/retained=true): ask your provider to remove it",
                );
            }
            plan.allowed = format!(
                "{policy}: ManagedService {name} goes; {engine}, credential Secrets and Services are retained"
            );
            backups(facts, &mut plan, None);
        }
        Step::RetainData => {
            for node in facts.objects {
                plan.keep(
                    node.object.clone(),
                    None,
                    "retained: no final backup could be taken",
                );
            }
            plan.allowed = format!(
                "{policy}: the engine no longer exists, so no final backup is taken; ManagedService {name} goes, its data volumes and credential Secrets are retained"
            );
            backups(facts, &mut plan, None);
        }
        Step::SnapshotThenRemove => {
            backups(facts, &mut plan, Some(final_backup.clone()));
            remove_objects(&mut plan, facts.objects, "deleted after the final backup");
            plan.allowed = format!(
                "{policy}: final backup {final_backup} is taken first, then ManagedService {name} and {engine} are removed"
            );
        }
        Step::Remove => {
            backups(facts, &mut plan, None);
            remove_objects(&mut plan, facts.objects, "deleted");
            plan.allowed = if policy == navique_api::services::DeletionPolicy::Delete {
                format!(
                    "{policy}: ManagedService {name} and {engine} are removed; no final backup is taken"
                )
            } else {
                format!(
                    "{policy}: the final backup {final_backup} is complete; ManagedService {name} and {engine} are removed"
                )
            };
        }
    }
    if plan.stops.is_empty() {
        plan.remove(me, None, "deleted (its finalizer goes once the policy ran)");
    } else {
        plan.keep(me, None, "in phase Deleting until what stops it clears");
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use navique_api::services::{DeletionPolicy, ServiceBackupSpec, ServicePlanSpec};
    use serde_json::json;

    use super::*;
    use crate::preview::outcome::decide;
    use crate::preview::tests::meta;

    fn service(policy: &str, mode: &str) -> ManagedService {
        let mut service: ManagedService = serde_json::from_value(json!({
            "apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ManagedService",
            "metadata": {"name": "orders-db", "namespace": "shop", "uid": "0a1b2c3d-4e5f"},
            "spec": {"classRef": {"name": "postgresql"}, "planRef": {"name": "ha"},
                     "placement": {"mode": mode}, "deletionPolicy": policy}
        }))
        .unwrap();
        service.metadata.annotations = Some(BTreeMap::new());
        service
    }

    fn ha(allowed: &[DeletionPolicy]) -> ServicePlan {
        serde_json::from_value(json!({
            "apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ServicePlan",
            "metadata": {"name": "ha"},
            "spec": {"classRef": {"name": "postgresql"}, "allowedDeletionPolicies": allowed, "backup": {"enabled": true}}
        }))
        .unwrap_or_else(|e| panic!("{e}: {:?}", std::any::type_name::<ServicePlanSpec>()))
    }

    fn backup(name: &str, origin: &str) -> ServiceBackup {
        let spec: ServiceBackupSpec =
            serde_json::from_value(json!({"serviceRef": {"name": "orders-db"}, "origin": origin}))
                .unwrap();
        let mut backup = ServiceBackup::new(name, spec);
        backup.metadata.namespace = Some("shop".into());
        backup
    }

    fn engine() -> Vec<Node> {
        ["orders-db", "data-orders-db-0"]
            .iter()
            .zip(["StatefulSet", "PersistentVolumeClaim"])
            .map(|(name, kind)| Node::of("v1", kind, &meta(name, &[])))
            .collect()
    }

    const ALL: [DeletionPolicy; 3] = [
        DeletionPolicy::Retain,
        DeletionPolicy::SnapshotAndDelete,
        DeletionPolicy::Delete,
    ];

    fn line(plan: &Plan, service: &ManagedService) -> String {
        decide(&target(service), plan).line
    }

    #[test]
    fn snapshot_and_delete_takes_the_final_backup_first_and_keeps_the_other_records() {
        let service = service("SnapshotAndDelete", "InProject");
        let plan_object = ha(&ALL);
        let objects = engine();
        let backups = [backup("nightly", "Scheduled")];
        let plan = delete(&ServiceFacts {
            service: &service,
            plan: Ok(Some(&plan_object)),
            objects: &objects,
            backups: &backups,
        });
        assert_eq!(
            line(&plan, &service),
            "allowed: SnapshotAndDelete: final backup orders-db-final-0a1b2c3d is taken first, then ManagedService orders-db and its engine and data volumes are removed"
        );
        let fates: Vec<_> = plan
            .backups
            .iter()
            .map(|b| (b.name.as_str(), b.origin.as_str(), b.fate.as_str()))
            .collect();
        assert_eq!(
            fates,
            [
                ("nightly", "Scheduled", "kept"),
                ("orders-db-final-0a1b2c3d", "Final", "taken first")
            ]
        );
        assert_eq!(plan.removed.len(), 3);
    }

    #[test]
    fn delete_without_the_confirmation_waits_and_removes_nothing() {
        let service = service("Delete", "ProviderShared");
        let plan_object = ha(&ALL);
        let plan = delete(&ServiceFacts {
            service: &service,
            plan: Ok(Some(&plan_object)),
            objects: &[],
            backups: &[],
        });
        assert_eq!(
            line(&plan, &service),
            "waits: ManagedService orders-db: needs services.kube-dc.com/confirm-delete=orders-db"
        );
        assert_eq!(
            plan.stops[0].message,
            "deletionPolicy Delete destroys data; annotate services.kube-dc.com/confirm-delete=orders-db to confirm, or the instance stays retained"
        );
        assert!(plan.removed.is_empty());
    }

    #[test]
    fn protection_or_a_lock_refuses_the_delete() {
        let mut protected = service("Delete", "InProject");
        protected.spec.deletion_protection = Some(true);
        let plan_object = ha(&ALL);
        let facts = |s| ServiceFacts {
            service: s,
            plan: Ok(Some(&plan_object)),
            objects: &[],
            backups: &[],
        };
        assert_eq!(
            line(&delete(&facts(&protected)), &protected),
            "refused: deletionProtection is enabled"
        );
        let mut locked = service("Retain", "InProject");
        locked.metadata.annotations = Some(BTreeMap::from([(
            "core.navique.com/locked".to_owned(),
            "keep-db".to_owned(),
        )]));
        assert_eq!(
            line(&delete(&facts(&locked)), &locked),
            "refused: locked by keep-db"
        );
    }

    #[test]
    fn a_policy_the_plan_does_not_allow_is_downgraded_as_the_controller_does() {
        let service = service("Delete", "InProject");
        let plan_object = ha(&[DeletionPolicy::Retain]);
        let objects = engine();
        let plan = delete(&ServiceFacts {
            service: &service,
            plan: Ok(Some(&plan_object)),
            objects: &objects,
            backups: &[],
        });
        assert!(
            line(&plan, &service).starts_with("allowed: Retain: ManagedService orders-db goes"),
            "{}",
            line(&plan, &service)
        );
        assert!(
            plan.notes[0].starts_with("DeletionPolicyDowngraded: "),
            "{:?}",
            plan.notes
        );
        assert_eq!(plan.kept.len(), 2);
    }

    #[test]
    fn an_engine_object_marked_delete_confirm_stops_the_removal() {
        let mut service = service("Delete", "InProject");
        service.metadata.annotations = Some(BTreeMap::from([(
            "services.kube-dc.com/confirm-delete".to_owned(),
            "orders-db".to_owned(),
        )]));
        let plan_object = ha(&ALL);
        let mut objects = engine();
        objects[1] = Node::of(
            "v1",
            "PersistentVolumeClaim",
            &meta(
                "data-orders-db-0",
                &[("cd.hanzo.ai/sync-options", "Delete=confirm")],
            ),
        );
        let plan = delete(&ServiceFacts {
            service: &service,
            plan: Ok(Some(&plan_object)),
            objects: &objects,
            backups: &[],
        });
        assert_eq!(
            line(&plan, &service),
            "partial: ManagedService orders-db stops at PersistentVolumeClaim data-orders-db-0 (waiting for deletion approval)"
        );
    }

    // fail closed: a plan the user cannot read is not taken as "gone".
    #[test]
    fn an_unreadable_plan_is_unknown() {
        let service = service("SnapshotAndDelete", "InProject");
        let plan = delete(&ServiceFacts {
            service: &service,
            plan: Err("forbidden".into()),
            objects: &[],
            backups: &[],
        });
        assert_eq!(
            line(&plan, &service),
            "unknown: cannot read ServicePlan ha, which decides the policy in force: forbidden"
        );
    }
}
