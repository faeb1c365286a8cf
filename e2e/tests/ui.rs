//! `kubectl navique ui` in a real headless Chromium: the page of the
//! plugin (started through kubectl as the user of a kubeconfig) on the dev
//! API server in RBAC mode, with the real service-lifecycle-controller
//! making prunes wait and carrying them out once approved. A pending prune
//! appears without a reload; Approve approves one resource; Approve all
//! approves exactly the list the confirmation showed ("stale
//! authorisation": not what started to wait after); a viewer is shown the
//! API server's refusal and a user without any role the refusal of the
//! reads ("privileged deputy": the page acts only as its user); requests
//! without the token, for another Host, or from another site are refused
//! ("unauthenticated inside"); a Stack needing two approvers waits, on the
//! page, for a second person. Screenshots go to target/ui-screenshots.

use std::os::unix::fs::PermissionsExt;
use std::sync::OnceLock;
use std::time::Duration;

use navique_e2e::browser::{Browser, UiServer};
use navique_e2e::stacks::{STACK_ACCOUNT, StackEnv, bind_service_account};
use navique_e2e::{Cluster, PROJECT_MEMBERS, eventually};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(30);

fn env() -> &'static StackEnv {
    static ENV: OnceLock<StackEnv> = OnceLock::new();
    ENV.get_or_init(StackEnv::start)
}

fn cluster() -> &'static Cluster {
    &env().locks.cluster
}

/// A Project with alice (admin), bob (edit) and carol (view), and dave
/// known but bound to nothing; a kubeconfig for `user` in it.
fn project(prefix: &str, dir: &tempfile::TempDir, user: &str) -> (String, std::path::PathBuf) {
    for name in ["alice", "bob", "carol", "dave"] {
        cluster().add_user(name, &[]);
    }
    let ns = cluster().project(prefix, &PROJECT_MEMBERS);
    bind_service_account(cluster(), &ns, STACK_ACCOUNT, "edit");
    let kubeconfig = cluster().kubeconfig_for(&format!("{user}-token"), dir.path());
    (ns, kubeconfig)
}

/// A ConfigMap manifest that waits for approval before it is pruned.
fn confirmed(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": {"cd.hanzo.ai/sync-options": "Prune=confirm"}},
        "data": {"name": name},
    })
}

fn apply_stack(ns: &str, names: &[&str]) {
    apply_stack_needing(ns, names, 1);
}

/// Stack `app` of `names`, whose removals wait for `approvers` people.
fn apply_stack_needing(ns: &str, names: &[&str], approvers: u32) {
    let resources: Vec<Value> = names.iter().map(|n| confirmed(n)).collect();
    let stack = json!({
        "apiVersion": "core.navique.com/v1alpha1",
        "kind": "Stack",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"approvals": {"required": approvers}, "resources": resources},
    });
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&stack.to_string()));
}

/// The status item of `name` in Stack `app`, once `check` accepts it.
async fn until_item(ns: &str, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(WAIT, what, || async {
        let output = cluster().kubectl(&["get", "stack", "app", "-n", ns, "-o", "json"], None);
        let stack: Value = serde_json::from_slice(&output.stdout).ok()?;
        stack["status"]["resources"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == name)
            .filter(|r| check(r))
            .cloned()
    })
    .await
}

/// Stack `app` of `ns` with `all` synced, then with only `kept`: the rest
/// wait for approval.
async fn pending_prunes(ns: &str, all: &[&str], kept: &[&str]) {
    apply_stack(ns, all);
    for name in all {
        until_item(ns, name, "the sync", |r| r["status"] == "Synced").await;
    }
    apply_stack(ns, kept);
    for name in all.iter().filter(|n| !kept.contains(n)) {
        until_item(ns, name, "the prune to wait", |r| {
            r["requiresDeletionApproval"] == true
        })
        .await;
    }
}

fn exists(ns: &str, name: &str) -> bool {
    cluster()
        .kubectl(&["get", "configmap", name, "-n", ns, "-o", "name"], None)
        .status
        .success()
}

fn approval(ns: &str, name: &str) -> String {
    cluster().kubectl_ok(&[
        "get",
        "configmap",
        name,
        "-n",
        ns,
        "-o",
        r#"jsonpath={.metadata.annotations.cd\.hanzo\.ai/deletion-approved}"#,
    ])
}

fn row(name: &str) -> String {
    format!(r#"tr.approval[data-name="{name}"]"#)
}

/// Marks the loaded page, to tell later that it was never reloaded.
async fn mark(browser: &Browser) {
    browser
        .client
        .execute("window.naviqueMark = 'not reloaded'; return null;", vec![])
        .await
        .expect("mark the page");
}

async fn still_marked(browser: &Browser) -> bool {
    browser
        .client
        .execute("return window.naviqueMark || null;", vec![])
        .await
        .expect("read the mark")
        == json!("not reloaded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_prune_appears_without_reload_and_approve_prunes_it() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-one", &dir, "alice");
    apply_stack(&ns, &["kept", "settings"]);
    until_item(&ns, "settings", "the sync", |r| r["status"] == "Synced").await;

    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    browser
        .until_text("#no-approvals", "the empty list", |t| {
            t == "No approvals pending."
        })
        .await;
    browser
        .until_text("#live", "the live stream", |t| t == "live")
        .await;
    assert_eq!(
        browser.text("#scope").await.unwrap(),
        format!("namespace {ns}")
    );
    mark(&browser).await;

    // The prune starts to wait: the page shows it from its watch.
    apply_stack(&ns, &["kept"]);
    let shown = browser
        .until_text(&row("settings"), "the pending prune on the page", |t| {
            t.contains("settings")
        })
        .await;
    assert!(still_marked(&browser).await, "the page was reloaded");
    let cells = browser.texts(&format!("{} td", row("settings"))).await;
    assert_eq!(
        cells[..4],
        ["ConfigMap", "settings", "Prune", "0"],
        "{shown}"
    );
    // Waiting since the prune started to wait, as its status item
    // records it (the exact time in the cell's title), a moment ago.
    let item = until_item(&ns, "settings", "the recorded wait", |r| {
        r["requiresDeletionApproval"] == true
    })
    .await;
    assert!(cells[4].ends_with("(just now)"), "waiting since: {cells:?}");
    let exact = browser
        .client
        .execute(
            &format!(
                "return document.querySelector('{} td.since').title;",
                row("settings")
            ),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(exact, item["waitingSince"], "{item}");
    assert_eq!(
        cells[5],
        "waiting for approval: run kubectl navique approve, or annotate cd.hanzo.ai/deletion-approved=true and add your user name to core.navique.com/approved-by, to prune it\napprovals required: 1"
    );
    assert_eq!(
        browser.text("section.stack h3").await.unwrap(),
        format!("Stack {ns}/app")
    );
    assert!(browser.text(&row("kept")).await.is_none());
    browser.screenshot("ui-pending-prune").await;

    browser
        .click(&format!("{} button.approve", row("settings")))
        .await;
    eventually(WAIT, "the approved prune to be carried out", || async {
        (!exists(&ns, "settings")).then_some(())
    })
    .await;
    browser
        .until_gone(&row("settings"), "the pruned row to leave the page")
        .await;
    browser
        .until_text("#no-approvals", "the empty list again", |t| {
            t == "No approvals pending."
        })
        .await;
    assert!(still_marked(&browser).await, "the page was reloaded");
    assert!(exists(&ns, "kept"));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_all_approves_exactly_the_list_the_confirmation_showed() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-all", &dir, "alice");
    pending_prunes(&ns, &["a", "b", "late"], &["late"]).await;

    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    browser
        .until_text(&row("b"), "both pending prunes", |t| t.contains('b'))
        .await;
    assert_eq!(
        browser
            .text("section.stack button.approve-all")
            .await
            .unwrap(),
        "Approve all (2)"
    );
    browser.click("section.stack button.approve-all").await;
    assert_eq!(
        browser.texts("#confirm-list li").await,
        ["Prune ConfigMap/a", "Prune ConfigMap/b"]
    );
    assert_eq!(
        browser.text("#confirm-title").await.unwrap(),
        format!("Approve all of Stack {ns}/app?")
    );
    assert_eq!(browser.text("#confirm-ok").await.unwrap(), "Approve 2");
    browser.screenshot("ui-approve-all-confirmation").await;

    // While the user reads the list, a third removal starts to wait.
    apply_stack(&ns, &[]);
    until_item(&ns, "late", "the third prune to wait", |r| {
        r["requiresDeletionApproval"] == true
    })
    .await;
    browser
        .until_text(&row("late"), "the third prune on the page", |t| {
            t.contains("late")
        })
        .await;
    assert_eq!(
        browser.texts("#confirm-list li").await,
        ["Prune ConfigMap/a", "Prune ConfigMap/b"],
        "the confirmation changed under the user"
    );

    browser.click("#confirm-ok").await;
    eventually(WAIT, "a and b to be pruned", || async {
        (!exists(&ns, "a") && !exists(&ns, "b")).then_some(())
    })
    .await;
    browser.until_gone(&row("a"), "a to leave the page").await;
    browser.until_gone(&row("b"), "b to leave the page").await;
    // The one that started to wait after the confirmation was shown.
    assert!(exists(&ns, "late"));
    assert_eq!(approval(&ns, "late"), "");
    assert!(browser.text(&row("late")).await.is_some());
    assert_eq!(
        browser
            .text("section.stack button.approve-all")
            .await
            .unwrap(),
        "Approve all (1)"
    );
    browser.screenshot("ui-approve-all-done").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_eyes_waits_on_the_page_for_a_second_distinct_approver() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-four", &dir, "alice");
    let bob = cluster().kubeconfig_for("bob-token", dir.path());
    apply_stack_needing(&ns, &["kept", "settings"], 2);
    until_item(&ns, "settings", "the sync", |r| r["status"] == "Synced").await;
    apply_stack_needing(&ns, &["kept"], 2);
    until_item(&ns, "settings", "the prune to wait", |r| {
        r["requiresDeletionApproval"] == true
    })
    .await;

    // Alice approves on her page: one of two, and the prune still waits.
    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    browser
        .until_text(&row("settings"), "the pending prune", |t| {
            t.contains("approvals required: 2")
        })
        .await;
    browser
        .click(&format!("{} button.approve", row("settings")))
        .await;
    let counted = browser
        .until_text(&row("settings"), "alice counted as the first of two", |t| {
            t.contains("1 of 2 distinct approvers (alice)")
        })
        .await;
    assert!(counted.contains("user: alice"), "{counted}");
    assert!(exists(&ns, "settings"), "pruned after one approver of two");
    // docs/stacks.md's four-eyes screenshot.
    browser.screenshot("ui-four-eyes-one-of-two").await;
    browser.close().await;
    drop(ui);

    // Bob, a second person, approves on his own page: the prune runs.
    let ui = UiServer::start(cluster(), &bob, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    browser
        .until_text(&row("settings"), "the prune still pending", |t| {
            t.contains("1 of 2 distinct approvers (alice)")
        })
        .await;
    browser
        .click(&format!("{} button.approve", row("settings")))
        .await;
    eventually(
        WAIT,
        "the prune approved by two to be carried out",
        || async { (!exists(&ns, "settings")).then_some(()) },
    )
    .await;
    browser
        .until_gone(&row("settings"), "the pruned row to leave the page")
        .await;
    assert!(exists(&ns, "kept"));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_is_shown_the_api_servers_refusal_and_a_stranger_sees_nothing() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, carol) = project("ui-viewer", &dir, "carol");
    pending_prunes(&ns, &["settings"], &[]).await;

    let ui = UiServer::start(cluster(), &carol, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    browser
        .until_text(&row("settings"), "the pending prune", |t| {
            t.contains("settings")
        })
        .await;
    browser
        .click(&format!("{} button.approve", row("settings")))
        .await;
    let refusal = browser
        .until_text(
            &format!("{} .result", row("settings")),
            "the refusal",
            |t| !t.is_empty(),
        )
        .await;
    assert_eq!(
        refusal,
        format!(
            "Error from server (Forbidden): configmaps \"settings\" is forbidden: User \"carol\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"{ns}\""
        )
    );
    browser.screenshot("ui-viewer-refused").await;
    assert_eq!(approval(&ns, "settings"), "");
    assert!(exists(&ns, "settings"));

    // dave has no role: the page reads as dave, and shows the refusal.
    let dave = cluster().kubeconfig_for("dave-token", dir.path());
    let stranger = UiServer::start(cluster(), &dave, &["-n", &ns]);
    browser.open(&stranger.url).await;
    let refused = browser
        .until_text("#approvals .panel-error", "the refused list", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(
        refused,
        format!(
            "Error from server (Forbidden): stacks.core.navique.com is forbidden: User \"dave\" cannot list resource \"stacks\" in API group \"core.navique.com\" in the namespace \"{ns}\""
        )
    );
    assert!(browser.text(&row("settings")).await.is_none());
    browser.close().await;
}

/// One raw HTTP/1.1 request to the page; the status code and body.
async fn send(ui: &UiServer, request: String) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(ui.authority())
        .await
        .expect("connect to the page");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (status, body.to_owned())
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

fn post(path: &str, host: &str, origin: &str, content_type: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// "Unauthenticated inside": other local users and pages know the port
/// but not the token; a rebinding DNS name or another site's page send
/// their own Host or Origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_for_another_host_or_from_another_site_are_refused() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-token", &dir, "alice");
    pending_prunes(&ns, &["settings", "other"], &[]).await;
    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let host = ui.authority().to_owned();
    let token = ui.token().to_owned();
    let no_token = "this page needs the token of the URL `kubectl navique ui` printed\n";

    // In the browser: the page without its token, and with another token.
    let browser = Browser::start().await;
    for url in [
        format!("http://{host}/"),
        format!("http://{host}/{}/", "0".repeat(64)),
    ] {
        browser.open(&url).await;
        assert_eq!(browser.text("body").await.unwrap(), no_token.trim_end());
    }
    browser.screenshot("ui-without-token").await;
    browser.close().await;

    for path in ["/", "/app.js", "/events", "/api/approve"] {
        assert_eq!(
            send(&ui, get(path, &host)).await,
            (403, no_token.to_owned()),
            "{path}"
        );
    }
    assert_eq!(
        send(&ui, get(&format!("/{}/", &token[..63]), &host))
            .await
            .0,
        403
    );
    // DNS rebinding: the token is right, the name is not this server's.
    let port = host.rsplit(':').next().unwrap();
    assert_eq!(
        send(
            &ui,
            get(&format!("/{token}/"), &format!("attacker.example:{port}"))
        )
        .await,
        (
            403,
            "this page answers only requests for 127.0.0.1 and localhost on this port\n".to_owned()
        )
    );

    let approve = format!("/{token}/api/approve");
    let body = json!({"stack": {"namespace": ns, "name": "app"},
        "items": [{"kind": "ConfigMap", "name": "settings"}]})
    .to_string();
    let own = format!("http://{host}");
    for (origin, content_type, expected) in [
        (
            "http://attacker.example",
            "application/json",
            "requests from other sites are refused\n",
        ),
        (
            "null",
            "application/json",
            "requests from other sites are refused\n",
        ),
        (
            own.as_str(),
            "text/plain",
            "changes must be JSON sent by the page itself\n",
        ),
    ] {
        assert_eq!(
            send(&ui, post(&approve, &host, origin, content_type, &body)).await,
            (403, expected.to_owned()),
            "{origin} {content_type}"
        );
    }
    assert_eq!(approval(&ns, "settings"), "");

    // The same request from the page's own origin approves (the refusals
    // above were the guard's, not the request's).
    let (status, report) = send(&ui, post(&approve, &host, &own, "application/json", &body)).await;
    assert_eq!(status, 200, "{report}");
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["results"][0]["approved"], true, "{report}");
    assert_eq!(report["results"][0]["target"], "configmap/settings");
    eventually(WAIT, "the approved prune", || async {
        (!exists(&ns, "settings")).then_some(())
    })
    .await;
    assert!(exists(&ns, "other"));
    assert_eq!(approval(&ns, "other"), "");
}

/// The read-only panels: what a Lock protects and why, and a ManagedService
/// whose `Delete` waits for its confirmation, with the annotation to add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_locks_and_the_services_being_deleted_are_shown() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-panels", &dir, "alice");
    pending_prunes(&ns, &["kept", "old-config"], &["kept"]).await;
    let reason = "Production — remove this Lock deliberately";
    let manifest = navique_e2e::locks::lock(
        &ns,
        "protect-app",
        "core.navique.com/v1alpha1",
        "Stack",
        "app",
        reason,
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    env.locks
        .until_lock(&ns, "protect-app", true, "Protecting")
        .await;
    cluster().kubectl_ok(&[
        "apply",
        "-f",
        navique_e2e::repo_root()
            .join("deploy/examples/catalogue.yaml")
            .to_str()
            .unwrap(),
    ]);
    let service =
        std::fs::read_to_string(navique_e2e::repo_root().join("deploy/examples/orders-db.yaml"))
            .unwrap()
            .replace("namespace: my-project", &format!("namespace: {ns}"))
            .replace("    services.kube-dc.com/confirm-delete: orders-db\n", "");
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&service));
    cluster().kubectl_ok(&[
        "delete",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--wait=false",
    ]);

    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    let lock = browser
        .until_text(r#"tr.lock[data-name="protect-app"]"#, "the Lock", |t| {
            t.contains("locked")
        })
        .await;
    assert_eq!(
        browser
            .texts(r#"tr.lock[data-name="protect-app"] td"#)
            .await,
        [ns.as_str(), "Stack/app", "protect-app", "locked", reason],
        "{lock}"
    );
    let service = r#"tr.service[data-name="orders-db"]"#;
    browser
        .until_text(&format!("{service} .reason"), "the deleting service", |t| {
            t == "DeletionConfirmationNeeded"
        })
        .await;
    let cells = browser.texts(&format!("{service} td")).await;
    assert_eq!(
        cells[..4],
        [
            ns.as_str(),
            "orders-db",
            "Delete",
            "DeletionConfirmationNeeded"
        ]
    );
    assert_eq!(
        cells[4],
        format!(
            "{}\nTo confirm: kubectl annotate managedservice orders-db -n {ns} services.kube-dc.com/confirm-delete=orders-db",
            navique_api::messages::deletion_confirmation_needed("orders-db")
        )
    );
    assert!(browser.text(&row("old-config")).await.is_some());
    // All three panels: the screenshot docs/stacks.md shows.
    browser.screenshot("ui-overview").await;
    browser.close().await;
}

/// On a desktop the plugin opens the browser itself: on a file of the
/// user's own (mode 0600) that sends the browser on to the page, so the
/// token is in no process's arguments, where other local users could read
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_is_opened_on_a_private_file_that_leads_to_the_page() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-open", &dir, "alice");
    let opener = dir.path().join("browser");
    let opened = dir.path().join("opened.html");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nstat -c %a \"$1\" > {0}/mode\necho \"$@\" > {0}/args\ncp \"$1\" {1}\n",
            dir.path().display(),
            opened.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ui = UiServer::start_opening(cluster(), &alice, &["-n", &ns], &opener);
    eventually(WAIT, "the browser to be opened", || async {
        opened.exists().then_some(())
    })
    .await;
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(read("mode"), "600\n");
    assert!(
        !read("args").contains(ui.token()),
        "the token is in the browser's arguments"
    );
    assert!(read("opened.html").contains(&ui.url));

    let browser = Browser::start().await;
    browser.open(&format!("file://{}", opened.display())).await;
    browser
        .until_text("#scope", "the page, through the file", |t| {
            t == format!("namespace {ns}")
        })
        .await;
    browser
        .until_text("#live", "the live stream", |t| t == "live")
        .await;
    browser.close().await;
}

/// "Preview delete" on the page says what `kubectl navique preview delete`
/// says for the same user (the same function, with the page's user's own
/// credentials), and reads only: no object's resourceVersion moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_delete_on_the_page_says_what_the_command_says_and_changes_nothing() {
    let env = env();
    env.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let (ns, alice) = project("ui-preview", &dir, "alice");
    apply_stack(&ns, &["settings"]);
    until_item(&ns, "settings", "the sync", |r| r["status"] == "Synced").await;
    let manifest = navique_e2e::locks::lock(
        &ns,
        "protect-app",
        "core.navique.com/v1alpha1",
        "Stack",
        "app",
        "production",
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    env.locks
        .until_lock(&ns, "protect-app", true, "Protecting")
        .await;
    cluster().kubectl_ok(&[
        "apply",
        "-f",
        navique_e2e::repo_root()
            .join("deploy/examples/catalogue.yaml")
            .to_str()
            .unwrap(),
    ]);
    let service =
        std::fs::read_to_string(navique_e2e::repo_root().join("deploy/examples/orders-db.yaml"))
            .unwrap()
            .replace("namespace: my-project", &format!("namespace: {ns}"))
            .replace("    services.kube-dc.com/confirm-delete: orders-db\n", "");
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&service));
    let versions = || {
        cluster().kubectl_ok(&[
            "get",
            "stacks,configmaps,locks,managedservices",
            "-n",
            &ns,
            "-o",
            // Each object's own version: the List's is empty, and where
            // kubectl puts it varies.
            "jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion} {end}",
        ])
    };

    let ui = UiServer::start(cluster(), &alice, &["-n", &ns]);
    let browser = Browser::start().await;
    browser.open(&ui.url).await;
    let before = versions();
    for (kind, name, argument) in [
        ("Stack", "app", "stack/app"),
        ("ManagedService", "orders-db", "managedservice/orders-db"),
    ] {
        let row = format!(r#"tr.deletable[data-kind="{kind}"][data-name="{name}"]"#);
        browser
            .until_text(&row, "the object on the page", |_| true)
            .await;
        browser.click(&format!("{row} button.preview")).await;
        let shown = browser
            .until_text(&format!("{row} .outcome"), "the preview", |t| !t.is_empty())
            .await;
        let command = navique_e2e::plugin::kubectl_navique(
            cluster(),
            &alice,
            &["preview", "delete", argument, "-n", &ns, "-o", "json"],
        );
        let command: Value = serde_json::from_str(&command.stdout).expect(&command.stderr);
        assert_eq!(
            shown,
            command["outcome"]["line"].as_str().unwrap(),
            "{kind}"
        );
    }
    let stack = r#"tr.deletable[data-kind="Stack"][data-name="app"]"#;
    assert_eq!(
        browser.text(&format!("{stack} .outcome")).await.unwrap(),
        "refused: locked by protect-app"
    );
    assert_eq!(
        browser.texts(&format!("{stack} li.stops")).await,
        [
            "stops: Stack/app: locked by protect-app: resource is protected by Lock(s) [protect-app]; delete the Lock(s) before deleting this resource (reasons: protect-app: production)"
        ]
    );
    assert_eq!(versions(), before, "previews wrote nothing");
    browser.screenshot("ui-preview").await;
    browser.close().await;
}
