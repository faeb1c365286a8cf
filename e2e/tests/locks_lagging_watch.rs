//! A Lock deleted before the lock-controller's watches show the markers it
//! wrote still takes its name off its target, its Namespace and its kind's
//! CRD: nothing is left refusing deletes in the name of a Lock that is gone.
//! A Lock suspended then leaves them too, for its suspension; two Locks on
//! one object deleted together leave it unmarked. The watches and writes
//! are held back with the dev API server's faults (a delayed watch after
//! every watch is dropped, a delayed write), so these tests have a binary
//! of their own, each with its own API server. Markers that name only
//! Locks that are gone, with no Lock left to clear them, are cleared by
//! the controller itself.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use navique_e2e::eventually;
use navique_e2e::locks::{GuardMode, LOCK_CONTROLLER_USER, LockEnv, lock, stack};

const WAIT: Duration = Duration::from_secs(30);
/// How long the controller's watches of the marked kinds are held back at
/// most: the test lets them go (clearing the faults) once it has checked.
const HELD_MS: u64 = 120_000;
const CRD: &str = "stacks.core.navique.com";

#[tokio::test]
async fn a_lock_deleted_before_the_watches_show_its_markers_leaves_none() {
    let env = LockEnv::start(GuardMode::Policy);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("lagging");
    let markers = || {
        [
            env.marker(&["stack", "web", "-n", &ns]),
            env.marker(&["namespace", &ns]),
            env.marker(&["crd", CRD]),
        ]
    };
    // Creates a Lock on the Stack and waits until all three name it.
    let protect = async |name: &str| {
        let manifest = lock(&ns, name, "core.navique.com/v1alpha1", "Stack", "web", "");
        k.kubectl_in(&["apply", "-f", "-"], Some(&manifest));
        env.until_lock(&ns, name, true, "Protecting").await;
        eventually(WAIT, &format!("the {name} Lock's markers"), || async {
            (markers() == [name, name, &format!("{ns}/{name}")]).then_some(())
        })
        .await;
    };
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "web")));
    // A first Lock, marked and cleared with the watches keeping up: they
    // have seen the Stack, the Namespace and the CRD as they are.
    protect("first").await;
    k.kubectl_ok(&["delete", "lock", "first", "-n", &ns]);
    eventually(WAIT, "the first Lock's markers to clear", || async {
        markers().iter().all(String::is_empty).then_some(())
    })
    .await;
    // A moment for the controller's watches to show the clear too (the
    // log checks below tell if they had not: the clears would then not
    // have needed confirming).
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Every watch ends, and the controller's new watches of Stacks,
    // Namespaces and CRDs wait: what it caches of them stays as it was.
    let held: Vec<_> = ["stacks", "namespaces", "customresourcedefinitions"]
        .into_iter()
        .flat_map(|resource| {
            ["watch", "list"].map(|verb| {
                serde_json::json!({
                    "verb": verb, "resource": resource,
                    "user": LOCK_CONTROLLER_USER, "delayMs": HELD_MS,
                })
            })
        })
        .collect();
    k.post_raw(
        "/debug/faults",
        &serde_json::json!({ "faults": held }).to_string(),
    );
    k.post_raw("/debug/drop-watches", "");

    protect("brief").await;
    // The deletion does not wait for the watches: the delete is done (its
    // finalizer off) long before they are let go.
    k.kubectl_ok(&["delete", "lock", "brief", "-n", &ns, "--timeout=20s"]);
    let cleared_while_held = markers();

    // A Lock suspended before the watches show its stamp leaves its
    // target (and, no longer active, the Namespace and CRD) for the
    // suspension, as a break-glass must.
    k.bind_role(&ns, "oncall", "navique-lock-suspender");
    protect("pause").await;
    let until = Timestamp::from_second(Timestamp::now().as_second() + 600).expect("time");
    k.kubectl_ok(&[
        "annotate",
        "lock",
        "pause",
        "-n",
        &ns,
        "--as",
        "oncall",
        &format!("core.navique.com/suspended-until={until}"),
        "core.navique.com/suspend-reason=restore drill",
        "core.navique.com/suspended-by=oncall",
    ]);
    env.until_lock(&ns, "pause", false, "Suspended").await;
    // The reconcile that reports the suspension still counted the Lock
    // active for the Namespace and CRD; the next one, on its status, not.
    eventually(WAIT, "the suspended Lock's markers to clear", || async {
        markers().iter().all(String::is_empty).then_some(())
    })
    .await;
    k.kubectl_ok(&["delete", "lock", "pause", "-n", &ns, "--timeout=20s"]);
    let log = env.controller_log();
    // Lets the held watches go.
    k.kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    assert_eq!(
        cleared_while_held,
        ["", "", ""],
        "the markers once the Lock is gone, its watches still held back\n{log}"
    );
    // The clears were confirmed, the watches showing none of the marks:
    // the target's twice (deleted, suspended), the Namespace's and CRD's.
    let lines =
        |message: &str| -> Vec<&str> { log.lines().filter(|l| l.contains(message)).collect() };
    let target = lines("the watch does not show the target's marker yet");
    assert!(target.len() >= 2, "{log}");
    let shared = lines("clearing a marker the watch may not show yet");
    for object in [format!("namespace {ns}"), CRD.to_owned()] {
        assert!(
            shared.iter().any(|l| l.contains(&object)),
            "{object}\n{log}"
        );
    }
    assert!(
        !log.contains("reconcile failed"),
        "every reconcile succeeded (each confirmation is allowed by the chart's RBAC)\n{log}"
    );

    // Once the watches catch up, nothing brings a marker back, and what
    // the Lock protected can go.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        markers(),
        ["", "", ""],
        "the markers after the watches caught up"
    );
    k.kubectl_ok(&["delete", "stack", "web", "-n", &ns]);
    k.kubectl_ok(&["delete", "namespace", &ns, "--timeout", "20s"]);
}

/// Two Locks on one Stack deleted together: the marker the first one's
/// reconcile computed (naming the other, still there) is held back by the
/// dev API server until after the second's deletion has cleared the Stack.
/// Written in the target's line, one after the other, the last word is the
/// clear computed without either.
#[tokio::test]
async fn two_locks_on_one_object_deleted_together_leave_no_marker() {
    let env = LockEnv::start(GuardMode::Policy);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("together");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "web")));
    for name in ["a", "b"] {
        let manifest = lock(&ns, name, "core.navique.com/v1alpha1", "Stack", "web", "");
        k.kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    }
    for name in ["a", "b"] {
        env.until_lock(&ns, name, true, "Protecting").await;
    }
    let marker = || env.marker(&["stack", "web", "-n", &ns]);
    eventually(WAIT, "the Stack to name both Locks", || async {
        (marker() == "a,b").then_some(())
    })
    .await;

    // The controller's next write of a Stack waits 3 s at the server.
    let held = serde_json::json!({"faults": [{
        "verb": "patch", "resource": "stacks", "user": LOCK_CONTROLLER_USER,
        "delayMs": 3_000, "times": 1,
    }]});
    k.post_raw("/debug/faults", &held.to_string());
    k.kubectl_ok(&["delete", "lock", "b", "-n", &ns, "--wait=false"]);
    // b's reconcile has sent its marker, naming a, and waits on it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    k.kubectl_ok(&["delete", "lock", "a", "-n", &ns, "--wait=false"]);
    k.kubectl_ok(&[
        "wait",
        "--for=delete",
        "lock/a",
        "lock/b",
        "-n",
        &ns,
        "--timeout=30s",
    ]);
    assert_eq!(marker(), "", "{}", env.controller_log());
    k.kubectl_ok(&["delete", "stack", "web", "-n", &ns]);
}

/// Markers naming only Locks that are gone, with no Lock left whose
/// reconcile would clear them (a previous leader's write landing after
/// this one listed, or an earlier version's race), are cleared by the
/// controller itself once the API server confirms no such Lock exists; a
/// marker naming a Lock that exists but that the controller has not seen
/// yet is left to that Lock, and one it did not write is left alone.
#[tokio::test]
async fn markers_naming_only_locks_that_are_gone_are_cleared() {
    let env = LockEnv::start(GuardMode::Policy);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("orphans");
    let empty = k.namespace("orphans-empty");
    for name in ["web", "kept", "fresh", "by-hand"] {
        k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, name)));
    }
    let keep = lock(
        &ns,
        "keep",
        "core.navique.com/v1alpha1",
        "Stack",
        "kept",
        "",
    );
    k.kubectl_in(&["apply", "-f", "-"], Some(&keep));
    env.until_lock(&ns, "keep", true, "Protecting").await;

    // The controller's watch of Locks is held back from here (it watches
    // again from where it was; its lists go on): a Lock created now is one
    // it has not seen.
    let held = serde_json::json!({"faults": [{
        "verb": "watch", "resource": "locks", "user": LOCK_CONTROLLER_USER, "delayMs": HELD_MS,
    }]});
    k.post_raw("/debug/faults", &held.to_string());
    k.post_raw("/debug/drop-watches", "");
    let unseen = lock(
        &ns,
        "unseen",
        "core.navique.com/v1alpha1",
        "Stack",
        "fresh",
        "",
    );
    k.kubectl_in(&["apply", "-f", "-"], Some(&unseen));

    // Markers as a controller would have written them (the marker guard
    // lets only its identity; its field manager): for a Lock gone, and for
    // the unseen one.
    let as_controller = format!("--token={LOCK_CONTROLLER_USER}-token");
    let mark_as = |manager: &str,
                   args: &[&str],
                   annotations: serde_json::Value,
                   labels: serde_json::Value| {
        let patch = serde_json::json!({"metadata": {"annotations": annotations, "labels": labels}});
        let patch = patch.to_string();
        let manager = format!("--field-manager={manager}");
        let mut all = vec!["patch"];
        all.extend_from_slice(args);
        all.extend(["--type=merge", "-p", &patch, &as_controller, &manager]);
        k.kubectl_ok(&all);
    };
    let mark = |args: &[&str], annotations: serde_json::Value, labels: serde_json::Value| {
        mark_as("lock-controller", args, annotations, labels);
    };
    mark(
        &["stack", "web", "-n", &ns],
        serde_json::json!({"core.navique.com/locked": "gone", "core.navique.com/lock-reasons": "gone: migration"}),
        serde_json::json!({"core.navique.com/locked": "true"}),
    );
    mark(
        &["stack", "fresh", "-n", &ns],
        serde_json::json!({"core.navique.com/locked": "unseen"}),
        serde_json::json!({"core.navique.com/locked": "true"}),
    );
    // Not the controller's own write (another field manager): not its to
    // clear.
    mark_as(
        "kubectl-patch",
        &["stack", "by-hand", "-n", &ns],
        serde_json::json!({"core.navique.com/locked": "gone"}),
        serde_json::json!({}),
    );
    mark(
        &["namespace", &empty],
        serde_json::json!({"core.navique.com/locked": "gone", "core.navique.com/namespace-locked": "gone"}),
        serde_json::json!({}),
    );
    let cleared = "cleared markers naming only Locks that no longer exist";
    let logged = |message: &str, object: &str| {
        env.controller_log()
            .lines()
            .any(|l| l.contains(message) && l.contains(object))
    };
    let web = format!("Stack/{ns}/web");
    let namespace = format!("Namespace/{empty}");
    let fresh = format!("Stack/{ns}/fresh");
    let by_hand = format!("Stack/{ns}/by-hand");
    let deadline = std::time::Instant::now() + WAIT;
    while !(logged(cleared, &web)
        && logged(cleared, &namespace)
        && logged("Lock unseen exists", &fresh)
        && logged("the lock-controller did not write them", &by_hand))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller's word on the three\n{}",
            env.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let labels = |args: &[&str]| {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "jsonpath={.metadata.labels}"]);
        k.kubectl_ok(&all)
    };
    let namespace_wide = k.kubectl_ok(&[
        "get",
        "namespace",
        &empty,
        "-o",
        r#"jsonpath={.metadata.annotations.core\.navique\.com/namespace-locked}"#,
    ]);
    let log = env.controller_log();
    assert_eq!(
        [
            env.marker(&["stack", "web", "-n", &ns]),
            env.marker(&["namespace", &empty]),
            namespace_wide,
            env.marker(&["stack", "fresh", "-n", &ns]),
            env.marker(&["stack", "kept", "-n", &ns]),
            env.marker(&["stack", "by-hand", "-n", &ns]),
        ],
        ["", "", "", "unseen", "keep", "gone"],
        "{log}"
    );
    assert!(
        !labels(&["stack", "web", "-n", &ns]).contains("core.navique.com/locked"),
        "{log}"
    );
    // What they held can go; the rest stays protected.
    k.kubectl_ok(&["delete", "stack", "web", "-n", &ns]);
    k.kubectl_ok(&["delete", "namespace", &empty, "--timeout", "20s"]);
    let denied = k.kubectl_err(&["delete", "stack", "fresh", "-n", &ns], None);
    assert!(denied.contains("protected by Lock(s) [unseen]"), "{denied}");

    // Once the controller sees the Lock, it protects as any other.
    k.kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    env.until_lock(&ns, "unseen", true, "Protecting").await;
    assert_eq!(env.marker(&["stack", "fresh", "-n", &ns]), "unseen");
    assert!(!env.controller_log().contains("reconcile failed"));
}
