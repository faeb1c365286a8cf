//! Where a service's engine and plan are: for `ProviderShared`, the
//! provider's server named by the ServiceClass's admin Secret.

use kube::api::Api;
use kube::{Client, ResourceExt};
use navique_api::services::{ManagedService, ServicePlan};

use crate::Error;
use crate::postgres::{Engine, catalogue};

/// The engine of the service's class: its provider server, from the
/// class's admin Secret in the provider's namespace.
pub async fn of_service(
    client: &Client,
    service: &ManagedService,
    provider_namespace: &str,
) -> Result<Engine, Error> {
    Ok(
        catalogue::engine_of_class(client, &service.spec.class_ref.name, provider_namespace)
            .await?,
    )
}

/// The service's plan, `None` when it does not exist (any more).
pub async fn plan_of(
    client: &Client,
    service: &ManagedService,
) -> Result<Option<ServicePlan>, Error> {
    let name = &service.spec.plan_ref.name;
    Api::<ServicePlan>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(|source| Error::Read {
            kind: "ServicePlan",
            name: name.clone(),
            source,
        })
}

/// The ManagedService a reference names, `None` when it does not exist or,
/// when the reference pins a uid, is another service of the same name.
pub async fn referenced_service(
    client: &Client,
    namespace: &str,
    reference: &navique_api::services::ServiceRef,
) -> Result<Option<ManagedService>, Error> {
    let service = Api::<ManagedService>::namespaced(client.clone(), namespace)
        .get_opt(&reference.name)
        .await
        .map_err(|source| Error::Read {
            kind: "ManagedService",
            name: format!("{namespace}/{}", reference.name),
            source,
        })?;
    Ok(service.filter(|s| {
        reference
            .uid
            .as_deref()
            .is_none_or(|uid| s.uid().as_deref() == Some(uid))
    }))
}
