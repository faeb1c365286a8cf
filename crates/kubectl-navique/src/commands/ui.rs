//! `ui`: serves the approvals page on 127.0.0.1, fed by watches that run
//! with the user's own credentials, and approves through the same function
//! as `approve --all`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};
use kubectl_navique::approvals::{ApproveOutcome, ApproveReport};
use kubectl_navique::cli::UiArgs;
use kubectl_navique::preview::Cascade;
use kubectl_navique::render;
use kubectl_navique::ui::guard::{Facts, Guard, Refusal, Token};
use kubectl_navique::ui::preview::PreviewRequest;
use kubectl_navique::ui::request::{self, ApproveRequest, Selection};
use kubectl_navique::ui::view::{self, Watched};
use kubectl_navique::ui::{CONTENT_SECURITY_POLICY, assets, redirect_page};
use navique_api::core::{Lock, Stack};
use navique_api::services::ManagedService;
use tokio::sync::watch;

use super::approve::{approve_pending, discover};
use super::preview::delete_preview;
use super::{Session, stdout};

/// The largest request body read (an approval of [`request::MAX_ITEMS`]).
const MAX_BODY: usize = 256 * 1024;
/// Changes that arrive together are shown together.
const SETTLE: Duration = Duration::from_millis(50);

/// The three watches, in the order [`view::snapshot`] takes them.
type Watches = Arc<Mutex<[Watched; 3]>>;

struct Page {
    guard: Guard,
    client: Client,
    /// The namespace shown, `None` for all.
    scope: Option<String>,
    snapshots: watch::Receiver<Arc<String>>,
}

pub async fn run(session: &Session, args: &UiArgs) -> Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    let port = listener.local_addr()?.port();
    let token = Token::generate().context("cannot draw the page's token")?;
    let guard = Guard::new(token, port);
    let scope = session.scope().map(str::to_owned);

    let watches: Watches = Arc::default();
    let (changed, changes) = watch::channel(());
    for (slot, resource) in [
        ApiResource::erase::<Stack>(&()),
        ApiResource::erase::<Lock>(&()),
        ApiResource::erase::<ManagedService>(&()),
    ]
    .into_iter()
    .enumerate()
    {
        let api: Api<DynamicObject> = match &scope {
            Some(ns) => Api::namespaced_with(session.client.clone(), ns, &resource),
            None => Api::all_with(session.client.clone(), &resource),
        };
        tokio::spawn(follow(api, watches.clone(), slot, changed.clone()));
    }
    let (publish, snapshots) = watch::channel(Arc::new(String::new()));
    let composer = tokio::spawn(compose(watches, scope.clone(), changes, publish));

    let url = guard.url();
    let page = Arc::new(Page {
        guard,
        client: session.client.clone(),
        scope,
        snapshots,
    });
    let app = Router::new().fallback(handle).with_state(page);
    stdout(&format!(
        "Serving the Navique approvals page at {url}\nIt acts with your kubeconfig's credentials; press Ctrl-C to stop it.\n"
    ))?;
    // Kept until the server stops, then removed.
    let _redirect = if args.no_open {
        None
    } else {
        open_browser(&url)
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            // Without a publisher the event streams end, so open pages do
            // not keep the server waiting.
            composer.abort();
        })
        .await
        .context("the page's server failed")?;
    Ok(ExitCode::SUCCESS)
}

/// Keeps watch `slot` up to date from `api`, with the watcher's backoff
/// after a failure, whose message the panel shows until the watch recovers.
async fn follow(
    api: Api<DynamicObject>,
    watches: Watches,
    slot: usize,
    changed: watch::Sender<()>,
) {
    let mut objects: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let mut initial: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let key = |o: &DynamicObject| {
        (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    };
    let json = |o: &DynamicObject| serde_json::to_value(o).unwrap_or_default();
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let mut synced = None;
        let mut error = None;
        match event {
            Ok(watcher::Event::Init) => initial.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                initial.insert(key(&o), json(&o));
            }
            Ok(watcher::Event::InitDone) => {
                objects = std::mem::take(&mut initial);
                synced = Some(true);
            }
            Ok(watcher::Event::Apply(o)) => {
                objects.insert(key(&o), json(&o));
            }
            Ok(watcher::Event::Delete(o)) => {
                objects.remove(&key(&o));
            }
            Err(e) => error = Some(render::watch_error(&e)),
        }
        {
            let mut all = watches.lock().expect("watches");
            let watched = &mut all[slot];
            if let Some(synced) = synced {
                watched.synced = synced;
            }
            // A working watch clears the last failure.
            watched.error = error;
            watched.objects = objects.values().cloned().collect();
        }
        let _ = changed.send(());
    }
}

/// Publishes a new snapshot after each settled burst of changes.
async fn compose(
    watches: Watches,
    scope: Option<String>,
    mut changes: watch::Receiver<()>,
    publish: watch::Sender<Arc<String>>,
) {
    while changes.changed().await.is_ok() {
        tokio::time::sleep(SETTLE).await;
        changes.mark_unchanged();
        let text = {
            let all = watches.lock().expect("watches");
            let snapshot = view::snapshot(scope.as_deref(), &all[0], &all[1], &all[2]);
            serde_json::to_string(&snapshot).unwrap_or_default()
        };
        let _ = publish.send(Arc::new(text));
    }
}

/// Every request: the guard first, then the route after the token.
async fn handle(State(page): State<Arc<Page>>, request: Request) -> Response {
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let facts = Facts {
        method: request.method().as_str(),
        path: request.uri().path(),
        host: text(header::HOST),
        origin: text(header::ORIGIN),
        fetch_site: headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
        fetch_mode: headers.get("sec-fetch-mode").and_then(|v| v.to_str().ok()),
        content_type: text(header::CONTENT_TYPE),
    };
    let route = match page.guard.check(&facts) {
        Ok(route) => route.to_owned(),
        Err(refusal) => return refused(refusal),
    };
    let method = request.method().clone();
    let mut response = match (method, route.as_str()) {
        (Method::GET, "") => {
            let location = format!("{}/", request.uri().path());
            (
                StatusCode::PERMANENT_REDIRECT,
                [(header::LOCATION, location)],
            )
                .into_response()
        }
        (Method::GET, "/") => asset("text/html; charset=utf-8", assets::INDEX_HTML),
        (Method::GET, "/app.js") => asset("text/javascript; charset=utf-8", assets::APP_JS),
        (Method::GET, "/style.css") => asset("text/css; charset=utf-8", assets::STYLE_CSS),
        (Method::GET, "/events") => events(&page).into_response(),
        (Method::POST, "/api/approve") => approve(&page, request.into_body()).await,
        (Method::GET, "/api/preview") => preview(&page, request.uri().query()).await,
        _ => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    };
    secure(response.headers_mut());
    response
}

fn refused(refusal: Refusal) -> Response {
    let mut response = (StatusCode::FORBIDDEN, format!("{refusal}\n")).into_response();
    secure(response.headers_mut());
    response
}

/// Headers of every answer: nothing cached, no referrer, no framing, no
/// inline code.
fn secure(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The snapshots as server-sent events: the current one, then each new one.
fn events(page: &Page) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
    let mut snapshots = page.snapshots.clone();
    snapshots.mark_changed();
    let stream = futures::stream::unfold(snapshots, |mut snapshots| async move {
        loop {
            snapshots.changed().await.ok()?;
            let text = snapshots.borrow_and_update().clone();
            if !text.is_empty() {
                return Some((Ok(Event::default().data(text.as_str())), snapshots));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `POST api/approve`: the confirmed items, re-checked against the Stacks
/// read now, each approved with the user's credentials.
async fn approve(page: &Page, body: Body) -> Response {
    let json = |status: StatusCode, body: String| {
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    let error = |status: StatusCode, message: String| {
        json(status, serde_json::json!({ "error": message }).to_string())
    };
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("at most {MAX_BODY} bytes"),
        );
    };
    let request = match ApproveRequest::parse(&bytes) {
        Ok(request) => request,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if page
        .scope
        .as_ref()
        .is_some_and(|ns| *ns != request.stack.namespace)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "this page shows namespace {}, not {}",
                page.scope.as_deref().unwrap_or_default(),
                request.stack.namespace
            ),
        );
    }
    let results = match approve_all(page, &request).await {
        Ok(results) => results,
        // The Stacks could not be read, or discovery failed: nothing approved.
        Err(e) => {
            let message = render::kube_error(&e);
            request
                .items
                .iter()
                .map(|i| {
                    ApproveOutcome::failed(
                        format!("{}/{}", i.kind, i.name),
                        None,
                        None,
                        message.clone(),
                    )
                })
                .collect()
        }
    };
    json(
        StatusCode::OK,
        serde_json::to_string(&ApproveReport { results }).unwrap_or_default(),
    )
}

/// `GET api/preview`: the preview of a Stack's or ManagedService's delete,
/// read now with the user's credentials by the function `preview delete`
/// uses. It reads only.
async fn preview(page: &Page, query: Option<&str>) -> Response {
    let json = |status: StatusCode, body: String| {
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    let error = |status: StatusCode, message: String| {
        json(status, serde_json::json!({ "error": message }).to_string())
    };
    let request = match PreviewRequest::parse(query) {
        Ok(request) => request,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if page
        .scope
        .as_ref()
        .is_some_and(|ns| *ns != request.namespace)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "this page shows namespace {}, not {}",
                page.scope.as_deref().unwrap_or_default(),
                request.namespace
            ),
        );
    }
    let previewed = async {
        let index = discover(&page.client).await?;
        let kind = index
            .find(request.group(), request.kind)
            .cloned()
            .ok_or_else(|| kubectl_navique::Error::UnknownResourceType(request.kind.to_owned()))?;
        delete_preview(
            &page.client,
            &index,
            &kind,
            &request.namespace,
            &request.name,
            Cascade::Background,
        )
        .await
    };
    match previewed.await {
        Ok(preview) => json(
            StatusCode::OK,
            serde_json::to_string(&preview).unwrap_or_default(),
        ),
        // The API server's refusal, as kubectl words it, for the row.
        Err(e) => error(StatusCode::OK, super::describe(&e)),
    }
}

async fn approve_all(
    page: &Page,
    request: &ApproveRequest,
) -> Result<Vec<ApproveOutcome>, kube::Error> {
    let stacks: Api<Stack> = Api::namespaced(page.client.clone(), &request.stack.namespace);
    let stacks = stacks.list(&ListParams::default()).await?.items;
    let index = discover(&page.client)
        .await
        .map_err(|e| match e.downcast::<kube::Error>() {
            Ok(e) => e,
            Err(e) => kube::Error::Service(e.into()),
        })?;
    // Who the API server says the user is: the name each approval records.
    let user = kubectl_navique::approve::whoami(&page.client).await?;
    let mut results = Vec::new();
    for selected in request::select(&stacks, request) {
        results.push(match selected {
            Selection::Approve(pending) => {
                approve_pending(&page.client, &user, &index, pending).await
            }
            Selection::Refused(refused) => refused,
        });
    }
    Ok(results)
}

/// Opens the browser on a redirect file (the user's own, mode 0600), so
/// the token is in no process's arguments. `$BROWSER` if set, else the
/// desktop's opener. Failing to open is not an error: the URL is printed.
fn open_browser(url: &str) -> Option<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix("navique-ui-")
        .suffix(".html")
        .tempfile()
        .ok()?;
    file.write_all(redirect_page(url).as_bytes()).ok()?;
    let opener = std::env::var("BROWSER").unwrap_or_else(|_| {
        if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        }
        .to_owned()
    });
    let opened = std::process::Command::new(&opener)
        .arg(file.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Err(e) = opened {
        eprintln!("cannot open a browser with {opener} ({e}): open the URL above");
    }
    Some(file)
}
