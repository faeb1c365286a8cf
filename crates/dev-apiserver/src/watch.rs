//! Watches: a stream of newline-delimited JSON events from a
//! resourceVersion on, with initial ADDED events when none is given,
//! selectors applied to both sides of each change, bookmarks, timeouts, and
//! an ERROR event with 410 Expired when the version was compacted or the
//! watcher fell too far behind.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::request::{Req, Target};
use crate::resources::{served, served_ref};
use crate::respond::{Body, full, include_object, printer};
use crate::selectors::Filter;
use crate::state::State;
use crate::status::ApiError;
use crate::store::{Change, EventType, StorageKey};
use crate::table;

/// Default watch length when the client sets no timeout, as kube-apiserver
/// picks between 30 and 60 minutes.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Watcher {
    storage: StorageKey,
    namespace: Option<String>,
    filter: Filter,
    target_rt: Arc<crate::resources::ResourceType>,
    table: Option<String>,
    /// Table column definitions go with the first event only.
    headers_sent: std::sync::atomic::AtomicBool,
    sender: mpsc::Sender<Bytes>,
}

impl Watcher {
    /// Sends one event; false when the client has gone.
    async fn send(&self, kind: &str, object: &Value) -> bool {
        let table;
        let object = match &self.table {
            Some(include) if kind != "ERROR" && kind != "BOOKMARK" => {
                table = table::watch_event_table(
                    &printer(&self.target_rt),
                    object,
                    include,
                    !self
                        .headers_sent
                        .swap(true, std::sync::atomic::Ordering::Relaxed),
                    jiff::Timestamp::now(),
                );
                &table
            }
            _ => object,
        };
        let line = crate::gofmt::watch_event_json(kind, object);
        self.sender.send(Bytes::from(line)).await.is_ok()
    }

    /// How a change looks through this watch's selectors: an object that
    /// starts matching is ADDED, one that stops matching is DELETED.
    fn view<'c>(&self, change: &'c Change) -> Option<(&'static str, Cow<'c, Value>)> {
        if change.storage != self.storage
            || self
                .namespace
                .as_ref()
                .is_some_and(|ns| *ns != change.namespace)
        {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let before = change
            .previous
            .as_ref()
            .is_some_and(|p| self.filter.matches(p));
        let kind = match (change.kind, before, now) {
            (EventType::Deleted, true, _) => EventType::Deleted,
            (EventType::Deleted, false, _) => return None,
            (_, false, true) => EventType::Added,
            (_, true, true) => EventType::Modified,
            (_, true, false) => EventType::Deleted,
            (_, false, false) => return None,
        };
        Some((kind.as_str(), served_ref(&self.target_rt, &change.object)))
    }
}

fn expired(message: String) -> Value {
    ApiError::gone(message).body
}

pub fn watch(state: &Arc<State>, req: &Req, target: &Target) -> Result<Response<Body>, ApiError> {
    let rt = target.rt.clone();
    let filter = Filter::from(req, &rt)?;
    let timeout = req
        .param("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = req.flag("allowWatchBookmarks");
    let from: Option<u64> = req
        .param("resourceVersion")
        .filter(|rv| !rv.is_empty() && *rv != "0")
        .map(|rv| {
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))
        })
        .transpose()?;

    let (sender, receiver) = mpsc::channel::<Bytes>(256);
    let watcher = Watcher {
        storage: rt.storage_key(),
        namespace: target.namespace.clone(),
        filter,
        target_rt: rt.clone(),
        table: req.wants_table().then(|| include_object(req).to_owned()),
        headers_sent: std::sync::atomic::AtomicBool::new(false),
        sender,
    };

    // Under the store's lock: what happened so far, and a subscription to
    // everything after, with nothing missed or repeated.
    let (backlog, changes, current) = {
        let txn = state.store.lock();
        let changes = txn.subscribe();
        let backlog = match from {
            None => Ok(txn
                .list(&watcher.storage, watcher.namespace.as_deref(), None)
                .filter(|(_, object)| watcher.filter.matches(object))
                .map(|(_, object)| ("ADDED", served(&rt, object.clone())))
                .collect::<Vec<_>>()),
            Some(rv) => txn
                .changes_since(rv)
                .map(|changes| {
                    changes
                        .iter()
                        .filter_map(|c| watcher.view(c))
                        .map(|(kind, object)| (kind, object.into_owned()))
                        .collect()
                })
                .map_err(|oldest| (rv, oldest)),
        };
        (backlog, changes, txn.current_rv())
    };

    let bookmark_interval = state.bookmark_interval;
    let compactions = state.compactions.subscribe();
    tokio::spawn(async move {
        let events = match backlog {
            Ok(events) => events,
            Err((rv, oldest)) => {
                tracing::info!(resource = %watcher.target_rt.group_resource(), rv, oldest, "watch from a compacted resourceVersion: 410 Expired");
                let _ = watcher
                    .send(
                        "ERROR",
                        &expired(format!("too old resource version: {rv} ({oldest})")),
                    )
                    .await;
                return;
            }
        };
        for (kind, object) in events {
            if !watcher.send(kind, &object).await {
                return;
            }
        }
        follow(
            watcher,
            changes,
            compactions,
            current,
            timeout,
            bookmarks.then_some(bookmark_interval),
        )
        .await;
    });

    let stream = tokio_stream_from(receiver)
        .map(|bytes| Ok::<_, std::convert::Infallible>(Frame::data(bytes)));
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap_or_else(|_| Response::new(full(""))))
}

async fn follow(
    watcher: Watcher,
    mut changes: broadcast::Receiver<Arc<Change>>,
    mut compactions: tokio::sync::watch::Receiver<u64>,
    mut current: u64,
    timeout: Duration,
    bookmarks: Option<Duration>,
) {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(bookmarks.unwrap_or(Duration::from_secs(3600)));
    ticker.tick().await;
    loop {
        tokio::select! {
            () = &mut deadline => return,
            _ = compactions.changed() => return,
            _ = ticker.tick(), if bookmarks.is_some() => {
                let bookmark = json!({
                    "kind": watcher.target_rt.kind,
                    "apiVersion": watcher.target_rt.api_version(),
                    "metadata": {"resourceVersion": current.to_string()},
                });
                if !watcher.send("BOOKMARK", &bookmark).await {
                    return;
                }
            }
            received = changes.recv() => match received {
                Ok(change) => {
                    current = change.rv;
                    if let Some((kind, object)) = watcher.view(&change)
                        && !watcher.send(kind, &object).await
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let _ = watcher
                        .send("ERROR", &expired(format!("too old resource version: {current} (watcher fell behind)")))
                        .await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = watcher.sender.closed() => return,
        }
    }
}

fn tokio_stream_from(mut receiver: mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
