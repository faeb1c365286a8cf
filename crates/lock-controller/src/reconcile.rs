//! The Lock reconciler: stamps each Lock's target, its namespace and its
//! kind's CRD with what [`decision`] computes from every Lock, and reports
//! the outcome in the Lock's status. A finalizer clears a deleted Lock's
//! name from all three before it goes.

use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::finalizers;
use navique_api::core::Lock;
use navique_runtime::{Component, one_line};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Unit;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::decision::{self, Catalog, Classification, Markers, Outcome, ServedKind, Target};
use crate::watches::{self, Triggers, Views};

/// The field manager of every write, so that server-side apply removes
/// exactly the markers this controller set and no longer wants.
const MANAGER: &str = crate::NAME;
/// A safety net only: every change that matters arrives as a watch event.
const RESYNC: Duration = Duration::from_secs(3600);
/// How long reconciles in flight may take to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Wake-ups waiting for the controller; a full queue slows the watches.
const WAKE_QUEUE: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {kind} {name}")]
    ReadTarget {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot stamp {kind} {name}")]
    StampTarget {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot stamp Namespace {name}")]
    StampNamespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot stamp CustomResourceDefinition {name}")]
    StampCrd {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the Lock's status")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot add or remove the Lock's finalizer")]
    Finalizer(#[source] kube::Error),
    #[error("the Lock has no name or namespace")]
    Unnamed,
}

impl Error {
    /// The `error` label of `reconcile_errors`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ReadTarget { .. } => "read_target",
            Error::StampTarget { .. } => "stamp_target",
            Error::StampNamespace { .. } => "stamp_namespace",
            Error::StampCrd { .. } => "stamp_crd",
            Error::WriteStatus(_) => "write_status",
            Error::Finalizer(_) => "finalizer",
            Error::Unnamed => "unnamed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: &'static str,
}

/// The reconciler's metrics, under the component's prefix.
#[derive(Clone)]
pub struct Metrics {
    reconciles: Counter,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: Histogram,
    locks_active: Gauge,
}

impl Metrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self {
            reconciles: Counter::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            locks_active: Gauge::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "reconciles",
                "Lock reconciliations run",
                metrics.reconciles.clone(),
            );
            registry.register(
                "reconcile_errors",
                "Lock reconciliations that failed, by error",
                metrics.reconcile_errors.clone(),
            );
            registry.register_with_unit(
                "reconcile_duration",
                "Time a Lock reconciliation took",
                Unit::Seconds,
                metrics.reconcile_duration.clone(),
            );
            registry.register(
                "locks_active",
                "Locks whose target carries their name",
                metrics.locks_active.clone(),
            );
        });
        metrics
    }
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    /// Every Lock, as the controller's watch last saw it.
    locks: Store<Lock>,
    views: Views,
    metrics: Metrics,
    /// Consecutive failures per Lock, for the retry backoff.
    failures: navique_runtime::FailureBackoff<ObjectRef<Lock>>,
}

/// Runs the Lock controller until `token` is cancelled.
pub async fn run(
    client: Client,
    groups: Vec<String>,
    metrics: Metrics,
    token: CancellationToken,
) -> Result<(), Infallible> {
    let Some(catalog) = watches::discover_until_ok(&client, groups, &token).await else {
        return Ok(());
    };
    let controller = Controller::new(Api::<Lock>::all(client.clone()), watcher::Config::default());
    let locks = controller.store();
    let (triggers, views) = Triggers::new(client.clone(), locks.clone(), catalog);
    let (wake, woken) = mpsc::channel(WAKE_QUEUE);
    let context = Arc::new(Context {
        client,
        locks: locks.clone(),
        views: views.clone(),
        metrics,
        failures: navique_runtime::FailureBackoff::default(),
    });
    let controller = controller
        .reconcile_on(ReceiverStream::new(woken))
        .graceful_shutdown_on(token.clone().cancelled_owned())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
                // A wake-up for a Lock that is gone.
                Err(controller::Error::ObjectNotFound(lock)) => {
                    tracing::debug!(%lock, "woken Lock no longer exists");
                }
                Err(e) => tracing::warn!(error = %one_line(&e), "Lock watch failed"),
            }
        });
    // Stamps are compared with what the namespace and CRD watches saw, so
    // reconciling waits until they have listed everything once.
    let reconcile_when_ready = async {
        tokio::select! {
            () = views.ready() => {}
            () = token.cancelled() => return,
        }
        tokio::select! {
            () = controller => {}
            () = shutdown_deadline(&token, &locks) => {}
        }
    };
    tokio::select! {
        () = triggers.run(wake) => {}
        () = reconcile_when_ready => {}
    }
    Ok(())
}

/// Resolves when a graceful shutdown has lasted long enough. kube's
/// controller shuts down only once its Lock store is ready, which never
/// happens while the Lock CRD is missing: then at once, since nothing ran.
/// Otherwise reconciles in flight get a moment to finish; one cut short is
/// redone by the next leader.
async fn shutdown_deadline(token: &CancellationToken, locks: &Store<Lock>) {
    token.cancelled().await;
    if locks.wait_until_ready().now_or_never().is_some() {
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    }
}

async fn reconcile(lock: Arc<Lock>, context: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    context.metrics.reconciles.inc();
    let result = context.reconcile(&lock).await;
    context
        .metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let active = context
        .locks
        .state()
        .iter()
        .filter(|l| decision::is_active(l))
        .count();
    context
        .metrics
        .locks_active
        .set(i64::try_from(active).unwrap_or(i64::MAX));
    if result.is_ok() {
        context.failures.succeeded(&ObjectRef::from_obj(&*lock));
    }
    result
}

/// Retries a failed Lock with exponential backoff, so that a lasting failure
/// (a missing permission) does not spin.
fn error_policy(lock: Arc<Lock>, error: &Error, context: Arc<Context>) -> Action {
    context
        .metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            error: error.metric_label(),
        })
        .inc();
    let delay = context.failures.failed(ObjectRef::from_obj(&*lock));
    tracing::warn!(
        lock = %ObjectRef::from_obj(&*lock),
        error = %one_line(error),
        retry_in = ?delay,
        "reconcile failed"
    );
    Action::requeue(delay)
}

impl Context {
    /// The finalizer goes on before anything is stamped and comes off once
    /// the deleted Lock's name is off every stamp.
    async fn reconcile(&self, lock: &Lock) -> Result<Action, Error> {
        let has_finalizer = lock.finalizers().iter().any(|f| f == finalizers::LOCK);
        match (decision::is_deleting(lock), has_finalizer) {
            // The update wakes the Lock again.
            (false, false) => {
                let mut finalizers = lock.finalizers().to_vec();
                finalizers.push(finalizers::LOCK.to_owned());
                self.set_finalizers(lock, finalizers).await?;
                Ok(Action::await_change())
            }
            (false, true) => self.apply(lock).await,
            // Being deleted, the Lock no longer counts in any stamp.
            (true, true) => {
                self.sync_stamps(lock).await?;
                let mut finalizers = lock.finalizers().to_vec();
                finalizers.retain(|f| f != finalizers::LOCK);
                self.set_finalizers(lock, finalizers).await?;
                Ok(Action::await_change())
            }
            (true, false) => Ok(Action::await_change()),
        }
    }

    /// Writes the Lock's finalizers (see `navique_runtime::set_finalizers`).
    async fn set_finalizers(&self, lock: &Lock, finalizers: Vec<String>) -> Result<(), Error> {
        let namespace = lock.namespace().ok_or(Error::Unnamed)?;
        let api = Api::<Lock>::namespaced(self.client.clone(), &namespace);
        navique_runtime::set_finalizers(&api, &lock.name_any(), lock.resource_version(), finalizers)
            .await
            .map_err(Error::Finalizer)
    }

    async fn apply(&self, lock: &Lock) -> Result<Action, Error> {
        let outcome = self.sync_stamps(lock).await?;
        self.write_status(lock, &outcome).await?;
        Ok(Action::requeue(RESYNC))
    }

    /// Brings the markers of the Lock's target, namespace and kind's CRD to
    /// what all Locks call for, and says what it found of the target.
    async fn sync_stamps(&self, lock: &Lock) -> Result<Outcome, Error> {
        let namespace = lock.namespace().ok_or(Error::Unnamed)?;
        let catalog = self.views.catalog();
        let locks = self.locks.state();
        let outcome = match decision::classify(&lock.spec.target_ref, &catalog) {
            Classification::Invalid(message) => Outcome::InvalidTarget(message),
            Classification::Valid(kind) => {
                let outcome = self
                    .stamp_target(lock, kind, &namespace, &locks, &catalog)
                    .await?;
                self.stamp_crd(kind, decision::crd_stamp(&kind.group_kind(), &locks))
                    .await?;
                outcome
            }
        };
        self.stamp_namespace(&namespace, decision::namespace_stamp(&namespace, &locks))
            .await?;
        Ok(outcome)
    }

    async fn stamp_target(
        &self,
        lock: &Lock,
        kind: &ServedKind,
        namespace: &str,
        locks: &[Arc<Lock>],
        catalog: &Catalog,
    ) -> Result<Outcome, Error> {
        let name = &lock.spec.target_ref.name;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &kind.api_resource());
        let current = api
            .get_metadata_opt(name)
            .await
            .map_err(|source| Error::ReadTarget {
                kind: kind.kind.clone(),
                name: name.clone(),
                source,
            })?;
        let Some(current) = current else {
            return Ok(Outcome::MissingReference);
        };
        let target = Target {
            kind: &kind.group_kind(),
            namespace,
            name,
        };
        let stamp = decision::target_stamp(target, locks, catalog);
        if Markers::of(&current.metadata) != Markers::wanted(stamp.as_ref()) {
            let patch = decision::target_patch(kind, namespace, name, stamp.as_ref());
            apply_markers(&api, name, patch, stamp.is_none())
                .await
                .map_err(|source| Error::StampTarget {
                    kind: kind.kind.clone(),
                    name: name.clone(),
                    source,
                })?;
            tracing::info!(
                target = %format!("{}/{namespace}/{name}", kind.kind),
                locked = stamp.as_ref().map_or("", |s| s.locked.as_str()),
                "stamped target"
            );
        }
        Ok(Outcome::Protecting)
    }

    async fn stamp_namespace(&self, name: &str, locked: Option<String>) -> Result<(), Error> {
        // Not seen yet: its watch event will ask again. Never apply blindly,
        // which would create it.
        let Some(current) = self.views.namespaces.get(&ObjectRef::new(name)) else {
            return Ok(());
        };
        if decision::locked_of(&current.metadata) == locked.as_deref() {
            return Ok(());
        }
        let api = Api::<Namespace>::all(self.client.clone());
        let patch = decision::namespace_patch(name, locked.as_deref());
        apply_markers(&api, name, patch, locked.is_none())
            .await
            .map_err(|source| Error::StampNamespace {
                name: name.to_owned(),
                source,
            })?;
        tracing::debug!(
            namespace = name,
            locked = locked.as_deref().unwrap_or(""),
            "stamped namespace"
        );
        Ok(())
    }

    async fn stamp_crd(&self, kind: &ServedKind, locked: Option<String>) -> Result<(), Error> {
        let name = kind.crd_name();
        // Built-in kinds have no CRD; a CRD not seen yet asks again.
        let Some(current) = self.views.crds.get(&ObjectRef::new(&name)) else {
            return Ok(());
        };
        if decision::locked_of(&current.metadata) == locked.as_deref() {
            return Ok(());
        }
        let api = Api::<CustomResourceDefinition>::all(self.client.clone());
        let patch = decision::crd_patch(&name, locked.as_deref());
        apply_markers(&api, &name, patch, locked.is_none())
            .await
            .map_err(|source| Error::StampCrd {
                name: name.clone(),
                source,
            })?;
        tracing::debug!(
            crd = name,
            locked = locked.as_deref().unwrap_or(""),
            "stamped CRD"
        );
        Ok(())
    }

    async fn write_status(&self, lock: &Lock, outcome: &Outcome) -> Result<(), Error> {
        let Some(status) = decision::lock_status(lock, outcome, Timestamp::now()) else {
            return Ok(());
        };
        let (namespace, name) = (lock.namespace().ok_or(Error::Unnamed)?, lock.name_any());
        let patch = serde_json::json!({
            "apiVersion": Lock::api_version(&()),
            "kind": Lock::kind(&()),
            "status": status,
        });
        Api::<Lock>::namespaced(self.client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map_err(Error::WriteStatus)?;
        tracing::info!(lock = %format!("{namespace}/{name}"), ?outcome, "status changed");
        Ok(())
    }
}

/// Server-side applies `patch` (the markers as they should be). When
/// clearing, also removes markers another manager co-owns, which SSA leaves.
async fn apply_markers<K>(
    api: &Api<K>,
    name: &str,
    patch: serde_json::Value,
    clearing: bool,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let applied = api
        .patch_metadata(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(patch),
        )
        .await?;
    if clearing && !Markers::of(&applied.metadata).is_empty() {
        api.patch_metadata(
            name,
            &PatchParams::default(),
            &Patch::Merge(decision::remove_markers()),
        )
        .await?;
    }
    Ok(())
}
