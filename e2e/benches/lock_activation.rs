//! Time from Lock creation to `status.active: true` for 1,000 Locks created
//! at once, and the lock-controller's memory at that size, measured on the
//! real lock-controller against the dev API server.
//!
//! Run: `make bench-locks` (`cargo bench -p navique-e2e --bench lock_activation`;
//! needs the workspace binaries built in release: `cargo build --release --bins`).
//! Figures are recorded in docs/locks.md.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use navique_e2e::locks::{GuardMode, LockEnv};

const LOCKS: usize = 1_000;
const WRITERS: usize = 16;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = LockEnv::start(GuardMode::Policy);
    env.ready().await;
    let client = env.cluster.client().await;
    let namespace = env.cluster.namespace("bench");
    let resource = |kind: &str| {
        ApiResource::from_gvk(&GroupVersionKind::gvk("core.navique.com", "v1alpha1", kind))
    };
    let stacks: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &resource("Stack"));
    let locks: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &resource("Lock"));

    for chunk in (0..LOCKS).collect::<Vec<_>>().chunks(LOCKS / WRITERS) {
        let futures = chunk.iter().map(|i| {
            let stack: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
                "metadata": {"name": format!("stack-{i:04}")}, "spec": {"resources": []},
            }))
            .expect("stack");
            let stacks = stacks.clone();
            async move { stacks.create(&PostParams::default(), &stack).await }
        });
        futures::future::try_join_all(futures).await?;
    }

    // Watch Locks before creating them, and note when each turns active.
    let mut watch = locks
        .watch(&WatchParams::default().timeout(290), "0")
        .await?
        .boxed();
    let created: HashMap<String, Instant> = {
        let mut created = HashMap::new();
        let started = Instant::now();
        let all: Vec<usize> = (0..LOCKS).collect();
        for chunk in all.chunks(LOCKS / WRITERS) {
            let futures = chunk.iter().map(|i| {
                let lock: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": "core.navique.com/v1alpha1", "kind": "Lock",
                    "metadata": {"name": format!("lock-{i:04}")},
                    "spec": {"targetRef": {"kind": "Stack", "name": format!("stack-{i:04}")}},
                }))
                .expect("lock");
                let locks = locks.clone();
                async move {
                    locks
                        .create(&PostParams::default(), &lock)
                        .await
                        .map(|_| (format!("lock-{i:04}"), Instant::now()))
                }
            });
            created.extend(futures::future::try_join_all(futures).await?);
        }
        println!("created {LOCKS} Locks in {:.2?}", started.elapsed());
        created
    };
    let mut latencies = Vec::with_capacity(LOCKS);
    let mut active = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while active.len() < LOCKS && Instant::now() < deadline {
        let Some(event) = tokio::time::timeout(Duration::from_secs(60), watch.try_next()).await??
        else {
            break;
        };
        if let WatchEvent::Added(lock) | WatchEvent::Modified(lock) = event {
            let name = lock.metadata.name.clone().unwrap_or_default();
            if lock.data["status"]["active"] == true && active.insert(name.clone()) {
                latencies.push(created[&name].elapsed());
            }
        }
    }
    latencies.sort();
    let percentile =
        |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "activation of {} Locks: p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        latencies.len(),
        percentile(0.50),
        percentile(0.99),
        latencies.last().copied().unwrap_or_default()
    );
    let metrics = navique_e2e::http_get(env.controller_admin, "/metrics")
        .await
        .map_err(anyhow::Error::msg)?;
    for line in metrics
        .body
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("memory_bytes "))
    {
        let (name, value) = line.rsplit_once(' ').unwrap_or_default();
        let mib = value.parse::<f64>().unwrap_or_default() / (1024.0 * 1024.0);
        println!("{name}: {mib:.1} MiB");
    }
    anyhow::ensure!(
        latencies.len() == LOCKS,
        "only {} of {LOCKS} Locks turned active",
        latencies.len()
    );
    Ok(())
}
