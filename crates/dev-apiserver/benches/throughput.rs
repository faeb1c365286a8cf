//! Write throughput and watch fan-out of the dev API server, measured through
//! a real client over HTTPS: 10,000 ConfigMaps created by 16 concurrent
//! writers while 20 watchers each receive every event; then a list of them
//! all, and a list of them in pages of 500, as a reflector lists.
//!
//! Also the process's resident memory after the run: the server's store,
//! with its history of changes (bounded by count and by bytes), and the
//! clients.
//!
//! Run: `cargo bench -p dev-apiserver --bench throughput` (release build).
//! Figures are recorded in docs/dev-apiserver.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};

/// The server's allocator, as its binary has it (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const OBJECTS: usize = 10_000;
const WRITERS: usize = 16;
const WATCHERS: usize = 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir()?;
    let args = <dev_apiserver::Args as clap::Parser>::parse_from([
        "dev-apiserver",
        "--dir",
        dir.path().to_str().unwrap_or("."),
    ]);
    let (_addr, _server) = dev_apiserver::start(&args).await?;
    let kubeconfig = kube::config::Kubeconfig::read_from(dir.path().join("kubeconfig"))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    // Watchers first, each counting ADDED events.
    let seen: Vec<Arc<AtomicUsize>> = (0..WATCHERS)
        .map(|_| Arc::new(AtomicUsize::new(0)))
        .collect();
    let mut watch_tasks = Vec::new();
    for counter in &seen {
        let stream = api.watch(&WatchParams::default().timeout(290), "0").await?;
        let counter = counter.clone();
        watch_tasks.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            while let Ok(Some(event)) = stream.try_next().await {
                if matches!(event, WatchEvent::Added(_))
                    && counter.fetch_add(1, Ordering::Relaxed) + 1 == OBJECTS
                {
                    return;
                }
            }
        }));
    }

    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let api = api.clone();
            let next = next.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= OBJECTS {
                        return Ok::<_, kube::Error>(());
                    }
                    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                        "metadata": {"name": format!("bench-{i:05}"), "labels": {"bench": "yes"}},
                        "data": {"index": i.to_string()},
                    }))
                    .expect("configmap");
                    api.create(&PostParams::default(), &cm).await?;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await??;
    }
    let written = started.elapsed();
    for task in watch_tasks {
        tokio::time::timeout(Duration::from_secs(120), task).await??;
    }
    let delivered = started.elapsed();
    let total: usize = seen.iter().map(|c| c.load(Ordering::Relaxed)).sum();

    let list_started = Instant::now();
    let listed = api.list(&Default::default()).await?.items.len();
    let listed_in = list_started.elapsed();
    // As a reflector lists: pages of 500, each resuming at the last.
    let paged_started = Instant::now();
    let (mut paged, mut pages) = (0, 0);
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        paged += page.items.len();
        pages += 1;
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    let paged_in = paged_started.elapsed();

    println!(
        "writes: {OBJECTS} creates by {WRITERS} writers in {:.2?}: {:.0} writes/s",
        written,
        OBJECTS as f64 / written.as_secs_f64()
    );
    println!(
        "fan-out: {WATCHERS} watchers received {total} events; all delivered {:.2?} after the first write: {:.0} events/s",
        delivered,
        total as f64 / delivered.as_secs_f64()
    );
    println!("list: {listed} objects in {listed_in:.2?}");
    println!("list in pages of 500: {paged} objects in {pages} pages, {paged_in:.2?}");
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = |field: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    println!(
        "resident after the run (server and clients, one process): {:.1} MiB, peak {:.1} MiB",
        kib("VmRSS:").unwrap_or(f64::NAN) / 1024.0,
        kib("VmHWM:").unwrap_or(f64::NAN) / 1024.0
    );
    Ok(())
}
