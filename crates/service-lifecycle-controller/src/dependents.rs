//! What the ServiceBinding and ServiceCredentialPolicy controllers share:
//! both follow a ManagedService they name (optionally pinned by uid), are
//! woken when it changes, and report a `Ready` condition.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::conditions;
use navique_api::services::{
    ManagedService, ServiceBinding, ServiceCredentialPolicy, ServicePhase, ServiceRef,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::managed_service::objects::MANAGER;

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
