//! Stacks: applies `spec.resources` with server-side apply in sync-wave
//! order, prunes what left the list, and tears everything down in reverse
//! wave order when the Stack is deleted, behind its finalizer. Removals
//! marked `Prune=confirm` or `Delete=confirm` wait for
//! `cd.hanzo.ai/deletion-approved: "true"` and `spec.approvals.required`
//! distinct approvers named at admission in `core.navique.com/approved-by`
//! ([`approvers`]); an approval counts only when given while the removal
//! waits (or declared by the Stack's manifest, for one approver); one set
//! earlier is taken away when the wait starts. Sync
//! options that are not understood hold the resource: it is neither pruned
//! nor deleted ([`sync_options`]).
//!
//! A Stack owns only what it created or adopted explicitly, recorded by
//! uid in its status ([`plan::claim`]): the label alone proves nothing.
//! Resources are keyed by group, kind, namespace and name, not version.
//! A kind that is not served is reported and, at prune and teardown, let
//! alone.
//! Everything done to the resources is done as a ServiceAccount of the
//! Stack's namespace ([`identity`]): RBAC decides what a Stack may do.
//!
//! Resources carry the label `core.navique.com/stack` and no owner
//! reference: garbage collection (a foreground or orphaning delete of the
//! Stack) must never remove them past the approval gate.

pub mod access;
pub mod approvals;
pub mod approvers;
mod error;
pub mod identity;
pub mod live;
pub mod notifications;
pub mod plan;
pub mod sync_options;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::conditions;
use navique_api::constants::{events, finalizers, labels, reasons};
use navique_api::core::{
    HealthState, HealthStatus, OperationPhase, OperationState, ResourceStatus, Stack, StackStatus,
    SyncStatus,
};
use navique_api::grpc::approvals::v1::Operation;
use navique_api::messages;
use navique_runtime::controller::{ReconcileMetrics, Tracker};
use navique_runtime::events::Recorder;
use navique_runtime::{Leadership, one_line, set_finalizers};

use self::approvals::{Approvals, Waiting};
use self::approvers::{Approval, Marks};
use self::identity::{Acting, Identities};
use self::live::Deleted;
use self::notifications::{Notice, Notifier};
use self::plan::{Desired, Removal, ResourceKey, claim};
use self::sync_options::{Gate, SyncOptions};
use crate::managed_service::objects::MANAGER;
pub use error::Error;

/// How often a Stack that waits (for approval, a wave, a delete) is looked
/// at again: approvals are annotations on objects of any kind, which no
/// watch covers.
const WAITING_POLL: Duration = Duration::from_secs(2);
/// How often a Stack whose sync failed (a refused manifest, a kind the
/// controller may not manage) is tried again; a change of the Stack retries
/// at once.
const FAILED_RETRY: Duration = Duration::from_secs(30);
/// How often a synced Stack is applied again, repairing drift.
const RESYNC: Duration = Duration::from_secs(300);
/// The longest note an Event may carry (events.k8s.io/v1).
const EVENT_NOTE_BYTES: usize = 1024;

pub struct Context {
    client: Client,
    identities: Identities,
    approvals: Approvals,
    notifier: Option<Notifier>,
    recorder: Recorder,
    leadership: Leadership,
    tracker: Tracker<Stack>,
}

impl Context {
    pub fn new(
        client: Client,
        identities: Identities,
        metrics: ReconcileMetrics,
        leadership: Leadership,
        approvals: Approvals,
        notifier: Option<Notifier>,
    ) -> Self {
        let recorder = crate::event_recorder(&client);
        Self {
            client,
            identities,
            approvals,
            notifier,
            recorder,
            leadership,
            tracker: Tracker::new(metrics),
        }
    }
}

/// Reconciles Stacks until leadership ends.
pub async fn run(context: Context) -> Result<(), Infallible> {
    let token = context.leadership.token().clone();
    Controller::new(
        Api::<Stack>::all(context.client.clone()),
        watcher::Config::default(),
    )
    // A nested Stack's change (an approval starts or stops waiting) shows
    // on the Stack that lists it, at once.
    .watches(
        Api::<Stack>::all(context.client.clone()),
        watcher::Config::default(),
        |child: Stack| {
            let parent = child.labels().get(labels::STACK)?;
            Some(ObjectRef::new(parent).within(&child.namespace()?))
        },
    )
    .graceful_shutdown_on(token.cancelled_owned())
    .run(reconcile, error_policy, Arc::new(context))
    .for_each(|result| async move {
        match result {
            Ok(_) | Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
            Err(e) => tracing::debug!(error = %one_line(&e), "Stack controller"),
        }
    })
    .await;
    Ok(())
}

pub async fn reconcile(stack: Arc<Stack>, context: Arc<Context>) -> Result<Action, Error> {
    let work = async {
        Acting::new(context.clone(), &stack)?
            .reconcile(&stack)
            .await
    };
    context.tracker.reconcile(&stack, work).await
}

pub fn error_policy(stack: Arc<Stack>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&stack, error)
}

/// Health where the kind tells it; `None` for kinds the operator cannot judge.
pub fn health(kind: &str, object: &DynamicObject) -> Option<HealthStatus> {
    let healthy = || HealthStatus {
        status: HealthState::Healthy,
        message: None,
    };
    let progressing = |message: String| HealthStatus {
        status: HealthState::Progressing,
        message: Some(message),
    };
    let data = &object.data;
    let number = |pointer: &str| data.pointer(pointer).and_then(serde_json::Value::as_i64);
    match kind {
        "ConfigMap" | "Secret" | "Service" | "ServiceAccount" | "Role" | "RoleBinding" => {
            Some(healthy())
        }
        "Deployment" | "StatefulSet" => {
            let wanted = number("/spec/replicas").unwrap_or(1);
            let ready = number("/status/readyReplicas").unwrap_or(0);
            Some(if ready >= wanted {
                healthy()
            } else {
                progressing(format!("{ready} of {wanted} replicas ready"))
            })
        }
        "DaemonSet" => {
            let wanted = number("/status/desiredNumberScheduled").unwrap_or(0);
            let updated = number("/status/updatedNumberScheduled").unwrap_or(0);
            let available = number("/status/numberAvailable").unwrap_or(0);
            let observed = number("/status/observedGeneration").unwrap_or(0);
            let generation = number("/metadata/generation").unwrap_or(0);
            Some(if observed < generation {
                progressing("waiting for the rollout to be observed".to_owned())
            } else if updated >= wanted && available >= wanted {
                healthy()
            } else {
                progressing(format!("{available} of {wanted} pods available"))
            })
        }
        "Job" => {
            // The job controller's terminal conditions.
            let condition = |type_: &str| {
                data.pointer("/status/conditions")
                    .and_then(serde_json::Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == type_ && c["status"] == "True")
            };
            Some(if condition("Complete").is_some() {
                healthy()
            } else if let Some(failed) = condition("Failed") {
                HealthStatus {
                    status: HealthState::Degraded,
                    message: Some(
                        failed["message"]
                            .as_str()
                            .filter(|m| !m.is_empty())
                            .unwrap_or("the job failed")
                            .to_owned(),
                    ),
                }
            } else {
                progressing("waiting for the job to complete".to_owned())
            })
        }
        "PersistentVolumeClaim" => {
            let phase = data.pointer("/status/phase").and_then(|p| p.as_str());
            Some(if phase == Some("Bound") {
                healthy()
            } else {
                progressing("waiting for the claim to be bound".to_owned())
            })
        }
        "ManagedService" => {
            let phase = data.pointer("/status/phase").and_then(|p| p.as_str());
            Some(match phase {
                Some("Ready") => healthy(),
                Some("Failed") => HealthStatus {
                    status: HealthState::Degraded,
                    message: Some("the service failed".to_owned()),
                },
                _ => progressing("the service is being provisioned".to_owned()),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod health_tests {
    use super::*;

    fn object(kind: &str, data: serde_json::Value) -> DynamicObject {
        let resource = kube::api::ApiResource {
            group: String::new(),
            version: "v1".to_owned(),
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            plural: String::new(),
        };
        DynamicObject::new("x", &resource).data(data)
    }

    fn state(kind: &str, data: serde_json::Value) -> (HealthState, Option<String>) {
        let health = health(kind, &object(kind, data)).expect("the kind is judged");
        (health.status, health.message)
    }

    #[test]
    fn a_job_is_healthy_when_complete_degraded_when_failed_and_progressing_otherwise() {
        let complete = serde_json::json!({"status": {"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}
        ]}});
        assert_eq!(state("Job", complete), (HealthState::Healthy, None));
        let failed = serde_json::json!({"status": {"conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
        ]}});
        assert_eq!(
            state("Job", failed),
            (
                HealthState::Degraded,
                Some("Job has reached the specified backoff limit".to_owned())
            )
        );
        let running = serde_json::json!({"status": {"active": 1, "ready": 0}});
        assert_eq!(
            state("Job", running),
            (
                HealthState::Progressing,
                Some("waiting for the job to complete".to_owned())
            )
        );
    }

    #[test]
    fn a_daemon_set_is_healthy_when_every_desired_pod_is_updated_and_available() {
        let status = |available: i64| {
            serde_json::json!({
                "metadata": {"generation": 2},
                "status": {"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": available}
            })
        };
        assert_eq!(state("DaemonSet", status(3)), (HealthState::Healthy, None));
        assert_eq!(
            state("DaemonSet", status(1)),
            (
                HealthState::Progressing,
                Some("1 of 3 pods available".to_owned())
            )
        );
        let unobserved =
            serde_json::json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2}});
        assert_eq!(
            state("DaemonSet", unobserved),
            (
                HealthState::Progressing,
                Some("waiting for the rollout to be observed".to_owned())
            )
        );
        // A cluster without nodes desires no pod.
        let no_nodes = serde_json::json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 0, "numberReady": 0}});
        assert_eq!(state("DaemonSet", no_nodes), (HealthState::Healthy, None));
    }
}

fn row(key: &ResourceKey, wave: Option<i32>, status: SyncStatus) -> ResourceStatus {
    ResourceStatus {
        group: key.group.clone(),
        version: key.version.clone(),
        kind: key.kind.clone(),
        namespace: Some(key.namespace.clone()),
        name: key.name.clone(),
        status,
        health: None,
        requires_pruning: false,
        requires_deletion_approval: false,
        sync_wave: wave,
        message: None,
        uid: None,
        creating: false,
        pending_approvals: None,
        approved_by: Vec::new(),
        approvals_required: None,
        waiting_since: None,
    }
}

/// The stored row of `key`, if any.
fn recorded<'a>(previous: &'a StackStatus, key: &ResourceKey) -> Option<&'a ResourceStatus> {
    previous
        .resources
        .iter()
        .find(|r| ResourceKey::of_status(r, &key.namespace) == *key)
}

/// On a parent Stack's row of a nested Stack, `object`: how many approvals
/// wait in it and in the Stacks it lists (as its own rows count them).
fn nested_approvals(row: &mut ResourceStatus, key: &ResourceKey, object: &DynamicObject) {
    if key.group != Stack::group(&()) || key.kind != Stack::kind(&()) {
        return;
    }
    let Some(status) = object
        .data
        .get("status")
        .and_then(|s| serde_json::from_value::<StackStatus>(s.clone()).ok())
    else {
        return;
    };
    let count: u32 = status
        .resources
        .iter()
        .map(|r| u32::from(r.requires_deletion_approval) + r.pending_approvals.unwrap_or(0))
        .sum();
    if count > 0 {
        row.pending_approvals = Some(count);
        row.message = Some(messages::nested_approvals_pending(
            &key.name,
            count,
            &key.namespace,
        ));
    }
}

/// What one pass over a Stack found.
#[derive(Default)]
struct Pass {
    rows: Vec<ResourceStatus>,
    waiting: Vec<Waiting>,
    /// Why the operation is not finished (first cause).
    progressing: Option<String>,
    /// Why it failed (first cause).
    failed: Option<String>,
    /// Deletes refused by the API server: `Kind/name` and its message.
    denied: Vec<(String, String)>,
    /// Resources kept because of `Prune=false`.
    prune_skipped: Vec<String>,
    /// Resources held because their sync options are not understood: why.
    held: Vec<String>,
}

impl Pass {
    fn progressing(&mut self, why: impl FnOnce() -> String) {
        if self.progressing.is_none() {
            self.progressing = Some(why());
        }
    }
}

fn names(items: &[Waiting]) -> String {
    items
        .iter()
        .map(|w| w.key.display())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Acting {
    async fn reconcile(&self, stack: &Stack) -> Result<Action, Error> {
        let namespace = stack.namespace().ok_or(Error::Unidentified)?;
        let name = stack.name_any();
        let previous = stack.status.clone().unwrap_or_default();
        if stack.metadata.deletion_timestamp.is_some() {
            return self.teardown(stack, &namespace, &name, &previous).await;
        }
        if !stack.finalizers().iter().any(|f| f == finalizers::STACK) {
            let mut all = stack.finalizers().to_vec();
            all.push(finalizers::STACK.to_owned());
            let api = Api::<Stack>::namespaced(self.client.clone(), &namespace);
            set_finalizers(&api, &name, stack.resource_version(), all)
                .await
                .map_err(Error::Finalizer)?;
        }
        let desired = match plan::desired(&namespace, &stack.spec.resources) {
            Ok(desired) => desired,
            Err(e) => {
                self.tracker.count_failure(&e);
                let status = self.status(
                    stack,
                    &previous,
                    previous.resources.clone(),
                    OperationPhase::Failed,
                    e.to_string(),
                    (false, reasons::INVALID_MANIFEST),
                );
                self.write_status(stack, &previous, status).await?;
                return Ok(Action::await_change());
            }
        };
        let mut pass = Pass::default();
        self.apply_waves(&name, &desired, &previous, &mut pass)
            .await?;
        self.prune(&namespace, &name, &desired, &previous, &mut pass)
            .await?;

        let (phase, message, ready) = if let Some(failed) = pass.failed.take() {
            (
                OperationPhase::Failed,
                failed,
                (false, reasons::SYNC_FAILED),
            )
        } else if let Some((resource, denial)) = pass.denied.first() {
            (
                OperationPhase::Progressing,
                format!("the prune of {resource} was denied: {denial}"),
                (false, reasons::DELETION_DENIED),
            )
        } else if let Some(held) = pass.held.first() {
            (
                OperationPhase::Progressing,
                held.clone(),
                (false, reasons::INVALID_SYNC_OPTIONS),
            )
        } else if !pass.waiting.is_empty() {
            (
                OperationPhase::Progressing,
                format!("waiting for deletion approval of {}", names(&pass.waiting)),
                (false, reasons::WAITING_FOR_APPROVAL),
            )
        } else if let Some(why) = pass.progressing.take() {
            (
                OperationPhase::Progressing,
                why,
                (false, reasons::PROGRESSING),
            )
        } else if !pass.prune_skipped.is_empty() {
            (
                OperationPhase::Succeeded,
                format!(
                    "synced; not pruned (Prune=false): {}",
                    pass.prune_skipped.join(", ")
                ),
                (false, reasons::PRUNE_SKIPPED),
            )
        } else {
            (
                OperationPhase::Succeeded,
                format!("{} resource(s) synced", desired.len()),
                (true, reasons::SYNCED),
            )
        };
        self.announce(
            &namespace,
            &name,
            &previous,
            &pass.waiting,
            Operation::Prune,
        )
        .await;
        let next = match phase {
            OperationPhase::Progressing => WAITING_POLL,
            OperationPhase::Failed => FAILED_RETRY,
            OperationPhase::Succeeded => RESYNC,
        };
        let status = self.status(stack, &previous, pass.rows, phase, message, ready);
        self.write_status(stack, &previous, status).await?;
        Ok(Action::requeue(next))
    }

    /// Applies the manifests wave by wave; a wave whose resources are not
    /// healthy (or failed) holds back the later ones.
    async fn apply_waves(
        &self,
        stack: &str,
        desired: &[Desired],
        previous: &StackStatus,
        pass: &mut Pass,
    ) -> Result<(), Error> {
        let mut held: Option<String> = None;
        for wave in plan::waves(desired.iter().map(|d| d.wave)) {
            // What holds the later waves back: every resource of this wave
            // is applied, whatever its order in the wave.
            let mut hold: Option<String> = None;
            for item in desired.iter().filter(|d| d.wave == wave) {
                let recorded = recorded(previous, &item.key);
                let mut row = row(&item.key, Some(item.wave), SyncStatus::OutOfSync);
                // What the Stack owns stays recorded until it is replaced.
                row.uid = recorded.and_then(|r| r.uid.clone());
                row.creating = recorded.is_some_and(|r| r.creating);
                if let Some(why) = &held {
                    // Still in the Stack: an approval it carries goes now,
                    // not once its wave is applied.
                    match self.live.get(&item.key).await {
                        Ok(Some(object))
                            if claim(stack, &item.key, &object.metadata, recorded, false)
                                .is_ok() =>
                        {
                            self.withdraw_approval(item, &object).await?
                        }
                        Ok(_) => {}
                        // E.g. a kind that a lower wave has yet to define.
                        Err(e) => {
                            tracing::debug!(resource = %item.key.display(), error = %one_line(&e), "cannot read a resource held back")
                        }
                    }
                    row.message = Some(why.clone());
                    pass.rows.push(row);
                    continue;
                }
                match self.apply(stack, item, recorded).await {
                    Ok(None) => {
                        // Recorded first, created by the next pass (which
                        // this status write starts).
                        row.creating = true;
                        row.message = Some("to be created".to_owned());
                        pass.progressing(|| format!("creating {}", item.key.display()));
                        hold.get_or_insert_with(|| format!("waits for wave {wave}"));
                    }
                    Ok(Some(object)) => {
                        row.status = SyncStatus::Synced;
                        row.uid = object.uid();
                        row.creating = false;
                        row.health = health(&item.key.kind, &object);
                        nested_approvals(&mut row, &item.key, &object);
                        if let Some(h) = row.health.as_ref().filter(|h| {
                            matches!(h.status, HealthState::Progressing | HealthState::Degraded)
                        }) {
                            let detail = h.message.clone().unwrap_or_default();
                            pass.progressing(|| {
                                format!(
                                    "waiting for {} in wave {wave}: {detail}",
                                    item.key.display()
                                )
                            });
                            hold.get_or_insert_with(|| format!("waits for wave {wave}"));
                        }
                    }
                    Err(e) => {
                        let message = one_line(&e);
                        row.message = Some(message.clone());
                        self.tracker.count_failure(&e);
                        if pass.failed.is_none() {
                            pass.failed = Some(message);
                        }
                        match e {
                            // Nothing of it can be applied: the rest of the
                            // Stack syncs ("stuck forever").
                            Error::KindNotServed { .. } => {}
                            // Someone else's: not the Stack's to create.
                            Error::NotStackManaged(_) => {
                                row.creating = false;
                                hold.get_or_insert_with(|| format!("waits for wave {wave}"));
                            }
                            _ => {
                                hold.get_or_insert_with(|| format!("waits for wave {wave}"));
                            }
                        }
                    }
                }
                pass.rows.push(row);
            }
            if held.is_none() {
                held = hold;
            }
        }
        Ok(())
    }

    /// Applies one manifest to the Stack's own object ([`claim`]); an
    /// object of that name that is not the Stack's is left alone. An
    /// object to create is recorded first (`creating`, `None` here) and
    /// created, create-only, by the next pass: its uid is recorded by the
    /// status write that ends that pass.
    async fn apply(
        &self,
        stack: &str,
        item: &Desired,
        recorded: Option<&ResourceStatus>,
    ) -> Result<Option<DynamicObject>, Error> {
        let uid = match self.live.get(&item.key).await? {
            Some(existing) => {
                claim(stack, &item.key, &existing.metadata, recorded, item.adopt)
                    .map_err(Error::NotStackManaged)?;
                existing.uid()
            }
            None if !recorded.is_some_and(|r| r.creating) => return Ok(None),
            None => {
                return match self
                    .live
                    .create(&item.key, stack, item.manifest.clone())
                    .await?
                {
                    Some(object) => Ok(Some(object)),
                    // Created by someone else meanwhile: not adopted.
                    None => Err(Error::NotStackManaged(
                        messages::stack_resource_not_adopted(&item.key.qualified(), stack),
                    )),
                };
            }
        };
        let object = self
            .live
            .apply(&item.key, stack, item.manifest.clone())
            .await?;
        // Replaced between the read and the apply: not recorded as the
        // Stack's.
        if object.uid() != uid {
            return Err(Error::NotStackManaged(
                messages::stack_resource_not_adopted(&item.key.qualified(), stack),
            ));
        }
        self.withdraw_approval(item, &object).await?;
        Ok(Some(object))
    }

    /// Records a Normal Event `DeletionApproved`, and sends an `approved`
    /// notification, for each approver of `waiting` (in Stack `stack`)
    /// counted for the first time (not in the stored row).
    async fn count_approvers(
        &self,
        stack: &str,
        waiting: &Waiting,
        previous_row: &ResourceStatus,
        verb: &str,
    ) {
        let (key, required) = (&waiting.key, waiting.required);
        for (i, approver) in waiting.approved_by.iter().enumerate() {
            if previous_row
                .approved_by
                .iter()
                .any(|a| a.user == approver.user)
            {
                continue;
            }
            let note = format!(
                "{} approved the {verb} of {} at {} ({} of {required} distinct approvers)",
                approver.user,
                key.display(),
                approver.time.0,
                i + 1
            );
            self.publish(
                Some(key),
                EventType::Normal,
                events::DELETION_APPROVED,
                note,
            )
            .await;
            if let Some(notifier) = &self.notifier {
                let so_far = Waiting {
                    approved_by: waiting.approved_by[..=i].to_vec(),
                    ..waiting.clone()
                };
                let pending = so_far.pending(stack);
                notifier.notify(&Notice::approved(&key.namespace, stack, &pending));
            }
        }
    }

    /// `` (2 distinct approvers needed)`` when the Stack asks for more than
    /// one.
    fn approval_quorum(&self) -> String {
        match self.required_approvals {
            0 | 1 => String::new(),
            n => format!(" ({n} distinct approvers needed)"),
        }
    }

    /// Takes away an approval that the manifest does not declare from a
    /// resource of the Stack: nothing of a desired resource waits for one,
    /// and left in place it would approve a later removal before that
    /// waited ("stale authorisation"). A resource put back into the Stack
    /// loses its approval at once.
    async fn withdraw_approval(&self, item: &Desired, object: &DynamicObject) -> Result<(), Error> {
        let marks = Marks::of(object.metadata.annotations.as_ref(), &self.user);
        if approvers::approval(&marks, item.declares_approval, false, 1) == Approval::Stale {
            self.live.clear_approval(&item.key, object).await?;
        }
        Ok(())
    }

    /// Prunes what left `spec.resources`, last wave first.
    async fn prune(
        &self,
        namespace: &str,
        stack: &str,
        desired: &[Desired],
        previous: &StackStatus,
        pass: &mut Pass,
    ) -> Result<(), Error> {
        let wanted: BTreeSet<&ResourceKey> = desired.iter().map(|d| &d.key).collect();
        let mut gone: Vec<&ResourceStatus> = previous
            .resources
            .iter()
            .filter(|r| !wanted.contains(&ResourceKey::of_status(r, namespace)))
            .collect();
        gone.sort_by_key(|r| std::cmp::Reverse(r.sync_wave.unwrap_or(0)));
        for previous_row in gone {
            let key = ResourceKey::of_status(previous_row, namespace);
            self.remove_or_refused(stack, &key, previous_row, Operation::Prune, false, pass)
                .await?;
        }
        Ok(())
    }

    /// One removal (prune or teardown) of `key`, as its sync options and
    /// its approval allow. `declared`: the Stack's manifest of the resource
    /// declares `cd.hanzo.ai/deletion-approved: "true"`.
    async fn remove(
        &self,
        stack: &str,
        key: &ResourceKey,
        previous_row: &ResourceStatus,
        operation: Operation,
        declared: bool,
        pass: &mut Pass,
    ) -> Result<(), Error> {
        let pruning = operation == Operation::Prune;
        let object = match self.live.get(key).await {
            Ok(Some(object)) => object,
            Ok(None) => return Ok(()),
            // Nothing of it can be deleted: left alone, and out of the
            // inventory, so that neither a sync nor a teardown waits on it
            // forever ("stuck forever").
            Err(Error::KindNotServed { resource, problem }) => {
                let verb = if pruning { "pruned" } else { "deleted" };
                self.publish(
                    Some(key),
                    EventType::Warning,
                    events::KIND_NOT_SERVED,
                    messages::stack_kind_not_served_left_alone(&resource, &problem, verb),
                )
                .await;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // Only the Stack's own, by uid and label: anything else is left
        // alone ("ownership by label").
        if let Err(why) = claim(stack, key, &object.metadata, Some(previous_row), false) {
            tracing::info!(resource = %key.display(), %stack, ?operation, %why, "not the Stack's: left alone");
            return Ok(());
        }
        let mut row = row(key, previous_row.sync_wave, previous_row.status);
        row.uid = object.uid();
        if pruning {
            row.status = SyncStatus::OutOfSync;
            row.requires_pruning = true;
        }
        row.health = health(&key.kind, &object);
        nested_approvals(&mut row, key, &object);
        if object.metadata.deletion_timestamp.is_some() {
            row.message
                .get_or_insert_with(|| "being deleted".to_owned());
            pass.progressing(|| format!("waiting for {} to be deleted", key.display()));
            pass.rows.push(row);
            return Ok(());
        }
        let annotations = object.metadata.annotations.as_ref();
        let options = SyncOptions::of(annotations);
        let gate = options.gate(operation);
        // Options not understood (the resource is held), or conflicting
        // (the most protective value holds): the row and an Event say so.
        let problem = sync_options::value(annotations).and_then(|value| options.problem(value));
        let marks = Marks::of(annotations, &self.user);
        let waits = plan::waits_for_approval(previous_row, operation);
        let required = self.required_approvals;
        let approval = approvers::approval(&marks, declared, waits, required);
        // Only names given while the removal waits count.
        let approved_by = if waits {
            approvers::recorded(&marks, &previous_row.approved_by, Timestamp::now())
        } else {
            Vec::new()
        };
        let since = plan::waiting_since(previous_row, operation, Timestamp::now());
        let waiting = Waiting {
            key: key.clone(),
            uid: object.uid().unwrap_or_default(),
            operation,
            approved_by: approved_by.clone(),
            required,
            since,
        };
        let verb = if pruning { "prune" } else { "delete" };
        let mut decision = plan::removal(gate, approval);
        // Strip, then announce: the wait is recorded only once the early
        // approval is gone; one that changed meanwhile is looked at again.
        if decision == Removal::Withdraw && self.live.clear_approval(key, &object).await? {
            tracing::info!(resource = %key.display(), %stack, ?operation, "took away an approval set before the removal waited");
            decision = Removal::AwaitApproval;
        }
        match decision {
            Removal::Hold => {
                let why = problem.clone().unwrap_or_default();
                row.message = Some(messages::held(&why));
                pass.held
                    .push(messages::stack_resource_held(&key.display(), &why));
            }
            Removal::Keep if pruning => {
                row.message = Some("not pruned: Prune=false".to_owned());
                pass.prune_skipped.push(key.display());
            }
            Removal::Keep => return self.live.release(key, &object).await,
            Removal::Withdraw => {
                row.message = Some(messages::STALE_APPROVAL_WITHDRAWN.to_owned());
                pass.progressing(|| messages::STALE_APPROVAL_WITHDRAWN.to_owned());
            }
            Removal::AwaitApproval => {
                row.requires_deletion_approval = true;
                row.message = Some(approvers::waiting_message(
                    &marks,
                    &approved_by,
                    required,
                    verb,
                ));
                self.count_approvers(stack, &waiting, previous_row, verb)
                    .await;
                row.approved_by = approved_by;
                row.approvals_required = Some(required);
                row.waiting_since = Some(Time(since));
                pass.waiting.push(waiting);
            }
            Removal::Delete => {
                self.leadership.confirm().await.map_err(Error::NotLeader)?;
                match self.live.delete(key, &object).await? {
                    Deleted::Done => {
                        let (namespace, stack) = (&key.namespace, stack);
                        if gate == Some(Gate::Confirm) {
                            // Events after the delete: nothing slows the
                            // step between its decision and the API call.
                            self.count_approvers(stack, &waiting, previous_row, verb)
                                .await;
                            self.approvals.approved_removal(namespace, stack, &waiting);
                            if let Some(notifier) = &self.notifier {
                                let removed = waiting.pending(stack);
                                notifier.notify(&Notice::removed(namespace, stack, &removed));
                            }
                            self.publish(
                                Some(key),
                                EventType::Normal,
                                events::APPROVED_REMOVAL,
                                messages::approved_removal(pruning, &key.display(), &approved_by),
                            )
                            .await;
                        }
                        tracing::info!(resource = %key.display(), %namespace, %stack, ?operation, "deleted");
                        return Ok(());
                    }
                    Deleted::Denied(message) => {
                        self.refused(key, previous_row, &mut row, message, pass)
                            .await;
                    }
                }
            }
        }
        // A delete the API server refused keeps its own message: the
        // options allowed it.
        if let Some(problem) = problem.as_ref().filter(|_| decision != Removal::Delete) {
            let (reason, note) = if decision == Removal::Hold {
                (
                    events::INVALID_SYNC_OPTIONS,
                    messages::stack_resource_held(&key.display(), problem),
                )
            } else {
                let message = row.message.take().unwrap_or_default();
                row.message = Some(format!("{message}; {problem}"));
                (
                    events::CONFLICTING_SYNC_OPTIONS,
                    format!("{}: {problem}", key.display()),
                )
            };
            if previous_row.message != row.message {
                self.publish(Some(key), EventType::Warning, reason, note)
                    .await;
            }
        }
        pass.rows.push(row);
        Ok(())
    }

    /// Deletes the Stack's resources in reverse wave order: a wave is
    /// finished (deleted, or let go with `Delete=false`) before the next
    /// lower one starts; then the finalizer goes.
    async fn teardown(
        &self,
        stack: &Stack,
        namespace: &str,
        name: &str,
        previous: &StackStatus,
    ) -> Result<Action, Error> {
        if !stack.finalizers().iter().any(|f| f == finalizers::STACK) {
            self.approvals.forget(namespace, name);
            return Ok(Action::await_change());
        }
        // stuck forever: the namespace controller deletes everything in a
        // terminating namespace whatever the Stack waits for (its account's
        // RoleBindings too, so it could not act anyway): nothing to hold.
        let project = Api::<Namespace>::all(self.client.clone())
            .get_opt(namespace)
            .await
            .map_err(|source| Error::ReadNamespace(namespace.to_owned(), source))?;
        if project.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()) {
            return self.finish_teardown(stack, namespace, name).await;
        }
        // The inventory: a Stack records what it creates before creating it.
        let inventory = &previous.resources;
        let desired = plan::desired(namespace, &stack.spec.resources).unwrap_or_default();
        // Approvals the Stack's own manifests declare.
        let declared: BTreeSet<&ResourceKey> = desired
            .iter()
            .filter(|d| d.declares_approval)
            .map(|d| &d.key)
            .collect();
        // What is still there and the Stack's own by its recorded uid.
        // Retained objects (a service's Retain) never are: `claim` refuses
        // them, so they are left alone and hold neither the lower waves nor
        // the finalizer.
        let mut present = Vec::new();
        for item in inventory {
            let key = ResourceKey::of_status(item, namespace);
            match self.live.get(&key).await {
                Ok(Some(object))
                    if claim(name, &key, &object.metadata, Some(item), false).is_ok() =>
                {
                    present.push(item);
                }
                Ok(_) => {}
                // Left alone by `remove`, with its Event.
                Err(Error::KindNotServed { .. }) => {
                    self.remove(
                        name,
                        &key,
                        item,
                        Operation::Delete,
                        false,
                        &mut Pass::default(),
                    )
                    .await?;
                }
                // Perhaps there (the account may not read it): it holds its
                // wave, and its removal reports why.
                Err(_) => present.push(item),
            }
        }
        let last = |items: &[&ResourceStatus]| items.iter().map(|r| r.sync_wave.unwrap_or(0)).max();
        let Some(wave) = last(&present) else {
            return self.finish_teardown(stack, namespace, name).await;
        };
        let mut pass = Pass::default();
        for &item in &present {
            let key = ResourceKey::of_status(item, namespace);
            if item.sync_wave.unwrap_or(0) < wave {
                let mut kept = item.clone();
                kept.requires_deletion_approval = false;
                kept.approved_by.clear();
                kept.approvals_required = None;
                kept.waiting_since = None;
                kept.message = Some(format!("waits for wave {wave} to be deleted"));
                pass.rows.push(kept);
                continue;
            }
            let declares = declared.contains(&key);
            self.remove_or_refused(name, &key, item, Operation::Delete, declares, &mut pass)
                .await?;
        }
        let (message, reason) = if let Some((resource, denial)) = pass.denied.first() {
            (
                format!("deleting wave {wave}: the delete of {resource} was denied: {denial}"),
                reasons::DELETION_DENIED,
            )
        } else if let Some(held) = pass.held.first() {
            (
                format!("deleting wave {wave}: {held}"),
                reasons::INVALID_SYNC_OPTIONS,
            )
        } else if !pass.waiting.is_empty() {
            (
                format!(
                    "deleting wave {wave}: waiting for deletion approval of {}",
                    names(&pass.waiting)
                ),
                reasons::WAITING_FOR_APPROVAL,
            )
        } else {
            (format!("deleting wave {wave}"), reasons::DELETING)
        };
        self.announce(namespace, name, previous, &pass.waiting, Operation::Delete)
            .await;
        let status = self.status(
            stack,
            previous,
            pass.rows,
            OperationPhase::Progressing,
            message,
            (false, reason),
        );
        self.write_status(stack, previous, status).await?;
        Ok(Action::requeue(WAITING_POLL))
    }

    /// Ends a teardown: the finalizer goes.
    async fn finish_teardown(
        &self,
        stack: &Stack,
        namespace: &str,
        name: &str,
    ) -> Result<Action, Error> {
        self.approvals.forget(namespace, name);
        let api = Api::<Stack>::namespaced(self.client.clone(), namespace);
        let rest = stack
            .finalizers()
            .iter()
            .filter(|f| *f != finalizers::STACK)
            .cloned()
            .collect();
        set_finalizers(&api, name, stack.resource_version(), rest)
            .await
            .map_err(Error::Finalizer)?;
        Ok(Action::await_change())
    }

    /// Records what waits; for what starts to wait now, an Event on the
    /// Stack and a notification.
    async fn announce(
        &self,
        namespace: &str,
        name: &str,
        previous: &StackStatus,
        waiting: &[Waiting],
        operation: Operation,
    ) {
        let announced = |key: &ResourceKey| {
            previous.resources.iter().any(|r| {
                plan::waits_for_approval(r, operation)
                    && ResourceKey::of_status(r, namespace) == *key
            })
        };
        let new = self.approvals.update(namespace, name, waiting, announced);
        if new.is_empty() {
            return;
        }
        let fresh: Vec<&Waiting> = waiting.iter().filter(|w| !announced(&w.key)).collect();
        let list = fresh
            .iter()
            .map(|w| w.key.display())
            .collect::<Vec<_>>()
            .join(", ");
        let verb = if operation == Operation::Prune {
            "prune"
        } else {
            "delete"
        };
        self.publish(
            None,
            EventType::Normal,
            events::DELETION_APPROVAL_REQUIRED,
            format!(
                "waiting for approval to {verb} {list}: run kubectl navique approve --all --stack {name} -n {namespace}{}",
                self.approval_quorum()
            ),
        )
        .await;
        if let Some(notifier) = &self.notifier {
            let waiting = self.approvals.list(namespace, name);
            notifier.notify(&Notice::approval_required(namespace, name, &waiting));
        }
    }

    /// Records an Event on the Stack, related to `resource` when about
    /// one: Events of one reason about different resources are separate
    /// series.
    async fn publish(
        &self,
        resource: Option<&ResourceKey>,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let mut note = note;
        if note.len() > EVENT_NOTE_BYTES {
            let mut end = EVENT_NOTE_BYTES - '…'.len_utf8();
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push('…');
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: resource.map(|key| k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some(key.api_version()),
                kind: Some(key.kind.clone()),
                namespace: Some(key.namespace.clone()),
                name: Some(key.name.clone()),
                ..Default::default()
            }),
        };
        if let Err(e) = self.recorder.publish(&event, &self.stack).await {
            tracing::warn!(error = %one_line(&e), "cannot record the event");
        }
    }

    /// The status to write: `previous` with this pass's inventory, operation
    /// and `Ready`, keeping times that did not change.
    fn status(
        &self,
        stack: &Stack,
        previous: &StackStatus,
        resources: Vec<ResourceStatus>,
        phase: OperationPhase,
        message: String,
        (ready, reason): (bool, &str),
    ) -> StackStatus {
        let now = Timestamp::now();
        let generation = stack.metadata.generation;
        let earlier = previous.operation.as_ref();
        let unchanged = earlier
            .is_some_and(|o| o.phase == phase && o.message.as_deref() == Some(message.as_str()));
        // The operation goes on while it progresses; a new one starts with a
        // new generation or once the last one finished.
        let continues = earlier.is_some_and(|o| {
            previous.observed_generation == generation
                && (o.phase == OperationPhase::Progressing || unchanged)
        });
        let started_at = match earlier {
            Some(o) if continues => o.started_at.clone(),
            _ => Some(Time(now)),
        };
        let finished_at = match phase {
            OperationPhase::Progressing => None,
            _ if unchanged => earlier.and_then(|o| o.finished_at.clone()),
            _ => Some(Time(now)),
        };
        let mut status_conditions = previous.conditions.clone();
        conditions::upsert(
            &mut status_conditions,
            conditions::ready(ready, reason, message.clone(), generation, now),
        );
        StackStatus {
            observed_generation: generation,
            operation: Some(OperationState {
                phase,
                message: Some(message),
                started_at,
                finished_at,
            }),
            resources,
            conditions: status_conditions,
        }
    }

    async fn write_status(
        &self,
        stack: &Stack,
        previous: &StackStatus,
        status: StackStatus,
    ) -> Result<(), Error> {
        if stack.status.is_some() && *previous == status {
            return Ok(());
        }
        let namespace = stack.namespace().unwrap_or_default();
        let name = stack.name_any();
        let patch = serde_json::json!({
            "apiVersion": Stack::api_version(&()),
            "kind": Stack::kind(&()),
            "status": status,
        });
        Api::<Stack>::namespaced(self.client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map(|_| ())
            .or_else(|e| match e {
                kube::Error::Api(s) if s.code == 404 => Ok(()),
                source => Err(Error::WriteStatus(format!("{namespace}/{name}"), source)),
            })
    }
}

/// The metrics of the Stack controller.
pub fn register_metrics(
    component: &navique_runtime::Component,
    approvals: &Approvals,
    notifier: Option<&Notifier>,
) -> ReconcileMetrics {
    let gauge = approvals.gauge();
    let oldest = approvals.oldest_age();
    let notifications = notifier.map(Notifier::counts);
    component.register_metrics(|registry| {
        if let Some(counts) = notifications {
            registry.register(
                "approval_notifications",
                "Approval notifications by trigger and outcome (sent, retried, failed, invalid)",
                counts,
            );
        }
        registry.register(
            "pending_approvals",
            "Prunes and deletes of Stack resources waiting for approval",
            gauge,
        );
        registry.register_collector(Box::new(oldest));
    });
    ReconcileMetrics::register(component, "stack", "Stack")
}
