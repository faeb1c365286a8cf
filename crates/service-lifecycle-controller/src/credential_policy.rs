//! The ServiceCredentialPolicy controller: gives a Ready `ProviderShared`
//! service a new password every `spec.rotationInterval`, first one interval
//! after the policy's creation. What to do is decided by [`decide`] (pure);
//! see docs/managed-services.md, "Bindings and credential policies".
//!
//! The credential Secret is the password's source of truth and the
//! ManagedService reconciler its one steady writer: it reads the stored
//! password, re-applies it and sets it on the role. A rotation only puts a
//! new password into that Secret (a merge patch at the version read, so a
//! concurrent write fails it rather than being lost), then sets it on the
//! role at once. Whatever happens in between, the reconciler, woken by the
//! Secret's change, converges the role to the Secret; and a rotation counts
//! only if the Secret still holds the new password once the role has it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::{events, reasons};
use navique_api::messages;
use navique_api::services::{
    ManagedService, PlacementMode, ServiceCredentialPolicy, ServiceCredentialPolicyStatus,
};
use navique_runtime::events::Recorder;
use navique_runtime::{Component, Leadership, one_line};
use prometheus_client::metrics::counter::Counter;

use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};

use crate::Error;
use crate::dependents::{self, ServiceState};
use crate::managed_service::objects::MANAGER;
use crate::managed_service::{engine, service};
use crate::postgres::{Owner, catalogue, generate_password};

/// Re-checks every policy at least this often, so that a long wait is
/// never one long timer.
const RESYNC: Duration = Duration::from_secs(3600);

/// Parses `spec.rotationInterval`, such as `720h`, `1h30m` or `90s`.
pub fn parse_interval(text: &str) -> Result<Duration, Error> {
    Ok(navique_api::duration::parse("spec.rotationInterval", text)?)
}

pub struct Facts<'a> {
    pub service: &'a str,
    pub state: ServiceState,
    pub placement: Option<PlacementMode>,
    /// Whether the service's credential Secret exists.
    pub credentials: bool,
    /// The parsed interval, or why it cannot be.
    pub interval: Result<Duration, String>,
    pub created: Timestamp,
    pub last_rotation: Option<Timestamp>,
    pub now: Timestamp,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Ready False, nothing submitted.
    Hold {
        reason: &'static str,
        message: String,
    },
    /// Rotate now.
    Rotate,
    /// Ready True; the next rotation is due then.
    Wait { next: Timestamp },
}

/// When the next rotation is due: one interval after the last one, or
/// after the policy's creation before the first.
pub fn next_rotation(created: Timestamp, last: Option<Timestamp>, interval: Duration) -> Timestamp {
    last.unwrap_or(created)
        .checked_add(interval)
        .unwrap_or(Timestamp::MAX)
}

/// Decides whether a policy rotates now. The service's state comes first:
/// while it is being deleted nothing else matters.
pub fn decide(facts: &Facts) -> Decision {
    let hold = |reason, message| Decision::Hold { reason, message };
    let service = facts.service;
    let interval = match (facts.state, &facts.interval) {
        (ServiceState::Missing, _) => {
            return hold(
                reasons::CREDENTIAL_PENDING,
                messages::service_not_found(service),
            );
        }
        (ServiceState::Deleting, _) => {
            return hold(
                reasons::SERVICE_DELETING,
                messages::service_deleting_no_rotation(service),
            );
        }
        (_, Err(problem)) => return hold(reasons::INVALID_ROTATION_INTERVAL, problem.clone()),
        (_, Ok(interval)) => *interval,
    };
    if facts.placement != Some(PlacementMode::ProviderShared) {
        return hold(
            reasons::ROTATION_UNSUPPORTED,
            messages::ROTATION_IN_PROJECT_UNSUPPORTED.to_owned(),
        );
    }
    if facts.state != ServiceState::Ready {
        return hold(
            reasons::CREDENTIAL_PENDING,
            messages::service_not_ready(service),
        );
    }
    if !facts.credentials {
        return hold(
            reasons::CREDENTIAL_PENDING,
            messages::credentials_pending(service, &service::credentials_secret_name(service)),
        );
    }
    let next = next_rotation(facts.created, facts.last_rotation, interval);
    if next <= facts.now {
        Decision::Rotate
    } else {
        Decision::Wait { next }
    }
}

/// When to look again: at `next`, but at least every [`RESYNC`].
fn requeue_until(next: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(next.duration_since(now))
        .unwrap_or_default()
        .min(RESYNC)
}

/// `now` to the second, as `Time` is stored, so that what is written
/// compares equal to what is read back.
fn whole_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// The credential policy controller's metrics.
#[derive(Clone, Default)]
pub struct Metrics {
    controller: ReconcileMetrics,
    rotations: Counter,
}

impl Metrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self {
            controller: ReconcileMetrics::register(
                component,
                "credential_policy",
                "ServiceCredentialPolicy",
            ),
            rotations: Counter::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "credential_rotations",
                "Passwords rotated by ServiceCredentialPolicies",
                metrics.rotations.clone(),
            );
        });
        metrics
    }
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    recorder: Recorder,
    leadership: Leadership,
    rotations: Counter,
    tracker: Tracker<ServiceCredentialPolicy>,
    provider_namespace: String,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, leadership: Leadership) -> Self {
        let recorder = crate::event_recorder(&client);
        Self {
            client,
            recorder,
            leadership,
            rotations: metrics.rotations,
            tracker: Tracker::new(metrics.controller),
            provider_namespace: catalogue::DEFAULT_PROVIDER_NAMESPACE.to_owned(),
        }
    }

    /// Where the ServiceClasses' admin Secrets are read from.
    pub fn with_provider_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.provider_namespace = namespace.into();
        self
    }
}

/// Runs the ServiceCredentialPolicy controller until leadership ends.
pub async fn run(context: Context) -> Result<(), Infallible> {
    let client = context.client.clone();
    let token = context.leadership.token().clone();
    let controller = Controller::new(
        Api::<ServiceCredentialPolicy>::all(client.clone()),
        watcher::Config::default(),
    );
    dependents::follow_services(controller, &client)
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile, error_policy, Arc::new(context))
        .for_each(log_outcome)
        .await;
    Ok(())
}

/// Reconciles one policy (public for tests that drive it in-process).
pub async fn reconcile(
    policy: Arc<ServiceCredentialPolicy>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    context
        .tracker
        .reconcile(&policy, context.reconcile(&policy))
        .await
}

pub fn error_policy(
    policy: Arc<ServiceCredentialPolicy>,
    error: &Error,
    context: Arc<Context>,
) -> Action {
    context.tracker.failed(&policy, error)
}

impl Context {
    async fn reconcile(&self, policy: &ServiceCredentialPolicy) -> Result<Action, Error> {
        let namespace = policy
            .namespace()
            .ok_or(Error::Unidentified("ServiceCredentialPolicy"))?;
        let reference = &policy.spec.service_ref;
        let service = engine::referenced_service(&self.client, &namespace, reference).await?;
        let secret_name = service::credentials_secret_name(&reference.name);
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &namespace);
        let credentials = secrets
            .get_opt(&secret_name)
            .await
            .map_err(|source| Error::Read {
                kind: "Secret",
                name: format!("{namespace}/{secret_name}"),
                source,
            })?;
        let previous = policy.status.clone().unwrap_or_default();
        let now = Timestamp::now();
        let interval = parse_interval(&policy.spec.rotation_interval);
        let decision = decide(&Facts {
            service: &reference.name,
            state: ServiceState::of(service.as_ref()),
            placement: service.as_ref().map(|s| s.spec.placement.mode),
            credentials: credentials.is_some(),
            interval: interval.as_ref().copied().map_err(|e| e.to_string()),
            created: policy
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(now, |t| t.0),
            last_rotation: previous.last_rotation_time.as_ref().map(|t| t.0),
            now,
        });
        match decision {
            Decision::Hold { reason, message } => {
                self.write_status(policy, &previous, false, reason, message, None)
                    .await?;
                return Ok(Action::requeue(RESYNC));
            }
            Decision::Wait { next } => {
                self.write_status(
                    policy,
                    &previous,
                    true,
                    reasons::ROTATION_SCHEDULED,
                    messages::rotation_scheduled(&next.to_string()),
                    Some((previous.last_rotation_time.as_ref().map(|t| t.0), next)),
                )
                .await?;
                return Ok(Action::requeue(requeue_until(next, now)));
            }
            Decision::Rotate => {}
        }
        // decide() rotates only a Ready service whose credential Secret
        // exists, on a valid interval.
        let (Some(service), Some(credentials), Ok(interval)) = (service, credentials, interval)
        else {
            return Ok(Action::requeue(RESYNC));
        };
        if let Err(error) = self.rotate(policy, &service, &credentials).await {
            let message = one_line(&error);
            // Best effort: the error is what is returned and retried.
            if let Err(e) = self
                .write_status(
                    policy,
                    &previous,
                    false,
                    reasons::ROTATION_FAILED,
                    message,
                    None,
                )
                .await
            {
                tracing::warn!(error = %one_line(&e), "cannot report the failure");
            }
            return Err(error);
        }
        let rotated = whole_seconds(now);
        let next = next_rotation(rotated, Some(rotated), interval);
        self.write_status(
            policy,
            &previous,
            true,
            reasons::ROTATION_SCHEDULED,
            messages::rotation_scheduled(&next.to_string()),
            Some((Some(rotated), next)),
        )
        .await?;
        Ok(Action::requeue(requeue_until(next, now)))
    }

    /// Puts a new password into the credential Secret, then on the role.
    async fn rotate(
        &self,
        policy: &ServiceCredentialPolicy,
        service: &ManagedService,
        credentials: &Secret,
    ) -> Result<(), Error> {
        let namespace = credentials.namespace().unwrap_or_default();
        let secret_name = credentials.name_any();
        let full_name = format!("{namespace}/{secret_name}");
        let engine = engine::of_service(&self.client, service, &self.provider_namespace).await?;
        let db = service::database_of_service(service)?;
        let owner = Owner::of(service).ok_or(Error::Unnamed)?;
        let password = generate_password();
        // Every key as the ManagedService reconciler writes it, so that the
        // `uri` carries the new password too.
        let data = service::secret_data(&engine.credentials(&db.name, &db.owner, &password));
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": credentials.resource_version()},
            "data": data,
        });
        let secrets = Api::<Secret>::namespaced(self.client.clone(), &namespace);
        self.leadership.confirm().await.map_err(Error::NotLeader)?;
        secrets
            .patch(
                &secret_name,
                &PatchParams {
                    field_manager: Some(MANAGER.to_owned()),
                    ..Default::default()
                },
                &Patch::Merge(patch),
            )
            .await
            .map_err(|source| Error::Write {
                kind: "Secret",
                name: full_name.clone(),
                source,
            })?;
        engine.set_password(&owner, &db.owner, &password).await?;
        let stored = secrets
            .get_opt(&secret_name)
            .await
            .map_err(|source| Error::Read {
                kind: "Secret",
                name: full_name.clone(),
                source,
            })?;
        if service::stored_password(stored.as_ref().and_then(|s| s.data.as_ref())).as_deref()
            != Some(password.as_str())
        {
            return Err(Error::RotationOverwritten { secret: full_name });
        }
        self.rotations.inc();
        tracing::info!(policy = %format!("{namespace}/{}", policy.name_any()), role = db.owner, "password rotated");
        let event = Event {
            type_: EventType::Normal,
            reason: events::CREDENTIALS_ROTATED.to_owned(),
            note: Some(messages::credentials_rotated(
                &service.name_any(),
                &db.owner,
            )),
            action: "Rotate".to_owned(),
            secondary: Some(service.object_ref(&())),
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &navique_runtime::events::regarding(policy))
            .await
        {
            tracing::warn!(error = %one_line(&e), "cannot record the event");
        }
        Ok(())
    }

    /// Writes the status when it changed: `times` sets the last and next
    /// rotation times, `None` keeps them.
    async fn write_status(
        &self,
        policy: &ServiceCredentialPolicy,
        previous: &ServiceCredentialPolicyStatus,
        ready: bool,
        reason: &str,
        message: String,
        times: Option<(Option<Timestamp>, Timestamp)>,
    ) -> Result<(), Error> {
        let generation = policy.metadata.generation;
        let (last, next) = match times {
            Some((last, next)) => (last.map(Time), Some(Time(next))),
            None => (
                previous.last_rotation_time.clone(),
                previous.next_rotation_time.clone(),
            ),
        };
        let status = ServiceCredentialPolicyStatus {
            observed_generation: generation,
            last_rotation_time: last,
            next_rotation_time: next,
            conditions: dependents::with_ready(
                &previous.conditions,
                ready,
                reason,
                message,
                generation,
            ),
        };
        if policy.status.as_ref() == Some(&status) {
            return Ok(());
        }
        dependents::write_status(&self.client, policy, &status).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ServiceState::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn intervals_are_durations_of_the_rotation_interval_field() {
        assert_eq!(parse_interval("1h30m").unwrap().as_secs(), 5400);
        assert_eq!(parse_interval("1d").unwrap().as_secs(), 24 * 3600);
        assert_eq!(
            parse_interval("1w").unwrap_err().to_string(),
            "spec.rotationInterval: \"1w\" is not a duration such as 30d, 720h, 1h30m or 90s"
        );
    }

    fn facts(state: ServiceState) -> Facts<'static> {
        Facts {
            service: "orders-db",
            state,
            placement: Some(PlacementMode::ProviderShared),
            credentials: true,
            interval: Ok(Duration::from_secs(60)),
            created: at(1000),
            last_rotation: None,
            now: at(1030),
        }
    }

    fn held(decision: Decision) -> (&'static str, String) {
        match decision {
            Decision::Hold { reason, message } => (reason, message),
            other => panic!("expected a hold, got {other:?}"),
        }
    }

    #[test]
    fn the_first_rotation_is_one_interval_after_creation() {
        assert_eq!(decide(&facts(Ready)), Decision::Wait { next: at(1060) });
        let due = Facts {
            now: at(1060),
            ..facts(Ready)
        };
        assert_eq!(decide(&due), Decision::Rotate);
    }

    #[test]
    fn later_rotations_follow_the_last_one() {
        let after = Facts {
            last_rotation: Some(at(5000)),
            now: at(5059),
            ..facts(Ready)
        };
        assert_eq!(decide(&after), Decision::Wait { next: at(5060) });
        let due = Facts {
            now: at(5061),
            ..after
        };
        assert_eq!(decide(&due), Decision::Rotate);
    }

    #[test]
    fn a_deleting_service_gets_no_rotation_even_when_due() {
        for interval in [Ok(Duration::from_secs(1)), Err("bad".to_owned())] {
            let deleting = Facts {
                interval,
                now: at(999_999),
                ..facts(Deleting)
            };
            assert_eq!(
                held(decide(&deleting)),
                (
                    "ServiceDeleting",
                    "service orders-db is being deleted; no rotations are submitted".to_owned()
                )
            );
        }
    }

    #[test]
    fn a_missing_service_is_pending_like_a_binding() {
        let missing = Facts {
            placement: None,
            credentials: false,
            ..facts(Missing)
        };
        assert_eq!(
            held(decide(&missing)),
            (
                "CredentialPending",
                "service not found: orders-db".to_owned()
            )
        );
    }

    #[test]
    fn nothing_rotates_before_the_service_and_its_secret_are_there() {
        let due = |state| Facts {
            now: at(999_999),
            ..facts(state)
        };
        assert_eq!(
            held(decide(&due(NotReady))),
            (
                "CredentialPending",
                "waiting for service orders-db to be Ready".to_owned()
            )
        );
        let no_secret = Facts {
            credentials: false,
            ..due(Ready)
        };
        assert_eq!(
            held(decide(&no_secret)),
            (
                "CredentialPending",
                "waiting for Secret orders-db-credentials of service orders-db".to_owned()
            )
        );
        let in_project = Facts {
            placement: Some(PlacementMode::InProject),
            ..due(Ready)
        };
        assert_eq!(held(decide(&in_project)).0, "RotationUnsupported");
        let invalid = Facts {
            interval: Err("spec.rotationInterval: \"0s\" must be longer than zero".to_owned()),
            ..due(Ready)
        };
        assert_eq!(
            held(decide(&invalid)),
            (
                "InvalidRotationInterval",
                "spec.rotationInterval: \"0s\" must be longer than zero".to_owned()
            )
        );
    }

    #[test]
    fn requeues_are_capped_and_never_negative() {
        assert_eq!(requeue_until(at(130), at(100)), Duration::from_secs(30));
        assert_eq!(requeue_until(at(100), at(130)), Duration::ZERO);
        assert_eq!(requeue_until(at(1_000_000), at(0)), RESYNC);
    }
}
