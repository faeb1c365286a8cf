//! A deletion interrupted anywhere finishes the same way: the real
//! service-lifecycle-controller is stopped between each pair of deletion
//! steps (the dev API server fails the controller's next request, then the
//! process is killed with SIGKILL) and started again; the end state is the
//! policy's, and nothing the policy keeps is deleted. And a replica that
//! has lost its Lease never drops a database. A Stack's prune that waits
//! for approval keeps the time it started to wait across a restart.
//!
//! Each test starts its own environment: they kill the controller and
//! inject faults, which would disturb tests sharing one.

use std::time::Duration;

use navique_e2e::eventually;
use navique_e2e::services::{CONTROLLER_REPLICA, ServiceEnv, on_server};
use navique_e2e::stacks::{STACK_ACCOUNT, bind_service_account};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const RETAINED: &str = "{.metadata.labels.services\\.kube-dc\\.com/retained}";
const ERRORS: &str = "navique_service_lifecycle_controller_managed_service_reconcile_errors_total";

/// Fails the controller's requests matching `fault` until the controller
/// has met it in the deletion (its error counter for `error` grew and
/// `reached` holds), then kills it.
async fn crash_at(
    env: &ServiceEnv,
    fault: serde_json::Value,
    error: &str,
    reached: impl Fn() -> bool,
    delete: impl FnOnce(),
) {
    let metric = format!("{ERRORS}{{error=\"{error}\"}} ");
    let before = env.controller_metric(&metric).await;
    env.fail_controller_requests(fault);
    delete();
    eventually(
        WAIT,
        &format!("the controller to fail with {error}"),
        || async { (env.controller_metric(&metric).await > before && reached()).then_some(()) },
    )
    .await;
    env.kill_controller();
    env.clear_faults();
}

async fn restart(env: &ServiceEnv) {
    env.start_controller(&[]);
    env.controller_ready().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_delete_finishes_after_a_restart_at_every_step() {
    let env = ServiceEnv::start(&[]);
    env.controller_ready().await;
    let steps = [
        (
            "status",
            json!({"verb": "patch", "resource": "managedservices", "subresource": "status"}),
            "write_status",
        ),
        (
            "drop",
            json!({"verb": "get", "resource": "secrets", "namespace": "navique-system"}),
            "read",
        ),
        (
            "finalizer",
            json!({"verb": "patch", "resource": "managedservices", "subresource": ""}),
            "finalizer",
        ),
    ];
    for (i, (before, fault, error)) in steps.into_iter().enumerate() {
        let ns = env.cluster.namespace(&format!("crash-{before}"));
        let db = format!("crash_delete_{i}");
        env.apply(&env.orders_db(&ns, &db, "Delete", false)).await;
        env.until_state(&ns, "orders-db", "Ready Available").await;
        let blocked = || {
            before != "drop"
                || env
                    .state(&ns, "orders-db")
                    .starts_with("Deleting DeletionBlocked")
        };
        crash_at(&env, fault, error, blocked, || {
            env.start_deleting(&ns, "orders-db");
        })
        .await;
        // Where it stopped.
        match before {
            "status" => {
                assert_eq!(env.field(&ns, "orders-db", "{.status.phase}"), "Ready");
                assert!(env.postgres.database_exists(&on_server(&ns, &db)));
            }
            "drop" => {
                assert!(
                    env.state(&ns, "orders-db")
                        .starts_with("Deleting DeletionBlocked")
                );
                assert!(env.postgres.database_exists(&on_server(&ns, &db)));
            }
            _ => {
                assert!(
                    !env.postgres.database_exists(&on_server(&ns, &db)),
                    "dropped, finalizer kept"
                );
                assert_ne!(env.field(&ns, "orders-db", "{.metadata.name}"), "");
            }
        }
        restart(&env).await;
        env.until_gone(&ns, "orders-db").await;
        assert!(
            !env.postgres.database_exists(&on_server(&ns, &db)),
            "after a crash before the {before}"
        );
        assert!(!env.postgres.role_exists(&on_server(&ns, &db)));
        eventually(WAIT, "the credential Secret to be collected", || async {
            env.get(&ns, "secret/orders-db-credentials", "{.metadata.name}")
                .is_empty()
                .then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_retain_keeps_everything_after_a_restart() {
    let env = ServiceEnv::start(&[]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("crash-retain");
    let db = "crash_retain";
    env.apply(&env.orders_db(&ns, db, "Retain", false)).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    // Stopped after the Secret was let go of, before the Service.
    crash_at(
        &env,
        json!({"verb": "patch", "resource": "services"}),
        "write",
        || env.get(&ns, "secret/orders-db-credentials", RETAINED) == "true",
        || {
            env.start_deleting(&ns, "orders-db");
        },
    )
    .await;
    assert_eq!(
        env.get(&ns, "secret/orders-db-credentials", RETAINED),
        "true"
    );
    assert_eq!(env.get(&ns, "service/orders-db", RETAINED), "");
    restart(&env).await;
    env.until_gone(&ns, "orders-db").await;
    // Garbage collection had time to take anything still owned.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for object in ["secret/orders-db-credentials", "service/orders-db"] {
        assert_eq!(env.get(&ns, object, RETAINED), "true", "{object}");
    }
    assert!(env.postgres.database_exists(&on_server(&ns, db)));
    assert!(env.postgres.role_exists(&on_server(&ns, db)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_in_project_delete_removes_the_volume_after_a_restart() {
    let env = ServiceEnv::start(&[]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("crash-inproject");
    let manifest = ServiceEnv::in_project(&env.orders_db(&ns, "orders", "Delete", false));
    env.apply(&manifest).await;
    env.until_state(&ns, "orders-db", "Provisioning").await;
    // The claim the StatefulSet controller would make.
    env.cluster.kubectl_in(
        &["apply", "-n", &ns, "-f", "-"],
        Some("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-orders-db-0\n  labels: {services.kube-dc.com/service: orders-db}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Gi}}\n"),
    );
    eventually(WAIT, "the StatefulSet", || async {
        (!env
            .get(&ns, "statefulset/orders-db", "{.metadata.name}")
            .is_empty())
        .then_some(())
    })
    .await;
    // Stopped after the StatefulSet was deleted, before its volume.
    crash_at(
        &env,
        json!({"verb": "delete", "resource": "persistentvolumeclaims"}),
        "delete",
        || {
            env.get(&ns, "statefulset/orders-db", "{.metadata.name}")
                .is_empty()
        },
        || {
            env.start_deleting(&ns, "orders-db");
        },
    )
    .await;
    assert_eq!(
        env.get(&ns, "statefulset/orders-db", "{.metadata.name}"),
        ""
    );
    assert_eq!(
        env.get(&ns, "pvc/data-orders-db-0", "{.metadata.name}"),
        "data-orders-db-0"
    );
    restart(&env).await;
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(env.get(&ns, "pvc/data-orders-db-0", "{.metadata.name}"), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_lost_its_lease_never_drops_the_database() {
    // Renewals every 55 s: the replica would not notice the loss by itself
    // during the test, only the check before the drop can.
    let env = ServiceEnv::start(&["--lease-duration", "60", "--lease-grace", "5"]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("lease");
    let db = "lease_orders";
    env.apply(&env.orders_db(&ns, db, "Delete", false)).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;

    let take_lease = |holder: &str| {
        let patch = json!({"spec": {
            "holderIdentity": holder,
            "renewTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }});
        env.cluster.kubectl_ok(&[
            "patch",
            "lease",
            "service-lifecycle-controller",
            "-n",
            "navique-system",
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
        ]);
    };
    // Another replica took the Lease while this one was paused.
    take_lease("service-lifecycle-controller-1");
    env.start_deleting(&ns, "orders-db");
    let blocked = env
        .until_state(&ns, "orders-db", "Deleting DeletionBlocked: not deleting")
        .await;
    assert_eq!(
        blocked,
        "Deleting DeletionBlocked: not deleting: this replica cannot confirm it still leads: lost leadership of Lease navique-system/service-lifecycle-controller; stopping so that only the new leader reconciles"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "a stale leader dropped nothing"
    );

    // The Lease back: the deletion completes.
    take_lease(CONTROLLER_REPLICA);
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));
}

/// The status row of `name` in Stack `ns/app`, once `check` accepts it.
async fn until_row(
    env: &ServiceEnv,
    ns: &str,
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(WAIT, &format!("the row of {name}"), || async {
        let json = env
            .cluster
            .kubectl_ok(&["get", "stack", "app", "-n", ns, "-o", "json"]);
        let stack: Value = serde_json::from_str(&json).ok()?;
        stack["status"]["resources"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == name)
            .filter(|r| check(r))
            .cloned()
    })
    .await
}

/// Idempotent across restarts: a prune waiting for approval keeps the
/// `waitingSince` its first pass recorded when the controller is killed
/// and started again, and the new process's oldest-wait gauge counts from
/// it, not from its own start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_prune_keeps_the_time_it_started_to_wait_across_a_restart() {
    let env = ServiceEnv::start(&[]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("restart-wait");
    bind_service_account(&env.cluster, &ns, STACK_ACCOUNT, "edit");
    let apply = |names: &[&str]| {
        let resources: Vec<Value> = names
            .iter()
            .map(|name| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "annotations": {"cd.hanzo.ai/sync-options": "Prune=confirm"}},
                    "data": {"name": name}})
            })
            .collect();
        let stack = json!({"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
            "metadata": {"name": "app", "namespace": ns}, "spec": {"resources": resources}});
        env.cluster
            .kubectl_in(&["apply", "-f", "-"], Some(&stack.to_string()));
    };
    apply(&["kept", "settings"]);
    until_row(&env, &ns, "settings", |r| r["status"] == "Synced").await;
    apply(&["kept"]);
    let waiting = until_row(&env, &ns, "settings", |r| {
        r["requiresDeletionApproval"] == true
    })
    .await;
    let since = waiting["waitingSince"].clone();
    assert!(since.is_string(), "{waiting}");

    env.kill_controller();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restarted = std::time::Instant::now();
    restart(&env).await;
    const PENDING: &str = "navique_service_lifecycle_controller_pending_approvals ";
    const OLDEST: &str = "navique_service_lifecycle_controller_oldest_pending_approval_seconds ";
    let oldest = eventually(WAIT, "the new process to see the wait", || async {
        (env.controller_metric(PENDING).await >= 1.0).then_some(())?;
        Some(env.controller_metric(OLDEST).await)
    })
    .await;
    let up = restarted.elapsed().as_secs_f64();
    assert!(oldest > up + 4.0, "oldest {oldest} s, restarted {up} s ago");
    // Passes of the new process (every 2 s while it waits) keep the time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kept = until_row(&env, &ns, "settings", |r| {
        r["requiresDeletionApproval"] == true
    })
    .await;
    assert_eq!(kept["waitingSince"], since, "{kept}");
}
