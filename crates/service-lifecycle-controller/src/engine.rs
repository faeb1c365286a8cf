//! Where a service's engine is reached: for `ProviderShared`, the
//! provider's server named by the ServiceClass's admin Secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};
use navique_api::services::{ManagedService, ServiceClass, ServicePlan};

use crate::Error;
use crate::postgres::{AdminConnection, Engine};

/// The engine of the service's class: its provider server.
pub async fn of_service(client: &Client, service: &ManagedService) -> Result<Engine, Error> {
    let class_name = &service.spec.class_ref.name;
    let class = Api::<ServiceClass>::all(client.clone())
        .get_opt(class_name)
        .await
        .map_err(|source| Error::Read {
            kind: "ServiceClass",
            name: class_name.clone(),
            source,
        })?
        .ok_or_else(|| Error::ClassMissing(class_name.clone()))?;
    let secret_ref = class
        .spec
        .provider_shared
        .map(|p| p.admin_secret_ref)
        .ok_or_else(|| Error::NoProviderShared(class_name.clone()))?;
    let (namespace, name) = (secret_ref.namespace, secret_ref.name);
    let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(|source| Error::Read {
            kind: "Secret",
            name: format!("{namespace}/{name}"),
            source,
        })?
        .ok_or_else(|| Error::AdminSecretMissing {
            namespace: namespace.clone(),
            name: name.clone(),
        })?;
    let mut data = BTreeMap::new();
    for (key, value) in secret.data.unwrap_or_default() {
        let value = String::from_utf8(value.0).map_err(|_| Error::AdminSecretEncoding {
            namespace: namespace.clone(),
            name: name.clone(),
            key: key.clone(),
        })?;
        data.insert(key, value);
    }
    let admin = AdminConnection::from_secret(&data).map_err(|source| Error::AdminSecret {
        namespace,
        name,
        source: Box::new(source),
    })?;
    Ok(Engine::new(admin))
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
