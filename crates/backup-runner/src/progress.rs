//! Progress of a dump while it runs: the bytes pg_dump wrote (before
//! compression) and stored (after), the tables dumped, and how far that is
//! of the database's size (`pg_database_size`, an estimate: indexes and
//! free space are on disk but not in a dump, so a dump ends below it).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use navique_api::grpc::snapshot::v1::DumpProgress;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};

/// What `pg_dump --verbose` prints as it starts on a table's rows.
const TABLE_STARTED: &str = "pg_dump: dumping contents of table ";
/// What `pg_dump --verbose --jobs` prints once a worker reports an item
/// done (`finished item 3456 TABLE DATA public orders`): the worker has
/// closed the item's file by then.
const ITEM_FINISHED: &str = "pg_dump: finished item ";
/// The verbose lines' prefix; pg_dump's warnings and errors say which they are.
const VERBOSE: &str = "pg_dump: ";
const KEPT: [&str; 4] = ["error:", "warning:", "detail:", "hint:"];

/// Shared counters of one dump.
#[derive(Debug, Default)]
pub struct Counters {
    pub dumped: AtomicU64,
    pub tables_started: AtomicU64,
    /// The dump ids of the items a parallel pg_dump finished.
    finished: Mutex<HashSet<u32>>,
}

impl Counters {
    /// Whether pg_dump said it finished the item `dump_id`.
    pub fn finished(&self, dump_id: u32) -> bool {
        self.finished
            .lock()
            .expect("not poisoned")
            .contains(&dump_id)
    }

    /// The progress now, of a database of `database_bytes` holding `tables`
    /// tables (0 when unknown). A table counts as done once pg_dump has
    /// moved on to the next; at the end (`finished`) all are.
    pub fn progress(
        &self,
        stored: u64,
        database_bytes: u64,
        tables: u64,
        finished: bool,
    ) -> DumpProgress {
        let started = self.tables_started.load(Ordering::Relaxed);
        let tables = tables.max(started);
        DumpProgress {
            dumped_bytes: self.dumped.load(Ordering::Relaxed),
            stored_bytes: stored,
            database_bytes,
            tables_done: if finished {
                tables
            } else {
                started.saturating_sub(1)
            },
            tables,
        }
    }
}

/// Whole percent of the database dumped, at most 99 until the dump ends
/// (the estimate is not the dump's size); None without an estimate.
pub fn percent(progress: &DumpProgress, finished: bool) -> Option<u64> {
    if finished {
        return Some(100);
    }
    if progress.database_bytes == 0 {
        return None;
    }
    let share = u128::from(progress.dumped_bytes) * 100 / u128::from(progress.database_bytes);
    Some(u64::try_from(share).unwrap_or(u64::MAX).min(99))
}

/// The PROGRESS column: `41% 3/12 tables`, or `3/12 tables` without an
/// estimate.
pub fn summary(progress: &DumpProgress, finished: bool) -> String {
    let tables = format!("{}/{} tables", progress.tables_done, progress.tables);
    match percent(progress, finished) {
        Some(percent) => format!("{percent}% {tables}"),
        None => tables,
    }
}

/// Reads pg_dump's verbose stderr to the end: counts the tables it starts
/// on, and keeps what says why it failed (its first 16 KiB), not the
/// verbose chatter.
pub async fn read_verbose_stderr(
    stderr: Option<impl AsyncRead + Unpin>,
    counters: Arc<Counters>,
) -> String {
    let Some(stderr) = stderr else {
        return String::new();
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut kept = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.starts_with(TABLE_STARTED) {
            counters.tables_started.fetch_add(1, Ordering::Relaxed);
        } else if let Some(dump_id) = finished_item(&line) {
            counters
                .finished
                .lock()
                .expect("not poisoned")
                .insert(dump_id);
        } else if is_kept(&line) && kept.len() < crate::pg::STDERR_LIMIT {
            kept.push_str(&line);
            kept.push('\n');
        }
    }
    kept
}

/// The dump id of a `finished item` line.
fn finished_item(line: &str) -> Option<u32> {
    let rest = line.strip_prefix(ITEM_FINISHED)?;
    rest.split(' ').next()?.parse().ok()
}

/// A line to keep: not pg_dump's verbose information.
fn is_kept(line: &str) -> bool {
    match line.strip_prefix(VERBOSE) {
        Some(rest) => KEPT.iter().any(|kind| rest.starts_with(kind)),
        None => true,
    }
}

/// Counts the bytes read through it into `counters.dumped`.
pub struct Counting<R> {
    inner: R,
    counters: Arc<Counters>,
}

impl<R> Counting<R> {
    pub fn new(inner: R, counters: Arc<Counters>) -> Self {
        Self { inner, counters }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Counting<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        self.counters.dumped.fetch_add(read, Ordering::Relaxed);
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn progress(dumped: u64, database: u64, done: u64, tables: u64) -> DumpProgress {
        DumpProgress {
            dumped_bytes: dumped,
            stored_bytes: dumped / 4,
            database_bytes: database,
            tables_done: done,
            tables,
        }
    }

    #[test]
    fn the_summary_is_a_bounded_estimate_until_the_end() {
        assert_eq!(
            summary(&progress(412, 1000, 3, 12), false),
            "41% 3/12 tables"
        );
        // Past the estimate (a database that grew): 99% until it ends.
        assert_eq!(
            summary(&progress(1500, 1000, 11, 12), false),
            "99% 11/12 tables"
        );
        assert_eq!(
            summary(&progress(900, 1000, 12, 12), true),
            "100% 12/12 tables"
        );
        assert_eq!(summary(&progress(900, 0, 1, 2), false), "1/2 tables");
    }

    #[test]
    fn tables_count_as_done_once_the_next_starts() {
        let counters = Counters::default();
        assert_eq!(counters.progress(0, 10, 3, false).tables_done, 0);
        counters.tables_started.store(2, Ordering::Relaxed);
        let running = counters.progress(5, 10, 3, false);
        assert_eq!((running.tables_done, running.tables), (1, 3));
        // More tables than estimated (created meanwhile): never 4/3.
        counters.tables_started.store(4, Ordering::Relaxed);
        let done = counters.progress(5, 10, 3, true);
        assert_eq!((done.tables_done, done.tables), (4, 4));
    }

    #[tokio::test]
    async fn verbose_stderr_counts_tables_and_keeps_the_errors() {
        let stderr = b"pg_dump: last built-in OID is 16383\n\
pg_dump: dumping contents of table \"public.items\"\n\
pg_dump: dumping contents of table \"shop.notes\"\n\
pg_dump: finished item 3456 TABLE DATA public items\n\
pg_dump: finished item x TABLE DATA public odd\n\
pg_dump: error: query failed: ERROR:  permission denied for table secret\n\
pg_dump: detail: Query was: LOCK TABLE public.secret\n\
FATAL:  terminating connection\n";
        let counters = Arc::new(Counters::default());
        let kept = read_verbose_stderr(Some(&stderr[..]), counters.clone()).await;
        assert_eq!(counters.tables_started.load(Ordering::Relaxed), 2);
        assert!(counters.finished(3456));
        assert!(!counters.finished(3457));
        assert_eq!(
            kept,
            "pg_dump: error: query failed: ERROR:  permission denied for table secret\n\
pg_dump: detail: Query was: LOCK TABLE public.secret\n\
FATAL:  terminating connection\n"
        );
    }

    #[tokio::test]
    async fn counting_counts_every_byte_read() {
        let counters = Arc::new(Counters::default());
        let data = vec![1u8; 300_000];
        let mut out = Vec::new();
        Counting::new(&data[..], counters.clone())
            .read_to_end(&mut out)
            .await
            .unwrap();
        assert_eq!(counters.dumped.load(Ordering::Relaxed), 300_000);
    }
}
