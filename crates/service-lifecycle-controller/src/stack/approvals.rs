//! Pending deletion approvals: the leader's record of what waits, the
//! `ApprovalEvents` gRPC service that lists and streams it (the
//! notifications are in [`super::notifications`]).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::jiff::Timestamp;
use navique_api::core::Approver;
use navique_api::grpc::approvals::v1::approval_events_server::{
    ApprovalEvents, ApprovalEventsServer,
};
use navique_api::grpc::approvals::v1::{
    self as proto, ApprovalEvent, EventType, ListPendingApprovalsRequest,
    ListPendingApprovalsResponse, Operation, PendingApproval, ResourceRef, StackRef,
    StreamApprovalEventsRequest,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};

use super::access::{Access, Authenticated, denied, namespace_of, valid_name};
use super::plan::ResourceKey;

/// Events kept for subscribers that fall behind; older ones are dropped
/// (the subscriber is told, and can list again).
const EVENT_BUFFER: usize = 1024;

type StackKey = (String, String);

/// What waits for approval, per Stack, and the event stream.
#[derive(Clone)]
pub struct Approvals {
    pending: Arc<Mutex<BTreeMap<StackKey, BTreeMap<ResourceKey, PendingApproval>>>>,
    events: broadcast::Sender<ApprovalEvent>,
    gauge: Gauge,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            pending: Arc::default(),
            events: broadcast::channel(EVENT_BUFFER).0,
            gauge: Gauge::default(),
        }
    }
}

/// A removal that waits, as the controller sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub key: ResourceKey,
    pub uid: String,
    pub operation: Operation,
    /// Who approved it so far, while it waits.
    pub approved_by: Vec<Approver>,
    /// Distinct approvers it needs.
    pub required: u32,
    /// When it started to wait (its row's `waitingSince`).
    pub since: Timestamp,
}

fn timestamp(time: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: time.as_second(),
        nanos: time.subsec_nanosecond(),
    }
}

fn approval(stack: &StackKey, waiting: &Waiting) -> PendingApproval {
    PendingApproval {
        stack: Some(StackRef {
            namespace: stack.0.clone(),
            name: stack.1.clone(),
        }),
        resource: Some(ResourceRef {
            group: waiting.key.group.clone(),
            version: waiting.key.version.clone(),
            kind: waiting.key.kind.clone(),
            namespace: waiting.key.namespace.clone(),
            name: waiting.key.name.clone(),
            uid: waiting.uid.clone(),
        }),
        operation: waiting.operation as i32,
        since: Some(timestamp(waiting.since)),
        approved_by: waiting
            .approved_by
            .iter()
            .map(|a| proto::Approver {
                user: a.user.clone(),
                time: Some(timestamp(a.time.0)),
            })
            .collect(),
        approvals_required: waiting.required,
    }
}

impl Waiting {
    /// The removal as the gRPC service and the notifications show it, of
    /// Stack `stack` (in the resource's namespace).
    pub fn pending(&self, stack: &str) -> PendingApproval {
        approval(&(self.key.namespace.clone(), stack.to_owned()), self)
    }
}

impl Approvals {
    /// The gauge of pending approvals, for the metrics registry.
    pub fn gauge(&self) -> Gauge {
        self.gauge.clone()
    }

    /// `oldest_pending_approval_seconds`, measured at each scrape.
    pub fn oldest_age(&self) -> OldestPendingAge {
        OldestPendingAge(self.pending.clone())
    }

    /// Records what waits in Stack `namespace/name` now. Approvals new to
    /// this process are added; those in `announced` (already waiting in the
    /// Stack's stored status, e.g. before a restart) are not announced
    /// again. Returns the approvals announced now: an
    /// `APPROVAL_REQUIRED` event went out for each.
    pub fn update(
        &self,
        namespace: &str,
        name: &str,
        waiting: &[Waiting],
        announced: impl Fn(&ResourceKey) -> bool,
    ) -> Vec<PendingApproval> {
        let stack = (namespace.to_owned(), name.to_owned());
        let now = Timestamp::now();
        let mut all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let previous = all.remove(&stack).unwrap_or_default();
        let mut current = BTreeMap::new();
        let mut new = Vec::new();
        for item in waiting {
            let known = previous.get(&item.key).is_some_and(|p| {
                p.operation == item.operation as i32
                    && p.resource.as_ref().is_some_and(|r| r.uid == item.uid)
            });
            // Who approved so far may have changed; since when it waits is
            // the Stack's status's.
            let pending = approval(&stack, item);
            if !known && !announced(&item.key) {
                self.send(EventType::ApprovalRequired, &pending, now);
                new.push(pending.clone());
            }
            current.insert(item.key.clone(), pending);
        }
        if !current.is_empty() {
            all.insert(stack, current);
        }
        self.gauge
            .set(i64::try_from(all.values().map(BTreeMap::len).sum::<usize>()).unwrap_or(i64::MAX));
        new
    }

    /// The removal of an approved resource ran: APPROVED, then DELETED.
    pub fn approved_removal(&self, namespace: &str, name: &str, removed: &Waiting) {
        let stack = (namespace.to_owned(), name.to_owned());
        let now = Timestamp::now();
        let pending = approval(&stack, removed);
        self.send(EventType::Approved, &pending, now);
        self.send(EventType::Deleted, &pending, now);
    }

    /// The Stack is gone: nothing of it waits any more.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.update(namespace, name, &[], |_| true);
    }

    fn send(&self, type_: EventType, pending: &PendingApproval, now: Timestamp) {
        // No subscriber is not an error.
        let _ = self.events.send(ApprovalEvent {
            r#type: type_ as i32,
            approval: Some(pending.clone()),
            time: Some(timestamp(now)),
        });
    }

    /// Pending approvals in `namespace` (all when empty), of Stack `stack`
    /// (all when empty).
    pub fn list(&self, namespace: &str, stack: &str) -> Vec<PendingApproval> {
        let all = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|((ns, name), _)| {
                (namespace.is_empty() || ns == namespace) && (stack.is_empty() || name == stack)
            })
            .flat_map(|(_, pending)| pending.values().cloned())
            .collect()
    }

    /// The ApprovalEvents service, each call of which `access` checks.
    pub fn into_server(self, access: Access) -> ApprovalEventsServer<ApprovalService> {
        ApprovalEventsServer::new(ApprovalService {
            approvals: self,
            access,
        })
    }
}

/// How long the oldest pending approval has waited, in seconds (0 when none
/// waits): since this process saw it start to wait, so a restart or a new
/// leader counts again from then.
#[derive(Debug)]
pub struct OldestPendingAge(Arc<Mutex<BTreeMap<StackKey, BTreeMap<ResourceKey, PendingApproval>>>>);

impl OldestPendingAge {
    fn seconds(&self, now: Timestamp) -> f64 {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.values()
            .flat_map(BTreeMap::values)
            .filter_map(|p| p.since.as_ref())
            .map(|since| since.seconds as f64 + f64::from(since.nanos) / 1e9)
            .reduce(f64::min)
            .map_or(0.0, |oldest| {
                (now.as_duration().as_secs_f64() - oldest).max(0.0)
            })
    }
}

impl Collector for OldestPendingAge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = ConstGauge::new(self.seconds(Timestamp::now()));
        let metric = encoder.encode_descriptor(
            "oldest_pending_approval_seconds",
            "How long the oldest prune or delete of a Stack resource has waited for approval",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

/// `ApprovalEvents`: the pending approvals, and their events, of the
/// namespaces whose Stacks the caller may list (see [`super::access`]).
#[derive(Clone)]
pub struct ApprovalService {
    approvals: Approvals,
    access: Access,
}

type EventStream = Pin<Box<dyn Stream<Item = Result<ApprovalEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ApprovalEvents for ApprovalService {
    async fn list_pending_approvals(
        &self,
        request: Request<ListPendingApprovalsRequest>,
    ) -> Result<Response<ListPendingApprovalsResponse>, Status> {
        let who = self.access.authenticate(request.metadata()).await?;
        let request = request.into_inner();
        valid_name("namespace", &request.namespace, true)?;
        valid_name("stack", &request.stack, false)?;
        if !request.namespace.is_empty() {
            self.access.require(&who, &request.namespace).await?;
        }
        let pending = self.approvals.list(&request.namespace, &request.stack);
        Ok(Response::new(ListPendingApprovalsResponse {
            approvals: self.access.visible(&who, pending).await?,
        }))
    }

    type StreamApprovalEventsStream = EventStream;

    async fn stream_approval_events(
        &self,
        request: Request<StreamApprovalEventsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let who = self.access.authenticate(request.metadata()).await?;
        let request = request.into_inner();
        valid_name("namespace", &request.namespace, true)?;
        if !request.namespace.is_empty() {
            self.access.require(&who, &request.namespace).await?;
        }
        // Subscribe before listing, so nothing falls between the two.
        let live = BroadcastStream::new(self.approvals.events.subscribe());
        let existing = if request.include_existing {
            let now = timestamp(Timestamp::now());
            let pending = self.approvals.list(&request.namespace, "");
            self.access
                .visible(&who, pending)
                .await?
                .into_iter()
                .map(|approval| ApprovalEvent {
                    r#type: EventType::ApprovalRequired as i32,
                    approval: Some(approval),
                    time: Some(now),
                })
                .collect()
        } else {
            Vec::new()
        };
        let follow = Follow {
            live,
            access: self.access.clone(),
            who,
            namespace: request.namespace,
            ended: false,
        };
        let stream = futures::stream::iter(existing.into_iter().map(Ok)).chain(follow.events());
        Ok(Response::new(Box::pin(stream)))
    }
}

/// A subscriber's live events: those of its namespace (every namespace when
/// empty) that it may see, checked as each arrives. Losing the right to one
/// namespace it asked for, or a check that cannot be made, ends the stream
/// with the refusal.
struct Follow {
    live: BroadcastStream<ApprovalEvent>,
    access: Access,
    who: Authenticated,
    namespace: String,
    ended: bool,
}

impl Follow {
    fn events(self) -> impl Stream<Item = Result<ApprovalEvent, Status>> + Send {
        futures::stream::unfold(self, |mut follow| async move {
            if follow.ended {
                return None;
            }
            loop {
                let event = match follow.live.next().await? {
                    Ok(event) => event,
                    Err(lagged) => {
                        let status = Status::data_loss(format!(
                            "{lagged}; list the pending approvals again"
                        ));
                        return Some((Err(status), follow));
                    }
                };
                let Some(namespace) = event.approval.as_ref().and_then(namespace_of) else {
                    continue;
                };
                if !follow.namespace.is_empty() && namespace != follow.namespace {
                    continue;
                }
                let refusal = match follow.access.may_see(&follow.who, namespace).await {
                    Ok(true) => return Some((Ok(event), follow)),
                    Ok(false) if follow.namespace.is_empty() => continue,
                    Ok(false) => denied(&follow.who, namespace),
                    Err(status) => status,
                };
                follow.ended = true;
                return Some((Err(refusal), follow));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    fn waiting(name: &str, operation: Operation) -> Waiting {
        Waiting {
            key: ResourceKey {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "team".into(),
                name: name.into(),
            },
            uid: format!("uid-{name}"),
            operation,
            approved_by: Vec::new(),
            required: 1,
            since: "2026-12-01T10:00:00Z".parse().unwrap(),
        }
    }

    fn types(events: &mut broadcast::Receiver<ApprovalEvent>) -> Vec<(EventType, String)> {
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            let type_ = event.r#type();
            let name = event.approval.unwrap().resource.unwrap().name;
            seen.push((type_, name));
        }
        seen
    }

    #[test]
    fn each_wait_is_announced_once_and_counted() {
        let approvals = Approvals::default();
        let mut events = approvals.events.subscribe();
        let a = waiting("a", Operation::Prune);
        let new = approvals.update("team", "web", std::slice::from_ref(&a), |_| false);
        assert_eq!(new.len(), 1);
        assert_eq!(
            approvals.update("team", "web", std::slice::from_ref(&a), |_| false),
            []
        );
        assert_eq!(approvals.gauge.get(), 1);
        assert_eq!(
            types(&mut events),
            [(EventType::ApprovalRequired, "a".to_owned())]
        );

        approvals.approved_removal("team", "web", &a);
        approvals.update("team", "web", &[], |_| false);
        assert_eq!(approvals.gauge.get(), 0);
        assert_eq!(
            types(&mut events),
            [
                (EventType::Approved, "a".to_owned()),
                (EventType::Deleted, "a".to_owned())
            ]
        );
    }

    /// The age is counted from when each removal started to wait, as the
    /// Stack's status records it, so a restarted controller (or a new
    /// leader) reports the same.
    #[test]
    fn the_oldest_wait_is_measured_from_the_stacks_status_at_each_scrape() {
        let at = |t: &str| -> Timestamp { t.parse().unwrap() };
        let a = waiting("a", Operation::Prune);
        let b = Waiting {
            since: at("2026-12-01T10:05:00Z"),
            ..waiting("b", Operation::Delete)
        };
        for restarted in [false, true] {
            let approvals = Approvals::default();
            let oldest = approvals.oldest_age();
            assert_eq!(oldest.seconds(Timestamp::now()), 0.0, "nothing waits");
            approvals.update("team", "web", std::slice::from_ref(&a), |_| restarted);
            approvals.update("team", "api", std::slice::from_ref(&b), |_| restarted);
            assert_eq!(oldest.seconds(at("2026-12-01T10:06:30Z")), 390.0);
            let listed = approvals.list("team", "web");
            assert_eq!(
                listed[0].since,
                Some(prost_types::Timestamp {
                    seconds: at("2026-12-01T10:00:00Z").as_second(),
                    nanos: 0
                })
            );
            approvals.forget("team", "web");
            assert_eq!(oldest.seconds(at("2026-12-01T10:06:30Z")), 90.0);
            approvals.forget("team", "api");
            assert_eq!(oldest.seconds(at("2026-12-01T10:06:30Z")), 0.0);
        }
    }

    #[test]
    fn waits_already_in_the_stored_status_are_not_announced_again() {
        let approvals = Approvals::default();
        let mut events = approvals.events.subscribe();
        let new = approvals.update("team", "web", &[waiting("a", Operation::Delete)], |_| true);
        assert_eq!(new, []);
        assert_eq!(types(&mut events), []);
        assert_eq!(approvals.list("team", "web").len(), 1, "still listed");
        assert_eq!(approvals.list("other", "").len(), 0);
    }

    fn request<T>(message: T, token: Option<&str>) -> Request<T> {
        let mut request = Request::new(message);
        *request.metadata_mut() =
            super::super::access::tests::metadata(token.map(|t| format!("Bearer {t}")).as_deref());
        request
    }

    fn list_request(namespace: &str, token: Option<&str>) -> Request<ListPendingApprovalsRequest> {
        let message = ListPendingApprovalsRequest {
            namespace: namespace.into(),
            stack: String::new(),
        };
        request(message, token)
    }

    fn stack_namespaces(approvals: &[PendingApproval]) -> Vec<String> {
        approvals
            .iter()
            .map(|a| a.stack.as_ref().unwrap().namespace.clone())
            .collect()
    }

    #[tokio::test]
    async fn each_call_sees_only_the_namespaces_its_caller_may_list() {
        let approvals = Approvals::default();
        for ns in ["team-a", "team-b"] {
            approvals.update(ns, "web", &[waiting("a", Operation::Prune)], |_| false);
        }
        let service = ApprovalService {
            approvals: approvals.clone(),
            access: Access::with_reviews(super::super::access::tests::fake()),
        };
        let code = async |request| {
            service
                .list_pending_approvals(request)
                .await
                .map(|_| ())
                .unwrap_err()
                .code()
        };
        assert_eq!(code(list_request("", None)).await, Code::Unauthenticated);
        assert_eq!(
            code(list_request("", Some("bogus"))).await,
            Code::Unauthenticated
        );
        assert_eq!(
            code(list_request("team-b", Some("carol-token"))).await,
            Code::PermissionDenied
        );
        assert_eq!(
            code(list_request("team-a", Some("dave-token"))).await,
            Code::PermissionDenied
        );
        assert_eq!(
            code(list_request("Team-A", Some("carol-token"))).await,
            Code::InvalidArgument
        );
        let stack = ListPendingApprovalsRequest {
            namespace: "team-a".into(),
            stack: "web/x".into(),
        };
        let invalid = service
            .list_pending_approvals(request(stack, Some("carol-token")))
            .await
            .unwrap_err();
        assert!(
            invalid
                .message()
                .starts_with("stack: Invalid value: \"web/x\"")
        );
        let list = async |namespace, token| {
            let response = service
                .list_pending_approvals(list_request(namespace, Some(token)))
                .await
                .unwrap();
            stack_namespaces(&response.into_inner().approvals)
        };
        assert_eq!(list("", "carol-token").await, ["team-a"]);
        assert_eq!(list("team-a", "carol-token").await, ["team-a"]);
        assert_eq!(list("", "dave-token").await, Vec::<String>::new());

        // Streams: the existing approvals, then live events, of team-a only.
        let stream = StreamApprovalEventsRequest {
            namespace: String::new(),
            include_existing: true,
        };
        let mut events = service
            .stream_approval_events(request(stream.clone(), Some("carol-token")))
            .await
            .unwrap()
            .into_inner();
        let refused = service
            .stream_approval_events(request(
                StreamApprovalEventsRequest {
                    namespace: "team-b".into(),
                    include_existing: false,
                },
                Some("carol-token"),
            ))
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied);
        let next = async |events: &mut EventStream| {
            let event = events.next().await.unwrap().unwrap();
            event.approval.unwrap().stack.unwrap().namespace
        };
        assert_eq!(next(&mut events).await, "team-a");
        approvals.update("team-b", "web", &[waiting("b", Operation::Prune)], |_| {
            false
        });
        approvals.update("team-a", "web", &[waiting("b", Operation::Prune)], |_| {
            false
        });
        assert_eq!(next(&mut events).await, "team-a");
        let unauthenticated = service
            .stream_approval_events(request(stream, None))
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(unauthenticated.code(), Code::Unauthenticated);
    }
}
