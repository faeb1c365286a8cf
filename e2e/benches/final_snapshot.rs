//! Final-snapshot and restore throughput of the real backup-runner, each
//! beside its floor measured in the same run, and backup-runner's peak
//! memory.
//!
//! A throwaway PostgreSQL gets a ProviderShared ManagedService (made by the
//! real service-lifecycle-controller on the dev API server), whose database
//! its owner fills with orders (random amounts, dates, uuids, addresses,
//! JSON order lines, free-text notes) until `pg_database_size` reaches
//! `NAVIQUE_BENCH_DATABASE_MIB` (default 512). Then, `NAVIQUE_BENCH_ROUNDS`
//! times (default 3), each of these, one after the other, in an order that
//! rotates from round to round:
//!
//! - backup-runner (release build, `--store-url file://...`): a FINAL
//!   snapshot over gRPC, timed from `RequestSnapshot` to the COMPLETED
//!   message of `WatchSnapshot`, so including the verification (read-back,
//!   sha256, `pg_restore --list`); the VERIFYING message splits the two;
//! - `pg_dump -Fc -Z0 | zstd > file`, its floor: backup-runner's own
//!   pg_dump command (binary, flags and connection, from `PgTools` and the
//!   credential Secret), through the zstd command at its default level;
//! - `pg_dump -Fc > file (zlib)`: what backup-runner ran before, pg_dump
//!   compressing with zlib itself;
//! - `pg_dump -Fc -Z0 > file`: pg_dump alone, uncompressed.
//!
//! And the parallel variants, with `NAVIQUE_BENCH_JOBS` jobs (default 2):
//!
//! - backup-runner with `jobs` in the request (as a plan's `backup.jobs`
//!   sends it): `pg_dump -Fd -j N -Z0` into its work folder, each file
//!   compressed into its own object while pg_dump writes it, every part
//!   read back;
//! - `pg_dump -Fd -j N -Z0 && zstd files`, its floor: the same pg_dump
//!   command, then the zstd command over the files;
//! - `pg_dump -Fd -j N` (pg_dump's own gzip, in its jobs) and
//!   `pg_dump -Fd -j N -Z0` (pg_dump alone).
//!
//! Then one more snapshot is kept, and `NAVIQUE_BENCH_ROUNDS` times each of:
//!
//! - backup-runner's `RestoreSnapshot` of it (stream from the store, sha256,
//!   decompression, `pg_restore --single-transaction --clean --if-exists`)
//!   into a service that asks for it;
//! - `zstd -d < file | pg_restore --single-transaction` of the same file
//!   into an empty database, its floor.
//!
//! And a parallel snapshot is kept and restored by:
//!
//! - backup-runner's `RestoreSnapshot` with `jobs` into the service emptied
//!   first (parallel jobs restore only into a database that holds nothing):
//!   fetch every part into its work folder, decompressed and checked, then
//!   `pg_restore -j N`;
//! - `zstd -d` of the same parts then `pg_restore -j N` into an empty
//!   database, its floor.
//!
//! Throughput is `pg_database_size` over wall time. Peak memory is `VmHWM`
//! of backup-runner's `/proc/<pid>/status`, reset before each of its
//! snapshots and restores so that each reports its own, and the highest of
//! the run at the end (pg_dump and pg_restore run as their own processes
//! and are not in it).
//!
//! Each measure also prints its CPU time: its own processes' (backup-runner
//! with the pg_dump or pg_restore it ran and waited for; a floor's pg_dump,
//! zstd and pg_restore), and the machine's from `/proc/stat` (PostgreSQL's
//! backend included) with how busy that kept the cores. On a machine whose
//! cores a measure keeps busy, its time follows the CPU it spends.
//!
//! Run: `make bench-backup` (`cargo bench -p navique-e2e --bench
//! final_snapshot`; needs the workspace binaries built in release: `cargo
//! build --release --bins`, and `zstd`: `apt-get install zstd`). 10 GiB:
//! `NAVIQUE_BENCH_DATABASE_MIB=10240 NAVIQUE_BENCH_ROUNDS=1 make
//! bench-backup`. Figures are recorded in docs/backups.md.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use backup_runner::pg::{Connection, Input, PgTools};
use navique_api::grpc::snapshot::v1::snapshot_service_client::SnapshotServiceClient;
use navique_api::grpc::snapshot::v1::{
    Origin, Phase, RequestSnapshotRequest, RestoreSnapshotRequest, ServiceRef, WatchSnapshotRequest,
};
use navique_e2e::free_port;
use navique_e2e::services::{Postgres, ServiceEnv, grpc_ca, on_server, snapshot_client};
use navique_provider_postgres::{AdminConnection, Database};
use navique_runtime::grpc_tls::ca::Ca;
use tonic::transport::Channel;

const SERVICE: &str = "orders-db";
const DATABASE: &str = "bench_orders";
/// Orders inserted per statement while filling.
const BATCH: u64 = 100_000;
const MIB: f64 = 1024.0 * 1024.0;

/// The pipelines measured beside backup-runner: pg_dump's extra flags, and
/// whether its output goes through zstd.
/// backup-runner's pg_dump already has `--compress=0`; a later
/// `--compress` wins.
static PIPELINES: [(&str, &[&str], bool); 3] = [
    ("pg_dump -Fc -Z0 | zstd > file", &[], true),
    ("pg_dump -Fc > file (zlib)", &["--compress=6"], false),
    ("pg_dump -Fc -Z0 > file", &[], false),
];
/// The parallel pipelines, with `-j N`: pg_dump's extra flags, and
/// whether its files go through zstd.
static PARALLEL: [(&str, &[&str], bool); 3] = [
    ("pg_dump -Fd -j N -Z0 && zstd files", &[], true),
    ("pg_dump -Fd -j N (gzip)", &["--compress=6"], false),
    ("pg_dump -Fd -j N -Z0", &[], false),
];
/// The archive the restores read, and the service they restore into.
const RESTORE_SOURCE: &str = "orders-db-final-restores";
const PARALLEL_SOURCE: &str = "orders-db-final-parallel-restores";
const TARGET: &str = "orders-restored";
const TARGET_DATABASE: &str = "bench_restored";

const SCHEMA: &str = "
create table customers (
  id integer primary key,
  name text not null,
  email text not null,
  country char(2) not null,
  created_at timestamptz not null
);
create table orders (
  id bigint primary key,
  customer_id integer not null references customers,
  placed_at timestamptz not null,
  status text not null,
  currency char(3) not null,
  total numeric(12,2) not null,
  reference uuid not null,
  shipping_address text not null,
  lines jsonb not null,
  note text
);
create index orders_customer on orders (customer_id);
insert into customers
select i,
  first_names[1 + i % 20] || ' ' || last_names[1 + (i / 20) % 25],
  lower(first_names[1 + i % 20] || '.' || last_names[1 + (i / 20) % 25]) || i || '@example.' || countries[1 + i % 10],
  upper(countries[1 + i % 10]),
  timestamptz '2020-01-01' + random() * interval '1000 days'
from generate_series(1, 100000) as i,
  (select '{Anna,Ben,Clara,David,Eva,Felix,Greta,Hugo,Ida,Jonas,Katrin,Leon,Mia,Noah,Olga,Paul,Rosa,Sven,Tara,Uwe}'::text[] as first_names,
          '{Müller,Schmidt,Schneider,Fischer,Weber,Meyer,Wagner,Becker,Schulz,Hoffmann,Koch,Richter,Klein,Wolf,Neumann,Schwarz,Braun,Zimmermann,Krüger,Hartmann,Lange,Werner,Krause,Lehmann,Köhler}'::text[] as last_names,
          '{de,at,ch,nl,fr,es,it,pl,se,ie}'::text[] as countries) as names;
";

/// One batch of orders, `:from` to `:to`: only the notes' words, the
/// statuses, currencies and cities repeat.
const ORDERS: &str = "
with v as (select
  '{apple,bridge,candle,delta,engine,forest,garden,harbor,island,jacket,kettle,ladder,meadow,needle,orange,pencil,quartz,river,saddle,timber,umbrella,valley,window,yellow,zephyr,anchor,basket,cotton,dragon,feather,glacier,hammer,lantern,marble,nickel,oyster,pepper,quiver,ribbon,silver,thunder,velvet,walnut,copper,maple,cedar,linen,amber,cobalt,crystal,please,deliver,before,after,noon,door,leave,with,neighbour,call,when,arriving,gift,wrap,fragile,handle,care,express,standard,return,exchange,size,colour,wrong,missing,item,order,refund,invoice,company,address,billing,shipping,weekend,monday,friday,urgent,thanks,again,great,service,box,bag,extra,small,large,medium,black,white,blue,green,red}'::text[] as words,
  '{pending,paid,paid,shipped,shipped,delivered,delivered,delivered,cancelled,refunded}'::text[] as statuses,
  '{EUR,EUR,USD,USD,GBP,CHF,SEK,PLN}'::text[] as currencies,
  '{Berlin,Hamburg,Munich,Cologne,Frankfurt,Stuttgart,Leipzig,Dresden,Vienna,Zurich,Amsterdam,Rotterdam,Paris,Lyon,Madrid,Lisbon,Milan,Prague,Warsaw,Dublin}'::text[] as cities
)
insert into orders
select i,
  1 + floor(random() * 100000)::int,
  timestamptz '2023-01-01' + random() * interval '900 days',
  v.statuses[1 + floor(random() * 10)::int],
  v.currencies[1 + floor(random() * 8)::int],
  round((5 + random() * 995)::numeric, 2),
  gen_random_uuid(),
  (1 + floor(random() * 300)::int) || ' ' || initcap(v.words[1 + floor(random() * 100)::int]) || ' Street, '
    || lpad(floor(random() * 99999)::int::text, 5, '0') || ' ' || v.cities[1 + floor(random() * 20)::int],
  (select jsonb_agg(jsonb_build_object(
      'line', n,
      'sku', 'SKU-' || lpad(floor(random() * 100000)::int::text, 5, '0'),
      'name', initcap(v.words[1 + floor(random() * 100)::int]) || ' ' || v.words[1 + floor(random() * 100)::int],
      'quantity', 1 + floor(random() * 5)::int,
      'unit_price', round((1 + random() * 199)::numeric, 2)))
   from generate_series(1, 1 + i % 5) as n),
  case when i % 3 <> 0 then
    array_to_string(array(select v.words[1 + floor(random() * 100)::int] from generate_series(1, 3 + i % 17)), ' ')
  end
from v, generate_series(:from, :to) as i;
";

/// What one way of dumping took and wrote.
#[derive(Clone, Copy)]
struct Run {
    elapsed: Duration,
    size: u64,
    /// The CPU it took, where measured.
    cpu: Option<Cpu>,
}

/// The CPU time taken during one measure, in seconds.
#[derive(Clone, Copy)]
struct Cpu {
    /// By every process on the machine (user, system, interrupts, steal).
    machine: f64,
    /// By the measure's own processes: backup-runner with the pg_dump it
    /// ran, or the pipeline's pg_dump and zstd. PostgreSQL's backend
    /// serving the dump is in `machine` only.
    own: f64,
    /// The machine's CPU time over its cores' time for the measure.
    busy: f64,
}

/// CPU time read before a measure: the machine's busy ticks, and a
/// process's own and reaped children's ticks (reaped children's count once
/// waited for, which each measure does before it ends).
struct CpuClock {
    pid: u32,
    machine: u64,
    process: u64,
    started: Instant,
}

impl CpuClock {
    fn start(pid: u32) -> anyhow::Result<Self> {
        Ok(Self {
            pid,
            machine: machine_ticks()?,
            process: process_ticks(pid)?,
            started: Instant::now(),
        })
    }

    fn stop(self) -> anyhow::Result<Cpu> {
        let ticks = procfs::ticks_per_second() as f64;
        let machine = machine_ticks()?.saturating_sub(self.machine) as f64 / ticks;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        Ok(Cpu {
            machine,
            own: process_ticks(self.pid)?.saturating_sub(self.process) as f64 / ticks,
            busy: machine / (cores * self.started.elapsed().as_secs_f64()),
        })
    }
}

/// Ticks every core spent on anything but idling and waiting for I/O.
fn machine_ticks() -> anyhow::Result<u64> {
    use procfs::CurrentSI;
    let total = procfs::KernelStats::current()?.total;
    Ok(total.user
        + total.nice
        + total.system
        + total.irq.unwrap_or_default()
        + total.softirq.unwrap_or_default()
        + total.steal.unwrap_or_default())
}

/// A process's own ticks and those of its children it has waited for.
fn process_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = procfs::process::Process::new(i32::try_from(pid)?)?.stat()?;
    let children = u64::try_from(stat.cutime + stat.cstime).unwrap_or_default();
    Ok(stat.utime + stat.stime + children)
}

/// A backup-runner snapshot: the whole of it, and until VERIFYING.
#[derive(Clone)]
struct Snapshot {
    /// The archive's path.
    location: String,
    run: Run,
    dumped: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let found = Command::new("zstd").arg("--version").output();
    anyhow::ensure!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "zstd is missing ({}): install Debian's zstd package (apt-get install zstd)",
        found.map_or_else(|e| e.to_string(), |o| o.status.to_string())
    );
    let target_mib: u64 = setting("NAVIQUE_BENCH_DATABASE_MIB", 512)?;
    let rounds: usize = setting("NAVIQUE_BENCH_ROUNDS", 3)?;
    let jobs: u32 = setting("NAVIQUE_BENCH_JOBS", 2)?;

    let env = ServiceEnv::start(&[]);
    env.controller_ready().await;
    let ns = env.cluster.namespace("bench");
    env.apply(&env.orders_db(&ns, DATABASE, "SnapshotAndDelete", false))
        .await;
    env.until_state(&ns, SERVICE, "Ready Available").await;
    let uid = env.field(&ns, SERVICE, "{.metadata.uid}");

    // The service's database on the shared server, prefixed by its Project.
    let database = on_server(&ns, DATABASE);
    let started = Instant::now();
    let database_size = fill(&env.postgres, &database, target_mib * 1024 * 1024);
    let described = env.postgres.query_in(
        &database,
        "select (select count(*) from orders), pg_table_size('orders') + pg_table_size('customers')",
    );
    let (orders, tables) = described.split_once('|').unwrap_or_default();
    println!(
        "database {database}: pg_database_size {database_size} bytes ({:.0} MiB), filled in {:.0?}; \
         {orders} orders; tables without indexes {:.0} MiB",
        database_size as f64 / MIB,
        started.elapsed(),
        tables.parse::<f64>().unwrap_or_default() / MIB,
    );

    // backup-runner's own pg_dump: its lookup, its flags, its connection
    // (the provider's admin, into the service's database).
    let tools = PgTools::locate(None)?;
    let admin = AdminConnection::from_secret(
        &[
            ("host", "127.0.0.1".to_owned()),
            ("port", env.postgres.port.to_string()),
            ("user", "postgres".to_owned()),
            ("password", "unused".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    )?;
    let connection = Connection::as_provider(&admin, &Database::new(&database, &database));
    println!(
        "pg_dump: {} ({}), as backup-runner runs it, of {}",
        tools.bin_dir().join("pg_dump").display(),
        version(&tools.bin_dir().join("pg_dump")),
        connection.describe()
    );
    println!("zstd: {}, default level (3)", version(Path::new("zstd")));

    let store = tempfile::Builder::new()
        .prefix("navique-bench-store-")
        .tempdir_in("/tmp")?;
    let port = free_port();
    let runner = env
        .start_backup_runner_with(
            port,
            &format!("file://{}", store.path().display()),
            &[],
            // As the chart runs it.
            &[
                ("MALLOC_ARENA_MAX".to_owned(), "2".to_owned()),
                ("MALLOC_MMAP_THRESHOLD_".to_owned(), "131072".to_owned()),
            ],
        )
        .await;
    let pid = runner.pid();
    let mut peaks = Peaks::new(pid)?;
    println!(
        "backup-runner (pid {pid}) ready: resident {:.1} MiB, peak {:.1} MiB",
        status_mib(pid, "VmRSS")?,
        peaks.highest
    );
    // As the lifecycle controller calls it: its certificate of the gRPC CA.
    let (bundle, key) = grpc_ca(&env.cluster).await;
    let mut client = snapshot_client(&Ca { bundle, key }, "service-lifecycle-controller", port);
    let service = ServiceRef {
        namespace: ns.clone(),
        name: SERVICE.to_owned(),
        uid,
    };

    println!("load average before: {}", load_average());
    let scratch = tempfile::Builder::new()
        .prefix("navique-bench-dumps-")
        .tempdir_in("/tmp")?;
    let mut snapshots = Vec::new();
    let mut parallel_snapshots = Vec::new();
    let mut pipelines: Vec<Vec<Run>> = vec![Vec::new(); PIPELINES.len()];
    let mut parallel: Vec<Vec<Run>> = vec![Vec::new(); PARALLEL.len()];
    // backup-runner is 0, the pipelines follow, then backup-runner with
    // jobs and the parallel pipelines; each round starts one later, so
    // that none is always first or last.
    let parallel_runner = PIPELINES.len() + 1;
    let measures = parallel_runner + 1 + PARALLEL.len();
    for round in 1..=rounds {
        for measure in (0..measures).map(|i| (i + round - 1) % measures) {
            if measure == parallel_runner {
                let name = format!("{SERVICE}-final-parallel-{round}");
                record_final(&env, &ns, &service, &name);
                peaks.reset()?;
                let clock = CpuClock::start(pid)?;
                let mut snapshot = take_snapshot(&mut client, &service, &name, jobs, true).await?;
                snapshot.run.cpu = Some(clock.stop()?);
                println!(
                    "round {round}/{rounds}: {:<32} {} (dump and upload {:.1} s, \
                     verification {:.1} s); peak resident {:.1} MiB",
                    format!("backup-runner, {jobs} jobs"),
                    describe(snapshot.run, database_size),
                    snapshot.dumped.as_secs_f64(),
                    snapshot
                        .run
                        .elapsed
                        .saturating_sub(snapshot.dumped)
                        .as_secs_f64(),
                    peaks.measured()?,
                );
                parallel_snapshots.push(snapshot);
            } else if measure > parallel_runner {
                let (name, flags, through_zstd) = PARALLEL[measure - parallel_runner - 1];
                let out = scratch.path().join("dump.d");
                let (tools, connection) = (tools.clone(), connection.clone());
                let clock = CpuClock::start(std::process::id())?;
                let mut run = tokio::task::spawn_blocking(move || {
                    parallel_pipeline(&tools, &connection, flags, jobs, through_zstd, &out)
                })
                .await??;
                run.cpu = Some(clock.stop()?);
                println!(
                    "round {round}/{rounds}: {:<32} {}",
                    name.replace('N', &jobs.to_string()),
                    describe(run, database_size)
                );
                parallel[measure - parallel_runner - 1].push(run);
            } else if measure == 0 {
                let name = format!("{SERVICE}-final-{round}");
                record_final(&env, &ns, &service, &name);
                peaks.reset()?;
                let clock = CpuClock::start(pid)?;
                let mut snapshot = take_snapshot(&mut client, &service, &name, 1, true).await?;
                snapshot.run.cpu = Some(clock.stop()?);
                println!(
                    "round {round}/{rounds}: {:<32} {} (dump and upload {:.1} s, \
                     verification {:.1} s); peak resident {:.1} MiB",
                    "backup-runner",
                    describe(snapshot.run, database_size),
                    snapshot.dumped.as_secs_f64(),
                    snapshot
                        .run
                        .elapsed
                        .saturating_sub(snapshot.dumped)
                        .as_secs_f64(),
                    peaks.measured()?,
                );
                snapshots.push(snapshot);
            } else {
                let (name, flags, through_zstd) = PIPELINES[measure - 1];
                let out = scratch.path().join("dump");
                let (tools, connection) = (tools.clone(), connection.clone());
                let clock = CpuClock::start(std::process::id())?;
                let mut run = tokio::task::spawn_blocking(move || {
                    pipeline(&tools, &connection, flags, through_zstd, &out)
                })
                .await??;
                run.cpu = Some(clock.stop()?);
                println!(
                    "round {round}/{rounds}: {name:<32} {}",
                    describe(run, database_size)
                );
                pipelines[measure - 1].push(run);
            }
        }
    }
    println!("load average after: {}", load_average());

    let (runner_median, runner_range) = median(snapshots.iter().map(|s| s.run).collect());
    let dumped = median_duration(snapshots.iter().map(|s| s.dumped).collect());
    println!("median of {rounds} rounds, of a database of {database_size} bytes:");
    println!(
        "  {:<32} {} (dump and upload {:.1} s, verification {:.1} s); times {runner_range}",
        "backup-runner",
        describe(runner_median, database_size),
        dumped.as_secs_f64(),
        (runner_median.elapsed.saturating_sub(dumped)).as_secs_f64()
    );
    for ((name, _, _), runs) in PIPELINES.iter().zip(pipelines) {
        let (run, range) = median(runs);
        println!(
            "  {name:<32} {}; times {range}; backup-runner / this: {:.2} of its throughput",
            describe(run, database_size),
            run.elapsed.as_secs_f64() / runner_median.elapsed.as_secs_f64()
        );
    }
    let (parallel_median, parallel_range) =
        median(parallel_snapshots.iter().map(|s| s.run).collect());
    let parallel_dumped = median_duration(parallel_snapshots.iter().map(|s| s.dumped).collect());
    println!(
        "  {:<32} {} (dump and upload {:.1} s, verification {:.1} s); times {parallel_range}",
        format!("backup-runner, {jobs} jobs"),
        describe(parallel_median, database_size),
        parallel_dumped.as_secs_f64(),
        (parallel_median.elapsed.saturating_sub(parallel_dumped)).as_secs_f64()
    );
    for ((name, _, _), runs) in PARALLEL.iter().zip(parallel) {
        let (run, range) = median(runs);
        println!(
            "  {:<32} {}; times {range}; backup-runner, {jobs} jobs / this: {:.2} of its throughput",
            name.replace('N', &jobs.to_string()),
            describe(run, database_size),
            run.elapsed.as_secs_f64() / parallel_median.elapsed.as_secs_f64()
        );
    }
    println!(
        "backup-runner peak resident memory (VmHWM) over {} snapshots: {:.1} MiB",
        2 * rounds,
        peaks.highest
    );

    // Restores: one kept archive, restored by backup-runner (RestoreSnapshot,
    // as the lifecycle controller asks, into a service that asks for it)
    // and by `zstd -d < file | pg_restore` into an empty database.
    record_final(&env, &ns, &service, RESTORE_SOURCE);
    peaks.reset()?;
    let clock = CpuClock::start(pid)?;
    let mut kept = take_snapshot(&mut client, &service, RESTORE_SOURCE, 1, false).await?;
    kept.run.cpu = Some(clock.stop()?);
    let archive = kept.location.clone();
    println!(
        "kept for the restores: backup-runner          {}; peak resident {:.1} MiB",
        describe(kept.run, database_size),
        peaks.measured()?
    );
    record_final(&env, &ns, &service, PARALLEL_SOURCE);
    peaks.reset()?;
    let clock = CpuClock::start(pid)?;
    let mut kept_parallel =
        take_snapshot(&mut client, &service, PARALLEL_SOURCE, jobs, false).await?;
    kept_parallel.run.cpu = Some(clock.stop()?);
    println!(
        "kept for the restores: backup-runner, {jobs} jobs  {}; peak resident {:.1} MiB",
        describe(kept_parallel.run, database_size),
        peaks.measured()?
    );
    let mut restore_peak = 0.0_f64;
    for record in [RESTORE_SOURCE, PARALLEL_SOURCE] {
        navique_e2e::eventually(
            Duration::from_secs(60),
            "the kept backups' records",
            || async {
                (env.get(&ns, &format!("servicebackup/{record}"), "{.status.phase}") == "Completed")
                    .then_some(())
            },
        )
        .await;
    }
    let restored = env
        .orders_db(&ns, TARGET_DATABASE, "Retain", false)
        .replace(&format!("name: {SERVICE}"), &format!("name: {TARGET}"))
        .replace(
            "  deletionPolicy: Retain",
            &format!("  deletionPolicy: Retain\n  restoreFrom:\n    backupName: {RESTORE_SOURCE}"),
        );
    env.apply(&restored).await;
    // No backup-runner is configured for the controller: it provisions the
    // database, then waits; the bench asks for the restores itself.
    let target_database = on_server(&ns, TARGET_DATABASE);
    navique_e2e::eventually(Duration::from_secs(60), "the target database", || async {
        env.postgres.database_exists(&target_database).then_some(())
    })
    .await;
    let target = ServiceRef {
        namespace: ns.clone(),
        name: TARGET.to_owned(),
        uid: env.field(&ns, TARGET, "{.metadata.uid}"),
    };
    let mut by_runner = Vec::new();
    let mut by_floor = Vec::new();
    for round in 1..=rounds {
        for measure in (0..2).map(|i| (i + round - 1) % 2) {
            if measure == 0 {
                peaks.reset()?;
                let clock = CpuClock::start(pid)?;
                let started = Instant::now();
                client
                    .restore_snapshot(RestoreSnapshotRequest {
                        source_service: Some(service.clone()),
                        backup_name: RESTORE_SOURCE.to_owned(),
                        target: Some(target.clone()),
                        jobs: 1,
                    })
                    .await?;
                let run = Run {
                    elapsed: started.elapsed(),
                    size: kept.run.size,
                    cpu: Some(clock.stop()?),
                };
                println!(
                    "round {round}/{rounds}: {:<32} {}; peak resident {:.1} MiB",
                    "backup-runner restore",
                    describe(run, database_size),
                    restore_peak_of(&mut peaks, &mut restore_peak)?
                );
                by_runner.push(run);
            } else {
                let empty = format!("bench_floor_{round}");
                env.postgres.query(&format!("create database {empty}"));
                let into = connection.with_database(&empty);
                let (tools, archive) = (tools.clone(), archive.clone());
                let clock = CpuClock::start(std::process::id())?;
                let mut run = tokio::task::spawn_blocking(move || {
                    restore_floor(&tools, &into, Path::new(&archive))
                })
                .await??;
                run.cpu = Some(clock.stop()?);
                env.postgres
                    .query(&format!("drop database {empty} with (force)"));
                println!(
                    "round {round}/{rounds}: {:<32} {}",
                    "zstd -d < file | pg_restore",
                    describe(run, database_size)
                );
                by_floor.push(run);
            }
        }
    }
    let (runner_restore, runner_range) = median(by_runner);
    let (floor_restore, floor_range) = median(by_floor);
    println!("restores, median of {rounds} rounds:");
    println!(
        "  {:<32} {}; times {runner_range}",
        "backup-runner restore",
        describe(runner_restore, database_size)
    );
    println!(
        "  {:<32} {}; times {floor_range}; backup-runner / this: {:.2} of its throughput",
        "zstd -d < file | pg_restore",
        describe(floor_restore, database_size),
        floor_restore.elapsed.as_secs_f64() / runner_restore.elapsed.as_secs_f64()
    );
    println!("backup-runner peak resident memory (VmHWM) over the restores: {restore_peak:.1} MiB");
    let mut restore_peak = 0.0_f64;

    // Parallel restores: into the target emptied first (its tables are
    // those of the archive), and the floor into an empty database.
    // The target asks for this backup now (backup-runner restores only what
    // it asks for); the controller has no backup-runner to call.
    env.cluster.kubectl_ok(&[
        "patch",
        "managedservice",
        TARGET,
        "-n",
        &ns,
        "--type=merge",
        "-p",
        &format!(r#"{{"spec":{{"restoreFrom":{{"backupName":"{PARALLEL_SOURCE}"}}}}}}"#),
    ]);
    let parts = Path::new(&kept_parallel.location).to_path_buf();
    let mut by_runner = Vec::new();
    let mut by_floor = Vec::new();
    for round in 1..=rounds {
        for measure in (0..2).map(|i| (i + round - 1) % 2) {
            if measure == 0 {
                env.postgres.query_in(
                    &target_database,
                    "drop table if exists orders, customers cascade",
                );
                peaks.reset()?;
                let clock = CpuClock::start(pid)?;
                let started = Instant::now();
                client
                    .restore_snapshot(RestoreSnapshotRequest {
                        source_service: Some(service.clone()),
                        backup_name: PARALLEL_SOURCE.to_owned(),
                        target: Some(target.clone()),
                        jobs,
                    })
                    .await?;
                let run = Run {
                    elapsed: started.elapsed(),
                    size: kept_parallel.run.size,
                    cpu: Some(clock.stop()?),
                };
                println!(
                    "round {round}/{rounds}: {:<32} {}; peak resident {:.1} MiB",
                    format!("backup-runner restore, {jobs} jobs"),
                    describe(run, database_size),
                    restore_peak_of(&mut peaks, &mut restore_peak)?
                );
                by_runner.push(run);
            } else {
                let empty = format!("bench_parallel_floor_{round}");
                env.postgres.query(&format!("create database {empty}"));
                let into = connection.with_database(&empty);
                let (tools, parts) = (tools.clone(), parts.clone());
                let out = scratch.path().join("restore.d");
                let clock = CpuClock::start(std::process::id())?;
                let mut run = tokio::task::spawn_blocking(move || {
                    parallel_restore_floor(&tools, &into, &parts, jobs, &out)
                })
                .await??;
                run.cpu = Some(clock.stop()?);
                env.postgres
                    .query(&format!("drop database {empty} with (force)"));
                println!(
                    "round {round}/{rounds}: {:<32} {}",
                    format!("zstd -d parts && pg_restore -j {jobs}"),
                    describe(run, database_size)
                );
                by_floor.push(run);
            }
        }
    }
    let (runner_restore, runner_range) = median(by_runner);
    let (floor_restore, floor_range) = median(by_floor);
    println!("parallel restores, median of {rounds} rounds:");
    println!(
        "  {:<32} {}; times {runner_range}",
        format!("backup-runner restore, {jobs} jobs"),
        describe(runner_restore, database_size)
    );
    println!(
        "  {:<32} {}; times {floor_range}; backup-runner / this: {:.2} of its throughput",
        format!("zstd -d parts && pg_restore -j {jobs}"),
        describe(floor_restore, database_size),
        floor_restore.elapsed.as_secs_f64() / runner_restore.elapsed.as_secs_f64()
    );
    println!(
        "backup-runner peak resident memory (VmHWM) over the parallel restores: {restore_peak:.1} MiB"
    );
    println!(
        "backup-runner peak resident memory (VmHWM) over the whole run: {:.1} MiB",
        peaks.highest
    );
    Ok(())
}

/// The Final ServiceBackup record `name` backup-runner takes a snapshot for.
fn record_final(env: &ServiceEnv, ns: &str, service: &ServiceRef, name: &str) {
    env.cluster.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  serviceRef: {{name: {SERVICE}, uid: {}}}\n  origin: Final\n",
            service.uid
        )),
    );
}

/// backup-runner's parallel pg_dump command with `flags` added into the
/// folder `out`, then (when `through_zstd`) the zstd command over its
/// files, as backup-runner compresses each; returns the time until the
/// last exited and the bytes written, and removes the folder.
fn parallel_pipeline(
    tools: &PgTools,
    connection: &Connection,
    flags: &[&str],
    jobs: u32,
    through_zstd: bool,
    out: &Path,
) -> anyhow::Result<Run> {
    let mut dump = tools.dump_directory(connection, None, jobs, out).into_std();
    dump.args(flags);
    let started = Instant::now();
    let dumped = dump.output()?;
    anyhow::ensure!(
        dumped.status.success(),
        "pg_dump failed ({}): {}",
        dumped.status,
        String::from_utf8_lossy(&dumped.stderr)
    );
    if through_zstd {
        let files: Vec<_> = std::fs::read_dir(out)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        let status = Command::new("zstd")
            .args(["-q", "--rm"])
            .args(&files)
            .status()?;
        anyhow::ensure!(status.success(), "zstd failed: {status}");
    }
    let elapsed = started.elapsed();
    let size = std::fs::read_dir(out)?
        .map(|e| Ok(e?.metadata()?.len()))
        .sum::<std::io::Result<u64>>()?;
    std::fs::remove_dir_all(out)?;
    Ok(Run {
        elapsed,
        size,
        cpu: None,
    })
}

/// `zstd -d` of a directory archive's parts into `out`, then
/// backup-runner's scratch-restore command with `jobs` jobs into `into`, an
/// empty database; returns the time until pg_restore exited.
fn parallel_restore_floor(
    tools: &PgTools,
    into: &Connection,
    parts: &Path,
    jobs: u32,
    out: &Path,
) -> anyhow::Result<Run> {
    std::fs::create_dir_all(out)?;
    let files: Vec<_> = std::fs::read_dir(parts)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    let size = files
        .iter()
        .map(|f| Ok(std::fs::metadata(f)?.len()))
        .sum::<std::io::Result<u64>>()?;
    let started = Instant::now();
    let status = Command::new("zstd")
        .args(["-q", "-d", "--output-dir-flat"])
        .arg(out)
        .args(&files)
        .status()?;
    anyhow::ensure!(status.success(), "zstd -d failed: {status}");
    let input = Input::Directory {
        dir: out.to_path_buf(),
        jobs,
    };
    let restored = tools.restore_scratch(into, &input).into_std().output()?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        restored.status.success(),
        "pg_restore failed ({}): {}",
        restored.status,
        String::from_utf8_lossy(&restored.stderr)
    );
    std::fs::remove_dir_all(out)?;
    Ok(Run {
        elapsed,
        size,
        cpu: None,
    })
}

/// `zstd -d < archive | pg_restore` (backup-runner's scratch-restore
/// command: one transaction, objects owned by the connecting role) into
/// `into`, an empty database; returns the time until both exited.
fn restore_floor(tools: &PgTools, into: &Connection, archive: &Path) -> anyhow::Result<Run> {
    let started = Instant::now();
    let mut zstd = Command::new("zstd")
        .args(["-q", "-d", "-c"])
        .arg(archive)
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = zstd.stdout.take().expect("zstd's stdout is piped");
    let mut restore = tools.restore_scratch(into, &Input::Stdin).into_std();
    let restored = restore.stdin(stdout).output()?;
    let status = zstd.wait()?;
    let elapsed = started.elapsed();
    anyhow::ensure!(status.success(), "zstd -d failed: {status}");
    anyhow::ensure!(
        restored.status.success(),
        "pg_restore failed ({}): {}",
        restored.status,
        String::from_utf8_lossy(&restored.stderr)
    );
    Ok(Run {
        elapsed,
        size: std::fs::metadata(archive)?.len(),
        cpu: None,
    })
}

/// A positive integer from the environment, `default` when unset.
fn setting<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    default: T,
) -> anyhow::Result<T> {
    let Ok(value) = std::env::var(name) else {
        return Ok(default);
    };
    value
        .trim()
        .parse()
        .ok()
        .filter(|n| *n >= T::from(1))
        .ok_or_else(|| anyhow::anyhow!("{name}={value:?} is not a positive integer"))
}

/// Fills the service's database, as its owner, with batches of orders until
/// `pg_database_size` reaches `target` bytes; then vacuums (so that no dump
/// sets hint bits) and checkpoints. Returns the size.
fn fill(postgres: &Postgres, database: &str, target: u64) -> u64 {
    let as_owner = |sql: &str| postgres.query_in(database, &format!("set role {database}; {sql}"));
    let size = || {
        postgres
            .query_in(database, "select pg_database_size(current_database())")
            .parse::<u64>()
            .expect("pg_database_size")
    };
    as_owner(SCHEMA);
    let mut next = 1;
    while size() < target {
        as_owner(
            &ORDERS
                .replace(":from", &next.to_string())
                .replace(":to", &(next + BATCH - 1).to_string()),
        );
        next += BATCH;
    }
    postgres.query_in(database, "vacuum analyze");
    postgres.query_in(database, "checkpoint");
    size()
}

/// Runs backup-runner's pg_dump command with `flags` added into `out`,
/// through zstd when `through_zstd`; returns the time until both exited and the
/// file's size, and removes the file.
fn pipeline(
    tools: &PgTools,
    connection: &Connection,
    flags: &[&str],
    through_zstd: bool,
    out: &Path,
) -> anyhow::Result<Run> {
    let file = std::fs::File::create(out)?;
    let mut dump = tools.dump(connection, None).into_std();
    dump.args(flags);
    let started = Instant::now();
    let dumped = if through_zstd {
        let mut pg_dump = dump.spawn()?;
        let stdout = pg_dump.stdout.take().expect("pg_dump's stdout is piped");
        let mut zstd = Command::new("zstd")
            .args(["-q", "-c"])
            .stdin(stdout)
            .stdout(file)
            .spawn()?;
        let dumped = pg_dump.wait_with_output()?;
        let status = zstd.wait()?;
        anyhow::ensure!(status.success(), "zstd failed: {status}");
        dumped
    } else {
        dump.stdout(file).output()?
    };
    let elapsed = started.elapsed();
    anyhow::ensure!(
        dumped.status.success(),
        "pg_dump failed ({}): {}",
        dumped.status,
        String::from_utf8_lossy(&dumped.stderr)
    );
    let size = std::fs::metadata(out)?.len();
    std::fs::remove_file(out)?;
    Ok(Run {
        elapsed,
        size,
        cpu: None,
    })
}

/// Takes a FINAL snapshot named `backup` with `jobs` pg_dump jobs through
/// SnapshotService and follows it to COMPLETED; its archive (a file, or a
/// directory archive's folder) is removed after when `remove`.
async fn take_snapshot(
    client: &mut SnapshotServiceClient<Channel>,
    service: &ServiceRef,
    backup: &str,
    jobs: u32,
    remove: bool,
) -> anyhow::Result<Snapshot> {
    let key = format!("{}/bench-{backup}", service.uid);
    let started = Instant::now();
    client
        .request_snapshot(RequestSnapshotRequest {
            idempotency_key: key.clone(),
            service: Some(service.clone()),
            origin: Origin::Final as i32,
            backup_name: backup.to_owned(),
            jobs,
            ..Default::default()
        })
        .await?;
    let mut progress = client
        .watch_snapshot(WatchSnapshotRequest {
            idempotency_key: key,
        })
        .await?
        .into_inner();
    let mut dumped = None;
    while let Some(message) = progress.message().await? {
        match message.phase() {
            Phase::Verifying => {
                dumped.get_or_insert_with(|| started.elapsed());
            }
            Phase::Completed => {
                let elapsed = started.elapsed();
                let snapshot = message.snapshot.unwrap_or_default();
                let archive = snapshot
                    .location
                    .strip_prefix("file://")
                    .ok_or_else(|| anyhow::anyhow!("not a file: {}", snapshot.location))?;
                match (remove, archive.strip_suffix('/')) {
                    (false, _) => {}
                    (true, Some(folder)) => std::fs::remove_dir_all(folder)?,
                    (true, None) => std::fs::remove_file(archive)?,
                }
                return Ok(Snapshot {
                    location: archive.to_owned(),
                    run: Run {
                        elapsed,
                        size: snapshot.size_bytes,
                        cpu: None,
                    },
                    dumped: dumped.unwrap_or(elapsed),
                });
            }
            Phase::Failed => anyhow::bail!("the snapshot failed: {}", message.message),
            _ => {}
        }
    }
    anyhow::bail!("WatchSnapshot ended before the snapshot completed")
}

/// `12.3 s, 45.6 MiB/s, 789 MiB written (ratio 3.1)`: time, database bytes
/// per second, and how much smaller than the database the output is.
fn describe(run: Run, database_size: u64) -> String {
    let seconds = run.elapsed.as_secs_f64();
    let cpu = run.cpu.map_or_else(String::new, |cpu| {
        format!(
            ", CPU {:.1} s ({:.1} s on the machine, {:.0}% busy)",
            cpu.own,
            cpu.machine,
            cpu.busy * 100.0
        )
    });
    format!(
        "{seconds:6.1} s, {:5.1} MiB/s, {:6.1} MiB written (database / output {:.1}){cpu}",
        database_size as f64 / MIB / seconds,
        run.size as f64 / MIB,
        database_size as f64 / run.size as f64
    )
}

/// The run of median time, and the range of the times (`18.7–22.8 s`).
fn median(mut runs: Vec<Run>) -> (Run, String) {
    runs.sort_by_key(|r| r.elapsed);
    let seconds = |run: &Run| run.elapsed.as_secs_f64();
    let range = format!(
        "{:.1}–{:.1} s",
        seconds(&runs[0]),
        seconds(&runs[runs.len() - 1])
    );
    (runs[runs.len() / 2], range)
}

fn median_duration(mut durations: Vec<Duration>) -> Duration {
    durations.sort();
    durations[durations.len() / 2]
}

/// backup-runner's peak resident memory, measure by measure: its `VmHWM`
/// is reset before each (`/proc/<pid>/clear_refs`), so that each reports
/// its own peak rather than the run's so far and a size's figures compare
/// with another's phase by phase; `highest` is the run's.
struct Peaks {
    pid: u32,
    highest: f64,
}

impl Peaks {
    fn new(pid: u32) -> anyhow::Result<Self> {
        Ok(Self {
            pid,
            highest: status_mib(pid, "VmHWM")?,
        })
    }

    /// Starts a measure: the peak becomes what is resident now.
    fn reset(&self) -> anyhow::Result<()> {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5")
            .map_err(|e| anyhow::anyhow!("cannot reset backup-runner's VmHWM: {e}"))
    }

    /// The peak since the last reset, counted in the run's.
    fn measured(&mut self) -> anyhow::Result<f64> {
        let peak = status_mib(self.pid, "VmHWM")?;
        self.highest = self.highest.max(peak);
        Ok(peak)
    }
}

/// A restore's peak, counted in its kind's (`highest`) and the run's.
fn restore_peak_of(peaks: &mut Peaks, highest: &mut f64) -> anyhow::Result<f64> {
    let peak = peaks.measured()?;
    *highest = highest.max(peak);
    Ok(peak)
}

/// A `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .filter_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .find_map(|rest| rest.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/{pid}/status"))
}

/// The first line `program --version` prints.
fn version(program: &Path) -> String {
    Command::new(program)
        .arg("--version")
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
