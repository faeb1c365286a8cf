//! Parallel dumps and restores: pg_dump's directory format, which is the
//! only one `pg_dump --jobs` writes and the only one `pg_restore --jobs`
//! reads from a pipe-less source. It is a folder of files on local disk
//! (one per table's data, and `toc.dat`), so a parallel backup is dumped
//! into backup-runner's work folder, then each file is compressed with zstd
//! into its own object `<backup>.d/<file>.zst`, listed in the manifest with
//! its size and checksum. A restore fetches every part back (checked)
//! before pg_restore starts.
//!
//! Local disk holds the uncompressed dump (about the database's size
//! without indexes) for the time of a parallel backup or restore; memory
//! stays that of one streamed object.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::compression;
use crate::layout::BackupKey;
use crate::manifest::{Layout, Part};
use crate::progress::Counters;
use crate::store::Store;
use crate::transfer::{self, Buffers, Digested, Parts};
use crate::{Error, Metrics};

/// The most jobs a dump or restore runs: each is a PostgreSQL session.
pub const MAX_JOBS: u32 = 16;
/// Work folders start with this, so that those a killed process left are
/// recognised and removed at start-up.
const WORK_PREFIX: &str = "navique-work-";
/// Parts fetched (read back, checked, decompressed) at once by restores
/// and verifications, each on a thread of its own.
const FETCHED_AT_ONCE: usize = 2;
/// pg_dump's folder inside a work folder (pg_dump creates it).
const DUMP: &str = "dump";

/// The jobs of a request: its own (1 to 16), or `default` (`--jobs`)
/// when it sets none (0). Anything else is refused, never clamped.
pub fn jobs(requested: u32, default: u32) -> Result<u32, Error> {
    match requested {
        0 => Ok(default),
        1..=MAX_JOBS => Ok(requested),
        other => Err(Error::InvalidRequest(format!(
            "jobs {other} is not between 1 and {MAX_JOBS}"
        ))),
    }
}

/// Whether a restore into a service runs pg_restore's parallel jobs. They
/// cannot share one transaction, so a failure half way is not rolled
/// back: only a directory archive, into a database that holds nothing,
/// and only where a retry can restore over what it left (the provider
/// records the restore first, or the target is not protected). Otherwise
/// the one-transaction restore, whatever the jobs.
pub fn restores_in_parallel(
    jobs: u32,
    layout: Layout,
    target_holds_data: bool,
    retry_allowed: bool,
) -> bool {
    jobs > 1 && layout == Layout::Directory && !target_holds_data && retry_allowed
}

/// A fresh work folder under `base`, removed when dropped; pg_dump's
/// folder is [`dump_dir`] inside it.
pub fn work_dir(base: &Path) -> Result<tempfile::TempDir, Error> {
    std::fs::create_dir_all(base)
        .map_err(Error::io(format!("cannot create {}", base.display())))?;
    tempfile::Builder::new()
        .prefix(WORK_PREFIX)
        .tempdir_in(base)
        .map_err(Error::io(format!(
            "cannot create a work folder in {}",
            base.display()
        )))
}

pub fn dump_dir(work: &tempfile::TempDir) -> PathBuf {
    work.path().join(DUMP)
}

/// Removes the work folders a killed backup-runner left under `base`: one
/// replica runs, so none is in use at start-up.
pub fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(WORK_PREFIX)
            && let Err(e) = std::fs::remove_dir_all(entry.path())
        {
            tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a stale work folder");
        }
    }
}

/// The bytes in the files of `dir`, for progress while pg_dump writes.
pub fn size_of(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or_default()
}

/// The files pg_dump wrote, sorted by name. Anything else in the folder
/// (a folder, a name that is not pg_dump's) fails the backup.
pub fn files(dir: &Path) -> Result<Vec<String>, Error> {
    let unexpected = |what: String| Error::PgTools(format!("pg_dump's folder holds {what}"));
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(Error::io(format!("cannot read {}", dir.display())))?
    {
        let entry = entry.map_err(Error::io(format!("cannot read {}", dir.display())))?;
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| unexpected(format!("{n:?}")))?;
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || !crate::manifest::is_part_name(&name) {
            return Err(unexpected(format!("{name:?}, not a file of pg_dump's")));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Files compressed and uploaded at once, each on a blocking thread of its
/// own with one part filling and one uploading: with the part size, what
/// bounds a parallel dump's memory, whatever its jobs.
pub const FILE_STREAMS: usize = 2;
/// How often the folder is looked at for new files, and a file being
/// written for more bytes.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// How often the bytes pg_dump wrote are measured (a look at every file's size).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// Bytes read from a file at a time.
const READ_SIZE: usize = 256 * 1024;
/// Compressed bytes buffered between a file's thread and its upload.
const PIPE_SIZE: usize = 256 * 1024;

/// Whether pg_dump has closed `name` for good: once it said it finished
/// the item whose data the file holds (`<dumpId>.dat`), or once it exited
/// 0 (every other file: `toc.dat`, large objects'). Files are never
/// reopened, which [`upload_while_dumping`] checks.
fn is_closed(name: &str, counters: &Counters, exited: bool) -> bool {
    exited || data_item(name).is_some_and(|id| counters.finished(id))
}

/// The dump id of a table data file, `<dumpId>.dat`.
fn data_item(name: &str) -> Option<u32> {
    let id = name.strip_suffix(".dat")?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// What of pg_dump's folder to start on now: files not started yet, in
/// name order; while pg_dump runs only table data files (which it writes
/// once, from start to end), after it exited 0 all. A file started before
/// and there again was written twice, which fails the backup.
pub fn to_start(
    present: &[String],
    started: &HashSet<String>,
    uploading: &HashSet<String>,
    exited: bool,
) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for name in present {
        if !started.contains(name) {
            if exited || data_item(name).is_some() {
                names.push(name.clone());
            }
        } else if exited && !uploading.contains(name) {
            return Err(Error::PgTools(format!(
                "pg_dump wrote {name} again after it was stored"
            )));
        }
    }
    Ok(names)
}

/// Runs beside a parallel pg_dump (`child`, writing `dir`): compresses and
/// uploads each of its files as a part of `backup` while pg_dump writes
/// it, [`FILE_STREAMS`] at a time, and completes a part's upload only once
/// pg_dump has closed the file and all of it was read; each file is
/// removed from local disk once stored. `Ok(Err(status))` is pg_dump's
/// failure; then, as on any error, the uploads running are aborted (the
/// caller removes the parts stored). `progress` gets the bytes stored.
#[allow(clippy::too_many_arguments)]
pub async fn upload_while_dumping(
    store: &Store,
    backup: &BackupKey,
    dir: &Path,
    child: &mut tokio::process::Child,
    counters: &Arc<Counters>,
    metrics: &Metrics,
    progress: &(dyn Fn(u64) + Send + Sync),
    cancel: &CancellationToken,
) -> Result<Result<Vec<Part>, std::process::ExitStatus>, Error> {
    let streams = cancel.child_token();
    let exited = Arc::new(AtomicBool::new(false));
    let stored = AtomicU64::new(0);
    let removed = AtomicU64::new(0);
    let parts_held = Parts {
        buffers: Buffers::new(FILE_STREAMS * 2),
        in_flight: 1,
    };
    let file = File {
        store,
        backup,
        dir,
        parts: &parts_held,
        metrics,
        stored: &stored,
        removed: &removed,
        progress,
        cancel: &streams,
    };
    let mut started = HashSet::new();
    let mut uploading = HashSet::new();
    let mut running = FuturesUnordered::new();
    let mut parts = Vec::new();
    let mut looks = tokio::time::interval(LOOK_EVERY);
    looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Files to start, from the last look at the folder (a look lists it,
    // which with thousands of tables is not for every file stored).
    let mut pending = std::collections::VecDeque::new();
    let mut look = true;
    let mut measured: Option<std::time::Instant> = None;
    let outcome = loop {
        let done = exited.load(Ordering::Relaxed);
        if look {
            look = false;
            let listed = present_files(dir)
                .and_then(|present| to_start(&present, &started, &uploading, done));
            match listed {
                Ok(names) => pending = names.into(),
                Err(e) => break Err(e),
            }
            if done && pending.is_empty() && running.is_empty() {
                break Ok(Ok(()));
            }
        }
        while running.len() < FILE_STREAMS
            && let Some(name) = pending.pop_front()
        {
            started.insert(name.clone());
            uploading.insert(name.clone());
            let closed = {
                let exited = exited.clone();
                let name = name.clone();
                let counters = counters.clone();
                move || is_closed(&name, &counters, exited.load(Ordering::Relaxed))
            };
            running.push(file.upload(name, closed));
        }
        if done && pending.is_empty() && running.is_empty() {
            // All stored: a last look says whether anything is left.
            look = true;
            continue;
        }
        if measured.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) {
            measured = Some(std::time::Instant::now());
            counters.dumped.store(
                removed.load(Ordering::Relaxed) + size_of(dir),
                Ordering::Relaxed,
            );
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Err(Error::ShuttingDown),
            status = child.wait(), if !done => match status {
                Ok(status) if status.success() => {
                    exited.store(true, Ordering::Relaxed);
                    look = true;
                }
                Ok(status) => break Ok(Err(status)),
                Err(e) => break Err(Error::io("cannot wait for pg_dump")(e)),
            },
            Some(uploaded) = running.next(), if !running.is_empty() => match uploaded {
                Ok(part) => {
                    let part: Part = part;
                    uploading.remove(&part.name);
                    parts.push(part);
                }
                Err(e) => break Err(e),
            },
            _ = looks.tick() => look = true,
        }
    };
    if !matches!(outcome, Ok(Ok(()))) {
        // Every upload running aborts (nothing half-written completes).
        streams.cancel();
        while running.next().await.is_some() {}
    }
    outcome.map(|finished| {
        finished.map(|()| {
            parts.sort_by(|a, b| a.name.cmp(&b.name));
            parts
        })
    })
}

/// What uploading one file of pg_dump's folder needs.
struct File<'a> {
    store: &'a Store,
    backup: &'a BackupKey,
    dir: &'a Path,
    parts: &'a Parts,
    metrics: &'a Metrics,
    /// Bytes stored, of every file.
    stored: &'a AtomicU64,
    /// Bytes of the files stored and removed.
    removed: &'a AtomicU64,
    progress: &'a (dyn Fn(u64) + Send + Sync),
    cancel: &'a CancellationToken,
}

impl File<'_> {
    /// Compresses `name` on a blocking thread while pg_dump writes it, into
    /// the part's multipart upload, which completes only once the thread
    /// read the file whole after `closed` said so, and finished the frame.
    async fn upload(
        &self,
        name: String,
        closed: impl Fn() -> bool + Send + 'static,
    ) -> Result<Part, Error> {
        let path = self.dir.join(&name);
        let (into, mut from) = tokio::io::duplex(PIPE_SIZE);
        // The thread stops waiting for more of the file once this ends.
        let stop = self.cancel.child_token();
        let _stop = stop.clone().drop_guard();
        let compressing = tokio::task::spawn_blocking({
            let path = path.clone();
            let handle = tokio::runtime::Handle::current();
            move || compress_file(&path, closed, Blocking(handle, into), &stop)
        });
        let read = AtomicU64::new(0);
        let reported = AtomicU64::new(0);
        let progress = |written: u64| {
            let more = written.saturating_sub(reported.swap(written, Ordering::Relaxed));
            (self.progress)(self.stored.fetch_add(more, Ordering::Relaxed) + more);
        };
        let digested = transfer::upload(
            self.store,
            &self.backup.part(&name),
            &mut from,
            self.parts,
            &progress,
            self.metrics,
            self.cancel,
            || async {
                let compressed = compressing.await.map_err(|e| Error::Io {
                    what: format!("compressing {}", path.display()),
                    source: std::io::Error::other(e),
                })??;
                read.store(compressed, Ordering::Relaxed);
                Ok(())
            },
        )
        .await?;
        tokio::fs::remove_file(&path)
            .await
            .map_err(Error::io(format!("cannot remove {}", path.display())))?;
        self.removed
            .fetch_add(read.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(Part {
            name,
            size_bytes: digested.size,
            sha256: digested.sha256,
        })
    }
}

/// Compresses the file at `path` into `into` as it is written: reads what
/// is there, and at its end waits for more until `closed` (asked before
/// the read that found the end) says the writer closed it. The bytes read
/// must then be the file's length. Returns them.
fn compress_file<W: std::io::Write>(
    path: &Path,
    closed: impl Fn() -> bool,
    into: W,
    stop: &CancellationToken,
) -> Result<u64, Error> {
    use std::io::{Read, Write};
    let failed = |e| Error::Io {
        what: format!("cannot compress {}", path.display()),
        source: e,
    };
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut encoder = compression::encoder(into, 1).map_err(failed)?;
    let mut buffer = vec![0u8; READ_SIZE];
    let mut read = 0u64;
    loop {
        let was_closed = closed();
        let n = file.read(&mut buffer).map_err(failed)?;
        if n > 0 {
            read += n as u64;
            encoder.write_all(&buffer[..n]).map_err(failed)?;
        } else if was_closed {
            break;
        } else if stop.is_cancelled() {
            return Err(Error::ShuttingDown);
        } else {
            std::thread::sleep(LOOK_EVERY);
        }
    }
    let length = file.metadata().map_err(failed)?.len();
    if length != read {
        return Err(Error::PgTools(format!(
            "{} changed while it was read: {read} bytes read, {length} bytes on disk",
            path.display()
        )));
    }
    encoder.finish().map_err(failed)?.flush().map_err(failed)?;
    Ok(read)
}

/// An async writer written from a blocking thread; dropped, it closes.
struct Blocking<W>(tokio::runtime::Handle, W);

impl<W: AsyncWrite + Unpin> std::io::Write for Blocking<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.block_on(self.1.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.block_on(self.1.flush())
    }
}

/// The files in pg_dump's folder, none before pg_dump creates it.
fn present_files(dir: &Path) -> Result<Vec<String>, Error> {
    match dir.try_exists() {
        Ok(false) => Ok(Vec::new()),
        _ => files(dir),
    }
}

/// Deletes every object under the backup's folder: what an interrupted
/// attempt left, or the parts of one that failed. Missing is deleted.
pub async fn remove_parts(store: &Store, backup: &BackupKey) -> Result<(), Error> {
    store.delete_under(&backup.directory()).await
}

/// [`transfer::fetch_decompressed`] of `part`, named with its outcome.
async fn fetch_part<'a>(
    store: &Store,
    key: String,
    part: &'a Part,
    into: Option<PathBuf>,
    cancel: &CancellationToken,
) -> (&'a Part, Result<(Digested, Option<std::io::Error>), Error>) {
    let fetched = transfer::fetch_decompressed(store, &key, into, cancel).await;
    (part, fetched)
}

/// Fetches the parts of `backup` into `dir`, decompressed; those `keep`
/// refuses are read, checked and dropped (verification keeps only the
/// table of contents). Each must have the size and sha256 its manifest
/// lists and decompress whole. `Ok(Err(reason))` says which did not; an
/// `Err` is the store's.
pub async fn fetch(
    store: &Store,
    backup: &BackupKey,
    parts: &[Part],
    dir: &Path,
    keep: impl Fn(&str) -> bool,
    cancel: &CancellationToken,
) -> Result<Result<(), String>, Error> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(Error::io(format!("cannot create {}", dir.display())))?;
    // Largest first: the big tables' parts take most of the time, and the
    // small ones are fetched beside them.
    let mut largest_first: Vec<&Part> = parts.iter().collect();
    largest_first.sort_by_key(|part| std::cmp::Reverse(part.size_bytes));
    let mut waiting = largest_first.into_iter();
    let mut fetching = FuturesUnordered::new();
    loop {
        while fetching.len() < FETCHED_AT_ONCE
            && let Some(part) = waiting.next()
        {
            let into = keep(&part.name).then(|| dir.join(&part.name));
            fetching.push(fetch_part(
                store,
                backup.part(&part.name),
                part,
                into,
                cancel,
            ));
        }
        let Some((part, fetched)) = fetching.next().await else {
            break;
        };
        let (read, failed) = fetched?;
        let expected = Digested {
            size: part.size_bytes,
            sha256: part.sha256.clone(),
        };
        let object = format!("{}.zst", part.name);
        if read != expected {
            return Ok(Err(format!(
                "part {object}: read back {} bytes with sha256 {}, but {} bytes with sha256 {} were stored",
                read.size, read.sha256, expected.size, expected.sha256
            )));
        }
        if let Some(e) = failed {
            return Ok(Err(format!("part {object} does not decompress: {e}")));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::{ObjectStoreExt, PutPayload};
    use tokio::io::AsyncWriteExt;

    #[test]
    fn jobs_come_from_the_request_or_the_flag_and_bad_ones_are_refused() {
        assert_eq!(jobs(0, 1).unwrap(), 1);
        assert_eq!(jobs(0, 4).unwrap(), 4);
        assert_eq!(jobs(16, 1).unwrap(), 16);
        assert_eq!(jobs(1, 8).unwrap(), 1);
        let error = jobs(17, 1).unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            error.to_string(),
            "invalid request: jobs 17 is not between 1 and 16"
        );
    }

    #[test]
    fn only_an_empty_target_is_restored_by_parallel_jobs() {
        use Layout::{Directory, Single};
        assert!(restores_in_parallel(4, Directory, false, true));
        assert!(!restores_in_parallel(1, Directory, false, true), "one job");
        assert!(!restores_in_parallel(4, Single, false, true), "a stream");
        assert!(
            !restores_in_parallel(4, Directory, true, true),
            "holds data"
        );
        assert!(
            !restores_in_parallel(4, Directory, false, false),
            "no retry"
        );
    }

    #[test]
    fn only_pg_dumps_plain_files_become_parts() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["toc.dat", "3456.dat", "blobs.toc"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        assert_eq!(
            files(dir.path()).unwrap(),
            ["3456.dat", "blobs.toc", "toc.dat"]
        );
        assert_eq!(size_of(dir.path()), 7 + 8 + 9);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let error = files(dir.path()).unwrap_err().to_string();
        assert_eq!(
            error,
            "pg_dump's folder holds \"sub\", not a file of pg_dump's"
        );
    }

    /// `sh -c script` as pg_dump, its stderr read as pg_dump's, its stdin
    /// the test's to tell it to go on (`read`).
    fn fake_pg_dump(script: &str) -> (tokio::process::Child, Arc<Counters>) {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let counters = Arc::new(Counters::default());
        tokio::spawn(crate::progress::read_verbose_stderr(
            child.stderr.take(),
            counters.clone(),
        ));
        (child, counters)
    }

    struct Dump {
        root: tempfile::TempDir,
        store: Store,
        backup: BackupKey,
    }

    impl Dump {
        fn new() -> Self {
            let root = tempfile::tempdir().unwrap();
            let store =
                Store::from_url_opts(&format!("file://{}", root.path().join("s").display()), [])
                    .unwrap();
            Self {
                root,
                store,
                backup: BackupKey::new("ns", "db", "u1", "b").unwrap(),
            }
        }

        fn dir(&self) -> PathBuf {
            self.root.path().join("dump")
        }

        fn object(&self, name: &str) -> PathBuf {
            self.root.path().join(format!("s/ns/db-u1/b.d/{name}.zst"))
        }

        async fn upload(
            &self,
            child: &mut tokio::process::Child,
            counters: &Arc<Counters>,
        ) -> Result<Result<Vec<Part>, std::process::ExitStatus>, Error> {
            upload_while_dumping(
                &self.store,
                &self.backup,
                &self.dir(),
                child,
                counters,
                &Metrics::default(),
                &|_| {},
                &CancellationToken::new(),
            )
            .await
        }
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("{what}: not within 5 s");
    }

    fn decompressed(path: &Path) -> Vec<u8> {
        zstd::stream::decode_all(std::fs::File::open(path).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_table_file_is_stored_while_pg_dump_runs_once_it_is_finished() {
        let dump = Dump::new();
        // Writes half a table file and waits; then the rest, closes it, says
        // the item is finished and waits; then writes toc.dat and exits 0.
        let script = format!(
            "mkdir {dir} && exec 3> {dir}/3456.dat && printf first >&3 && read go && \
             printf ' second' >&3 && exec 3>&- && \
             echo 'pg_dump: finished item 3456 TABLE DATA public orders' >&2 && read go && \
             printf toc > {dir}/toc.dat",
            dir = dump.dir().display()
        );
        let (mut child, counters) = fake_pg_dump(&script);
        let mut stdin = child.stdin.take().unwrap();
        let uploading = dump.upload(&mut child, &counters);
        let driving = async {
            let table = dump.dir().join("3456.dat");
            eventually("the first half written", || {
                std::fs::read(&table).is_ok_and(|b| b == b"first")
            })
            .await;
            // Read by now, but not stored: pg_dump has not closed it.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert!(!dump.object("3456.dat").exists(), "a half-written file");
            stdin.write_all(b"go\n").await.unwrap();
            eventually("the finished file stored", || {
                dump.object("3456.dat").exists()
            })
            .await;
            // pg_dump still runs (it waits for the test), the file is stored whole.
            assert_eq!(decompressed(&dump.object("3456.dat")), b"first second");
            // Removed right after the upload that made the object appear.
            eventually("removed once stored", || !table.exists()).await;
            assert!(!dump.object("toc.dat").exists());
            stdin.write_all(b"go\n").await.unwrap();
        };
        let (parts, ()) = tokio::join!(uploading, driving);
        let parts = parts.unwrap().unwrap();
        assert_eq!(
            parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["3456.dat", "toc.dat"]
        );
        assert_eq!(decompressed(&dump.object("toc.dat")), b"toc");
        let stored = std::fs::read(dump.object("3456.dat")).unwrap();
        assert_eq!(parts[0].size_bytes, stored.len() as u64);
        assert_eq!(
            parts[0].sha256,
            transfer::hex(&<sha2::Sha256 as sha2::Digest>::digest(&stored))
        );
    }

    #[tokio::test]
    async fn a_pg_dump_that_fails_midway_leaves_its_open_file_unstored() {
        let dump = Dump::new();
        let script = format!(
            "mkdir {dir} && exec 3> {dir}/3456.dat && printf first >&3 && read go && \
             echo 'pg_dump: error: connection lost' >&2 && exit 1",
            dir = dump.dir().display()
        );
        let (mut child, counters) = fake_pg_dump(&script);
        let mut stdin = child.stdin.take().unwrap();
        let uploading = dump.upload(&mut child, &counters);
        let driving = async {
            let table = dump.dir().join("3456.dat");
            eventually("the first half written", || {
                std::fs::read(&table).is_ok_and(|b| b == b"first")
            })
            .await;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            stdin.write_all(b"go\n").await.unwrap();
        };
        let (outcome, ()) = tokio::join!(uploading, driving);
        let status = outcome.unwrap().unwrap_err();
        assert_eq!(status.code(), Some(1));
        assert!(!dump.object("3456.dat").exists(), "never stored");
        let left: Vec<_> = std::fs::read_dir(dump.root.path().join("s/ns/db-u1/b.d"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "the aborted upload left {left:?}");
    }

    #[test]
    fn table_files_start_while_pg_dump_runs_and_the_rest_after() {
        let present: Vec<String> = ["16390.dat", "16391.dat", "blobs.toc", "toc.dat"]
            .map(String::from)
            .to_vec();
        let none = HashSet::new();
        let started: HashSet<String> = ["16390.dat".to_owned()].into();
        assert_eq!(
            to_start(&present, &started, &started, false).unwrap(),
            ["16391.dat"]
        );
        assert_eq!(
            to_start(&present, &started, &started, true).unwrap(),
            ["16391.dat", "blobs.toc", "toc.dat"]
        );
        // Stored and removed, then there again: written twice.
        let error = to_start(&present, &started, &none, true).unwrap_err();
        assert_eq!(
            error.to_string(),
            "pg_dump wrote 16390.dat again after it was stored"
        );
        assert_eq!(data_item("16390.dat"), Some(16390));
        for name in ["toc.dat", ".dat", "1.dat.gz", "+1.dat", "blob_3.dat"] {
            assert_eq!(data_item(name), None, "{name}");
        }
        let counters = Counters::default();
        assert!(!is_closed("16390.dat", &counters, false));
        assert!(is_closed("toc.dat", &counters, true));
    }

    #[test]
    fn stale_work_folders_go_and_others_stay() {
        let base = tempfile::tempdir().unwrap();
        let stale = work_dir(base.path()).unwrap().keep();
        std::fs::write(stale.join("x"), "x").unwrap();
        std::fs::create_dir(base.path().join("other")).unwrap();
        remove_stale(base.path());
        assert!(!stale.exists());
        assert!(base.path().join("other").exists());
    }

    #[tokio::test]
    async fn parts_upload_and_fetch_back_and_an_altered_one_is_named() {
        let root = tempfile::tempdir().unwrap();
        let store =
            Store::from_url_opts(&format!("file://{}", root.path().join("s").display()), [])
                .unwrap();
        let backup = BackupKey::new("ns", "db", "u1", "b").unwrap();
        let dump = root.path().join("dump");
        std::fs::create_dir(&dump).unwrap();
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 97) as u8).collect();
        std::fs::write(dump.join("3456.dat"), &data).unwrap();
        std::fs::write(dump.join("toc.dat"), b"PGDMP toc").unwrap();
        let cancel = CancellationToken::new();
        // A pg_dump that has written its files and exits 0.
        let (mut child, counters) = fake_pg_dump("true");
        let parts = upload_while_dumping(
            &store,
            &backup,
            &dump,
            &mut child,
            &counters,
            &Metrics::default(),
            &|_| {},
            &cancel,
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(
            parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["3456.dat", "toc.dat"]
        );
        assert!(
            files(&dump).unwrap().is_empty(),
            "local files go once stored"
        );
        let object = root.path().join("s/ns/db-u1/b.d/3456.dat.zst");
        assert_eq!(
            std::fs::metadata(&object).unwrap().len(),
            parts[0].size_bytes
        );

        let back = root.path().join("back");
        let fetched = fetch(&store, &backup, &parts, &back, |_| true, &cancel)
            .await
            .unwrap();
        assert_eq!(fetched, Ok(()));
        assert!(std::fs::read(back.join("3456.dat")).unwrap() == data);
        let toc_only = root.path().join("toc-only");
        let fetched = fetch(
            &store,
            &backup,
            &parts,
            &toc_only,
            |n| n == "toc.dat",
            &cancel,
        )
        .await
        .unwrap();
        assert_eq!(fetched, Ok(()));
        assert!(!toc_only.join("3456.dat").exists());
        assert_eq!(
            std::fs::read(toc_only.join("toc.dat")).unwrap(),
            b"PGDMP toc"
        );

        let mut bytes = std::fs::read(&object).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        store
            .inner()
            .put(
                &store.path(&backup.part("3456.dat")),
                PutPayload::from(bytes),
            )
            .await
            .unwrap();
        let reason = fetch(&store, &backup, &parts, &back, |_| true, &cancel)
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            reason.starts_with("part 3456.dat.zst: read back "),
            "{reason}"
        );

        remove_parts(&store, &backup).await.unwrap();
        assert!(!root.path().join("s/ns/db-u1/b.d/toc.dat.zst").exists());
        remove_parts(&store, &backup).await.unwrap();
    }
}
