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
        let now = Timestamp::now();
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
#[derive(Clone)]
pub struct Queued {
    lanes: Arc<[tokio::sync::mpsc::Sender<(Event, ObjectReference)>]>,
}

/// Events in flight at once. One at a time, a burst of ten thousand Locks'
/// Events took a minute to publish and held the reconciles waiting on it.
const LANES: usize = 8;

impl Queued {
    /// The queue of `capacity` Events, and the task publishing them with
    /// `recorder`, which ends once every copy of the queue is dropped and
    /// what it held is published.
    pub fn new(
        recorder: Recorder,
        capacity: usize,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (lanes, receivers): (Vec<_>, Vec<_>) = (0..LANES)
            .map(|_| tokio::sync::mpsc::channel(capacity.div_ceil(LANES)))
            .unzip();
        let publish = async move {
            let recorder = &recorder;
            futures::future::join_all(receivers.into_iter().map(|mut receiver| async move {
                while let Some((event, regarding)) = receiver.recv().await {
                    let event: Event = event;
                    if let Err(e) = recorder.publish(&event, &regarding).await {
                        tracing::warn!(
                            regarding = ?regarding.name,
                            reason = event.reason,
                            error = %crate::one_line(&e),
                            "cannot record the event"
                        );
                    }
                }
            }))
            .await;
        };
        let lanes = lanes.into();
        (Self { lanes }, publish)
    }

    /// Queues `event` about `regarding`; waits only while its lane is full.
    pub async fn publish(&self, event: Event, regarding: ObjectReference) {
        let lane = &self.lanes[lane(&regarding, self.lanes.len())];
        // Closed only once the publishing task is gone, at shutdown.
        let _ = lane.send((event, regarding)).await;
    }
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
