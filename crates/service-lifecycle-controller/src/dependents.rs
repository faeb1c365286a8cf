//! What the ServiceBinding and ServiceCredentialPolicy controllers share:
//! both follow a ManagedService they name (optionally pinned by uid), are
//! woken when it changes, report a `Ready` condition, and retry failures
//! with the same backoff and metrics.

use std::fmt::Debug;
use std::time::Instant;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::conditions;
use navique_api::services::{
    ManagedService, ServiceBinding, ServiceCredentialPolicy, ServicePhase, ServiceRef,
};
use navique_runtime::{Component, FailureBackoff, intent, one_line};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::objects::MANAGER;

/// Where the referenced service stands, as its dependents see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceState {
    /// Gone, never created, or (uid pinned) replaced by another service.
    Missing,
    /// Being deleted: its deletion policy runs or waits.
    Deleting,
    /// Provisioning or failed.
    NotReady,
    Ready,
}

impl ServiceState {
    pub fn of(service: Option<&ManagedService>) -> Self {
        let Some(service) = service else {
            return ServiceState::Missing;
        };
        let phase = service.status.as_ref().and_then(|s| s.phase);
        if service.metadata.deletion_timestamp.is_some() || phase == Some(ServicePhase::Deleting) {
            ServiceState::Deleting
        } else if phase == Some(ServicePhase::Ready) {
            ServiceState::Ready
        } else {
            ServiceState::NotReady
        }
    }
}

/// A kind that depends on a ManagedService of its namespace.
pub trait Dependent:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    const KIND: &'static str;
    fn service_ref(&self) -> &ServiceRef;
}

impl Dependent for ServiceBinding {
    const KIND: &'static str = "ServiceBinding";
    fn service_ref(&self) -> &ServiceRef {
        &self.spec.service_ref
    }
}

impl Dependent for ServiceCredentialPolicy {
    const KIND: &'static str = "ServiceCredentialPolicy";
    fn service_ref(&self) -> &ServiceRef {
        &self.spec.service_ref
    }
}

/// The dependents (from the controller's own cache) that name `service` in
/// `namespace`.
pub fn referrers<K: Dependent>(
    store: &Store<K>,
    namespace: Option<&str>,
    service: &str,
) -> Vec<ObjectRef<K>> {
    store
        .state()
        .iter()
        .filter(|d| d.namespace().as_deref() == namespace && d.service_ref().name == service)
        .map(|d| ObjectRef::from_obj(&**d))
        .collect()
}

/// Wakes the dependents of a ManagedService whenever it changes or goes,
/// so that a deletion or a phase change is reported at once.
pub fn follow_services<K: Dependent>(controller: Controller<K>, client: &Client) -> Controller<K> {
    let store = controller.store();
    controller.watches(
        Api::<ManagedService>::all(client.clone()),
        watcher::Config::default(),
        move |service| referrers(&store, service.namespace().as_deref(), &service.name_any()),
    )
}

/// `previous` with the `Ready` condition set (its transition time kept
/// when the status did not change).
pub fn with_ready(
    previous: &[Condition],
    ready: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Vec<Condition> {
    let mut conditions = previous.to_vec();
    conditions::upsert(
        &mut conditions,
        conditions::ready(ready, reason, message, generation, Timestamp::now()),
    );
    conditions
}

/// Server-side applies a dependent's status.
pub async fn write_status<K: Dependent>(
    client: &Client,
    object: &K,
    status: &impl Serialize,
) -> Result<(), Error> {
    let namespace = object.namespace().ok_or(Error::Unidentified(K::KIND))?;
    let name = object.name_any();
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    Api::<K>::namespaced(client.clone(), &namespace)
        .patch_status(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(patch),
        )
        .await
        .map_err(|source| Error::WriteObjectStatus {
            kind: K::KIND,
            name: format!("{namespace}/{name}"),
            source,
        })?;
    Ok(())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: &'static str,
}

/// One controller's reconcile counters.
#[derive(Clone, Default)]
pub struct ControllerMetrics {
    reconciles: Counter,
    reconcile_errors: Family<ErrorLabels, Counter>,
}

impl ControllerMetrics {
    /// Registers `<prefix>_reconciles` and `<prefix>_reconcile_errors`.
    pub fn register(component: &Component, prefix: &str, kind: &str) -> Self {
        let metrics = Self::default();
        component.register_metrics(|registry| {
            registry.register(
                format!("{prefix}_reconciles"),
                format!("{kind} reconciliations run"),
                metrics.reconciles.clone(),
            );
            registry.register(
                format!("{prefix}_reconcile_errors"),
                format!("{kind} reconciliations that failed, by error"),
                metrics.reconcile_errors.clone(),
            );
        });
        metrics
    }
}

/// Counts a controller's reconciles and failures and spaces out retries.
pub struct Tracker<K: Resource<DynamicType = ()>> {
    metrics: ControllerMetrics,
    failures: FailureBackoff<ObjectRef<K>>,
}

impl<K: Resource<DynamicType = ()>> Tracker<K> {
    pub fn new(metrics: ControllerMetrics) -> Self {
        Self {
            metrics,
            failures: FailureBackoff::default(),
        }
    }

    /// Runs one reconcile of `object`, counted and logged.
    pub async fn reconcile(
        &self,
        object: &K,
        work: impl Future<Output = Result<Action, Error>>,
    ) -> Result<Action, Error> {
        let reference = ObjectRef::from_obj(object);
        // A failing object is retried on its backoff, not on the echo of
        // its own status write; a change of what it asks for goes at once.
        if let Some(wait) = self.failures.waiting(&reference, intent(object)) {
            return Ok(Action::requeue(wait));
        }
        self.metrics.reconciles.inc();
        let started = Instant::now();
        let result = work.await;
        tracing::debug!(object = %reference, took = ?started.elapsed(), ok = result.is_ok(), "reconciled");
        if result.is_ok() {
            self.failures.succeeded(&reference);
        }
        result
    }

    /// Counts a failure that a reconcile reports in the object's status
    /// and retries on its own schedule, rather than returning it.
    pub fn count_failure(&self, error: &Error) {
        self.metrics
            .reconcile_errors
            .get_or_create(&ErrorLabels {
                error: error.metric_label(),
            })
            .inc();
    }

    /// The error policy: counts the failure and retries with backoff.
    pub fn failed(&self, object: &K, error: &Error) -> Action {
        self.count_failure(error);
        let reference = ObjectRef::from_obj(object);
        let delay = self.failures.failed_with(reference.clone(), intent(object));
        tracing::warn!(object = %reference, error = %one_line(error), retry_in = ?delay, "reconcile failed");
        Action::requeue(delay)
    }
}

/// Logs a controller's outcomes that are not reconcile failures (those are
/// logged by [`Tracker::failed`]).
pub async fn log_outcome<K: Resource<DynamicType = ()>>(
    result: Result<(ObjectRef<K>, Action), controller::Error<Error, watcher::Error>>,
) {
    match result {
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(%object, "woken object no longer exists");
        }
        Err(e) => tracing::warn!(kind = %K::kind(&()), error = %one_line(&e), "watch failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use navique_api::services::ManagedServiceStatus;

    fn service(phase: Option<ServicePhase>, deleting: bool) -> ManagedService {
        let mut service: ManagedService = serde_json::from_value(serde_json::json!({
            "apiVersion": "services.kube-dc.com/v1alpha1",
            "kind": "ManagedService",
            "metadata": {"name": "orders-db", "namespace": "p"},
            "spec": {
                "classRef": {"name": "postgresql"},
                "planRef": {"name": "plan"},
                "placement": {"mode": "ProviderShared"},
            },
        }))
        .unwrap();
        service.status = Some(ManagedServiceStatus {
            phase,
            ..Default::default()
        });
        if deleting {
            service.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        }
        service
    }

    #[test]
    fn the_service_state_follows_phase_and_deletion() {
        use ServiceState::*;
        assert_eq!(ServiceState::of(None), Missing);
        assert_eq!(ServiceState::of(Some(&service(None, false))), NotReady);
        assert_eq!(
            ServiceState::of(Some(&service(Some(ServicePhase::Failed), false))),
            NotReady
        );
        assert_eq!(
            ServiceState::of(Some(&service(Some(ServicePhase::Ready), false))),
            Ready
        );
        assert_eq!(
            ServiceState::of(Some(&service(Some(ServicePhase::Deleting), false))),
            Deleting
        );
        // Marked for deletion before the controller wrote Deleting.
        assert_eq!(
            ServiceState::of(Some(&service(Some(ServicePhase::Ready), true))),
            Deleting
        );
    }
}
