//! The ManagedService reconciler. `ProviderShared`: a database and its owner
//! role on the provider's PostgreSQL (from the ServiceClass's admin Secret)
//! and an ExternalName Service. `InProject`: a PostgreSQL StatefulSet with
//! its data volume and Services in the Project. Both get a credential Secret
//! `<service>-credentials`, and the deletion-policy machine
//! ([`deletion::decide`]) behind the finalizer
//! `services.kube-dc.com/deletion-policy`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::conditions;
use navique_api::constants::{annotations, events, finalizers, labels, reasons};
use navique_api::services::{
    BackupOrigin, BackupPhase, ManagedService, ManagedServiceStatus, PlacementMode, ServiceBackup,
    ServicePhase,
};
use navique_runtime::{Component, Leadership, one_line};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::deletion::{self, Facts, Step};
use crate::final_backup::{self, BackupRunner, Progress};
use crate::instance::{self, InProjectShape};
use crate::objects::{MANAGER, Objects};
use crate::postgres::{Credentials, Owner, catalogue, generate_password};
use crate::schedule;
use crate::service;
use crate::{Error, engine};

/// Re-checks a Ready service now and then, so that drift is repaired.
const RESYNC: Duration = Duration::from_secs(3600);
/// How often a running final backup is looked at.
const FINAL_BACKUP_POLL: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: &'static str,
}

/// The reconciler's metrics, under the component's prefix.
#[derive(Clone, Default)]
pub struct Metrics {
    reconciles: Counter,
    reconcile_errors: Family<ErrorLabels, Counter>,
}

impl Metrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self::default();
        component.register_metrics(|registry| {
            registry.register(
                "managed_service_reconciles",
                "ManagedService reconciliations run",
                metrics.reconciles.clone(),
            );
            registry.register(
                "managed_service_reconcile_errors",
                "ManagedService reconciliations that failed, by error",
                metrics.reconcile_errors.clone(),
            );
        });
        metrics
    }
}

/// The image of `InProject` engines when `--postgres-image` is not given.
pub const DEFAULT_POSTGRES_IMAGE: &str = "postgres:17";

/// What every reconcile shares.
pub struct Context {
    client: Client,
    recorder: Recorder,
    metrics: Metrics,
    leadership: Leadership,
    postgres_image: String,
    provider_namespace: String,
    backup_runner: Option<BackupRunner>,
    /// Consecutive failures per service, for the retry backoff.
    failures: navique_runtime::FailureBackoff<ObjectRef<ManagedService>>,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, leadership: Leadership) -> Self {
        let recorder = crate::event_recorder(&client);
        Self {
            client,
            recorder,
            metrics,
            leadership,
            postgres_image: DEFAULT_POSTGRES_IMAGE.to_owned(),
            provider_namespace: catalogue::DEFAULT_PROVIDER_NAMESPACE.to_owned(),
            backup_runner: None,
            failures: navique_runtime::FailureBackoff::default(),
        }
    }

    /// Where final backups are asked for; without one, `SnapshotAndDelete`
    /// stays blocked.
    pub fn with_backup_runner(mut self, backup_runner: Option<BackupRunner>) -> Self {
        self.backup_runner = backup_runner;
        self
    }

    /// Where the ServiceClasses' admin Secrets are read from.
    pub fn with_provider_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.provider_namespace = namespace.into();
        self
    }

    /// The image `InProject` engines run.
    pub fn with_postgres_image(mut self, image: impl Into<String>) -> Self {
        self.postgres_image = image.into();
        self
    }
}

/// Runs the ManagedService controller until leadership ends.
pub async fn run(context: Context) -> Result<(), Infallible> {
    let client = context.client.clone();
    let token = context.leadership.token().clone();
    let engine_objects = || watcher::Config::default().labels(labels::SERVICE);
    Controller::new(
        Api::<ManagedService>::all(client.clone()),
        watcher::Config::default(),
    )
    // A deleted or changed object of the service is written again, and a
    // StatefulSet becoming ready makes the service Ready.
    .owns(Api::<Secret>::all(client.clone()), engine_objects())
    .owns(Api::<Service>::all(client.clone()), engine_objects())
    .owns(Api::<StatefulSet>::all(client), engine_objects())
    .graceful_shutdown_on(token.cancelled_owned())
    .run(reconcile, error_policy, Arc::new(context))
    .for_each(|result| async move {
        match result {
            Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
            Err(controller::Error::ObjectNotFound(service)) => {
                tracing::debug!(%service, "woken ManagedService no longer exists");
            }
            Err(e) => tracing::warn!(error = %one_line(&e), "ManagedService watch failed"),
        }
    })
    .await;
    Ok(())
}

/// Reconciles one service (public for tests that drive it in-process).
pub async fn reconcile(
    service: Arc<ManagedService>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    context.metrics.reconciles.inc();
    let started = Instant::now();
    let result = context.reconcile(&service).await;
    tracing::debug!(
        service = %ObjectRef::from_obj(&*service),
        took = ?started.elapsed(),
        ok = result.is_ok(),
        "reconciled"
    );
    if result.is_ok() {
        context.failures.succeeded(&ObjectRef::from_obj(&*service));
    }
    result
}

/// Retries a failed service with exponential backoff.
pub fn error_policy(service: Arc<ManagedService>, error: &Error, context: Arc<Context>) -> Action {
    context
        .metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            error: error.metric_label(),
        })
        .inc();
    let delay = context.failures.failed(ObjectRef::from_obj(&*service));
    tracing::warn!(
        service = %ObjectRef::from_obj(&*service),
        error = %one_line(error),
        retry_in = ?delay,
        "reconcile failed"
    );
    Action::requeue(delay)
}

/// The status to write: `previous` with the given phase and Ready
/// condition, the service's namespace and generation.
fn next_status(
    service: &ManagedService,
    phase: ServicePhase,
    ready: bool,
    reason: &str,
    message: String,
    applied: Option<navique_api::services::DeletionPolicy>,
) -> ManagedServiceStatus {
    let previous = service.status.clone().unwrap_or_default();
    let generation = service.metadata.generation;
    let mut conditions: Vec<Condition> = previous.conditions.clone();
    conditions::upsert(
        &mut conditions,
        conditions::ready(ready, reason, message, generation, Timestamp::now()),
    );
    ManagedServiceStatus {
        phase: Some(phase),
        instance_namespace: service.namespace(),
        observed_generation: generation,
        restored_from: previous.restored_from,
        last_scheduled_backup_time: previous.last_scheduled_backup_time,
        applied_deletion_policy: applied,
        conditions,
    }
}

impl Context {
    async fn reconcile(&self, service: &ManagedService) -> Result<Action, Error> {
        let has_finalizer = service
            .finalizers()
            .iter()
            .any(|f| f == finalizers::MANAGED_SERVICE);
        match (service.metadata.deletion_timestamp.is_some(), has_finalizer) {
            (true, true) => self.delete(service).await,
            (true, false) => Ok(Action::await_change()),
            // The update wakes the service again.
            (false, false) => {
                let mut list = service.finalizers().to_vec();
                list.push(finalizers::MANAGED_SERVICE.to_owned());
                self.set_finalizers(service, service.resource_version(), list)
                    .await?;
                Ok(Action::await_change())
            }
            (false, true) => match self.provision(service).await {
                Ok(action) => Ok(action),
                Err(error) => {
                    self.report_failure(service, &error).await;
                    Err(error)
                }
            },
        }
    }

    /// Provisioning failed: phase Failed, Ready False ProvisioningFailed.
    /// Best effort: the error is what is returned and retried.
    async fn report_failure(&self, service: &ManagedService, error: &Error) {
        let previous = service
            .status
            .as_ref()
            .and_then(|s| s.applied_deletion_policy);
        let status = next_status(
            service,
            ServicePhase::Failed,
            false,
            reasons::PROVISIONING_FAILED,
            one_line(error),
            previous,
        );
        if let Err(e) = self.write_status(service, status).await {
            tracing::warn!(error = %one_line(&e), "cannot report the failure");
        }
    }

    async fn provision(&self, service: &ManagedService) -> Result<Action, Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let name = service.name_any();
        let db = service::database_of_service(service)?;
        let owner = Owner::of(service).ok_or(Error::Unnamed)?;
        let shape = match service.spec.placement.mode {
            PlacementMode::InProject => Some(
                InProjectShape::from_parameters(service.spec.parameters.as_ref())
                    .map_err(Error::InvalidParameters)?,
            ),
            PlacementMode::ProviderShared => None,
        };
        let plan = engine::plan_of(&self.client, service).await?;
        let previous = service
            .status
            .as_ref()
            .and_then(|s| s.applied_deletion_policy);
        let applied =
            service::applied_policy(service.spec.deletion_policy, previous, plan.as_ref());
        let objects = Objects::of(&self.client, service)?;
        let secret_name = service::credentials_secret_name(&name);
        let existing: Option<Secret> = objects.get(&secret_name).await?;
        if existing.as_ref().is_none_or(|s| !objects.owned(s)) {
            objects.check_no_retained().await?;
        }
        if service.status.as_ref().and_then(|s| s.phase).is_none() {
            let status = next_status(
                service,
                ServicePhase::Provisioning,
                false,
                reasons::PROVISIONING,
                format!("provisioning database {}", db.name),
                previous,
            );
            self.write_status(service, status).await?;
        }
        let password = service::stored_password(existing.as_ref().and_then(|s| s.data.as_ref()))
            .unwrap_or_else(generate_password);
        let (ready, message) = match shape {
            None => {
                let engine =
                    engine::of_service(&self.client, service, &self.provider_namespace).await?;
                // No credential for a name that is not the service's own.
                engine.reserve(&owner, &db).await?;
                let credentials = engine.credentials(&db.name, &db.owner, &password);
                // The password is kept before the role gets it, so it is never lost.
                objects
                    .apply::<Secret>(service::secret_body(&secret_name, &name, &credentials))
                    .await?;
                engine.ensure(&owner, &db, &password).await?;
                let admin = engine.admin();
                objects
                    .apply::<Service>(instance::provider_service(&name, &admin.host, admin.port))
                    .await?;
                (
                    Ok(()),
                    format!("database {} on {}", db.name, admin.endpoint()),
                )
            }
            Some(shape) => {
                let credentials = Credentials {
                    host: instance::in_project_host(&name, &namespace),
                    port: instance::PORT,
                    database: db.name.clone(),
                    user: db.owner.clone(),
                    password,
                };
                objects
                    .apply::<Secret>(service::secret_body(&secret_name, &name, &credentials))
                    .await?;
                objects
                    .apply::<Service>(instance::headless_service(&name))
                    .await?;
                objects
                    .apply::<Service>(instance::client_service(&name))
                    .await?;
                let set: StatefulSet = objects
                    .apply(instance::stateful_set(
                        service,
                        &shape,
                        &self.postgres_image,
                        &secret_name,
                    ))
                    .await?;
                (
                    instance::readiness(&set),
                    format!("database {} in StatefulSet {name}", db.name),
                )
            }
        };
        let mut restored = None;
        if ready.is_ok()
            && let Some(restore) = service.spec.restore_from.as_ref().filter(|r| {
                service
                    .status
                    .as_ref()
                    .and_then(|s| s.restored_from.as_ref())
                    != Some(&r.backup_name)
            })
        {
            let status = next_status(
                service,
                ServicePhase::Provisioning,
                false,
                reasons::PROVISIONING,
                format!("restoring from ServiceBackup {}", restore.backup_name),
                applied,
            );
            self.write_status(service, status).await?;
            self.restore(service, restore).await?;
            restored = Some(restore.backup_name.clone());
        }
        let (phase, reason, message) = match ready {
            Ok(()) => (ServicePhase::Ready, reasons::AVAILABLE, message),
            Err(waiting) => (ServicePhase::Provisioning, reasons::PROVISIONING, waiting),
        };
        let is_ready = phase == ServicePhase::Ready;
        let mut status = next_status(service, phase, is_ready, reason, message, applied);
        if restored.is_some() {
            status.restored_from = restored;
        }
        let scheduled = if is_ready {
            match schedule::ensure(&self.client, service, plan.as_ref(), Timestamp::now()).await {
                Ok(scheduled) => scheduled,
                // A plan's bad schedule is the provider's to fix; the service still serves.
                Err(e @ Error::InvalidSchedule { .. }) => {
                    tracing::warn!(error = %e, "no scheduled backups");
                    schedule::Scheduled {
                        recorded: None,
                        next: None,
                    }
                }
                Err(e) => return Err(e),
            }
        } else {
            schedule::Scheduled {
                recorded: None,
                next: None,
            }
        };
        if let Some(tick) = scheduled.recorded {
            status.last_scheduled_backup_time = Some(Time(tick));
        }
        if self.write_status(service, status).await?.is_some() && is_ready {
            tracing::info!(service = %format!("{namespace}/{name}"), database = db.name, "ready");
        }
        // A StatefulSet's readiness arrives through its watch.
        Ok(Action::requeue(
            scheduled.next.map_or(RESYNC, |next| next.min(RESYNC)),
        ))
    }

    /// Carries out the deletion policy, then removes the finalizer.
    async fn delete(&self, service: &ManagedService) -> Result<Action, Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let name = service.name_any();
        let uid = service.uid().ok_or(Error::Unnamed)?;
        let plan = engine::plan_of(&self.client, service).await?;
        let project = Api::<Namespace>::all(self.client.clone())
            .get_opt(&namespace)
            .await
            .map_err(|source| Error::Read {
                kind: "Namespace",
                name: namespace.clone(),
                source,
            })?;
        let project_deleting = project
            .as_ref()
            .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some());
        let objects = Objects::of(&self.client, service)?;
        let provider = match service.spec.placement.mode {
            PlacementMode::ProviderShared => {
                Some(engine::of_service(&self.client, service, &self.provider_namespace).await)
            }
            PlacementMode::InProject => None,
        };
        let engine_exists = match &provider {
            Some(Ok(engine)) => engine.exists(&uid).await?,
            // Unknown (no engine to ask): assume it exists, the side that
            // backs up rather than keeps.
            Some(Err(_)) => true,
            None => objects.get::<StatefulSet>(&name).await?.is_some(),
        };
        let applied = service
            .status
            .as_ref()
            .and_then(|s| s.applied_deletion_policy);
        let decision = deletion::decide(&Facts {
            name: &name,
            requested: service.spec.deletion_policy,
            applied,
            plan: &service.spec.plan_ref.name,
            allowed: plan
                .as_ref()
                .map(|p| p.spec.allowed_deletion_policies.as_slice()),
            backup_enabled: plan.as_ref().is_some_and(|p| p.spec.backup.enabled),
            confirmation: service
                .annotations()
                .get(annotations::CONFIRM_DELETE)
                .map(String::as_str),
            project_deleting,
            engine_exists,
            final_backup_completed: self.final_backup_completed(service).await?,
        });
        let status = next_status(
            service,
            ServicePhase::Deleting,
            false,
            decision.reason,
            decision.message.clone(),
            applied,
        );
        let written = self.write_status(service, status).await?;
        if written.is_some() {
            self.record_decision(service, project.as_ref(), &decision)
                .await;
        }
        let resource_version = written
            .as_ref()
            .map_or(service.resource_version(), |s| s.resource_version());
        let carried_out = match decision.step {
            Step::AwaitConfirmation => return Ok(Action::await_change()),
            Step::SnapshotThenRemove => match self.final_backup(service).await {
                // Removed on the next pass, decided from the Completed record.
                Ok(Progress::Completed { .. }) => return Ok(Action::requeue(Duration::ZERO)),
                Ok(Progress::Running(message)) => {
                    let current = written.as_ref().unwrap_or(service);
                    let status = next_status(
                        current,
                        ServicePhase::Deleting,
                        false,
                        reasons::RETAINED,
                        message,
                        applied,
                    );
                    self.write_status(current, status).await?;
                    return Ok(Action::requeue(FINAL_BACKUP_POLL));
                }
                Ok(Progress::Failed(message)) => Err(Error::FinalBackupFailed(message)),
                Err(e) => Err(e),
            },
            Step::Retain | Step::RetainData => match provider {
                Some(Ok(engine)) => match objects.retain_all().await {
                    Ok(()) => engine.retain(&uid).await.map_err(Error::from),
                    Err(e) => Err(e),
                },
                // The records stay the deleted service's: no other service
                // can use them either way.
                Some(Err(_)) | None => objects.retain_all().await,
            },
            Step::Remove => match provider {
                Some(Ok(engine)) => match self.leadership.confirm().await {
                    // Only what is recorded as this service's own.
                    Ok(()) => engine.drop_owned(&uid).await.map(|dropped| {
                        tracing::info!(service = %format!("{namespace}/{name}"), ?dropped, "dropped the service's database and roles");
                    }).map_err(Error::from),
                    Err(e) => Err(Error::NotLeader(e)),
                },
                Some(Err(e)) => Err(e),
                None => objects.remove_engine(&self.leadership).await,
            },
        };
        if let Err(error) = carried_out {
            // Reported on the stored object (the status was just written).
            let current = written.as_ref().unwrap_or(service);
            let status = next_status(
                current,
                ServicePhase::Deleting,
                false,
                reasons::DELETION_BLOCKED,
                one_line(&error),
                applied,
            );
            if let Err(e) = self.write_status(current, status).await {
                tracing::warn!(error = %one_line(&e), "cannot report the failure");
            }
            return Err(error);
        }
        tracing::info!(
            service = %format!("{namespace}/{name}"),
            step = ?decision.step,
            policy = %decision.policy,
            "deletion policy carried out"
        );
        let mut list = service.finalizers().to_vec();
        list.retain(|f| f != finalizers::MANAGED_SERVICE);
        self.set_finalizers(service, resource_version, list).await?;
        Ok(Action::await_change())
    }

    /// Restores a ServiceBackup of the service's Project into it through
    /// backup-runner. Only a `Completed` record of a known service is used.
    async fn restore(
        &self,
        service: &ManagedService,
        restore: &navique_api::services::RestoreFrom,
    ) -> Result<(), Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let runner = self.backup_runner.as_ref().ok_or(Error::NoBackupRunner)?;
        if let Some(other) = restore.namespace.as_ref().filter(|n| **n != namespace) {
            return Err(Error::Restore(
                navique_api::messages::restore_from_another_project(other),
            ));
        }
        let name = &restore.backup_name;
        let record = Api::<ServiceBackup>::namespaced(self.client.clone(), &namespace)
            .get_opt(name)
            .await
            .map_err(|source| Error::Read {
                kind: "ServiceBackup",
                name: format!("{namespace}/{name}"),
                source,
            })?
            .ok_or_else(|| {
                Error::Restore(format!(
                    "spec.restoreFrom.backupName: ServiceBackup {name} not found"
                ))
            })?;
        let request = final_backup::restore_request(service, &record)?;
        let result = runner.restore(request).await?;
        tracing::info!(
            service = %format!("{namespace}/{}", service.name_any()),
            backup = name,
            location = result.location,
            "restored"
        );
        Ok(())
    }

    /// Ensures the final ServiceBackup record and asks backup-runner for its
    /// snapshot (idempotent: the same one every time).
    async fn final_backup(&self, service: &ManagedService) -> Result<Progress, Error> {
        let runner = self.backup_runner.as_ref().ok_or(Error::NoBackupRunner)?;
        let record = final_backup::record_name(service);
        final_backup::ensure_record(&self.client, service, &record).await?;
        let snapshot = runner
            .request(final_backup::request_for(service, &record)?)
            .await?;
        Ok(final_backup::progress(&snapshot))
    }

    /// Whether the service's final ServiceBackup is recorded `Completed`
    /// (backup-runner writes that only for a stored and verified backup).
    async fn final_backup_completed(&self, service: &ManagedService) -> Result<bool, Error> {
        if service.spec.deletion_policy != navique_api::services::DeletionPolicy::SnapshotAndDelete
        {
            return Ok(false);
        }
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let name = final_backup::record_name(service);
        let record = Api::<ServiceBackup>::namespaced(self.client.clone(), &namespace)
            .get_opt(&name)
            .await
            .map_err(|source| Error::Read {
                kind: "ServiceBackup",
                name: format!("{namespace}/{name}"),
                source,
            })?;
        Ok(record.is_some_and(|r| {
            r.spec.origin == BackupOrigin::Final
                && r.spec.service_ref.uid == service.uid()
                && r.status.and_then(|s| s.phase) == Some(BackupPhase::Completed)
        }))
    }

    /// Records the decision's events. `DeletionPolicyDowngraded` regards the
    /// service; `ProjectDeleted` regards the Project's Namespace (so it lands
    /// in `default`), because a terminating namespace takes no new objects,
    /// events included, and names the service as related.
    async fn record_decision(
        &self,
        service: &ManagedService,
        project: Option<&Namespace>,
        decision: &deletion::Decision,
    ) {
        let reference = service.object_ref(&());
        let mut events = Vec::new();
        if let Some(downgraded) = &decision.downgraded {
            events.push((
                Event {
                    type_: EventType::Warning,
                    reason: events::DELETION_POLICY_DOWNGRADED.to_owned(),
                    note: Some(downgraded.clone()),
                    action: "Delete".to_owned(),
                    secondary: None,
                },
                reference.clone(),
            ));
        }
        if decision.step == Step::RetainData {
            events.push((
                Event {
                    type_: EventType::Warning,
                    reason: events::DATA_RETAINED.to_owned(),
                    note: Some(decision.message.clone()),
                    action: "Delete".to_owned(),
                    secondary: None,
                },
                reference.clone(),
            ));
        }
        if decision.project_deleted
            && let Some(project) = project
        {
            events.push((
                Event {
                    type_: EventType::Normal,
                    reason: events::PROJECT_DELETED.to_owned(),
                    note: Some(service::project_deleted_note(
                        &service.name_any(),
                        &decision.message,
                    )),
                    action: "Delete".to_owned(),
                    secondary: Some(reference.clone()),
                },
                project.object_ref(&()),
            ));
        }
        for (event, regarding) in events {
            if let Err(e) = self.recorder.publish(&event, &regarding).await {
                tracing::warn!(error = %one_line(&e), reason = event.reason, "cannot record the event");
            }
        }
    }

    /// Writes the status with server-side apply when it differs from the
    /// stored one; returns the updated object when it wrote.
    async fn write_status(
        &self,
        service: &ManagedService,
        status: ManagedServiceStatus,
    ) -> Result<Option<ManagedService>, Error> {
        if service.status.as_ref() == Some(&status) {
            return Ok(None);
        }
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let patch = serde_json::json!({
            "apiVersion": ManagedService::api_version(&()),
            "kind": ManagedService::kind(&()),
            "status": status,
        });
        let written = Api::<ManagedService>::namespaced(self.client.clone(), &namespace)
            .patch_status(
                &service.name_any(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map_err(Error::WriteStatus)?;
        Ok(Some(written))
    }

    /// Writes the service's finalizers as read at `resource_version` (see
    /// `navique_runtime::set_finalizers`).
    async fn set_finalizers(
        &self,
        service: &ManagedService,
        resource_version: Option<String>,
        list: Vec<String>,
    ) -> Result<(), Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let api = Api::<ManagedService>::namespaced(self.client.clone(), &namespace);
        navique_runtime::set_finalizers(&api, &service.name_any(), resource_version, list)
            .await
            .map_err(Error::Finalizer)
    }
}
