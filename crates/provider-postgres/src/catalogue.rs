//! Where a service's `ProviderShared` engine is reached: the provider's
//! server named by its ServiceClass's admin Secret. Only a Secret in the
//! provider's namespace (the operator's) is read, never one a Project can
//! write, so no tenant steers where a component connects or as whom.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use navique_api::services::ServiceClass;

use crate::{AdminConnection, Engine};

/// The provider's namespace unless configured otherwise: the operator's.
pub const DEFAULT_PROVIDER_NAMESPACE: &str = "navique-system";

/// Why the engine of a class cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ServiceClass {0} not found")]
    ClassMissing(String),
    #[error("ServiceClass {0} has no providerShared.adminSecretRef")]
    NoProviderShared(String),
    #[error(
        "ServiceClass {class}: providerShared.adminSecretRef is in namespace {namespace}; the \
         admin Secret must be in the provider's namespace {provider}"
    )]
    OutsideProviderNamespace {
        class: String,
        namespace: String,
        provider: String,
    },
    #[error("admin Secret {namespace}/{name} not found")]
    AdminSecretMissing { namespace: String, name: String },
    #[error("admin Secret {namespace}/{name} is not usable")]
    AdminSecret {
        namespace: String,
        name: String,
        #[source]
        source: Box<crate::Error>,
    },
    #[error("admin Secret {namespace}/{name}: key {key} is not UTF-8")]
    AdminSecretEncoding {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("cannot read {kind} {name}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ClassMissing(_) => "class_missing",
            Error::NoProviderShared(_) | Error::OutsideProviderNamespace { .. } => "class_invalid",
            Error::AdminSecretMissing { .. }
            | Error::AdminSecret { .. }
            | Error::AdminSecretEncoding { .. } => "admin_secret",
            Error::Read { .. } => "read",
        }
    }
}

/// The engine of the ServiceClass `class_name`: its provider server, as
/// the admin Secret in `provider_namespace` describes it.
pub async fn engine_of_class(
    client: &Client,
    class_name: &str,
    provider_namespace: &str,
) -> Result<Engine, Error> {
    let class = Api::<ServiceClass>::all(client.clone())
        .get_opt(class_name)
        .await
        .map_err(|source| Error::Read {
            kind: "ServiceClass",
            name: class_name.to_owned(),
            source,
        })?
        .ok_or_else(|| Error::ClassMissing(class_name.to_owned()))?;
    let secret_ref = class
        .spec
        .provider_shared
        .map(|p| p.admin_secret_ref)
        .ok_or_else(|| Error::NoProviderShared(class_name.to_owned()))?;
    let (namespace, name) = (secret_ref.namespace, secret_ref.name);
    if namespace != provider_namespace {
        return Err(Error::OutsideProviderNamespace {
            class: class_name.to_owned(),
            namespace,
            provider: provider_namespace.to_owned(),
        });
    }
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
