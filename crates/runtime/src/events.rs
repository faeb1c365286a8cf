//! Records `events.k8s.io/v1` Events, folding repeats into a series.
//!
//! kube's `Recorder` compares whole object references, resourceVersion
//! included, and leaves the note out of its series key: an Event that names
//! the object's resourceVersion then never joins a series, and a new note of
//! the same reason is folded into the earlier Event, whose note stays. This
//! one keys a series the way client-go's correlator does: the object's
//! identity (uid, never resourceVersion), the related object, type, reason,
//! action and note. Every Event carries the full reference it was given, so
//! `kubectl describe` (which matches the uid) shows it, and an earlier
//! object of the same name is never counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};

/// How long a recorded Event can still take repeats; kube-apiserver keeps
/// Events for an hour, and a repeat after this starts a new Event.
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// How often expired series are forgotten: sweeping on every Event would
/// cost O(n²) for n Events.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// An object's identity in a series key: resourceVersion left out.
type Identity = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn identity(reference: &ObjectReference) -> Identity {
    (
        reference.api_version.clone(),
        reference.kind.clone(),
        reference.namespace.clone(),
        reference.name.clone(),
        reference.uid.clone(),
    )
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: Identity,
    related: Option<Identity>,
    warning: bool,
    reason: String,
    action: String,
    note: Option<String>,
}

fn series_key(event: &Event, regarding: &ObjectReference) -> SeriesKey {
    SeriesKey {
        regarding: identity(regarding),
        related: event.secondary.as_ref().map(identity),
        warning: event.type_ == EventType::Warning,
        reason: event.reason.clone(),
        action: event.action.clone(),
        note: event.note.clone(),
    }
}

/// `object` as an Event names it: with its uid and resourceVersion (kube's
/// `object_ref` leaves the resourceVersion out).
pub fn regarding<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    ObjectReference {
        resource_version: object.meta().resource_version.clone(),
        ..object.object_ref(&())
    }
}

/// Publishes the Events of one controller.
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    controller: String,
    instance: String,
    recorded: Arc<Mutex<Series>>,
}

/// The recent series, by a hash of their key: only what a repeat needs,
/// neither the key nor the Event, so that thousands of objects' Events cost
/// little memory. Two keys of one hash (odds of 1 in 2⁶⁴ per pair) would
/// only count one's repeat in the other's series.
#[derive(Default)]
struct Series {
    by_key: HashMap<u64, Recorded>,
    swept: Option<Timestamp>,
}

struct Recorded {
    name: String,
    /// The series' count so far: 1 for a single Event.
    count: i32,
    last_seen: Timestamp,
}

impl Series {
    /// The Event to repeat `key` on and the series' next count, if recent.
    fn repeat(&mut self, key: &SeriesKey, now: Timestamp) -> Option<(String, i32)> {
        let key = hashed(key);
        if self.swept.is_none_or(|swept| swept + SWEEP_EVERY <= now) {
            self.by_key.retain(|_, e| e.last_seen + SERIES_TTL > now);
            self.swept = Some(now);
        }
        self.by_key
            .get(&key)
            .filter(|e| e.last_seen + SERIES_TTL > now)
            .map(|e| (e.name.clone(), e.count + 1))
    }

    fn remember(&mut self, key: &SeriesKey, event: &KubeEvent) {
        let Some(last_seen) = last_seen(event) else {
            return;
        };
        let recorded = Recorded {
            name: event.metadata.name.clone().unwrap_or_default(),
            count: event.series.as_ref().map_or(1, |s| s.count),
            last_seen,
        };
        self.by_key.insert(hashed(key), recorded);
    }
}

impl Recorder {
    /// Events reported by `controller` (`reportingController`), from this
    /// process (`reportingInstance`: the pod's name, or the host's).
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| controller.to_owned());
        Self {
            client,
            controller: controller.to_owned(),
            instance,
            recorded: Arc::default(),
        }
    }

    /// Records `event` about `regarding`: a new Event, or the next of the
    /// series of an identical one recorded recently.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        self.publish_at(event, regarding, Timestamp::now()).await
    }

    /// [`Recorder::publish`] for an Event that happened at `now`, earlier
    /// than it is published.
    async fn publish_at(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let key = series_key(event, regarding);
        // The cache is held only between calls, never across one, so a slow
        // API server does not hold every other Event of the controller.
        let earlier = self.series().repeat(&key, now);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
        if let Some((name, count)) = earlier {
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(now),
            };
            let patch = serde_json::json!({"series": series});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(patched) => {
                    self.series().remember(&key, &patched);
                    return Ok(());
                }
                // Expired or deleted: start again.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let new = self.event(event, regarding, namespace, now);
        let created = api.create(&PostParams::default(), &new).await?;
        self.series().remember(&key, &created);
        Ok(())
    }

    fn series(&self) -> std::sync::MutexGuard<'_, Series> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn event(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        namespace: &str,
        now: Timestamp,
    ) -> KubeEvent {
        let name = regarding.name.as_deref().unwrap_or("event");
        KubeEvent {
            metadata: ObjectMeta {
                // kube-apiserver's own form: the object's name and a
                // unique suffix.
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            reason: Some(event.reason.clone()),
            action: Some(event.action.clone()),
            note: event.note.clone(),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        }
    }
}

/// Events published in the background, a few at a time: a burst of them (a
/// thousand Locks turning active) then waits behind the writes its objects
/// wait for, rather than competing with them for the API server. client-go's
/// event broadcaster is asynchronous for the same reason. One object's Events
/// go through one lane, in order, so that its series are never raced.
///
/// Events also give way to the work a [`Busy`] counts: an Event
/// waits while any of it is in flight, until the work is idle, its lane is
/// half full, or it has waited [`MAX_DEFERRAL`]. A burst of reconciles then
/// writes only what protects, and its Events follow it.
#[derive(Clone)]
pub struct Queued {
    lanes: Arc<[Lane]>,
}

struct Lane {
    sender: tokio::sync::mpsc::Sender<Pending>,
    /// Told when the lane is half full, so that a deferred Event goes.
    pressed: Arc<tokio::sync::Notify>,
}

/// Events in flight at once. One at a time, a burst of ten thousand Locks'
/// Events took a minute to publish and held the reconciles waiting on it.
const LANES: usize = 8;

/// The longest an Event gives way to busy work.
pub const MAX_DEFERRAL: Duration = Duration::from_secs(30);

/// An Event waiting in its lane: what [`Recorder::publish`] needs, in few
/// allocations, since a burst holds thousands of them.
struct Pending {
    warning: bool,
    reason: Box<str>,
    action: Box<str>,
    note: Option<Box<str>>,
    secondary: Option<Box<ObjectReference>>,
    regarding: Reference,
    /// When it happened, its time as published.
    at: Timestamp,
    /// When it stops giving way.
    deadline: tokio::time::Instant,
}

/// An object reference's fields in one string, separated by newlines
/// (which no name, kind, uid, version or field path that the controllers
/// write holds): absent and empty fields are both empty, as the API server
/// stores them.
struct Reference(Box<str>);

impl Reference {
    fn of(reference: &ObjectReference) -> Self {
        let fields = [
            &reference.api_version,
            &reference.kind,
            &reference.namespace,
            &reference.name,
            &reference.uid,
            &reference.resource_version,
            &reference.field_path,
        ];
        let joined: Vec<&str> = fields
            .iter()
            .map(|field| field.as_deref().unwrap_or_default())
            .collect();
        debug_assert!(
            joined.iter().all(|field| !field.contains('\n')),
            "{joined:?}"
        );
        Self(joined.join("\n").into())
    }

    fn object_reference(&self) -> ObjectReference {
        let mut fields = self
            .0
            .split('\n')
            .map(|field| (!field.is_empty()).then(|| field.to_owned()));
        let mut next = || fields.next().flatten();
        ObjectReference {
            api_version: next(),
            kind: next(),
            namespace: next(),
            name: next(),
            uid: next(),
            resource_version: next(),
            field_path: next(),
        }
    }
}

impl Pending {
    fn new(event: Event, regarding: &ObjectReference) -> Self {
        Self {
            warning: event.type_ == EventType::Warning,
            reason: event.reason.into(),
            action: event.action.into(),
            note: event.note.map(Into::into),
            secondary: event.secondary.map(Box::new),
            regarding: Reference::of(regarding),
            at: Timestamp::now(),
            deadline: tokio::time::Instant::now() + MAX_DEFERRAL,
        }
    }

    fn event(self) -> (Event, ObjectReference) {
        let event = Event {
            type_: if self.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: self.reason.into(),
            note: self.note.map(Into::into),
            action: self.action.into(),
            secondary: self.secondary.map(|s| *s),
        };
        (event, self.regarding.object_reference())
    }
}

/// Work in flight that queued Events give way to (a controller's
/// reconciles): each holds a [`Working`] while it runs.
#[derive(Clone, Default)]
pub struct Busy(Arc<BusyState>);

#[derive(Default)]
struct BusyState {
    in_flight: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// One piece of work in flight, until dropped.
pub struct Working(Arc<BusyState>);

impl Busy {
    pub fn enter(&self) -> Working {
        self.0
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Working(self.0.clone())
    }

    /// Resolves once no work is in flight.
    async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.0.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        if self
            .0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.0.idle.notify_waiters();
        }
    }
}

impl Queued {
    /// The queue of `capacity` Events, and the task publishing them with
    /// `recorder`, which ends once every copy of the queue is dropped and
    /// what it held is published. Events give way to `busy`'s work.
    pub fn new(
        recorder: Recorder,
        capacity: usize,
        busy: Busy,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (lanes, receivers): (Vec<_>, Vec<_>) = (0..LANES)
            .map(|_| {
                let (sender, receiver) = tokio::sync::mpsc::channel(capacity.div_ceil(LANES));
                let pressed = Arc::new(tokio::sync::Notify::new());
                let lane = Lane {
                    sender,
                    pressed: pressed.clone(),
                };
                (lane, (receiver, pressed))
            })
            .unzip();
        let publish = async move {
            let (recorder, busy) = (&recorder, &busy);
            // Unordered, so that a wake-up polls its own lane only (a
            // small `join_all` polls every lane on each).
            let mut lanes: futures::stream::FuturesUnordered<_> = receivers
                .into_iter()
                .map(|(mut receiver, pressed)| async move {
                    while let Some(pending) = receiver.recv().await {
                        give_way(&pending, &receiver, &pressed, busy).await;
                        let at = pending.at;
                        let (event, regarding) = pending.event();
                        if let Err(e) = recorder.publish_at(&event, &regarding, at).await {
                            tracing::warn!(
                                regarding = ?regarding.name,
                                reason = event.reason,
                                error = %crate::one_line(&e),
                                "cannot record the event"
                            );
                        }
                    }
                })
                .collect();
            while futures::StreamExt::next(&mut lanes).await.is_some() {}
        };
        let lanes = lanes.into();
        (Self { lanes }, publish)
    }

    /// Queues `event` about `regarding`; waits only while its lane is full.
    pub async fn publish(&self, event: Event, regarding: ObjectReference) {
        let lane = &self.lanes[lane(&regarding, self.lanes.len())];
        // Closed only once the publishing task is gone, at shutdown.
        let _ = lane.sender.send(Pending::new(event, &regarding)).await;
        if half_full(lane.sender.capacity(), lane.sender.max_capacity()) {
            lane.pressed.notify_one();
        }
    }
}

/// Waits until `pending` may go: `busy` idle, its lane half full, or its
/// time to wait over.
async fn give_way(
    pending: &Pending,
    receiver: &tokio::sync::mpsc::Receiver<Pending>,
    pressed: &tokio::sync::Notify,
    busy: &Busy,
) {
    // A wake-up from `pressed` may be a permit a sender left while the
    // lane was half full earlier: the lane is looked at again.
    while !half_full(receiver.capacity(), receiver.max_capacity()) {
        tokio::select! {
            () = busy.idle() => return,
            () = pressed.notified() => {}
            () = tokio::time::sleep_until(pending.deadline) => return,
        }
    }
}

/// Whether a lane of `max` Events with room for `free` more is half full.
fn half_full(free: usize, max: usize) -> bool {
    free * 2 <= max
}

/// The lane of an object's Events: by its identity, never its
/// resourceVersion, so that all of them keep one order.
fn lane(regarding: &ObjectReference, lanes: usize) -> usize {
    (hashed(&identity(regarding)) % lanes as u64) as usize
}

fn hashed(key: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key)
}

fn last_seen(event: &KubeEvent) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(uid: &str, resource_version: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("core.navique.com/v1alpha1".into()),
            kind: Some("Stack".into()),
            namespace: Some("team".into()),
            name: Some("web".into()),
            uid: Some(uid.into()),
            resource_version: Some(resource_version.into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_objects_events_keep_one_lane_and_objects_spread_over_the_lanes() {
        assert_eq!(
            lane(&reference("a", "1"), LANES),
            lane(&reference("a", "2"), LANES),
            "a new resourceVersion is the same object"
        );
        let used: std::collections::HashSet<usize> = (0..64)
            .map(|i| lane(&reference(&format!("uid-{i}"), "1"), LANES))
            .collect();
        assert!(used.len() > LANES / 2, "{used:?}");
    }

    fn pending(deadline: tokio::time::Instant) -> Pending {
        Pending {
            deadline,
            ..Pending::new(
                event("Protecting", "protecting Stack web"),
                &reference("u", "1"),
            )
        }
    }

    fn later() -> tokio::time::Instant {
        tokio::time::Instant::now() + MAX_DEFERRAL
    }

    #[test]
    fn a_queued_event_keeps_its_reference_and_fields() {
        let regarding = ObjectReference {
            field_path: Some("spec.targetRef".into()),
            ..reference("uid-1", "42")
        };
        let warning = Event {
            type_: EventType::Warning,
            secondary: Some(reference("uid-2", "7")),
            ..event("MissingReference", "Stack web not found in namespace team")
        };
        let (event, back) = Pending::new(warning, &regarding).event();
        assert_eq!(back, regarding);
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(event.reason, "MissingReference");
        assert_eq!(event.action, "Reconcile");
        assert_eq!(
            event.note.as_deref(),
            Some("Stack web not found in namespace team")
        );
        assert_eq!(event.secondary, Some(reference("uid-2", "7")));
        // Absent fields stay absent.
        let bare = ObjectReference {
            name: Some("web".into()),
            ..Default::default()
        };
        assert_eq!(Reference::of(&bare).object_reference(), bare);
    }

    /// Whether `give` resolves within `wait`.
    async fn goes_within(give: impl std::future::Future<Output = ()>, wait: Duration) -> bool {
        tokio::time::timeout(wait, give).await.is_ok()
    }

    #[tokio::test]
    async fn an_event_waits_for_the_reconciles_in_flight_then_goes() {
        let busy = Busy::default();
        let pressed = tokio::sync::Notify::new();
        let (_sender, receiver) = tokio::sync::mpsc::channel::<Pending>(8);
        let event = pending(later());
        let (first, second) = (busy.enter(), busy.enter());
        let give = give_way(&event, &receiver, &pressed, &busy);
        tokio::pin!(give);
        assert!(!goes_within(give.as_mut(), Duration::from_millis(100)).await);
        drop(first);
        assert!(
            !goes_within(give.as_mut(), Duration::from_millis(100)).await,
            "one reconcile is still in flight"
        );
        drop(second);
        assert!(goes_within(give, Duration::from_secs(10)).await);
        // Nothing in flight: at once.
        let give = give_way(&event, &receiver, &pressed, &busy);
        assert!(goes_within(give, Duration::from_secs(10)).await);
    }

    #[tokio::test]
    async fn an_event_goes_while_busy_once_its_lane_is_half_full_or_its_wait_is_over() {
        let busy = Busy::default();
        let _working = busy.enter();
        let pressed = tokio::sync::Notify::new();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Pending>(8);
        let event = pending(later());
        for _ in 0..3 {
            sender.try_send(pending(later())).unwrap();
        }
        let give = give_way(&event, &receiver, &pressed, &busy);
        assert!(
            !goes_within(give, Duration::from_millis(100)).await,
            "3 of 8 queued"
        );
        sender.try_send(pending(later())).unwrap();
        let give = give_way(&event, &receiver, &pressed, &busy);
        assert!(
            goes_within(give, Duration::from_secs(10)).await,
            "4 of 8 queued"
        );

        // Told by a sender that filled its lane while the Event waited; a
        // telling left from earlier, with the lane no longer half full,
        // does not count.
        let (sender, lane) = tokio::sync::mpsc::channel::<Pending>(8);
        pressed.notify_one();
        let give = give_way(&event, &lane, &pressed, &busy);
        tokio::pin!(give);
        assert!(!goes_within(give.as_mut(), Duration::from_millis(100)).await);
        for _ in 0..4 {
            sender.try_send(pending(later())).unwrap();
        }
        pressed.notify_one();
        assert!(goes_within(give, Duration::from_secs(10)).await);

        // Past its deadline.
        let (_sender, empty) = tokio::sync::mpsc::channel::<Pending>(8);
        let overdue = pending(tokio::time::Instant::now());
        let give = give_way(&overdue, &empty, &pressed, &busy);
        assert!(goes_within(give, Duration::from_secs(10)).await);
    }

    /// The lanes end to end, with a recorder whose API server refuses
    /// every connection: an Event queued while a reconcile runs waits
    /// (publishing it would fail at once), and once the queue is dropped
    /// and the reconcile done, the lanes publish what they held and end.
    #[tokio::test]
    async fn the_lanes_hold_events_while_busy_and_end_once_dropped_and_idle() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = refused.local_addr().unwrap();
        drop(refused);
        let config = kube::Config::new(format!("http://{address}").parse().unwrap());
        let recorder = Recorder::new(kube::Client::try_from(config).unwrap(), "test");
        let busy = Busy::default();
        let working = busy.enter();
        let (queued, publish) = Queued::new(recorder, 64, busy.clone());
        queued
            .publish(
                event("Protecting", "protecting Stack web"),
                reference("u", "1"),
            )
            .await;
        drop(queued);
        tokio::pin!(publish);
        assert!(
            !goes_within(publish.as_mut(), Duration::from_millis(200)).await,
            "the Event gives way to the reconcile"
        );
        drop(working);
        assert!(goes_within(publish, Duration::from_secs(10)).await);
    }

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn recorded(name: &str, count: Option<i32>, at: Timestamp) -> KubeEvent {
        KubeEvent {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            event_time: Some(MicroTime(at)),
            series: count.map(|count| EventSeries {
                count,
                last_observed_time: MicroTime(at),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_repeat_continues_a_recent_series_and_an_old_one_starts_again() {
        let key = series_key(
            &event("Protecting", "protecting Stack web"),
            &reference("u", "1"),
        );
        let other = series_key(
            &event("Protecting", "protecting Stack db"),
            &reference("u", "1"),
        );
        let start = Timestamp::UNIX_EPOCH;
        let mut series = Series::default();
        assert_eq!(series.repeat(&key, start), None);
        series.remember(&key, &recorded("web.1", None, start));
        assert_eq!(series.repeat(&key, start), Some(("web.1".into(), 2)));
        assert_eq!(series.repeat(&other, start), None);
        let later = start + Duration::from_secs(10);
        series.remember(&key, &recorded("web.1", Some(2), later));
        assert_eq!(series.repeat(&key, later), Some(("web.1".into(), 3)));
        // Past the TTL of its last repeat, a series is over, and then swept.
        let expired = later + SERIES_TTL;
        assert_eq!(series.repeat(&key, expired), None);
        assert!(series.by_key.is_empty());
    }

    #[test]
    fn a_series_is_one_object_one_reason_and_one_note_at_any_resource_version() {
        let prune = event("WaitingForApproval", "waiting for approval to prune x");
        assert_eq!(
            series_key(&prune, &reference("u1", "10")),
            series_key(&prune, &reference("u1", "11")),
            "a new resourceVersion continues the series"
        );
        assert_ne!(
            series_key(&prune, &reference("u1", "10")),
            series_key(&prune, &reference("u2", "10")),
            "an earlier object of the same name is another series"
        );
        let delete = event("WaitingForApproval", "waiting for approval to delete x");
        assert_ne!(
            series_key(&prune, &reference("u1", "10")),
            series_key(&delete, &reference("u1", "10")),
            "another note is another Event"
        );
    }
}
