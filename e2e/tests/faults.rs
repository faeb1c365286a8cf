//! Faults injected into the dev API server reach clients as a real server's
//! failures would, so reliability tests can run against it.

use std::time::{Duration, Instant};

use navique_e2e::Cluster;

#[test]
fn injected_failures_and_delays_reach_the_client_then_clear() {
    let cluster = Cluster::dev(&[]);
    let ns = cluster.namespace("faults");
    cluster.post_raw(
        "/debug/faults",
        &format!(r#"{{"faults": [{{"verb": "list", "resource": "configmaps", "namespace": "{ns}", "code": 503, "message": "etcd is having a bad day", "times": 1}}]}}"#),
    );
    let err = cluster.kubectl_err(&["get", "configmaps", "-n", &ns], None);
    assert_eq!(
        err,
        "Error from server (ServiceUnavailable): etcd is having a bad day\n"
    );
    assert!(
        cluster
            .kubectl(&["get", "configmaps", "-n", &ns], None)
            .status
            .success(),
        "the fault applied once"
    );

    cluster.post_raw(
        "/debug/faults",
        &format!(r#"{{"faults": [{{"verb": "create", "resource": "configmaps", "namespace": "{ns}", "delayMs": 1500}}]}}"#),
    );
    let started = Instant::now();
    cluster.kubectl_ok(&["create", "configmap", "slow", "-n", &ns]);
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "the create was delayed"
    );
    cluster.kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    let started = Instant::now();
    cluster.kubectl_ok(&["create", "configmap", "fast", "-n", &ns]);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "faults cleared"
    );
}

#[tokio::test]
async fn a_kube_rs_watcher_survives_dropped_watches() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    use kube::runtime::{WatchStreamExt, watcher};

    let cluster = Cluster::dev(&[]);
    let ns = cluster.namespace("drops");
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().await, &ns);
    let mut names = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .map(|o| o.ok().and_then(|o| o.metadata.name))
        .boxed();
    let create = |name: &'static str| {
        let api = api.clone();
        async move {
            let cm: ConfigMap =
                serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
    };
    create("first").await;
    let wait = Duration::from_secs(20);
    let first = tokio::time::timeout(wait, names.next())
        .await
        .expect("an event")
        .flatten();
    assert_eq!(first.as_deref(), Some("first"));
    cluster.post_raw("/debug/drop-watches", "{}");
    create("second").await;
    let second = tokio::time::timeout(wait, names.next())
        .await
        .expect("an event")
        .flatten();
    assert_eq!(second.as_deref(), Some("second"));
}
