//! The Kubernetes objects a service has in its Project (credential Secret,
//! Services, the `InProject` StatefulSet and its data volumes): written
//! owned by the service, let go of under `Retain`, removed under `Delete`.
//! Every operation is idempotent, so that a deletion interrupted anywhere
//! finishes the same way when it runs again.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::{NamespaceResourceScope, Resource as OpenApiResource};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::labels;
use navique_api::grpc::approvals::v1::Operation;
use navique_api::messages;
use navique_api::services::ManagedService;
use navique_runtime::Leadership;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;
use crate::managed_service::instance;
use crate::stack::plan;
use crate::stack::sync_options::{self, Gate, SyncOptions};

/// The field manager of every write.
pub const MANAGER: &str = crate::NAME;

/// A kind of object a service may have in its Project.
pub trait ProjectObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + OpenApiResource
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
{
}

impl<K> ProjectObject for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + OpenApiResource
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
{
}

/// One service's objects.
pub struct Objects<'a> {
    client: &'a Client,
    service: &'a ManagedService,
    namespace: String,
    name: String,
    uid: String,
}

impl<'a> Objects<'a> {
    pub fn of(client: &'a Client, service: &'a ManagedService) -> Result<Self, Error> {
        Ok(Self {
            client,
            service,
            namespace: service.namespace().ok_or(Error::Unnamed)?,
            name: service.name_any(),
            uid: service.uid().ok_or(Error::Unnamed)?,
        })
    }

    fn api<K: ProjectObject>(&self) -> Api<K> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn full_name(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    /// Reads one object, `None` when it does not exist.
    pub async fn get<K: ProjectObject>(&self, name: &str) -> Result<Option<K>, Error> {
        self.api::<K>()
            .get_opt(name)
            .await
            .map_err(|source| Error::Read {
                kind: K::KIND,
                name: self.full_name(name),
                source,
            })
    }

    /// Server-side applies `body` (apiVersion, kind, metadata.name and what
    /// the service wants of it) owned by the service as its controller. An
    /// object of that name that is not the service's is left alone: taking
    /// it over would overwrite someone else's data.
    pub async fn apply<K: ProjectObject>(&self, mut body: Value) -> Result<K, Error> {
        let owner = self
            .service
            .controller_owner_ref(&())
            .ok_or(Error::Unnamed)?;
        let name = body["metadata"]["name"]
            .as_str()
            .ok_or(Error::Unnamed)?
            .to_owned();
        if let Some(existing) = self.get::<K>(&name).await?
            && !self.owned(&existing)
        {
            return Err(Error::NameTaken {
                kind: K::KIND,
                name: self.full_name(&name),
            });
        }
        body["metadata"]["namespace"] = self.namespace.clone().into();
        body["metadata"]["ownerReferences"] =
            serde_json::to_value([owner]).expect("an owner reference serializes");
        self.api::<K>()
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(body),
            )
            .await
            .map_err(|source| Error::Write {
                kind: K::KIND,
                name: self.full_name(&name),
                source,
            })
    }

    /// Objects of the kind that carry the service's label.
    async fn labelled<K: ProjectObject>(&self, extra: &str) -> Result<Vec<K>, Error> {
        let selector = format!("{}={}{extra}", labels::SERVICE, self.name);
        Ok(self
            .api::<K>()
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::Read {
                kind: K::KIND,
                name: format!("{} labelled {selector}", self.namespace),
                source,
            })?
            .items)
    }

    /// Refuses to provision over objects retained from a deleted service of
    /// the same name: taking them over would hand its data (the volume, the
    /// database behind the Secret) to the new service, and a later `Delete`
    /// of the new one would destroy what `Retain` promised to keep.
    pub async fn check_no_retained(&self) -> Result<(), Error> {
        let retained = format!(",{}=true", labels::RETAINED);
        let found = [
            first_name(self.labelled::<Secret>(&retained).await?, Secret::KIND),
            first_name(self.labelled::<Service>(&retained).await?, Service::KIND),
            first_name(
                self.labelled::<StatefulSet>(&retained).await?,
                StatefulSet::KIND,
            ),
            first_name(
                self.labelled::<PersistentVolumeClaim>(&retained).await?,
                PersistentVolumeClaim::KIND,
            ),
        ];
        match found.into_iter().flatten().next() {
            Some((kind, name)) => Err(Error::RetainedNameInUse {
                kind,
                name: self.full_name(&name),
            }),
            None => Ok(()),
        }
    }

    /// `Retain`: every object of the service stays, owned by nothing (so
    /// garbage collection keeps it, whatever references were added to it)
    /// and labelled retained (so the webhook keeps Project identities from
    /// changing or deleting it).
    pub async fn retain_all(&self) -> Result<(), Error> {
        self.retain::<Secret>(|s, _| self.owned(s)).await?;
        self.retain::<Service>(|s, _| self.owned(s)).await?;
        self.retain::<StatefulSet>(|s, _| self.owned(s)).await?;
        self.retain::<PersistentVolumeClaim>(|claim, name| {
            self.owned(claim) || instance::is_data_claim(&self.name, name)
        })
        .await
    }

    /// Whether the service owns the object.
    pub fn owned<K: Resource>(&self, object: &K) -> bool {
        object.owner_references().iter().any(|o| o.uid == self.uid)
    }

    async fn retain<K: ProjectObject>(&self, ours: impl Fn(&K, &str) -> bool) -> Result<(), Error> {
        for object in self.labelled::<K>("").await? {
            let name = object.name_any();
            if !ours(&object, &name) {
                continue;
            }
            let labelled =
                object.labels().get(labels::RETAINED).map(String::as_str) == Some("true");
            if labelled && object.owner_references().is_empty() {
                continue;
            }
            // Every owner goes, not only the service: a reference a tenant
            // planted (to its own ConfigMap, say) would otherwise let the
            // garbage collector delete retained data. null, not [], removes
            // the field (as kube-apiserver stores it).
            let patch = serde_json::json!({"metadata": {
                "ownerReferences": Value::Null,
                "labels": {labels::RETAINED: "true"},
                "resourceVersion": object.resource_version(),
            }});
            self.api::<K>()
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|source| Error::Write {
                    kind: K::KIND,
                    name: self.full_name(&name),
                    source,
                })?;
        }
        Ok(())
    }

    /// `Delete` of an `InProject` engine: the StatefulSet, then its data
    /// volumes. Only what the service owns (and its own data claims) goes,
    /// never a retained object; leadership is confirmed right before each
    /// delete. The credential Secret and Services go by garbage collection
    /// once the finalizer is removed.
    /// `Some(why)` when an object waits for a person (an approval, a
    /// `Delete=false` to lift): a wait, not a failure.
    pub async fn remove_engine(&self, leadership: &Leadership) -> Result<Option<String>, Error> {
        if let Some(set) = self.get::<StatefulSet>(&self.name).await?
            && self.owned(&set)
            && let Some(held) = self.delete(&set, leadership).await?
        {
            return Ok(Some(held));
        }
        for claim in self.labelled::<PersistentVolumeClaim>("").await? {
            let name = claim.name_any();
            let retained = claim.labels().get(labels::RETAINED).map(String::as_str) == Some("true");
            if instance::is_data_claim(&self.name, &name)
                && !retained
                && let Some(held) = self.delete(&claim, leadership).await?
            {
                return Ok(Some(held));
            }
        }
        Ok(None)
    }

    /// Deletes exactly the object read (uid precondition), so that a new
    /// object of the same name created meanwhile is never the one deleted;
    /// one marked `Delete=confirm` only once approved, and, fail closed,
    /// none marked `Delete=false` or whose sync options are not understood:
    /// for those, why it is held.
    async fn delete<K: ProjectObject>(
        &self,
        object: &K,
        leadership: &Leadership,
    ) -> Result<Option<String>, Error> {
        let name = object.name_any();
        // The Stacks' approval gate holds for the operator's own deletes too.
        let annotations = object.meta().annotations.as_ref();
        let options = SyncOptions::of(annotations);
        let full_name = self.full_name(&name);
        match options.gate(Operation::Delete) {
            Some(Gate::Allow) => {}
            Some(Gate::Confirm) if plan::approved(annotations) => {}
            Some(Gate::Confirm) => {
                return Ok(Some(messages::engine_object_awaiting_approval(
                    K::KIND,
                    &full_name,
                )));
            }
            Some(Gate::Never) => {
                return Ok(Some(messages::engine_object_never_deleted(
                    K::KIND,
                    &full_name,
                )));
            }
            None => {
                let why = sync_options::value(annotations)
                    .and_then(|value| options.problem(value))
                    .unwrap_or_default();
                return Ok(Some(messages::engine_object_held(
                    K::KIND,
                    &full_name,
                    &why,
                )));
            }
        }
        leadership.confirm().await.map_err(Error::NotLeader)?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: object.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match self.api::<K>().delete(&name, &params).await {
            Ok(_) => Ok(None),
            // Already gone, or another object by now: nothing of ours left.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
            Err(source) => Err(Error::Delete {
                kind: K::KIND,
                name: self.full_name(&name),
                source,
            }),
        }
    }
}

fn first_name<K: Resource>(objects: Vec<K>, kind: &'static str) -> Option<(&'static str, String)> {
    objects.first().map(|o| (kind, o.name_any()))
}
