//! The ServiceBinding controller: copies a ManagedService's credential
//! Secret into the Secret `spec.secretName` (default: the binding's name) in
//! the binding's namespace, owned by the binding (so it goes with it) and
//! not by the service. What to do is decided by [`decide`] (pure); see
//! docs/managed-services.md, "Bindings and credential policies".

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::{labels, reasons};
use navique_api::messages;
use navique_api::services::{ServiceBinding, ServiceBindingStatus};
use navique_runtime::{Component, Leadership};
use serde_json::Value;

use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};

use crate::Error;
use crate::dependents::{self, ServiceState};
use crate::managed_service::objects::MANAGER;
use crate::managed_service::{engine, service};

/// Re-checks every binding now and then; changes arrive through watches.
const RESYNC: Duration = Duration::from_secs(3600);
/// How often a binding whose Secret name is taken looks again (a foreign
/// Secret's removal wakes nothing).
const CONFLICT_RETRY: Duration = Duration::from_secs(60);

/// The service's credential Secret, as the binding finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Missing,
    /// Left behind by a `Retain` deletion.
    Retained,
    Present,
}

/// The Secret named by the binding, as it finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Absent,
    /// Owned by this binding.
    Ours,
    /// Someone else's: never overwritten.
    Foreign,
}

/// What a reconcile does to the delivered Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Write the credentials into it.
    Deliver,
    /// Leave everything as it is.
    Keep,
    /// Remove it (if ours): the service was deleted with its data.
    Remove,
    /// Touch nothing: the name is taken.
    Refuse,
}

pub struct Facts<'a> {
    pub service: &'a str,
    pub state: ServiceState,
    pub source: Source,
    pub secret: &'a str,
    pub target: Target,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    pub step: Step,
    pub ready: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Decides a binding's step and `Ready` condition.
///
/// A missing service was deleted under `Delete` (or never existed) unless
/// its credential Secret survives labelled retained: only `Retain` leaves
/// it behind, and it is labelled before the service goes. So the delivered
/// Secret is removed with the service's data and kept with it: after a
/// `Retain` the apps keep working against the retained database.
pub fn decide(facts: &Facts) -> Decision {
    let pending = |step, message| Decision {
        step,
        ready: false,
        reason: reasons::CREDENTIAL_PENDING,
        message,
    };
    let service = facts.service;
    match (facts.state, facts.source, facts.target) {
        (ServiceState::Missing, Source::Retained, _) => {
            pending(Step::Keep, messages::service_not_found(service))
        }
        (ServiceState::Missing, _, _) => {
            pending(Step::Remove, messages::service_not_found(service))
        }
        (ServiceState::Deleting, _, _) => pending(Step::Keep, messages::service_deleting(service)),
        (_, _, Target::Foreign) => Decision {
            step: Step::Refuse,
            ready: false,
            reason: reasons::SECRET_CONFLICT,
            message: messages::secret_not_owned(facts.secret),
        },
        (ServiceState::NotReady, _, _) => pending(Step::Keep, messages::service_not_ready(service)),
        (ServiceState::Ready, Source::Missing, _) => pending(
            Step::Keep,
            messages::credentials_pending(service, &service::credentials_secret_name(service)),
        ),
        (ServiceState::Ready, _, _) => Decision {
            step: Step::Deliver,
            ready: true,
            reason: reasons::CREDENTIALS_DELIVERED,
            message: messages::credentials_delivered(service, facts.secret),
        },
    }
}

impl Decision {
    /// `status.secretName`: the Secret holding the credentials once the
    /// step is done; `previous` is what the status said before.
    pub fn secret_name(&self, target: &str, previous: Option<&str>) -> Option<String> {
        match self.step {
            Step::Deliver => Some(target.to_owned()),
            Step::Remove => None,
            Step::Keep | Step::Refuse => previous.map(str::to_owned),
        }
    }
}

/// The delivered Secret as a server-side apply body: the credentials,
/// labelled with the binding and owned by it.
pub fn secret_body(
    binding: &str,
    secret: &str,
    owner: &OwnerReference,
    data: &BTreeMap<String, ByteString>,
) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret,
            "labels": {
                labels::BINDING: binding,
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            },
            "ownerReferences": [owner],
        },
        "type": "Opaque",
        "data": data,
    })
}

/// The binding controller's metrics.
#[derive(Clone, Default)]
pub struct Metrics(ReconcileMetrics);

impl Metrics {
    pub fn register(component: &Component) -> Self {
        Self(ReconcileMetrics::register(
            component,
            "service_binding",
            "ServiceBinding",
        ))
    }
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    leadership: Leadership,
    tracker: Tracker<ServiceBinding>,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, leadership: Leadership) -> Self {
        Self {
            client,
            leadership,
            tracker: Tracker::new(metrics.0),
        }
    }
}

/// Runs the ServiceBinding controller until leadership ends.
pub async fn run(context: Context) -> Result<(), Infallible> {
    let client = context.client.clone();
    let token = context.leadership.token().clone();
    let controller = Controller::new(
        Api::<ServiceBinding>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    dependents::follow_services(controller, &client)
        // A changed or deleted delivered Secret is written again.
        .owns(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default().labels(labels::BINDING),
        )
        // A written (rotated), retained or collected credential Secret
        // reaches its bindings at once.
        .watches(
            Api::<Secret>::all(client),
            watcher::Config::default().labels(labels::SERVICE),
            move |secret| {
                let service = secret.labels().get(labels::SERVICE).cloned();
                service.map_or_else(Vec::new, |service| {
                    dependents::referrers(&store, secret.namespace().as_deref(), &service)
                })
            },
        )
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile, error_policy, Arc::new(context))
        .for_each(log_outcome)
        .await;
    Ok(())
}

/// Reconciles one binding (public for tests that drive it in-process).
pub async fn reconcile(
    binding: Arc<ServiceBinding>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    context
        .tracker
        .reconcile(&binding, context.reconcile(&binding))
        .await
}

pub fn error_policy(binding: Arc<ServiceBinding>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&binding, error)
}

fn owned_by(secret: &Secret, uid: &str) -> bool {
    secret.owner_references().iter().any(|o| o.uid == uid)
}

impl Context {
    async fn reconcile(&self, binding: &ServiceBinding) -> Result<Action, Error> {
        let unidentified = || Error::Unidentified("ServiceBinding");
        let namespace = binding.namespace().ok_or_else(unidentified)?;
        let uid = binding.uid().ok_or_else(unidentified)?;
        let owner = binding.controller_owner_ref(&()).ok_or_else(unidentified)?;
        let name = binding.name_any();
        let reference = &binding.spec.service_ref;
        let target = binding.spec.secret_name.clone().unwrap_or(name.clone());
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &namespace);
        let get = async |secret: &str| {
            secrets.get_opt(secret).await.map_err(|source| Error::Read {
                kind: "Secret",
                name: format!("{namespace}/{secret}"),
                source,
            })
        };

        let service = engine::referenced_service(&self.client, &namespace, reference).await?;
        let credentials = get(&service::credentials_secret_name(&reference.name)).await?;
        let existing = get(&target).await?;
        let decision = decide(&Facts {
            service: &reference.name,
            state: ServiceState::of(service.as_ref()),
            source: match &credentials {
                None => Source::Missing,
                Some(s) if s.labels().get(labels::RETAINED).map(String::as_str) == Some("true") => {
                    Source::Retained
                }
                Some(_) => Source::Present,
            },
            secret: &target,
            target: match &existing {
                None => Target::Absent,
                Some(s) if owned_by(s, &uid) => Target::Ours,
                Some(_) => Target::Foreign,
            },
        });

        let previous = binding.status.as_ref().and_then(|s| s.secret_name.clone());
        // A Secret delivered under a former spec.secretName.
        let former = previous.as_deref().filter(|p| *p != target);
        match decision.step {
            Step::Deliver => {
                let data = credentials.and_then(|s| s.data).unwrap_or_default();
                secrets
                    .patch(
                        &target,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(secret_body(&name, &target, &owner, &data)),
                    )
                    .await
                    .map_err(|source| Error::Write {
                        kind: "Secret",
                        name: format!("{namespace}/{target}"),
                        source,
                    })?;
                if let Some(former) = former {
                    self.remove(&secrets, get(former).await?, &uid).await?;
                }
            }
            Step::Remove => {
                self.remove(&secrets, existing, &uid).await?;
                if let Some(former) = former {
                    self.remove(&secrets, get(former).await?, &uid).await?;
                }
            }
            Step::Keep | Step::Refuse => {}
        }

        let status = ServiceBindingStatus {
            observed_generation: binding.metadata.generation,
            secret_name: decision.secret_name(&target, previous.as_deref()),
            conditions: dependents::with_ready(
                binding
                    .status
                    .as_ref()
                    .map_or(&[][..], |s| &s.conditions[..]),
                decision.ready,
                decision.reason,
                decision.message,
                binding.metadata.generation,
            ),
        };
        if binding.status.as_ref() != Some(&status) {
            dependents::write_status(&self.client, binding, &status).await?;
        }
        Ok(Action::requeue(match decision.step {
            Step::Refuse => CONFLICT_RETRY,
            _ => RESYNC,
        }))
    }

    /// Deletes a delivered Secret if this binding owns it: exactly the one
    /// read (uid precondition), and only while this replica still leads.
    async fn remove(
        &self,
        secrets: &Api<Secret>,
        secret: Option<Secret>,
        uid: &str,
    ) -> Result<(), Error> {
        let Some(secret) = secret.filter(|s| owned_by(s, uid)) else {
            return Ok(());
        };
        self.leadership.confirm().await.map_err(Error::NotLeader)?;
        let name = secret.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: secret.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match secrets.delete(&name, &params).await {
            Ok(_) => Ok(()),
            // Already gone, or another Secret by now.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(source) => Err(Error::Delete {
                kind: "Secret",
                name: format!("{}/{name}", secret.namespace().unwrap_or_default()),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ServiceState::*;

    fn decide_for(state: ServiceState, source: Source, target: Target) -> Decision {
        decide(&Facts {
            service: "orders-db",
            state,
            source,
            secret: "orders-app",
            target,
        })
    }

    #[test]
    fn a_ready_service_is_delivered() {
        for source in [Source::Present, Source::Retained] {
            for target in [Target::Absent, Target::Ours] {
                assert_eq!(
                    decide_for(Ready, source, target),
                    Decision {
                        step: Step::Deliver,
                        ready: true,
                        reason: "CredentialsDelivered",
                        message: "credentials of service orders-db are in Secret orders-app"
                            .to_owned(),
                    }
                );
            }
        }
    }

    #[test]
    fn a_missing_service_is_reported_with_the_guides_message() {
        for source in [Source::Missing, Source::Present, Source::Retained] {
            for target in [Target::Absent, Target::Ours, Target::Foreign] {
                let decision = decide_for(Missing, source, target);
                assert!(!decision.ready);
                assert_eq!(decision.reason, "CredentialPending");
                assert_eq!(decision.message, "service not found: orders-db");
            }
        }
    }

    #[test]
    fn the_delivered_secret_goes_only_when_the_service_went_with_its_data() {
        // Delete: the credential Secret is gone (or, until collected, not
        // retained).
        assert_eq!(
            decide_for(Missing, Source::Missing, Target::Ours).step,
            Step::Remove
        );
        assert_eq!(
            decide_for(Missing, Source::Present, Target::Ours).step,
            Step::Remove
        );
        // Retain: kept, data and all.
        assert_eq!(
            decide_for(Missing, Source::Retained, Target::Ours).step,
            Step::Keep
        );
    }

    #[test]
    fn a_deleting_service_keeps_what_was_delivered() {
        let decision = decide_for(Deleting, Source::Present, Target::Ours);
        assert_eq!(
            (decision.step, decision.reason, decision.message.as_str()),
            (
                Step::Keep,
                "CredentialPending",
                "service orders-db is being deleted"
            )
        );
    }

    #[test]
    fn a_foreign_secret_is_never_overwritten() {
        for state in [Ready, NotReady] {
            let decision = decide_for(state, Source::Present, Target::Foreign);
            assert_eq!(
                (decision.step, decision.reason, decision.message.as_str()),
                (
                    Step::Refuse,
                    "SecretConflict",
                    "Secret orders-app exists and does not belong to this ServiceBinding; set spec.secretName to another name or remove that Secret"
                )
            );
        }
    }

    #[test]
    fn waiting_for_the_service_or_its_secret_is_pending() {
        let decision = decide_for(NotReady, Source::Missing, Target::Absent);
        assert_eq!(
            (decision.step, decision.message.as_str()),
            (Step::Keep, "waiting for service orders-db to be Ready")
        );
        let decision = decide_for(Ready, Source::Missing, Target::Ours);
        assert_eq!(
            (decision.step, decision.message.as_str()),
            (
                Step::Keep,
                "waiting for Secret orders-db-credentials of service orders-db"
            )
        );
    }

    #[test]
    fn the_status_names_the_secret_that_holds_the_credentials() {
        let with = |step| Decision {
            step,
            ready: false,
            reason: "",
            message: String::new(),
        };
        assert_eq!(
            with(Step::Deliver).secret_name("new", Some("old")),
            Some("new".to_owned())
        );
        assert_eq!(with(Step::Remove).secret_name("new", Some("old")), None);
        assert_eq!(
            with(Step::Keep).secret_name("new", Some("old")),
            Some("old".to_owned())
        );
        assert_eq!(with(Step::Refuse).secret_name("new", None), None);
    }

    #[test]
    fn the_delivered_secret_is_labelled_and_owned_by_the_binding() {
        let owner = OwnerReference {
            api_version: "services.kube-dc.com/v1alpha1".to_owned(),
            kind: "ServiceBinding".to_owned(),
            name: "orders-app".to_owned(),
            uid: "u1".to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let data = BTreeMap::from([("password".to_owned(), ByteString(b"pw".to_vec()))]);
        let body = secret_body("orders-app", "orders-creds", &owner, &data);
        assert_eq!(body["metadata"]["name"], "orders-creds");
        assert_eq!(
            body["metadata"]["labels"]["services.kube-dc.com/binding"],
            "orders-app"
        );
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(body["data"]["password"], "cHc=");
        assert!(
            body["metadata"]["labels"]
                .get("services.kube-dc.com/service")
                .is_none(),
            "a delivered Secret is not one of the service's objects"
        );
    }
}
