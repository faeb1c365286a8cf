//! The Locks guide's behaviour, as scenarios both guard modes must pass.

use std::time::Duration;

use crate::locks::{GuardMode, LOCK_CONTROLLER_USER, LockEnv, lock, names, seed_manifest, stack};
use crate::readable::assert_readable;
use crate::{eventually, http_get};

const WAIT: Duration = Duration::from_secs(20);
const SEED_DENIAL: &str = "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource";

/// The seed verbatim: `kubectl delete stack forge -n forge` is refused with
/// the seed's message and the Lock's reason; after the Lock is deleted the
/// same delete succeeds.
pub async fn the_seed_example(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    k.kubectl_ok(&["create", "namespace", "forge"]);
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&seed_manifest("forge-stack.yaml", "forge")),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&seed_manifest("lock.yaml", "forge")),
    );
    env.until_lock("forge", "protect-forge-stack", true, "Protecting")
        .await;
    assert_eq!(
        env.lock_field("forge", "protect-forge-stack", "{.status.reason}"),
        "Production environment — remove this Lock deliberately before deleting."
    );

    let denied = k.kubectl(&["delete", "stack", "forge", "-n", "forge"], None);
    assert_eq!(denied.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.starts_with("Error from server (Forbidden): "),
        "{stderr}"
    );
    assert!(stderr.contains(SEED_DENIAL), "{stderr}");
    assert!(
        stderr.contains("(reasons: protect-forge-stack: Production environment — remove this Lock deliberately before deleting.)"),
        "{stderr}"
    );

    k.kubectl_ok(&["delete", "lock", "protect-forge-stack", "-n", "forge"]);
    assert_eq!(
        k.kubectl_ok(&["delete", "stack", "forge", "-n", "forge"]),
        "stack.core.navique.com \"forge\" deleted\n"
    );
    k.kubectl_ok(&["delete", "namespace", "forge"]);
}

/// Two Locks on one target: both named; one gone keeps it protected; both
/// gone lifts the protection.
pub async fn two_locks_stack(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("two-locks");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "app")));
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "lock-b",
            "core.navique.com/v1alpha1",
            "Stack",
            "app",
            "",
        )),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "lock-a",
            "core.navique.com/v1alpha1",
            "Stack",
            "app",
            "audit",
        )),
    );
    env.until_lock(&ns, "lock-a", true, "Protecting").await;
    env.until_lock(&ns, "lock-b", true, "Protecting").await;
    let err = k.kubectl_err(&["delete", "stack", "app", "-n", &ns], None);
    assert!(
        err.contains("resource is protected by Lock(s) [lock-a, lock-b]; delete the Lock(s) before deleting this resource (reasons: lock-a: audit)"),
        "{err}"
    );
    k.kubectl_ok(&["delete", "lock", "lock-a", "-n", &ns]);
    let err = k.kubectl_err(&["delete", "stack", "app", "-n", &ns], None);
    assert!(
        err.contains("resource is protected by Lock(s) [lock-b]; delete"),
        "{err}"
    );
    k.kubectl_ok(&["delete", "lock", "lock-b", "-n", &ns]);
    assert_eq!(env.marker(&["stack", "app", "-n", &ns]), "");
    k.kubectl_ok(&["delete", "stack", "app", "-n", &ns]);
}

/// A Lock before its target is MissingReference, then active once the
/// target exists; invalid targets are refused in status and stamp nothing.
pub async fn missing_and_invalid_targets(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("targets");
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "early",
            "core.navique.com/v1alpha1",
            "Stack",
            "later",
            "",
        )),
    );
    env.until_lock(&ns, "early", false, "MissingReference")
        .await;
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "later")));
    env.until_lock(&ns, "early", true, "Protecting").await;
    assert_eq!(env.marker(&["stack", "later", "-n", &ns]), "early");

    k.kubectl_ok(&["create", "configmap", "settings", "-n", &ns]);
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "on-configmap",
            "v1",
            "ConfigMap",
            "settings",
            "",
        )),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "on-lock",
            "core.navique.com/v1alpha1",
            "Lock",
            "early",
            "",
        )),
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(&ns, "on-apps", "apps/v1", "Deployment", "web", "")),
    );
    for name in ["on-configmap", "on-lock", "on-apps"] {
        env.until_lock(&ns, name, false, "InvalidTarget").await;
    }
    assert_eq!(env.marker(&["configmap", "settings", "-n", &ns]), "");
    assert_eq!(env.marker(&["lock", "early", "-n", &ns]), "");
}

/// What a platform engineer sees of broken Locks: `kubectl apply` warns
/// (policy mode), `kubectl get lck -o wide` shows why, each Lock records
/// one Event per change with the status message, and a valid Lock records
/// Protecting and TargetStamped, then TargetCleared as it goes.
pub async fn broken_locks_are_visible(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("visible");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "forge")));
    let groups = "only objects of core.navique.com, services.kube-dc.com can be locked";
    let add_group = |group: &str| {
        format!(
            "to lock objects of {group}, add it to the lock-controller's --enforceable-groups and the guard's groups (Helm value lockGuard.groups)"
        )
    };
    let broken = [
        (
            "typo",
            "core.navique.com/v1alpha1",
            "Stak",
            "kind Stak is not served by core.navique.com/v1alpha1".to_owned(),
        ),
        (
            "lowercase",
            "core.navique.com/v1alpha1",
            "stack",
            "kind stack is not served by core.navique.com/v1alpha1".to_owned(),
        ),
        (
            "on-configmap",
            "v1",
            "ConfigMap",
            format!(
                "targetRef.apiVersion v1 is not enforceable: {groups}; to lock objects of the core group (v1), add core to the lock-controller's --enforceable-groups and the guard's groups (Helm values lockGuard.groups and lockGuard.resources.core)"
            ),
        ),
        (
            "on-deployment",
            "apps/v1",
            "Deployment",
            format!(
                "targetRef.apiVersion apps/v1 is not enforceable: {groups}; {}",
                add_group("apps")
            ),
        ),
    ];
    for (name, api_version, kind, message) in &broken {
        let out = k.kubectl(
            &["apply", "-f", "-"],
            Some(&lock(&ns, name, api_version, kind, "forge", "")),
        );
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("lock.core.navique.com/{name} created\n")
        );
        if env.mode == GuardMode::Policy {
            assert_eq!(
                stderr,
                format!(
                    "Warning: Validation failed for ValidatingAdmissionPolicy 'navique-lock-target' with binding 'navique-lock-target': {message}\n"
                ),
                "kubectl apply of Lock {name}"
            );
        }
    }
    let out = k.kubectl(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "keep",
            "core.navique.com/v1alpha1",
            "Stack",
            "forge",
            "production",
        )),
    );
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    for (name, ..) in &broken {
        env.until_lock(&ns, name, false, "InvalidTarget").await;
    }
    env.until_lock(&ns, "keep", true, "Protecting").await;

    // -o wide: STATUS is the Ready reason, REASON the Lock's spec.reason,
    // MESSAGE the Ready message.
    let wide = k.kubectl_ok(&["get", "lck", "-n", &ns, "-o", "wide"]);
    let mut lines = wide.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "KIND", "TARGET", "ACTIVE", "STATUS", "REASON", "AGE", "MESSAGE"
        ]
    );
    for (name, _, kind, message) in &broken {
        let row = wide
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{wide}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            &cells[..5],
            [*name, *kind, "forge", "false", "InvalidTarget"],
            "{wide}"
        );
        assert!(row.ends_with(message.as_str()), "{row}");
    }
    let keep = wide.lines().find(|l| l.starts_with("keep ")).unwrap();
    let cells: Vec<&str> = keep.split_whitespace().collect();
    assert_eq!(
        &cells[..6],
        ["keep", "Stack", "forge", "true", "Protecting", "production"]
    );
    assert!(keep.ends_with("protecting Stack forge"), "{keep}");

    // Events: one per Lock and change, regarding the Lock by uid.
    let events = |reason: &str| -> Vec<serde_json::Value> {
        let list: serde_json::Value = serde_json::from_str(&k.kubectl_ok(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns,
            "--field-selector",
            &format!("reason={reason}"),
            "-o",
            "json",
        ]))
        .unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    };
    let uid = |name: &str| env.lock_field(&ns, name, "{.metadata.uid}");
    let invalid = eventually(WAIT, "an InvalidTarget Event per broken Lock", || async {
        let found = events("InvalidTarget");
        (found.len() == broken.len()).then_some(found)
    })
    .await;
    for (name, _, _, message) in &broken {
        let event = invalid
            .iter()
            .find(|e| e["regarding"]["name"] == *name)
            .unwrap_or_else(|| panic!("no InvalidTarget Event on {name}: {invalid:?}"));
        assert_eq!(event["type"], "Warning");
        assert_eq!(event["note"], message.as_str());
        assert_eq!(event["regarding"]["kind"], "Lock");
        assert_eq!(event["regarding"]["uid"], uid(name).as_str());
        assert_eq!(event["reportingController"], "lock-controller");
    }
    let one = |reason: &str, name: &str| {
        let found: Vec<_> = events(reason)
            .into_iter()
            .filter(|e| e["regarding"]["name"] == name)
            .collect();
        assert_eq!(found.len(), 1, "one {reason} Event on {name}: {found:?}");
        found[0].clone()
    };
    let protecting = one("Protecting", "keep");
    assert_eq!(
        (protecting["type"].as_str(), protecting["note"].as_str()),
        (Some("Normal"), Some("protecting Stack forge"))
    );
    assert_eq!(protecting["regarding"]["uid"], uid("keep").as_str());
    let stamped = one("TargetStamped", "keep");
    assert_eq!(
        stamped["note"],
        "stamped Stack forge with core.navique.com/locked: deleting it is denied"
    );

    // A reconcile that changes nothing records nothing.
    k.kubectl_ok(&["annotate", "lock", "typo", "-n", &ns, "touched=1"]);
    k.kubectl_ok(&["annotate", "lock", "keep", "-n", &ns, "touched=1"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let typo = one("InvalidTarget", "typo");
    assert!(typo.get("series").is_none(), "no repeat: {typo}");
    one("Protecting", "keep");

    let described = k.kubectl_ok(&["describe", "lock", "keep", "-n", &ns]);
    let events_part = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events in describe:\n{described}"));
    for line in [
        "Normal  Protecting",
        "Normal  TargetStamped",
        "protecting Stack forge",
        "stamped Stack forge with core.navique.com/locked: deleting it is denied",
    ] {
        assert!(events_part.contains(line), "{line:?} in:\n{described}");
    }

    // Gauges by state.
    let metrics = http_get(env.controller_admin, "/metrics")
        .await
        .unwrap()
        .body;
    let gauge = |state: &str| -> i64 {
        let prefix = format!("navique_lock_controller_locks{{state=\"{state}\"}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in:\n{metrics}"))
    };
    assert!(gauge("invalid") >= 4, "{metrics}");
    assert!(gauge("active") >= 1, "{metrics}");
    gauge("missing");
    let active = metrics
        .lines()
        .find_map(|line| line.strip_prefix("navique_lock_controller_locks_active "))
        .unwrap();
    assert_eq!(
        active,
        gauge("active").to_string(),
        "locks_active = locks{{state=active}}"
    );

    k.kubectl_ok(&["delete", "lock", "keep", "-n", &ns]);
    let cleared = eventually(WAIT, "TargetCleared on the deleted Lock", || async {
        events("TargetCleared").into_iter().next()
    })
    .await;
    assert_eq!(
        cleared["note"],
        "cleared core.navique.com/locked from Stack forge: no Lock protects it now"
    );
    assert_readable(k, &ns);
}

/// A marker removed behind the controller's back is restored from the watch
/// event at once; the marker guard refuses anyone else's edit.
pub async fn tampering_is_refused_or_undone(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("tamper");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "app")));
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "keep",
            "core.navique.com/v1alpha1",
            "Stack",
            "app",
            "",
        )),
    );
    env.until_lock(&ns, "keep", true, "Protecting").await;

    let err = k.kubectl_err(
        &[
            "annotate",
            "stack",
            "app",
            "-n",
            &ns,
            "core.navique.com/locked-",
        ],
        None,
    );
    assert!(
        err.contains("are managed by the lock-controller; create or delete Locks instead"),
        "{err}"
    );
    assert_eq!(env.marker(&["stack", "app", "-n", &ns]), "keep");

    // Someone able to bypass the guard removes the marker: restored fast,
    // from the watch event (the controller resyncs nothing periodically).
    k.kubectl_ok(&[
        "annotate",
        "stack",
        "app",
        "-n",
        &ns,
        "core.navique.com/locked-",
        "--as",
        LOCK_CONTROLLER_USER,
    ]);
    eventually(
        Duration::from_secs(5),
        "the marker to be restored",
        || async { (env.marker(&["stack", "app", "-n", &ns]) == "keep").then_some(()) },
    )
    .await;
    let err = k.kubectl_err(&["delete", "stack", "app", "-n", &ns], None);
    assert!(
        err.contains("resource is protected by Lock(s) [keep]"),
        "{err}"
    );
}

/// Updates of a locked object work; its cascade-deleted owner goes, the
/// locked child stays.
pub async fn updates_pass_and_cascades_stop_at_the_lock(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("cascade");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "parent")));
    let uid = k.kubectl_ok(&[
        "get",
        "stack",
        "parent",
        "-n",
        &ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let child = format!(
        "{}  ownerReferences:\n  - apiVersion: core.navique.com/v1alpha1\n    kind: Stack\n    name: parent\n    uid: {uid}\n",
        stack(&ns, "child").replace("spec:\n  resources: []\n", "")
    ) + "spec:\n  resources: []\n";
    k.kubectl_in(&["apply", "-f", "-"], Some(&child));
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "child-lock",
            "core.navique.com/v1alpha1",
            "Stack",
            "child",
            "",
        )),
    );
    env.until_lock(&ns, "child-lock", true, "Protecting").await;

    k.kubectl_ok(&["label", "stack", "child", "-n", &ns, "tier=gold"]);
    k.kubectl_ok(&[
        "patch",
        "stack",
        "child",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"resources":[]}}"#,
    ]);

    k.kubectl_ok(&["delete", "stack", "parent", "-n", &ns]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        k.kubectl(&["get", "stack", "child", "-n", &ns], None)
            .status
            .success(),
        "the locked child survives"
    );
    assert_eq!(env.marker(&["stack", "child", "-n", &ns]), "child-lock");
}

/// Namespaces holding Locks, and CRDs with locked objects, cannot be
/// deleted; the label lists locked objects.
pub async fn namespaces_crds_and_the_label(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("guarded");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "locked")));
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "free")));
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&lock(
            &ns,
            "ns-lock",
            "core.navique.com/v1alpha1",
            "Stack",
            "locked",
            "",
        )),
    );
    env.until_lock(&ns, "ns-lock", true, "Protecting").await;

    let listed = k.kubectl_ok(&[
        "get",
        "stacks",
        "-A",
        "-l",
        "core.navique.com/locked=true",
        "-o",
        "json",
    ]);
    let mine: Vec<String> = names(&listed)
        .into_iter()
        .filter(|n| n.starts_with(&format!("{ns}/")))
        .collect();
    assert_eq!(mine, [format!("{ns}/locked")]);

    eventually(WAIT, "the namespace marker", || async {
        (env.marker(&["namespace", &ns]) == "ns-lock").then_some(())
    })
    .await;
    let err = k.kubectl_err(&["delete", "namespace", &ns], None);
    assert!(
        err.contains(&format!("namespace {ns} holds Lock(s) [ns-lock]; delete the Lock(s) before deleting this namespace")),
        "{err}"
    );
    eventually(WAIT, "the CRD marker", || async {
        env.marker(&["crd", "stacks.core.navique.com"])
            .contains(&format!("{ns}/ns-lock"))
            .then_some(())
    })
    .await;
    let err = k.kubectl_err(
        &[
            "delete",
            "crd",
            "stacks.core.navique.com",
            "--dry-run=server",
        ],
        None,
    );
    assert!(
        err.contains("stacks.core.navique.com has locked objects (Lock(s) ["),
        "{err}"
    );

    k.kubectl_ok(&["delete", "lock", "ns-lock", "-n", &ns]);
    eventually(WAIT, "the namespace marker to clear", || async {
        env.marker(&["namespace", &ns]).is_empty().then_some(())
    })
    .await;
    k.kubectl_ok(&["delete", "namespace", &ns, "--timeout", "20s"]);
}

/// Locks created and deleted together, whose reconciles coalesce their
/// writes of the Namespace marker (some return without waiting for a write
/// queued by another): once all are done, the marker names the first ten
/// and counts the rest, and the namespace's deletion is refused saying so.
pub async fn a_burst_leaves_the_namespace_marker_exact(env: &LockEnv) {
    env.ready().await;
    let k = &env.cluster;
    let ns = k.namespace("burst");
    let numbers = 1..=24;
    let stacks: Vec<String> = numbers
        .clone()
        .map(|n| stack(&ns, &format!("s-{n:02}")))
        .collect();
    k.kubectl_in(&["apply", "-f", "-"], Some(&stacks.join("---\n")));
    let locks: Vec<String> = numbers
        .clone()
        .map(|n| {
            let (name, target) = (format!("l-{n:02}"), format!("s-{n:02}"));
            lock(
                &ns,
                &name,
                "core.navique.com/v1alpha1",
                "Stack",
                &target,
                "",
            )
        })
        .collect();
    k.kubectl_in(&["apply", "-f", "-"], Some(&locks.join("---\n")));
    let first_ten = |from: usize| (from..from + 10).map(|n| format!("l-{n:02}"));
    let wanted = format!(
        "{},and 10+ more",
        first_ten(1).collect::<Vec<_>>().join(",")
    );
    eventually(
        WAIT,
        "the namespace marker to name ten and count 14",
        || async { (env.marker(&["namespace", &ns]) == wanted).then_some(()) },
    )
    .await;
    for n in numbers.clone() {
        env.until_lock(&ns, &format!("l-{n:02}"), true, "Protecting")
            .await;
    }
    assert_eq!(
        env.marker(&["namespace", &ns]),
        wanted,
        "all active, no write left"
    );
    let err = k.kubectl_err(&["delete", "namespace", &ns], None);
    assert!(
        err.contains(&format!(
            "namespace {ns} holds Lock(s) [{}, and 10+ more]; delete the Lock(s) before deleting this namespace",
            first_ten(1).collect::<Vec<_>>().join(", ")
        )),
        "{err}"
    );

    // Twelve go at once: the marker moves on to the next ten and the two
    // after them.
    let gone: Vec<String> = (1..=12).map(|n| format!("l-{n:02}")).collect();
    let mut delete = vec!["delete", "lock", "-n", &ns, "--wait=false"];
    delete.extend(gone.iter().map(String::as_str));
    k.kubectl_ok(&delete);
    let wanted = format!("{},and 2 more", first_ten(13).collect::<Vec<_>>().join(","));
    eventually(
        WAIT,
        "the namespace marker to name the next ten",
        || async { (env.marker(&["namespace", &ns]) == wanted).then_some(()) },
    )
    .await;

    k.kubectl_ok(&["delete", "locks", "--all", "-n", &ns]);
    eventually(WAIT, "the namespace marker to clear", || async {
        env.marker(&["namespace", &ns]).is_empty().then_some(())
    })
    .await;
    k.kubectl_ok(&["delete", "namespace", &ns, "--timeout", "20s"]);
}

/// The scenarios as `#[tokio::test]`s on one environment per test binary,
/// with the guard in the given [`GuardMode`](crate::locks::GuardMode).
#[macro_export]
macro_rules! lock_guard_tests {
    ($mode:expr) => {
        fn env() -> &'static $crate::locks::LockEnv {
            static ENV: std::sync::OnceLock<$crate::locks::LockEnv> = std::sync::OnceLock::new();
            ENV.get_or_init(|| $crate::locks::LockEnv::start($mode))
        }

        #[tokio::test]
        async fn the_seed_example_is_refused_until_the_lock_goes() {
            $crate::lock_scenarios::the_seed_example(env()).await;
        }

        #[tokio::test]
        async fn two_locks_both_protect_until_both_go() {
            $crate::lock_scenarios::two_locks_stack(env()).await;
        }

        #[tokio::test]
        async fn missing_targets_activate_later_and_invalid_ones_stamp_nothing() {
            $crate::lock_scenarios::missing_and_invalid_targets(env()).await;
        }

        #[tokio::test]
        async fn broken_locks_warn_show_why_and_record_events() {
            $crate::lock_scenarios::broken_locks_are_visible(env()).await;
        }

        #[tokio::test]
        async fn tampering_with_the_marker_is_refused_or_undone() {
            $crate::lock_scenarios::tampering_is_refused_or_undone(env()).await;
        }

        #[tokio::test]
        async fn updates_pass_and_cascades_stop_at_the_lock() {
            $crate::lock_scenarios::updates_pass_and_cascades_stop_at_the_lock(env()).await;
        }

        #[tokio::test]
        async fn namespaces_and_crds_with_locks_stay_and_the_label_lists_locked_objects() {
            $crate::lock_scenarios::namespaces_crds_and_the_label(env()).await;
        }

        #[tokio::test]
        async fn a_burst_of_locks_leaves_the_namespace_marker_exact() {
            $crate::lock_scenarios::a_burst_leaves_the_namespace_marker_exact(env()).await;
        }
    };
}
