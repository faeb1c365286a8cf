//! Break-glass: a Lock suspended until a time, by someone holding the
//! `suspend` verb, lets its target's delete through and re-locks by itself
//! at the deadline, in both guard modes. The chart's limit is set short
//! (`lockGuard.maxSuspension=20s`). Tried as attackers: a user who may
//! update Locks but not suspend them (privileged deputy), one writing
//! someone else's name (identity by name), one asking for longer than the
//! limit or giving no reason (fail open).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use navique_e2e::eventually;
use navique_e2e::locks::{GuardMode, LockEnv, lock, stack};
use navique_e2e::plugin::kubectl_navique;

const CHART: &[&str] = &["--set", "lockGuard.maxSuspension=20s"];
const WAIT: Duration = Duration::from_secs(30);
const UNTIL: &str = "core.navique.com/suspended-until";
const REASON: &str = "core.navique.com/suspend-reason";
const BY: &str = "core.navique.com/suspended-by";

/// `seconds` from now, as `suspended-until` takes it.
fn in_seconds(seconds: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second() + seconds)
        .unwrap()
        .to_string()
}

/// A user who may update (and patch) Locks in `ns`, but not suspend them.
fn lock_updater(ns: &str, user: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: lock-updater, namespace: {ns}}}
rules:
- {{apiGroups: [core.navique.com], resources: [locks], verbs: [get, list, watch, update, patch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: lock-updater, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: lock-updater}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
"
    )
}

async fn break_glass(mode: GuardMode) {
    let env = LockEnv::start_with(mode, CHART);
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("breakglass");
    // oncall may suspend (the chart's lock-suspender role) but not delete
    // Locks; erin may update Locks but not suspend them.
    k.bind_role(&ns, "oncall", "navique-lock-suspender");
    k.kubectl_in(&["apply", "-f", "-"], Some(&lock_updater(&ns, "erin")));
    let objects = stack(&ns, "storefront")
        + "---\n"
        + &lock(
            &ns,
            "keep",
            "core.navique.com/v1alpha1",
            "Stack",
            "storefront",
            "Black Friday",
        );
    k.kubectl_in(&["apply", "-f", "-"], Some(&objects));
    env.until_lock(&ns, "keep", true, "Protecting").await;
    let annotate = |user: &str, pairs: &[String]| {
        let mut args = vec![
            "annotate",
            "lock",
            "keep",
            "-n",
            &ns,
            "--overwrite",
            "--as",
            user,
        ];
        args.extend(pairs.iter().map(String::as_str));
        k.kubectl(&args, None)
    };
    let refused = |user: &str, pairs: &[String], message: &str| {
        let out = annotate(user, pairs);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{user} {pairs:?} was admitted");
        assert!(err.contains(message), "{user} {pairs:?}: {err}");
        assert!(err.contains("(Forbidden)"), "{err}");
    };
    let until = in_seconds(15);
    let suspension = |until: &str, reason: &str, by: &str| {
        vec![
            format!("{UNTIL}={until}"),
            format!("{REASON}={reason}"),
            format!("{BY}={by}"),
        ]
    };

    // privileged deputy: updating a Lock does not give suspending it.
    k.kubectl_ok(&[
        "label",
        "lock",
        "keep",
        "-n",
        &ns,
        "team=shop",
        "--as",
        "erin",
    ]);
    refused(
        "erin",
        &suspension(&until, "restore drill", "erin"),
        &format!(
            "erin may not suspend or resume Lock {ns}/keep: that needs the suspend verb on locks.core.navique.com, which update and delete do not give"
        ),
    );
    // identity by name: nobody suspends in another's name.
    refused(
        "oncall",
        &suspension(&until, "restore drill", "alice"),
        "core.navique.com/suspended-by must be the user who suspends the Lock, oncall, not \"alice\"",
    );
    // fail open: no reason, or a time that does not read, is refused.
    refused(
        "oncall",
        &[format!("{UNTIL}={until}"), format!("{BY}=oncall")],
        "core.navique.com/suspend-reason is required: say why the Lock is suspended",
    );
    refused(
        "oncall",
        &suspension("tomorrow", "restore drill", "oncall"),
        "core.navique.com/suspended-until must be a time in UTC such as 2026-12-01T19:30:00Z, not \"tomorrow\"",
    );
    // The suspender may not delete the Lock itself.
    let err = k.kubectl_err(
        &["delete", "lock", "keep", "-n", &ns, "--as", "oncall"],
        None,
    );
    assert!(err.contains("forbidden"), "{err}");

    // Beyond the limit: admitted (admission has no clock), refused by the
    // lock-controller; the Lock stays active and says why.
    let too_long = in_seconds(600);
    assert!(
        annotate("oncall", &suspension(&too_long, "restore drill", "oncall"))
            .status
            .success()
    );
    eventually(WAIT, "the suspension to be refused", || async {
        (env.lock_field(&ns, "keep", "{.status.suspension.state}") == "Refused").then_some(())
    })
    .await;
    let message = env.lock_field(&ns, "keep", "{.status.suspension.message}");
    assert!(
        message.starts_with(&format!(
            "core.navique.com/suspended-until {too_long} is more than 20s (lockGuard.maxSuspension) after the suspension was seen at "
        )) && message.ends_with(": the Lock stays active"),
        "{message}"
    );
    assert_eq!(env.lock_field(&ns, "keep", "{.status.active}"), "true");
    assert_eq!(
        k.event_messages(&ns, "SuspensionRefused"),
        format!("Warning {message}\n")
    );
    let err = k.kubectl_err(&["delete", "stack", "storefront", "-n", &ns], None);
    assert!(
        err.contains("resource is protected by Lock(s) [keep]"),
        "{err}"
    );

    // Within the limit: the Lock stops protecting, recording who and why.
    assert!(
        annotate("oncall", &suspension(&until, "restore drill", "oncall"))
            .status
            .success()
    );
    env.until_lock(&ns, "keep", false, "Suspended").await;
    let suspended = format!(
        "suspended by oncall until {until} (restore drill): this Lock does not protect Stack storefront until then"
    );
    assert_eq!(
        env.lock_field(
            &ns,
            "keep",
            r#"{.status.conditions[?(@.type=="Ready")].message}"#
        ),
        suspended
    );
    assert_eq!(
        env.lock_field(&ns, "keep", "{.status.suspension.suspendedBy}"),
        "oncall"
    );
    assert_eq!(
        env.lock_field(&ns, "keep", "{.status.suspension.reason}"),
        "restore drill"
    );
    assert_eq!(
        env.lock_field(&ns, "keep", "{.status.suspension.until}"),
        until
    );
    assert_eq!(
        k.event_messages(&ns, "LockSuspended"),
        format!("Normal {suspended}\n")
    );
    assert_eq!(env.marker(&["stack", "storefront", "-n", &ns]), "");

    // The delete passes; the Lock object stays.
    k.kubectl_ok(&["delete", "stack", "storefront", "-n", &ns]);
    k.kubectl_ok(&["get", "lock", "keep", "-n", &ns]);
    // A new storefront is not stamped while the suspension lasts...
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "storefront")));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(env.marker(&["stack", "storefront", "-n", &ns]), "");

    // ...and is at the deadline, by the Lock itself.
    env.until_lock(&ns, "keep", true, "Protecting").await;
    assert_eq!(env.marker(&["stack", "storefront", "-n", &ns]), "keep");
    assert_eq!(
        env.lock_field(&ns, "keep", "{.status.suspension.state}"),
        "Ended"
    );
    assert_eq!(
        k.event_messages(&ns, "LockResumed"),
        format!(
            "Normal the suspension by oncall ended at {until}: protecting Stack storefront again\n"
        )
    );
    let err = k.kubectl_err(&["delete", "stack", "storefront", "-n", &ns], None);
    assert!(
        err.contains("resource is protected by Lock(s) [keep]"),
        "{err}"
    );

    // Lifting the (ended) suspension needs the verb too; the suspender may.
    refused(
        "erin",
        &[format!("{UNTIL}-"), format!("{REASON}-"), format!("{BY}-")],
        "erin may not suspend or resume Lock",
    );
    assert!(
        annotate(
            "oncall",
            &[format!("{UNTIL}-"), format!("{REASON}-"), format!("{BY}-")]
        )
        .status
        .success()
    );
    assert_eq!(env.lock_field(&ns, "keep", "{.status.active}"), "true");

    // The plugin computes the deadline and names the user the API server
    // authenticates; resuming early ends the suspension.
    k.add_user("oncall", &[]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = k.kubeconfig_for("oncall-token", dir.path());
    let plugin = |args: &[&str]| {
        let run = kubectl_navique(k, &kubeconfig, args);
        assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
        run.stdout
    };
    let out = plugin(&[
        "suspend",
        "keep",
        "--for",
        "15s",
        "--reason",
        "second drill",
        "-n",
        &ns,
    ]);
    assert!(
        out.starts_with("lock.core.navique.com/keep suspended by oncall until ")
            && out.ends_with(&format!(
                " (second drill); `kubectl get lock keep -n {ns}` shows when it takes effect\n"
            )),
        "{out}"
    );
    env.until_lock(&ns, "keep", false, "Suspended").await;
    assert_eq!(env.marker(&["stack", "storefront", "-n", &ns]), "");
    assert_eq!(
        plugin(&["resume", "keep", "-n", &ns]),
        format!(
            "lock.core.navique.com/keep resumed; `kubectl get lock keep -n {ns}` shows when it protects again\n"
        )
    );
    env.until_lock(&ns, "keep", true, "Protecting").await;
    assert_eq!(env.marker(&["stack", "storefront", "-n", &ns]), "keep");
    let resumed = k.event_messages(&ns, "LockResumed");
    assert!(
        resumed.ends_with(
            "Normal the suspension by oncall was lifted before its deadline: protecting Stack storefront again\n"
        ),
        "{resumed}"
    );
}

#[tokio::test]
async fn a_suspension_lets_a_delete_through_and_ends_by_itself_with_the_policy_guard() {
    break_glass(GuardMode::Policy).await;
}

#[tokio::test]
async fn a_suspension_lets_a_delete_through_and_ends_by_itself_with_the_webhook_guard() {
    break_glass(GuardMode::Webhook).await;
}

/// A suspended namespace-wide Lock lifts its namespace's protection while
/// the suspension lasts, and puts it back at the deadline by itself.
#[tokio::test]
async fn a_suspended_namespace_wide_lock_lets_deletes_through_until_the_deadline() {
    let env = LockEnv::start_with(
        GuardMode::Policy,
        &[
            "--set",
            "lockGuard.maxSuspension=20s",
            "--set",
            "lockGuard.namespaceLocks=true",
        ],
    );
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("freeze");
    k.bind_role(&ns, "oncall", "navique-lock-suspender");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "storefront")));
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(&ns, "freeze", "v1", "Namespace", &ns, "release week")),
    );
    env.until_lock(&ns, "freeze", true, "Protecting").await;
    let namespace_locked = || {
        k.kubectl_ok(&[
            "get",
            "namespace",
            &ns,
            "-o",
            r"jsonpath={.metadata.annotations.core\.navique\.com/namespace-locked}",
        ])
    };
    assert_eq!(namespace_locked(), "freeze");
    let err = k.kubectl_err(&["delete", "stack", "storefront", "-n", &ns], None);
    assert!(err.contains("protected by Lock(s) [freeze]"), "{err}");

    let until = in_seconds(12);
    k.kubectl_ok(&[
        "annotate",
        "lock",
        "freeze",
        "-n",
        &ns,
        "--as",
        "oncall",
        &format!("{UNTIL}={until}"),
        &format!("{REASON}=hotfix"),
        &format!("{BY}=oncall"),
    ]);
    env.until_lock(&ns, "freeze", false, "Suspended").await;
    assert_eq!(namespace_locked(), "");
    k.kubectl_ok(&["delete", "stack", "storefront", "-n", &ns]);

    // At the deadline the namespace is locked again, by the Lock itself.
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "storefront")));
    env.until_lock(&ns, "freeze", true, "Protecting").await;
    assert_eq!(namespace_locked(), "freeze");
    let err = k.kubectl_err(&["delete", "stack", "storefront", "-n", &ns], None);
    assert!(err.contains("protected by Lock(s) [freeze]"), "{err}");
}
