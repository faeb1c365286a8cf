//! The Stack's resources in the cluster, whatever their kind: found through
//! discovery, applied with server-side apply, deleted with a uid
//! precondition.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Client, ResourceExt};
use navique_api::constants::{annotations, labels};
use serde_json::{Value, json};

use super::Error;
use super::plan::ResourceKey;

/// The field manager of everything a Stack applies.
pub const MANAGER: &str = "navique-stack";

/// How a delete went.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted, or already gone.
    Done,
    /// Refused by the API server, e.g. admission denied it (a Lock).
    Denied(String),
}

pub struct Live {
    client: Client,
    kinds: Mutex<HashMap<(String, String, String), ApiResource>>,
}

impl Live {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            kinds: Mutex::default(),
        }
    }

    fn failed(action: &'static str, key: &ResourceKey) -> impl FnOnce(kube::Error) -> Error {
        let resource = format!("{} {}/{}", key.kind, key.namespace, key.name);
        move |source| Error::StackResource {
            action,
            resource,
            source,
        }
    }

    /// The namespaced API of `key`'s kind; a kind the server does not serve,
    /// or a cluster-scoped one, is refused.
    async fn api(&self, key: &ResourceKey) -> Result<Api<DynamicObject>, Error> {
        let id = (key.group.clone(), key.version.clone(), key.kind.clone());
        let known = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned();
        let resource = match known {
            Some(resource) => resource,
            None => {
                let gvk = GroupVersionKind::gvk(&key.group, &key.version, &key.kind);
                let (resource, capabilities): (ApiResource, ApiCapabilities) =
                    discovery::pinned_kind(&self.client, &gvk)
                        .await
                        .map_err(|e| match e {
                            // Not served (never, or no longer): known for
                            // sure. Anything else (the server unreachable)
                            // is an error, retried with backoff.
                            kube::Error::Api(ref s) if s.code == 404 => Error::KindNotServed {
                                resource: key.qualified(),
                                problem: format!(
                                    "{} {}: {}",
                                    key.api_version(),
                                    key.kind,
                                    s.message
                                ),
                            },
                            kube::Error::Discovery(ref d) => Error::KindNotServed {
                                resource: key.qualified(),
                                problem: discovery_problem(key, d),
                            },
                            source => Self::failed("discover the kind of", key)(source),
                        })?;
                if capabilities.scope != Scope::Namespaced {
                    return Err(Error::UnknownKind {
                        api_version: key.api_version(),
                        kind: key.kind.clone(),
                        problem: "it is cluster-scoped; a Stack manages namespaced resources"
                            .to_owned(),
                    });
                }
                self.kinds
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, resource.clone());
                resource
            }
        };
        Ok(Api::namespaced_with(
            self.client.clone(),
            &key.namespace,
            &resource,
        ))
    }

    pub async fn get(&self, key: &ResourceKey) -> Result<Option<DynamicObject>, Error> {
        self.api(key)
            .await?
            .get_opt(&key.name)
            .await
            .map_err(Self::failed("read", key))
    }

    /// Creates `manifest`, labelled with the Stack's name, only if no
    /// object of its name exists: `None` when one does (someone else's,
    /// never adopted by the create).
    pub async fn create(
        &self,
        key: &ResourceKey,
        stack: &str,
        mut manifest: Value,
    ) -> Result<Option<DynamicObject>, Error> {
        manifest["metadata"]["labels"][labels::STACK] = json!(stack);
        let object: DynamicObject = serde_json::from_value(manifest)
            .map_err(|e| Self::failed("create", key)(kube::Error::SerdeError(e)))?;
        let params = PostParams {
            field_manager: Some(MANAGER.to_owned()),
            ..PostParams::default()
        };
        match self.api(key).await?.create(&params, &object).await {
            Ok(object) => Ok(Some(object)),
            Err(kube::Error::Api(e)) if e.code == 409 && e.reason == "AlreadyExists" => Ok(None),
            Err(e) => Err(self.write_failed("create", key, e)),
        }
    }

    /// Server-side applies `manifest`, labelled with the Stack's name.
    pub async fn apply(
        &self,
        key: &ResourceKey,
        stack: &str,
        mut manifest: Value,
    ) -> Result<DynamicObject, Error> {
        manifest["metadata"]["labels"][labels::STACK] = json!(stack);
        self.api(key)
            .await?
            .patch(
                &key.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(manifest),
            )
            .await
            .map_err(|e| self.write_failed("apply", key, e))
    }

    /// A write that failed. A 404 means the kind went away (a create or
    /// apply never misses an object): it is looked up again next time.
    fn write_failed(&self, action: &'static str, key: &ResourceKey, source: kube::Error) -> Error {
        if matches!(&source, kube::Error::Api(e) if e.code == 404) {
            self.kinds
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(key.group.clone(), key.version.clone(), key.kind.clone()));
        }
        Self::failed(action, key)(source)
    }

    /// Deletes the object `object` is, if it still is that object.
    pub async fn delete(
        &self,
        key: &ResourceKey,
        object: &DynamicObject,
    ) -> Result<Deleted, Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: object.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api(key).await?.delete(&key.name, &params).await {
            Ok(_) => Ok(Deleted::Done),
            // Gone, or replaced by another object of that name: not ours to delete.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(Deleted::Done),
            Err(kube::Error::Api(e)) if e.code == 403 || e.code == 422 => {
                Ok(Deleted::Denied(e.message))
            }
            Err(e) => Err(Self::failed("delete", key)(e)),
        }
    }

    /// Takes away `cd.hanzo.ai/deletion-approved` and `core.navique.com/approved-by` from the object, unless it
    /// changed since it was read; whether it did.
    pub async fn clear_approval(
        &self,
        key: &ResourceKey,
        object: &DynamicObject,
    ) -> Result<bool, Error> {
        self.merge(
            key,
            object,
            json!({"annotations": {annotations::DELETION_APPROVED: null, annotations::APPROVED_BY: null}}),
        )
        .await
    }

    /// Lets go of the object (`Delete=false` on a deleted Stack): it keeps
    /// existing, no longer labelled as the Stack's.
    pub async fn release(&self, key: &ResourceKey, object: &DynamicObject) -> Result<(), Error> {
        self.merge(key, object, json!({"labels": {labels::STACK: null}}))
            .await
            .map(|_| ())
    }

    /// Merges `metadata` into the object if it is still the version read;
    /// whether it was.
    async fn merge(
        &self,
        key: &ResourceKey,
        object: &DynamicObject,
        mut metadata: Value,
    ) -> Result<bool, Error> {
        metadata["resourceVersion"] = json!(object.resource_version());
        match self
            .api(key)
            .await?
            .patch(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": metadata})),
            )
            .await
        {
            Ok(_) => Ok(true),
            // A newer version is seen at the next reconcile.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
            Err(e) => Err(Self::failed("patch", key)(e)),
        }
    }
}

/// Why discovery found no `key`'s kind, in words: kube's `MissingKind`
/// carries a Rust debug string of the kind.
fn discovery_problem(key: &ResourceKey, error: &kube::error::DiscoveryError) -> String {
    match error {
        kube::error::DiscoveryError::MissingKind(_) => {
            format!("{} has no kind {}", key.api_version(), key.kind)
        }
        other => navique_runtime::one_line(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::error::DiscoveryError;

    fn key(group: &str, kind: &str) -> ResourceKey {
        ResourceKey {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: "x".into(),
        }
    }

    #[test]
    fn a_missing_kind_is_said_in_words() {
        let gvk = GroupVersionKind::gvk("", "v1", "Stak");
        let error = DiscoveryError::MissingKind(format!("{gvk:?}"));
        assert_eq!(
            discovery_problem(&key("", "Stak"), &error),
            "v1 has no kind Stak"
        );
        let error = DiscoveryError::MissingKind(String::new());
        assert_eq!(
            discovery_problem(&key("adv.example.com", "Gizmo"), &error),
            "adv.example.com/v1 has no kind Gizmo"
        );
        let error = DiscoveryError::MissingApiGroup("adv.example.com".into());
        assert_eq!(
            discovery_problem(&key("adv.example.com", "Gizmo"), &error),
            "Missing Api Group: adv.example.com"
        );
    }
}
