//! The ManagedService reconciler. `ProviderShared`: a database and its owner
//! role on the provider's PostgreSQL (from the ServiceClass's admin Secret)
//! and an ExternalName Service. `InProject`: a PostgreSQL StatefulSet with
//! its data volume and Services in the Project. Both get a credential Secret
//! `<service>-credentials`, and the deletion-policy machine
//! ([`deletion::decide`]) behind the finalizer
//! `services.kube-dc.com/deletion-policy`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::{annotations, events, finalizers, labels, reasons};
use navique_api::services::{
    BackupOrigin, BackupPhase, ManagedService, ManagedServiceStatus, PlacementMode, ServiceBackup,
    ServicePhase, ServicePlan,
};
use navique_api::{conditions, messages};
use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};
use navique_runtime::events::Recorder;
use navique_runtime::{Attempts, Component, Leadership, Retry, one_line};
use prometheus_client::metrics::counter::Counter;

use crate::Error;
use crate::managed_service::deletion::{self, Facts, Step};
use crate::managed_service::engine;
use crate::managed_service::final_backup::{self, BackupRunner, Progress};
use crate::managed_service::instance::{self, InProjectShape};
use crate::managed_service::objects::{MANAGER, Objects};
use crate::managed_service::schedule;
use crate::managed_service::service;
use crate::postgres::{Credentials, Engine, Owner, catalogue, generate_password};

/// Re-checks a Ready service now and then, so that drift is repaired.
const RESYNC: Duration = Duration::from_secs(3600);
/// How often a removal held for a person (an engine object's approval)
/// is looked at.
const HELD_POLL: Duration = Duration::from_secs(10);
/// How often a running final backup is looked at.
const FINAL_BACKUP_POLL: Duration = Duration::from_secs(2);

/// The reconciler's metrics, under the component's prefix.
#[derive(Clone, Default)]
pub struct Metrics {
    reconciles: ReconcileMetrics,
    final_backup_failures: Counter,
}

impl Metrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self {
            reconciles: ReconcileMetrics::register(component, "managed_service", "ManagedService"),
            final_backup_failures: Counter::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "final_backup_failures",
                "Final backups that failed, counted once per cause in a row",
                metrics.final_backup_failures.clone(),
            );
        });
        metrics
    }
}

/// What [`Context::remove`] did.
enum Removal {
    Done,
    /// The stored service no longer decides `Remove`.
    Undecided,
    /// An engine object waits for a person: why.
    Held(String),
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
    tracker: Tracker<ManagedService>,
    /// Failed final backups per service uid, for the wait before the next.
    backup_attempts: Attempts<String>,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, leadership: Leadership) -> Self {
        let recorder = crate::event_recorder(&client);
        Self {
            client,
            recorder,
            tracker: Tracker::new(metrics.reconciles.clone()),
            metrics,
            leadership,
            postgres_image: DEFAULT_POSTGRES_IMAGE.to_owned(),
            provider_namespace: catalogue::DEFAULT_PROVIDER_NAMESPACE.to_owned(),
            backup_runner: None,
            backup_attempts: Attempts::default(),
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
    .for_each(log_outcome)
    .await;
    Ok(())
}

/// Reconciles one service (public for tests that drive it in-process).
pub async fn reconcile(
    service: Arc<ManagedService>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    context
        .tracker
        .reconcile(&service, context.reconcile(&service))
        .await
}

/// Retries a failed service with exponential backoff.
pub fn error_policy(service: Arc<ManagedService>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&service, error)
}

/// What a deletion's decision depends on, gathered before deciding.
struct DeletionFacts {
    plan: Option<ServicePlan>,
    project: Option<Namespace>,
    /// The shared server's engine (`ProviderShared`), or why it cannot be
    /// reached.
    provider: Option<Result<Engine, Error>>,
    engine_exists: bool,
    /// The final backup's record, once Completed.
    final_backup: Option<ServiceBackup>,
}

impl DeletionFacts {
    fn decide(&self, service: &ManagedService) -> deletion::Decision {
        let name = service.name_any();
        deletion::decide(&Facts {
            name: &name,
            requested: service.spec.deletion_policy,
            applied: applied_policy(service),
            plan: &service.spec.plan_ref.name,
            allowed: self
                .plan
                .as_ref()
                .map(|p| p.spec.allowed_deletion_policies.as_slice()),
            backup_enabled: self.plan.as_ref().is_some_and(|p| p.spec.backup.enabled),
            confirmation: service
                .annotations()
                .get(annotations::CONFIRM_DELETE)
                .map(String::as_str),
            protected: service.spec.deletion_protection == Some(true),
            project_deleting: self
                .project
                .as_ref()
                .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()),
            engine_exists: self.engine_exists,
            final_backup_completed: self.final_backup.is_some(),
        })
    }
}

/// Where a final backup is.
enum FinalBackup {
    Completed,
    /// Running; the message says how far.
    Running(String),
    /// The last attempt failed; the next starts after `retry_in`.
    Failed {
        cause: String,
        retry_in: Duration,
        /// Unlike the previous failure's cause: worth a Warning event.
        new_cause: bool,
    },
}

/// `status.appliedDeletionPolicy`: the policy in force.
fn applied_policy(service: &ManagedService) -> Option<navique_api::services::DeletionPolicy> {
    service
        .status
        .as_ref()
        .and_then(|s| s.applied_deletion_policy)
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
        match self.write_status(service, status).await {
            // A new cause (the status changed): one Warning event for it.
            Ok(Some(_)) => {
                self.warn(
                    service,
                    "Provision",
                    events::PROVISIONING_FAILED,
                    &one_line(error),
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %one_line(&e), "cannot report the failure"),
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
                self.provision_shared(service, &objects, (&owner, &db), &password)
                    .await?
            }
            Some(shape) => {
                self.provision_in_project(service, &objects, &shape, &db, password)
                    .await?
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
            self.restore(service, plan.as_ref(), restore).await?;
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
            self.schedule_backups(service, plan.as_ref()).await?
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

    /// `ProviderShared`: the database and role on the provider's server,
    /// recorded as the service's own before they are made; the password is
    /// kept in the credential Secret before the role gets it, so that it is
    /// never lost. `Ok` with the Ready message.
    async fn provision_shared(
        &self,
        service: &ManagedService,
        objects: &Objects<'_>,
        (owner, db): (&Owner, &crate::postgres::Database),
        password: &str,
    ) -> Result<(Result<(), String>, String), Error> {
        let name = service.name_any();
        let secret_name = service::credentials_secret_name(&name);
        let engine = engine::of_service(&self.client, service, &self.provider_namespace).await?;
        // No credential for a name that is not the service's own.
        engine.reserve(owner, db).await?;
        let credentials = engine.credentials(&db.name, &db.owner, password);
        objects
            .apply::<Secret>(service::secret_body(&secret_name, &name, &credentials))
            .await?;
        engine.ensure(owner, db, password).await?;
        let admin = engine.admin();
        objects
            .apply::<Service>(instance::provider_service(&name, &admin.host, admin.port))
            .await?;
        Ok((
            Ok(()),
            format!("database {} on {}", db.name, admin.endpoint()),
        ))
    }

    /// `InProject`: the credential Secret, the Services and the StatefulSet
    /// in the Project; ready once the StatefulSet is (else why not yet).
    async fn provision_in_project(
        &self,
        service: &ManagedService,
        objects: &Objects<'_>,
        shape: &InProjectShape,
        db: &crate::postgres::Database,
        password: String,
    ) -> Result<(Result<(), String>, String), Error> {
        let name = service.name_any();
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let secret_name = service::credentials_secret_name(&name);
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
                shape,
                &self.postgres_image,
                &secret_name,
            ))
            .await?;
        Ok((
            instance::readiness(&set),
            format!("database {} in StatefulSet {name}", db.name),
        ))
    }

    /// Records the plan's scheduled backup that is due, if any. A plan's
    /// bad schedule is the provider's to fix: the service still serves.
    async fn schedule_backups(
        &self,
        service: &ManagedService,
        plan: Option<&ServicePlan>,
    ) -> Result<schedule::Scheduled, Error> {
        match schedule::ensure(&self.client, service, plan, Timestamp::now()).await {
            Ok(scheduled) => Ok(scheduled),
            Err(e @ Error::InvalidSchedule { .. }) => {
                tracing::warn!(error = %e, "no scheduled backups");
                Ok(schedule::Scheduled {
                    recorded: None,
                    next: None,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Carries out the deletion policy, then removes the finalizer: gathers
    /// the facts from the stored object (not the watch's copy: protection,
    /// the confirmation and the policy as they are now), decides, then
    /// acts. Right before a destructive step the decision is made again.
    async fn delete(&self, cached: &ManagedService) -> Result<Action, Error> {
        let Some(service) = self.stored(cached).await? else {
            return Ok(Action::await_change());
        };
        let facts = self.deletion_facts(&service).await?;
        let decision = facts.decide(&service);
        if decision.step == Step::SnapshotThenRemove {
            return self.snapshot_then_remove(&service, &facts, &decision).await;
        }
        let written = self.report_decision(&service, &facts, &decision).await?;
        let current = written.as_ref().unwrap_or(&service);
        // Told once: when the status first says the backup is complete.
        if let (Some(_), Some(record)) = (&written, &facts.final_backup)
            && decision.step == Step::Remove
            && !decision.project_deleted
        {
            let location = record
                .status
                .as_ref()
                .and_then(|s| s.location.as_deref())
                .unwrap_or_default();
            self.tell(
                current,
                "Delete",
                events::FINAL_BACKUP_COMPLETED,
                &messages::final_backup_completed(&record.name_any(), location),
            )
            .await;
        }
        let carried_out = match decision.step {
            Step::AwaitConfirmation | Step::AwaitProtectionOff => {
                return Ok(Action::await_change());
            }
            Step::Retain | Step::RetainData => self.retain(current, facts).await,
            Step::Remove => match self.remove(current).await {
                Ok(Removal::Done) => Ok(()),
                // The stored object no longer says Remove: decide anew.
                Ok(Removal::Undecided) => return Ok(Action::requeue(Duration::ZERO)),
                // A wait for a person, said in the status; looked at again
                // soon, since an approval of the object does not wake the
                // service.
                Ok(Removal::Held(why)) => {
                    self.report_blocked(current, &why).await;
                    return Ok(Action::requeue(HELD_POLL));
                }
                Err(e) => Err(e),
            },
            Step::SnapshotThenRemove => unreachable!("handled above"),
        };
        if let Err(error) = carried_out {
            self.report_blocked(current, &one_line(&error)).await;
            return Err(error);
        }
        tracing::info!(
            service = %ObjectRef::from_obj(current),
            step = ?decision.step,
            policy = %decision.policy,
            "deletion policy carried out"
        );
        let mut list = current.finalizers().to_vec();
        list.retain(|f| f != finalizers::MANAGED_SERVICE);
        self.set_finalizers(current, current.resource_version(), list)
            .await?;
        Ok(Action::await_change())
    }

    /// The service as stored now; `None` once it is gone.
    async fn stored(&self, service: &ManagedService) -> Result<Option<ManagedService>, Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
        let name = service.name_any();
        let stored = Api::<ManagedService>::namespaced(self.client.clone(), &namespace)
            .get_opt(&name)
            .await
            .map_err(|source| Error::Read {
                kind: "ManagedService",
                name: format!("{namespace}/{name}"),
                source,
            })?;
        // Another service of the same name is not this one.
        Ok(stored.filter(|s| s.uid() == service.uid()))
    }

    /// What the deletion decision depends on, read now.
    async fn deletion_facts(&self, service: &ManagedService) -> Result<DeletionFacts, Error> {
        let namespace = service.namespace().ok_or(Error::Unnamed)?;
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
        let provider = match service.spec.placement.mode {
            PlacementMode::ProviderShared => {
                Some(engine::of_service(&self.client, service, &self.provider_namespace).await)
            }
            PlacementMode::InProject => None,
        };
        let engine_exists = match &provider {
            Some(Ok(engine)) => engine.exists(&uid).await?,
            // A class that does not exist names no server: nothing of the
            // service can be found, backed up or removed there.
            Some(Err(Error::Catalogue(catalogue::Error::ClassMissing(_)))) => false,
            // Unknown (no engine to ask): assume it exists, the side that
            // backs up rather than keeps.
            Some(Err(_)) => true,
            None => Objects::of(&self.client, service)?
                .get::<StatefulSet>(&service.name_any())
                .await?
                .is_some(),
        };
        Ok(DeletionFacts {
            final_backup: self.final_backup_completed(service).await?,
            plan,
            project,
            provider,
            engine_exists,
        })
    }

    /// Writes the decision's status and, when it changed, its events;
    /// returns the updated object when it wrote.
    async fn report_decision(
        &self,
        service: &ManagedService,
        facts: &DeletionFacts,
        decision: &deletion::Decision,
    ) -> Result<Option<ManagedService>, Error> {
        let status = next_status(
            service,
            ServicePhase::Deleting,
            false,
            decision.reason,
            decision.message.clone(),
            applied_policy(service),
        );
        let written = self.write_status(service, status).await?;
        if written.is_some() {
            self.record_decision(service, facts.project.as_ref(), decision)
                .await;
        }
        Ok(written)
    }

    /// A step failed: `DeletionBlocked` with its cause, on the stored
    /// object. Best effort: the error is what is returned and retried.
    async fn report_blocked(&self, service: &ManagedService, cause: &str) {
        let status = next_status(
            service,
            ServicePhase::Deleting,
            false,
            reasons::DELETION_BLOCKED,
            cause.to_owned(),
            applied_policy(service),
        );
        if let Err(e) = self.write_status(service, status).await {
            tracing::warn!(error = %one_line(&e), "cannot report the failure");
        }
    }

    /// `Retain` (or `RetainData`): the Kubernetes objects let go of and
    /// marked retained, and on a shared server the records marked retained.
    async fn retain(&self, service: &ManagedService, facts: DeletionFacts) -> Result<(), Error> {
        let uid = service.uid().ok_or(Error::Unnamed)?;
        Objects::of(&self.client, service)?.retain_all().await?;
        // Without an engine the records stay the deleted service's: no other
        // service can use them either way.
        if let Some(Ok(engine)) = facts.provider {
            engine.retain(&uid).await?;
        }
        self.tell(
            service,
            "Delete",
            events::ENGINE_RETAINED,
            messages::ENGINE_RETAINED,
        )
        .await;
        Ok(())
    }

    /// Removes the engine and data, once the stored object, read again
    /// right now, still decides `Remove`. Only what is recorded as the
    /// service's own goes, and only while this replica leads.
    async fn remove(&self, service: &ManagedService) -> Result<Removal, Error> {
        let Some(stored) = self.stored(service).await? else {
            return Ok(Removal::Undecided);
        };
        let facts = self.deletion_facts(&stored).await?;
        if facts.decide(&stored).step != Step::Remove {
            tracing::info!(service = %ObjectRef::from_obj(&stored), "the stored service no longer asks for removal");
            return Ok(Removal::Undecided);
        }
        let uid = stored.uid().ok_or(Error::Unnamed)?;
        match facts.provider {
            Some(Ok(engine)) => {
                self.leadership.confirm().await.map_err(Error::NotLeader)?;
                let dropped = engine.drop_owned(&uid).await?;
                tracing::info!(service = %ObjectRef::from_obj(&stored), ?dropped, "dropped the service's database and roles");
                let note = messages::engine_dropped(&dropped, &engine.admin().endpoint());
                self.tell(&stored, "Delete", events::DATABASE_DROPPED, &note)
                    .await;
            }
            // stuck forever: a class that does not exist names no server, so
            // nothing of the service can be reached, and none is removed.
            Some(Err(Error::Catalogue(catalogue::Error::ClassMissing(class)))) => {
                let note = messages::nothing_removed_without_class(&class);
                self.warn(&stored, "Delete", events::DATA_RETAINED, &note)
                    .await;
            }
            Some(Err(e)) => return Err(e),
            None => {
                if let Some(why) = Objects::of(&self.client, &stored)?
                    .remove_engine(&self.leadership)
                    .await?
                {
                    return Ok(Removal::Held(why));
                }
                self.tell(
                    &stored,
                    "Delete",
                    events::ENGINE_REMOVED,
                    &messages::in_project_engine_removed(&stored.name_any()),
                )
                .await;
            }
        }
        Ok(Removal::Done)
    }

    /// `SnapshotAndDelete` before its backup completed: asks for the final
    /// backup, or waits for it, or reports its failure and waits before the
    /// next attempt. Removal follows on the next pass, decided from the
    /// Completed record.
    async fn snapshot_then_remove(
        &self,
        service: &ManagedService,
        facts: &DeletionFacts,
        decision: &deletion::Decision,
    ) -> Result<Action, Error> {
        let uid = service.uid().ok_or(Error::Unnamed)?;
        let (reason, message, next) = match self.final_backup(service, facts.plan.as_ref()).await {
            Ok(FinalBackup::Completed) => {
                self.backup_attempts.completed(&uid);
                return Ok(Action::requeue(Duration::ZERO));
            }
            Ok(FinalBackup::Running(progress)) => match self.backup_attempts.last_failure(&uid) {
                // After a failure the status keeps its cause while retrying.
                Some((failures, cause)) => (
                    reasons::DELETION_BLOCKED,
                    format!("{cause}; retrying (attempt {}): {progress}", failures + 1),
                    FINAL_BACKUP_POLL,
                ),
                None => (reasons::RETAINED, progress, FINAL_BACKUP_POLL),
            },
            Ok(FinalBackup::Failed {
                cause,
                retry_in,
                new_cause,
            }) => {
                if new_cause {
                    self.metrics.final_backup_failures.inc();
                    self.warn(service, "Delete", events::FINAL_BACKUP_FAILED, &cause)
                        .await;
                }
                (reasons::DELETION_BLOCKED, cause, retry_in)
            }
            Err(error) => {
                self.report_blocked(service, &one_line(&error)).await;
                return Err(error);
            }
        };
        let status = next_status(
            service,
            ServicePhase::Deleting,
            false,
            reason,
            message,
            applied_policy(service),
        );
        if self.write_status(service, status).await?.is_some() {
            self.record_decision(service, facts.project.as_ref(), decision)
                .await;
        }
        Ok(Action::requeue(next))
    }

    /// Restores a ServiceBackup of the service's Project into it through
    /// backup-runner. Only a `Completed` record of a known service is used.
    async fn restore(
        &self,
        service: &ManagedService,
        plan: Option<&ServicePlan>,
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
        let request = final_backup::restore_request(service, plan, &record)?;
        let result = runner.restore(request).await?;
        tracing::info!(
            service = %format!("{namespace}/{}", service.name_any()),
            backup = name,
            location = result.location,
            "restored"
        );
        self.tell(
            service,
            "Restore",
            events::RESTORED,
            &messages::restored(name, &result.location, &result.sha256),
        )
        .await;
        Ok(())
    }

    /// Ensures the final ServiceBackup record, then follows its snapshot:
    /// asked for when backup-runner knows none, looked at while it runs,
    /// and after a failure asked for again only once the wait since that
    /// failure is over (1 s doubling to 5 min), however often the service
    /// is reconciled meanwhile.
    async fn final_backup(
        &self,
        service: &ManagedService,
        plan: Option<&ServicePlan>,
    ) -> Result<FinalBackup, Error> {
        let runner = self.backup_runner.as_ref().ok_or(Error::NoBackupRunner)?;
        let uid = service.uid().ok_or(Error::Unnamed)?;
        let record = final_backup::record_name(service);
        final_backup::ensure_record(&self.client, service, &record).await?;
        let request = || async {
            let snapshot = runner
                .request(final_backup::request_for(service, plan, &record)?)
                .await?;
            let attempt = self
                .backup_attempts
                .last_failure(&uid)
                .map_or(1, |(failures, _)| failures + 1);
            self.tell(
                service,
                "Delete",
                events::FINAL_BACKUP_STARTED,
                &messages::final_backup_started(&record, attempt),
            )
            .await;
            Ok::<_, Error>(snapshot)
        };
        let snapshot = match runner.get(&final_backup::idempotency_key(&uid)).await? {
            Some(snapshot) => snapshot,
            None => request().await?,
        };
        let snapshot = match final_backup::progress(&snapshot) {
            Progress::Failed(cause) => match self.backup_attempts.failed(uid.clone(), &cause) {
                Retry::Counted { delay, new_cause } => {
                    return Ok(FinalBackup::Failed {
                        cause,
                        retry_in: delay,
                        new_cause,
                    });
                }
                Retry::Wait(remaining) => {
                    return Ok(FinalBackup::Failed {
                        cause,
                        retry_in: remaining,
                        new_cause: false,
                    });
                }
                Retry::Now => request().await?,
            },
            _ => snapshot,
        };
        Ok(match final_backup::progress(&snapshot) {
            Progress::Completed { .. } => FinalBackup::Completed,
            Progress::Running(progress) => FinalBackup::Running(progress),
            // Failed at once: seen as a failure on the next look.
            Progress::Failed(cause) => FinalBackup::Running(cause),
        })
    }

    /// Records a Warning event about the service.
    async fn warn(&self, service: &ManagedService, action: &str, reason: &str, note: &str) {
        self.event(service, EventType::Warning, action, reason, note)
            .await;
    }

    /// Records a Normal event about the service.
    async fn tell(&self, service: &ManagedService, action: &str, reason: &str, note: &str) {
        self.event(service, EventType::Normal, action, reason, note)
            .await;
    }

    async fn event(
        &self,
        service: &ManagedService,
        type_: EventType,
        action: &str,
        reason: &str,
        note: &str,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &navique_runtime::events::regarding(service))
            .await
        {
            tracing::warn!(error = %one_line(&e), reason, "cannot record the event");
        }
    }

    /// Whether the service's final ServiceBackup is recorded `Completed`
    /// (backup-runner writes that only for a stored and verified backup).
    /// The Completed final backup's record, when there is one.
    async fn final_backup_completed(
        &self,
        service: &ManagedService,
    ) -> Result<Option<ServiceBackup>, Error> {
        if service.spec.deletion_policy != navique_api::services::DeletionPolicy::SnapshotAndDelete
        {
            return Ok(None);
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
        Ok(record.filter(|r| {
            r.spec.origin == BackupOrigin::Final
                && r.spec.service_ref.uid == service.uid()
                && r.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed)
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
        let reference = navique_runtime::events::regarding(service);
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
                navique_runtime::events::regarding(project),
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
