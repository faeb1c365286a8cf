//! The Lock reconciler: stamps each Lock's target, its namespace and its
//! kind's CRD with what [`decision`] computes from every Lock, and reports
//! the outcome in the Lock's status. A finalizer clears a deleted Lock's
//! name from all three before it goes.

use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use navique_api::constants::finalizers;
use navique_api::core::Lock;
use navique_runtime::Component;
use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};
use navique_runtime::events::{Busy, Queued, Recorder};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinError;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::coalesced::{self, Coalesced, Wait};
use crate::decision::{
    self, Catalog, Classification, Enforceable, LockEvent, LockState, Markers, Outcome, ServedKind,
    SharedStamp, StateCounts, Target,
};
use crate::index::LockIndex;
use crate::marked_here::MarkedHere;
use crate::namespace_wide;
use crate::orphaned::Found;
use crate::orphans::Repairs;
use crate::resync;
use crate::superseded::{self, Superseded};
use crate::suspension::{self, Limit};
use crate::watches::{self, Triggers, Views};

/// The field manager of every write, so that server-side apply removes
/// exactly the markers this controller set and no longer wants.
const MANAGER: &str = crate::NAME;
/// How long reconciles in flight may take to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long the Events still queued may take to go out after them.
const EVENTS_GRACE: Duration = Duration::from_secs(2);
/// Events waiting to be published: they give way to the reconciles until
/// half of it is full, and a full queue slows the reconciles. A Lock that
/// turns active has two, so half of 16,384 was reached 4,096 Locks into a
/// burst, and from then on each new Event pushed one out: 4,400 Event
/// writes among those of a burst of 10,000 Locks. Only what is queued
/// takes memory (about 300 bytes an Event).
const EVENT_QUEUE: usize = 65536;
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

impl navique_runtime::controller::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
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
struct StateLabels {
    state: &'static str,
}

/// The reconciler's metrics, under the component's prefix.
#[derive(Clone)]
pub struct Metrics {
    reconciles: ReconcileMetrics,
    locks_active: Gauge,
    locks: Family<StateLabels, Gauge>,
}

impl Metrics {
    pub fn register(component: &Component) -> Self {
        let metrics = Self {
            reconciles: ReconcileMetrics::register(component, "", "Lock"),
            locks_active: Gauge::default(),
            locks: Family::default(),
        };
        component.register_metrics(|registry| {
            registry.register(
                "locks_active",
                "Locks whose target carries their name",
                metrics.locks_active.clone(),
            );
            registry.register(
                "locks",
                "Locks by the state their last reconcile reported: active (protecting), invalid (InvalidTarget), missing (MissingReference)",
                metrics.locks.clone(),
            );
        });
        metrics
    }
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    index: LockIndex,
    views: Views,
    metrics: Metrics,
    /// Counts reconciles and spaces out each failing Lock's retries; a
    /// Lock is woken by its target's changes, so every wake-up runs.
    tracker: Tracker<Lock>,
    events: Queued,
    /// The reconciles in flight, which Events give way to.
    busy: Busy,
    /// What each Lock's last reconcile reported, for the `locks` gauges.
    /// By namespace and name: a whole ObjectRef would double the key.
    states: Mutex<StateCounts<(String, String)>>,
    /// The lines of marker writes per object: the Namespace and CRD ones
    /// coalesced, a target's one at a time.
    shared: Arc<Coalesced>,
    marked_here: MarkedHere,
    /// The lines whose object [`orphans`](crate::orphans) cleared (or
    /// tried to): the next stamp in the line reads the object from the API
    /// server, as the watch may still show the markers.
    cleared: Arc<MarkedHere>,
    superseded: Superseded,
    /// The longest break-glass suspension.
    limit: Limit,
}

/// Events on Locks, recorded once the reconcile's writes are done.
type StampEvents = Vec<(Arc<Lock>, LockEvent)>;

/// What stamping a Lock's target found.
struct Stamped {
    outcome: Outcome,
    /// The target's kind, when valid.
    kind: Option<ServedKind>,
    events: StampEvents,
}

/// Runs the Lock controller until `token` is cancelled.
pub async fn run(
    client: Client,
    enforceable: Enforceable,
    limit: Limit,
    concurrency: u16,
    metrics: Metrics,
    token: CancellationToken,
) -> Result<(), Infallible> {
    let Some(catalog) = watches::discover_until_ok(&client, enforceable, &token).await else {
        return Ok(());
    };
    let (locks, writer) = reflector::store();
    let index = LockIndex::new(locks.clone());
    let indexing = index.clone();
    let lock_events = watcher(Api::<Lock>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(watches::trim)
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(event) = event {
                indexing.apply(event);
            }
        })
        .touched_objects();
    let controller = Controller::for_stream(lock_events, locks.clone());
    let found = Found::default();
    let lines = Arc::new(Coalesced::default());
    let cleared = Arc::new(MarkedHere::default());
    let (triggers, views) = Triggers::new(
        client.clone(),
        locks.clone(),
        index.clone(),
        catalog,
        limit.clone(),
        found.clone(),
        cleared.clone(),
    );
    let repairs = Repairs {
        client: client.clone(),
        index: index.clone(),
        views: views.clone(),
        lines: lines.clone(),
        cleared: cleared.clone(),
    };
    let (wake, woken) = mpsc::channel(WAKE_QUEUE);
    let busy = Busy::default();
    let (events, publish_events) = Queued::new(
        Recorder::new(client.clone(), crate::NAME),
        EVENT_QUEUE,
        busy.clone(),
    );
    let context = Arc::new(Context {
        client,
        index,
        views: views.clone(),
        tracker: Tracker::ungated(metrics.reconciles.clone()),
        metrics,
        events,
        busy,
        states: Mutex::new(StateCounts::default()),
        shared: lines,
        marked_here: MarkedHere::default(),
        cleared,
        superseded: Superseded::default(),
        limit,
    });
    let resync = resync::run(locks.clone(), wake.clone());
    let controller = controller
        .reconcile_on(ReceiverStream::new(woken))
        // Unbounded, a burst of Locks would open thousands of connections
        // and the API server spend itself on handshakes.
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(token.clone().cancelled_owned())
        .run(reconcile, error_policy, context)
        .for_each(log_outcome);
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
    // Tasks of their own, so that a wake-up of one (a target's change, an
    // Event's response) does not poll the controller's every stream, nor
    // the controller theirs; dropped with this future, they stop.
    let triggers = AbortOnDropHandle::new(tokio::spawn(triggers.run(wake)));
    let repairs = AbortOnDropHandle::new(tokio::spawn(repairs.run(found, token.clone())));
    let mut publish_events = AbortOnDropHandle::new(tokio::spawn(publish_events));
    tokio::select! {
        ended = triggers => propagate_panic(ended),
        ended = repairs => propagate_panic(ended),
        () = resync => {}
        () = reconcile_when_ready => {}
        ended = &mut publish_events => {
            propagate_panic(ended);
            return Ok(());
        }
    }
    // The reconciles are over, and with them the queue's senders: what
    // Events still wait (they give way while reconciles run) go out now,
    // for a moment; past it they are lost, as client-go's are: a record,
    // never what protects.
    if let Ok(ended) = tokio::time::timeout(EVENTS_GRACE, publish_events).await {
        propagate_panic(ended);
    }
    Ok(())
}

/// A spawned task's panic goes on here, as it would have unspawned.
fn propagate_panic(ended: Result<(), JoinError>) {
    if let Err(error) = ended
        && error.is_panic()
    {
        std::panic::resume_unwind(error.into_panic());
    }
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
    let _working = context.busy.enter();
    let result = context
        .tracker
        // Boxed: the tracker's future would hold this 5 KiB one twice,
        // and kube's runner moves each reconcile's future as it starts it.
        .reconcile(&lock, Box::pin(context.reconcile(&lock)))
        .await;
    context.count_states();
    result
}

/// Retries a failed Lock with exponential backoff, so that a lasting failure
/// (a missing permission) does not spin.
fn error_policy(lock: Arc<Lock>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&lock, error)
}

impl Context {
    /// Sets the `locks` gauges from what the reconciles of the Locks that
    /// still exist reported. A Lock not reconciled yet is not counted.
    fn count_states(&self) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        // More states than Locks: some went without a last reconcile.
        if states.len() > self.index.len() {
            states.retain(|lock| self.index.contains(lock));
        }
        let counts = states.counts().clone();
        drop(states);
        for (state, count) in counts {
            self.metrics
                .locks
                .get_or_create(&StateLabels {
                    state: state.label(),
                })
                .set(count);
            if state == LockState::Active {
                self.metrics.locks_active.set(count);
            }
        }
    }

    fn set_state(&self, lock: &Lock, state: Option<LockState>) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states.set(
            (lock.namespace().unwrap_or_default(), lock.name_any()),
            state,
        );
    }

    /// Queues `event` on `lock`; a failure is logged, never retried.
    async fn record(&self, lock: &Lock, event: LockEvent) {
        let event = Event {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.to_owned(),
            note: Some(event.note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        self.events
            .publish(event, navique_runtime::events::regarding(lock))
            .await;
    }

    /// The finalizer goes on before anything is stamped and comes off once
    /// the deleted Lock's name is off every stamp.
    async fn reconcile(&self, lock: &Lock) -> Result<Action, Error> {
        if !decision::is_deleting(lock) && self.superseded.is_stale(lock, Instant::now()) {
            return Ok(Action::requeue(superseded::REMEMBERED));
        }
        let has_finalizer = lock.finalizers().iter().any(|f| f == finalizers::LOCK);
        match (decision::is_deleting(lock), has_finalizer) {
            // Goes on from the written Lock; a stale copy waits for the
            // newer one's own reconcile.
            (false, false) => {
                let mut finalizers = lock.finalizers().to_vec();
                finalizers.push(finalizers::LOCK.to_owned());
                match self.set_finalizers(lock, finalizers).await? {
                    Some(written) => {
                        self.superseded.wrote_over(lock, Instant::now());
                        self.apply(&written).await
                    }
                    None => Ok(Action::await_change()),
                }
            }
            (false, true) => self.apply(lock).await,
            // Being deleted, the Lock no longer counts in any stamp.
            (true, true) => {
                self.set_state(lock, None);
                let stamped = self.stamp_own_target(lock).await?;
                self.stamp_shared(lock, stamped.kind.as_ref()).await?;
                self.record_all(stamped.events).await;
                let mut finalizers = lock.finalizers().to_vec();
                finalizers.retain(|f| f != finalizers::LOCK);
                self.set_finalizers(lock, finalizers).await?;
                Ok(Action::await_change())
            }
            (true, false) => {
                self.set_state(lock, None);
                Ok(Action::await_change())
            }
        }
    }

    /// Writes the Lock's finalizers (see `navique_runtime::write_finalizers`):
    /// the Lock as written, or `None` when the copy was stale.
    async fn set_finalizers(
        &self,
        lock: &Lock,
        finalizers: Vec<String>,
    ) -> Result<Option<Lock>, Error> {
        let namespace = lock.namespace().ok_or(Error::Unnamed)?;
        let api = Api::<Lock>::namespaced(self.client.clone(), &namespace);
        navique_runtime::write_finalizers(
            &api,
            &lock.name_any(),
            lock.resource_version(),
            finalizers,
        )
        .await
        .map_err(Error::Finalizer)
    }

    /// The target's stamp, then the status: the target's marker is what
    /// protects it, and what the Lock's user waits for. The namespace and
    /// CRD markers name active Locks only, so they follow the status.
    ///
    /// A break-glass suspension is judged first: while it is in effect the
    /// Lock leaves its target's marker, and the reconcile is requeued for
    /// its deadline. Otherwise nothing is requeued: what matters arrives as
    /// a watch event, and [`resync`] is the safety net.
    async fn apply(&self, lock: &Lock) -> Result<Action, Error> {
        let now = Timestamp::now();
        let suspension = suspension::judge(lock, now, &self.limit);
        let stamped = self.stamp_own_target(lock).await?;
        let suspended = suspension::overrides_outcome(suspension.as_ref(), &stamped.outcome);
        let action = suspension::time_left(suspension.as_ref(), now)
            .map_or_else(Action::await_change, |left| {
                Action::requeue(left.min(resync::PERIOD))
            });
        if self
            .write_status(lock, &stamped.outcome, suspension, now)
            .await?
        {
            self.superseded.wrote_over(lock, Instant::now());
        }
        let state = if suspended {
            LockState::Suspended
        } else {
            stamped.outcome.state()
        };
        self.set_state(lock, Some(state));
        self.stamp_shared(lock, stamped.kind.as_ref()).await?;
        self.record_all(stamped.events).await;
        Ok(action)
    }

    async fn record_all(&self, events: Vec<(Arc<Lock>, LockEvent)>) {
        for (lock, event) in events {
            self.record(&lock, event).await;
        }
    }

    /// Brings the marker of the Lock's target to what all Locks call for.
    async fn stamp_own_target(&self, lock: &Lock) -> Result<Stamped, Error> {
        let namespace = lock.namespace().ok_or(Error::Unnamed)?;
        let catalog = self.views.catalog();
        let enabled = catalog.enforceable().namespace_locks;
        match namespace_wide::classify(lock, enabled) {
            namespace_wide::Verdict::NotNamespaceWide => {}
            namespace_wide::Verdict::Invalid(message) => {
                return Ok(Stamped {
                    outcome: Outcome::InvalidTarget(message),
                    kind: None,
                    events: Vec::new(),
                });
            }
            namespace_wide::Verdict::Valid => {
                let (found, events) = self.stamp_namespace_wide(&namespace).await?;
                return Ok(Stamped {
                    outcome: if found {
                        Outcome::Protecting
                    } else {
                        Outcome::MissingReference
                    },
                    kind: None,
                    events,
                });
            }
        }
        match decision::classify(&lock.spec.target_ref, &catalog) {
            Classification::Invalid(message) => Ok(Stamped {
                outcome: Outcome::InvalidTarget(message),
                kind: None,
                events: Vec::new(),
            }),
            Classification::Valid(kind) => {
                let (outcome, events) = self.stamp_target(lock, kind, &namespace, &catalog).await?;
                Ok(Stamped {
                    outcome,
                    kind: Some(kind.clone()),
                    events,
                })
            }
        }
    }

    /// Brings the markers of the Lock's namespace and of its target kind's
    /// CRD to what all Locks call for.
    async fn stamp_shared(&self, lock: &Lock, kind: Option<&ServedKind>) -> Result<(), Error> {
        let namespace = lock.namespace().ok_or(Error::Unnamed)?;
        if let Some(kind) = kind {
            let key = kind.crd_name();
            self.shared
                .write(&key, Wait::UnlessQueued, || {
                    self.stamp_crd(&key, kind, self.index.crd_marker(&kind.group_kind()))
                })
                .await?;
        }
        let key = coalesced::namespace_line(&namespace);
        self.shared
            .write(&key, Wait::UnlessQueued, || {
                self.stamp_namespace(&key, &namespace, self.index.namespace_marker(&namespace))
            })
            .await?;
        // Any Lock repairs a namespace-wide marker that is not what it
        // should be (a valid namespace-wide Lock did so with its own stamp;
        // an invalid one, say after --namespace-locks was turned off,
        // clears what it had stamped here).
        let enabled = self.views.catalog().enforceable().namespace_locks;
        if namespace_wide::classify(lock, enabled) != namespace_wide::Verdict::Valid {
            let wanted = namespace_wide::Markers::wanted(
                namespace_wide::stamp(&namespace, &self.namespace_wide_locks(&namespace), enabled)
                    .as_ref(),
            );
            let cached = self.views.namespaces.get(&ObjectRef::new(&namespace));
            if cached.is_some_and(|ns| namespace_wide::Markers::of(&ns.metadata) != wanted) {
                let (_, events) = self.stamp_namespace_wide(&namespace).await?;
                self.record_all(events).await;
            }
        }
        Ok(())
    }

    /// The Locks of `namespace` that may be namespace-wide: those whose
    /// target has the namespace's name, but for those suspended (their
    /// namespace's deletes pass while it lasts, as a suspended Lock's
    /// target's do).
    fn namespace_wide_locks(&self, namespace: &str) -> Vec<Arc<Lock>> {
        let mut locks = self.index.pointing_at(namespace, namespace);
        let now = Timestamp::now();
        locks.retain(|l| !suspension::in_effect(l, now, &self.limit));
        locks
    }

    /// Brings Namespace `namespace`'s namespace-wide marker to what its
    /// namespace-wide Locks call for, read from the API server rather than
    /// the watch, which may not show the last write yet. Whether the
    /// Namespace exists, and the Events on the Locks whose names were added
    /// or taken off. Coalesced, so that a write computed from an older view
    /// of the Locks never lands after a newer one.
    async fn stamp_namespace_wide(&self, namespace: &str) -> Result<(bool, StampEvents), Error> {
        let found = AtomicBool::new(true);
        let events = Mutex::new(Vec::new());
        self.shared
            .write(
                &coalesced::namespace_wide_line(namespace),
                Wait::Always,
                || async {
                    let api = Api::<Namespace>::all(self.client.clone());
                    let stamp_error = |source| Error::StampNamespace {
                        name: namespace.to_owned(),
                        source,
                    };
                    let Some(current) =
                        api.get_metadata_opt(namespace).await.map_err(stamp_error)?
                    else {
                        found.store(false, Ordering::SeqCst);
                        return Ok(());
                    };
                    let locks = self.namespace_wide_locks(namespace);
                    let enabled = self.views.catalog().enforceable().namespace_locks;
                    let stamp = namespace_wide::stamp(namespace, &locks, enabled);
                    let before = namespace_wide::Markers::of(&current.metadata);
                    let wanted = namespace_wide::Markers::wanted(stamp.as_ref());
                    if before == wanted {
                        return Ok(());
                    }
                    let params = PatchParams {
                        field_manager: Some(MANAGER.to_owned()),
                        ..PatchParams::default()
                    };
                    api.patch_metadata(
                        namespace,
                        &params,
                        &Patch::Merge(namespace_wide::patch(&wanted)),
                    )
                    .await
                    .map_err(stamp_error)?;
                    tracing::info!(
                        namespace,
                        locked = wanted.locked.as_deref().unwrap_or(""),
                        "stamped namespace-wide marker"
                    );
                    let changed = namespace_wide::stamp_events(
                        namespace,
                        before.locked.as_deref(),
                        wanted.locked.as_deref(),
                    );
                    let mut events = events.lock().unwrap_or_else(|e| e.into_inner());
                    for (lock_name, event) in changed {
                        if let Some(named) = locks
                            .iter()
                            .find(|l| l.metadata.name.as_deref() == Some(lock_name.as_str()))
                        {
                            events.push((named.clone(), event));
                        }
                    }
                    Ok(())
                },
            )
            .await?;
        let events = events.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok((found.into_inner(), events))
    }

    /// The target's markers as the API server has them.
    async fn live_target_markers(
        &self,
        api: &Api<DynamicObject>,
        kind: &ServedKind,
        name: &str,
    ) -> Result<Option<Markers>, Error> {
        let current = api
            .get_metadata_opt(name)
            .await
            .map_err(|source| Error::ReadTarget {
                kind: kind.kind.clone(),
                name: name.to_owned(),
                source,
            })?;
        Ok(current.map(|current| Markers::of(&current.metadata)))
    }

    /// Brings the target's markers to what its Locks call for, in the
    /// target's line: the reconciles of two Locks on it (both deleted at
    /// once, say) compute and write one after the other, so that a marker
    /// computed before a Lock left never lands after the one computed
    /// without it.
    async fn stamp_target(
        &self,
        lock: &Lock,
        kind: &ServedKind,
        namespace: &str,
        catalog: &Catalog,
    ) -> Result<(Outcome, StampEvents), Error> {
        let key = coalesced::target_line(&kind.group_kind(), namespace, &lock.spec.target_ref.name);
        self.shared
            .alone(&key, || async {
                let cleared = self.cleared.contains(&key);
                let stamped = self
                    .stamp_target_in_line(cleared, lock, kind, namespace, catalog)
                    .await;
                if cleared && stamped.is_ok() {
                    self.cleared.record(&key, false);
                }
                stamped
            })
            .await
    }

    /// `cleared`: by a repair in this line, since the last stamp.
    async fn stamp_target_in_line(
        &self,
        cleared: bool,
        lock: &Lock,
        kind: &ServedKind,
        namespace: &str,
        catalog: &Catalog,
    ) -> Result<(Outcome, StampEvents), Error> {
        let name = &lock.spec.target_ref.name;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &kind.api_resource());
        // From its kind's watch; from the API server when the watch has not
        // seen it (not listed yet, or the target is newer than the watch's
        // last event), so that a target created with its Lock is never
        // reported missing.
        // Cleared by a repair in this line (the watch may still show the
        // markers, or the target deleted since): read as a target the
        // watch has not seen.
        let cached = if cleared {
            None
        } else {
            self.views.targets.get(&kind.group_kind(), namespace, name)
        };
        let from_watch = cached.is_some();
        let markers = match cached {
            Some(cached) => Some(cached),
            None => self.live_target_markers(&api, kind, name).await?,
        };
        let Some(mut markers) = markers else {
            return Ok((Outcome::MissingReference, Vec::new()));
        };
        let mut locks = self.index.pointing_at(namespace, name);
        // A suspended Lock leaves the marker: deletes pass while it lasts.
        let now = Timestamp::now();
        locks.retain(|l| !suspension::in_effect(l, now, &self.limit));
        let target = Target {
            kind: &kind.group_kind(),
            namespace,
            name,
        };
        let stamp = decision::target_stamp(target, &locks, catalog);
        if from_watch && decision::confirms_target_clear(stamp.as_ref(), &markers) {
            let Some(live) = self.live_target_markers(&api, kind, name).await? else {
                return Ok((Outcome::MissingReference, Vec::new()));
            };
            if !live.is_empty() {
                tracing::info!(
                    target = %format!("{}/{namespace}/{name}", kind.kind),
                    "the watch does not show the target's marker yet"
                );
            }
            markers = live;
        }
        let mut events = Vec::new();
        if markers != Markers::wanted(stamp.as_ref()) {
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
            let after = stamp.as_ref().map(|s| s.locked.as_str());
            for (lock_name, event) in
                decision::stamp_events(&kind.kind, name, markers.locked.as_deref(), after)
            {
                let named = locks.iter().find(|l| {
                    l.metadata.namespace.as_deref() == Some(namespace)
                        && l.metadata.name.as_deref() == Some(lock_name.as_str())
                });
                if let Some(named) = named {
                    events.push((named.clone(), event));
                }
            }
        }
        Ok((Outcome::Protecting, events))
    }

    async fn stamp_namespace(
        &self,
        key: &str,
        name: &str,
        locked: Option<String>,
    ) -> Result<(), Error> {
        let api = Api::<Namespace>::all(self.client.clone());
        let stamp_error = |source| Error::StampNamespace {
            name: name.to_owned(),
            source,
        };
        // Cleared by a repair in this line: read from the API server, as
        // the watch may still show the marker (or the Namespace deleted).
        let cleared = self.cleared.contains(key);
        let (live, watched) = if cleared {
            let live = api.get_metadata_opt(name).await.map_err(stamp_error)?;
            (live, None)
        } else {
            (None, self.views.namespaces.get(&ObjectRef::new(name)))
        };
        let cached = match (&live, &watched) {
            (Some(live), _) => Some(&live.metadata),
            (None, Some(watched)) => Some(&watched.metadata),
            (None, None) => None,
        };
        let patch = || decision::namespace_patch(name, locked.as_deref());
        self.stamp_locked(&api, key, name, cached, locked.as_deref(), patch)
            .await
            .map_err(stamp_error)?;
        if cleared {
            self.cleared.record(key, false);
        }
        Ok(())
    }

    /// Built-in kinds have no CRD, and nothing is written to one the CRD
    /// watch has not seen.
    async fn stamp_crd(
        &self,
        key: &str,
        kind: &ServedKind,
        locked: Option<String>,
    ) -> Result<(), Error> {
        let name = kind.crd_name();
        let cached = self.views.crds.get(&ObjectRef::new(&name));
        let api = Api::<CustomResourceDefinition>::all(self.client.clone());
        let patch = || decision::crd_patch(&name, locked.as_deref());
        let cached = cached.as_ref().map(|crd| &crd.metadata);
        self.stamp_locked(&api, key, &name, cached, locked.as_deref(), patch)
            .await
            .map_err(|source| Error::StampCrd {
                name: name.clone(),
                source,
            })
    }

    /// Brings the `core.navique.com/locked` marker of a Namespace or CRD,
    /// whose watch shows `cached` (`None`: not seen), to `locked` (see
    /// [`decision::SharedStamp`]). Run in the object's line of
    /// [`Coalesced`] writes, keyed `key`, which also orders the updates of
    /// its [`MarkedHere`] entry: marked before a marking write is sent
    /// (should the client see an error for a write the server made, the
    /// entry is there), forgotten only once a clear is known to be done.
    async fn stamp_locked<K>(
        &self,
        api: &Api<K>,
        key: &str,
        name: &str,
        cached: Option<&ObjectMeta>,
        locked: Option<&str>,
        patch: impl FnOnce() -> serde_json::Value,
    ) -> Result<(), kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
    {
        let marked_here = self.marked_here.contains(key);
        let cached = cached.map(decision::locked_of);
        match decision::shared_stamp(cached, locked, marked_here) {
            SharedStamp::Keep => return Ok(()),
            SharedStamp::Write => {
                if locked.is_some() {
                    self.marked_here.record(key, true);
                }
                apply_markers(api, name, patch(), locked.is_none()).await?;
            }
            // A merge patch, which a missing object refuses rather than
            // being created by it, as an apply would be; it needs only the
            // `patch` verb, which the controller holds on CRDs.
            SharedStamp::Confirm => {
                tracing::info!(object = key, "clearing a marker the watch may not show yet");
                match remove_markers(api, name).await {
                    Ok(()) => {}
                    Err(kube::Error::Api(status)) if status.is_not_found() => {}
                    Err(error) => return Err(error),
                }
            }
        }
        if locked.is_none() {
            self.marked_here.record(key, false);
        }
        tracing::debug!(object = key, locked = locked.unwrap_or(""), "stamped");
        Ok(())
    }

    /// Writes the status `outcome` calls for; whether it changed.
    async fn write_status(
        &self,
        lock: &Lock,
        outcome: &Outcome,
        suspension: Option<navique_api::core::LockSuspension>,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let before = lock.status.as_ref().and_then(|s| s.suspension.clone());
        let suspension_events = suspension::events(lock, before.as_ref(), suspension.as_ref());
        let overridden = suspension::overrides_outcome(suspension.as_ref(), outcome);
        let Some(status) = suspension::lock_status(lock, outcome, suspension, now) else {
            return Ok(false);
        };
        let event = (!overridden)
            .then(|| decision::outcome_event(lock, outcome))
            .flatten();
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
        for event in suspension_events.into_iter().chain(event) {
            self.record(lock, event).await;
        }
        Ok(true)
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
        remove_markers(api, name).await?;
    }
    Ok(())
}

/// Removes every marker with a JSON merge patch: whoever set them, and
/// without creating the object should it be gone (a 404 then).
async fn remove_markers<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let clear = Patch::Merge(decision::remove_markers());
    api.patch_metadata(name, &PatchParams::default(), &clear)
        .await?;
    Ok(())
}
