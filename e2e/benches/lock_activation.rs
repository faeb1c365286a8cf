//! Time to `status.active: true` for Locks created at once (64 create
//! requests in flight), two ways: each Lock's, from its own create request,
//! and from the first create request of all; each beside its floor; the
//! lock-controller's memory at that size; and the API writes it makes at
//! rest. Measured on the real lock-controller against the dev API server,
//! one fresh environment per scenario: 1,000 Locks in one namespace,
//! 10,000 in one, 10,000 over 100.
//!
//! Also the CPU time the dev API server, the lock-controller and the
//! webhook spent from the first Lock's creation until every Lock was active
//! (their share of the two cores a burst saturates).
//!
//! As the chart installs it, the webhook's Lock finalizer rule
//! (`/mutate/locks`) stores each Lock with the controller's finalizer;
//! `NAVIQUE_BENCH_FINALIZER_WEBHOOK=0` leaves it out (and the webhook with
//! it), so that the controller writes the finalizer as it does without it.
//!
//! The floor is the dev API server's own time for the writes a Lock needs,
//! from a plain client in the same run: its target's marker and its status,
//! for as many Stacks, all started at once (64 in flight, as many as the
//! Lock creations), timed the same two ways: each pair from its first
//! request, and from the first request of all. Each ratio is activation
//! p99 over the floor's p99 timed the same way.
//!
//! Run: `make bench-locks` (`cargo bench -p navique-e2e --bench lock_activation`;
//! needs the workspace binaries built in release: `cargo build --release --bins`).
//! `NAVIQUE_BENCH_SCENARIOS=1000x1,10000x100` picks scenarios (Locks x
//! namespaces); `NAVIQUE_BENCH_IDLE_SECS` the idle window (60).
//! Figures are recorded in docs/locks.md.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use navique_e2e::locks::{GuardMode, LockEnv};

/// Requests in flight from the bench's client.
const IN_FLIGHT: usize = 64;
const DEFAULT_SCENARIOS: &str = "1000x1,10000x1,10000x100";

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("core.navique.com", "v1alpha1", kind))
}

fn object(kind: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "core.navique.com/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec,
    }))
    .expect("object")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let scenarios =
        std::env::var("NAVIQUE_BENCH_SCENARIOS").unwrap_or_else(|_| DEFAULT_SCENARIOS.into());
    let idle = Duration::from_secs(
        std::env::var("NAVIQUE_BENCH_IDLE_SECS").map_or(Ok(60), |s| s.parse())?,
    );
    for scenario in scenarios.split(',') {
        let (locks, namespaces) = scenario
            .split_once('x')
            .and_then(|(l, n)| Some((l.parse().ok()?, n.parse().ok()?)))
            .ok_or_else(|| anyhow::anyhow!("scenario {scenario:?} is not <locks>x<namespaces>"))?;
        run(locks, namespaces, idle).await?;
    }
    Ok(())
}

async fn run(count: usize, spread: usize, idle: Duration) -> anyhow::Result<()> {
    println!("== {count} Locks over {spread} namespace(s)");
    let finalizer_webhook = std::env::var("NAVIQUE_BENCH_FINALIZER_WEBHOOK").as_deref() != Ok("0");
    println!(
        "the webhook's Lock finalizer rule: {}",
        if finalizer_webhook { "on" } else { "off" }
    );
    let env = LockEnv::start_full(GuardMode::Policy, &[], finalizer_webhook);
    env.ready().await;
    let client = env.cluster.client().await;
    let namespaces: Vec<String> = (0..spread)
        .map(|_| env.cluster.namespace("bench"))
        .collect();
    // Lock i lives in namespace i % spread and targets stack-i there.
    let at = |i: usize| (namespaces[i % spread].as_str(), format!("{i:05}"));
    let api = |kind: &str, ns: &str| {
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource(kind))
    };

    let floor = floor(&client, &env, count).await?;
    let resident_before = resident(env.controller_admin).await?;

    futures::stream::iter(0..count)
        .map(|i| {
            let (ns, n) = at(i);
            let stack = object(
                "Stack",
                &format!("stack-{n}"),
                serde_json::json!({"resources": []}),
            );
            let stacks = api("Stack", ns);
            async move { stacks.create(&PostParams::default(), &stack).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;

    // Watch Locks before creating them, and note when each turns active
    // while they are being created: a watch read only once every Lock was
    // created fell behind the API server and timed each Lock by when the
    // bench got to it (the burst's length, at p99).
    let all_locks = Api::<DynamicObject>::all_with(client.clone(), &resource("Lock"));
    let watch = all_locks
        .watch(&WatchParams::default().timeout(290), "0")
        .await?
        .boxed();
    let observer = tokio::spawn(observe_activations(all_locks, watch, count));
    let (activated, activating) = tokio::sync::oneshot::channel::<()>();
    let activation_writes = tokio::spawn(count_until(watch_writes(&client).await?, async {
        let _ = activating.await;
    }));
    let api_pid = env
        .cluster
        .dev_pid()
        .ok_or_else(|| anyhow::anyhow!("the bench needs a dev API server of its own"))?;
    let webhook_cpu = || env.webhook_pid().map_or(Ok(0.0), cpu_seconds);
    let cpu_before = (
        cpu_seconds(api_pid)?,
        controller_cpu(env.controller_admin).await?,
        webhook_cpu()?,
    );
    let started = Instant::now();
    // Each Lock's time starts when its create request is sent.
    let created: HashMap<String, Instant> = futures::stream::iter(0..count)
        .map(|i| {
            let (ns, n) = at(i);
            let lock = object(
                "Lock",
                &format!("lock-{n}"),
                serde_json::json!({"targetRef": {"kind": "Stack", "name": format!("stack-{n}")}}),
            );
            let locks = api("Lock", ns);
            async move {
                let sent = Instant::now();
                locks
                    .create(&PostParams::default(), &lock)
                    .await
                    .map(|_| (format!("lock-{n}"), sent))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    println!("created {count} Locks in {:.2?}", started.elapsed());
    let (active, relists) = observer.await??;
    if relists > 0 {
        println!(
            "the bench's watch was restarted {relists} time(s): Locks it then listed active count as active at the list"
        );
    }
    anyhow::ensure!(
        active.len() == count,
        "only {} of {count} Locks turned active",
        active.len()
    );
    let mut latencies: Vec<Duration> = active
        .iter()
        .map(|(name, at)| at.saturating_duration_since(created[name]))
        .collect();
    let mut since_start: Vec<Duration> = active
        .values()
        .map(|at| at.saturating_duration_since(started))
        .collect();
    let cpu = (
        cpu_seconds(api_pid)? - cpu_before.0,
        controller_cpu(env.controller_admin).await? - cpu_before.1,
        webhook_cpu()? - cpu_before.2,
    );
    let _ = activated.send(());
    let writes = activation_writes.await?;
    println!(
        "API writes until all were active: {} per Lock ({})",
        per_lock(&writes, count),
        by_kind(&writes)
    );
    println!(
        "CPU until all were active: dev API server {:.2} s ({:.0} µs per Lock), lock-controller {:.2} s ({:.0} µs per Lock), webhook {:.2} s ({:.0} µs per Lock)",
        cpu.0,
        cpu.0 * 1e6 / count as f64,
        cpu.1,
        cpu.1 * 1e6 / count as f64,
        cpu.2,
        cpu.2 * 1e6 / count as f64
    );
    println!(
        "reconcile errors until all were active: {}",
        reconcile_errors(env.controller_admin).await?
    );
    latencies.sort();
    since_start.sort();
    let p99 = percentile(&latencies, 0.99);
    let p99_since_start = percentile(&since_start, 0.99);
    println!(
        "activation, each Lock from its create request: p50 {:.2?}, p99 {p99:.2?}, max {:.2?}",
        percentile(&latencies, 0.50),
        latencies.last().copied().unwrap_or_default()
    );
    println!(
        "activation, from the first create request: p50 {:.2?}, p99 {p99_since_start:.2?}, max {:.2?}",
        percentile(&since_start, 0.50),
        since_start.last().copied().unwrap_or_default()
    );
    println!(
        "floor (plain client, target marker + status per Lock): each Lock's pair from its first write p50 {:.2?}, p99 {:.2?}; from the first write p50 {:.2?}, p99 {:.2?}",
        percentile(&floor.each, 0.50),
        percentile(&floor.each, 0.99),
        percentile(&floor.since_start, 0.50),
        percentile(&floor.since_start, 0.99),
    );
    println!(
        "ratio at p99: {:.1}x each Lock, {:.1}x from the start",
        p99.as_secs_f64() / percentile(&floor.each, 0.99).as_secs_f64(),
        p99_since_start.as_secs_f64() / percentile(&floor.since_start, 0.99).as_secs_f64()
    );

    let resident_after = resident(env.controller_admin).await?;
    println!(
        "lock-controller resident: {:.1} MiB ({:.1} MiB before the Locks; {:.0} bytes per Lock)",
        resident_after / MIB,
        resident_before / MIB,
        (resident_after - resident_before) / count as f64
    );
    // At rest: once the queued Events are out (two quiet seconds).
    let settling = Instant::now();
    while settling.elapsed() < Duration::from_secs(120) {
        let writes = count_until(
            watch_writes(&client).await?,
            tokio::time::sleep(Duration::from_secs(2)),
        )
        .await;
        if writes.iter().all(|(_, n)| *n == 0) {
            break;
        }
    }
    println!(
        "settled {:.1?} after the last activation",
        settling.elapsed()
    );
    let writes = count_until(watch_writes(&client).await?, tokio::time::sleep(idle)).await;
    println!(
        "API writes at rest over {idle:?}: {} ({})",
        writes.iter().map(|(_, n)| n).sum::<usize>(),
        by_kind(&writes)
    );
    let resident_idle = resident(env.controller_admin).await?;
    println!(
        "lock-controller resident at rest: {:.1} MiB ({:.0} bytes per Lock)",
        resident_idle / MIB,
        (resident_idle - resident_before) / count as f64
    );
    Ok(())
}

/// The floor's times: a merge patch of a Stack's annotation and of its
/// status, the shape of a Lock's two writes, for as many Stacks, all
/// started at once.
struct Floor {
    /// Each pair's, from its first write's request, sorted.
    each: Vec<Duration>,
    /// Each pair's end, from the first request of all, sorted.
    since_start: Vec<Duration>,
}

async fn floor(client: &Client, env: &LockEnv, count: usize) -> anyhow::Result<Floor> {
    let ns = env.cluster.namespace("floor");
    let stacks = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &resource("Stack"));
    futures::stream::iter(0..count)
        .map(|i| {
            let stack = object(
                "Stack",
                &format!("floor-{i:05}"),
                serde_json::json!({"resources": []}),
            );
            let stacks = stacks.clone();
            async move { stacks.create(&PostParams::default(), &stack).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    let started = Instant::now();
    let times: Vec<(Duration, Duration)> = futures::stream::iter(0..count)
        .map(|i| {
            let stacks = stacks.clone();
            async move {
                let sent = Instant::now();
                let name = format!("floor-{i:05}");
                let marker = serde_json::json!({"metadata": {
                    "annotations": {"bench.navique.com/floor": format!("lock-{i:05}")},
                    "labels": {"bench.navique.com/floor": "true"},
                }});
                stacks
                    .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(marker))
                    .await?;
                let status = serde_json::json!({"status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "Protecting",
                    "message": format!("protecting Stack stack-{i:05}"),
                    "observedGeneration": 1,
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }]}});
                stacks
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await?;
                Ok::<_, kube::Error>((sent.elapsed(), started.elapsed()))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    let (mut each, mut since_start): (Vec<_>, Vec<_>) = times.into_iter().unzip();
    each.sort();
    since_start.sort();
    Ok(Floor { each, since_start })
}

/// When each of `count` Locks was first seen active on `watch`, and how
/// many times the watch was restarted from a list.
async fn observe_activations(
    locks: Api<DynamicObject>,
    mut watch: Changes,
    count: usize,
) -> anyhow::Result<(HashMap<String, Instant>, usize)> {
    let mut active = HashMap::with_capacity(count);
    let mut relists = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while active.len() < count && Instant::now() < deadline {
        let next = tokio::time::timeout(Duration::from_secs(60), watch.try_next()).await?;
        let mut seen = |lock: &DynamicObject, at: Instant| {
            if lock.data["status"]["active"] == true {
                active.entry(lock.name_any()).or_insert(at);
            }
        };
        match next {
            Ok(Some(WatchEvent::Added(lock) | WatchEvent::Modified(lock))) => {
                seen(&lock, Instant::now())
            }
            Ok(Some(WatchEvent::Deleted(_) | WatchEvent::Bookmark(_))) => {}
            // The watch ended or fell behind the API server: what a list
            // shows active counts as active once the list is in (an upper
            // bound), then watch on.
            Ok(None) | Ok(Some(WatchEvent::Error(_))) | Err(_) => {
                relists += 1;
                let list = locks.list(&Default::default()).await?;
                let listed = Instant::now();
                list.items.iter().for_each(|lock| seen(lock, listed));
                let version = list.metadata.resource_version.unwrap_or_default();
                watch = locks
                    .watch(&WatchParams::default().timeout(290), &version)
                    .await?
                    .boxed();
            }
        }
    }
    Ok((active, relists))
}

const MIB: f64 = 1024.0 * 1024.0;

/// The lock-controller's resident memory, in bytes.
async fn resident(admin: SocketAddr) -> anyhow::Result<f64> {
    process_metric(admin, "process_resident_memory_bytes").await
}

/// The lock-controller's CPU time so far, user and system, in seconds.
async fn controller_cpu(admin: SocketAddr) -> anyhow::Result<f64> {
    process_metric(admin, "process_cpu_seconds_total").await
}

/// A process metric of the lock-controller's `/metrics`.
async fn process_metric(admin: SocketAddr, name: &str) -> anyhow::Result<f64> {
    metrics(admin)
        .await?
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (metric, value) = l.rsplit_once(' ')?;
            (metric == name).then(|| value.parse().ok()).flatten()
        })
        .ok_or_else(|| anyhow::anyhow!("no {name} in the lock-controller's metrics"))
}

/// The lock-controller's `reconcile_errors_total` series that are not
/// zero, or `none`: a retried reconcile is one cause of a long tail.
async fn reconcile_errors(admin: SocketAddr) -> anyhow::Result<String> {
    let metrics = metrics(admin).await?;
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("reconcile_errors_total{") && !l.ends_with(" 0"))
        .collect();
    Ok(if errors.is_empty() {
        "none".to_owned()
    } else {
        errors.join(", ")
    })
}

/// The lock-controller's `/metrics`.
async fn metrics(admin: SocketAddr) -> anyhow::Result<String> {
    let response = navique_e2e::http_get(admin, "/metrics")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(response.body)
}

/// A process's CPU time so far, user and system, in seconds.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = procfs::process::Process::new(i32::try_from(pid)?)?.stat()?;
    Ok((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

type Changes = futures::stream::BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>;

/// Watches of what the lock-controller and the bench write (Locks, Stacks,
/// Namespaces, CRDs, Events), from now. Lease renewals are not counted.
async fn watch_writes(client: &Client) -> anyhow::Result<Vec<(String, Changes)>> {
    let kinds = [
        resource("Lock"),
        resource("Stack"),
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Namespace")),
        ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )),
        ApiResource::from_gvk(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event")),
    ];
    let mut watches = Vec::new();
    for kind in &kinds {
        let api = Api::<DynamicObject>::all_with(client.clone(), kind);
        let version = api.list_metadata(&Default::default()).await?.metadata;
        let version = version.resource_version.unwrap_or_default();
        let stream = api
            .watch(&WatchParams::default().timeout(290), &version)
            .await?;
        watches.push((kind.kind.clone(), stream.boxed()));
    }
    Ok(watches)
}

/// The changes `watches` see until `end`, by kind.
async fn count_until(
    watches: Vec<(String, Changes)>,
    end: impl std::future::Future<Output = ()> + Send + 'static,
) -> Vec<(String, usize)> {
    let end = end.boxed().shared();
    let counts = watches.into_iter().map(|(kind, stream)| {
        let end = end.clone();
        async move {
            let count = stream
                .take_until(end)
                .filter(|e| futures::future::ready(!matches!(e, Ok(WatchEvent::Bookmark(_)))))
                .count()
                .await;
            (kind, count)
        }
    });
    futures::future::join_all(counts).await
}

fn per_lock(writes: &[(String, usize)], locks: usize) -> String {
    let total: usize = writes.iter().map(|(_, n)| n).sum();
    format!("{:.2}", total as f64 / locks as f64)
}

fn by_kind(writes: &[(String, usize)]) -> String {
    writes
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
