//! Snapshots by idempotency key: one attempt per key at a time, found again
//! in the store after a restart, retried after a failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use navique_api::grpc::snapshot::v1::{DumpProgress, Phase, Snapshot, TestRestore};
use navique_api::services::BackupPhase;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::Error;
use crate::engine::{Engine, Report, SnapshotRequest};
use crate::layout::BackupKey;
use crate::manifest::Manifest;
use crate::status::{StatusWriter, backup_phase, backup_status};

/// How long shutdown waits for running attempts to abort their uploads.
const DRAIN: Duration = Duration::from_secs(20);

/// What a request does given the key's current attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer with the current attempt.
    Existing,
    /// Start a new attempt under the key.
    Start,
}

/// COMPLETED and in-flight attempts are returned as they are; an unknown
/// key starts one (which first looks for a completed backup in the store);
/// a FAILED one starts again when the caller retries failures.
pub fn decide(current: Option<Phase>, retry_failed: bool) -> Decision {
    match current {
        None => Decision::Start,
        Some(Phase::Failed) if retry_failed => Decision::Start,
        Some(_) => Decision::Existing,
    }
}

/// The moves an attempt may make: forwards, or to FAILED from any phase
/// that is not final. PENDING goes straight to COMPLETED when the store
/// already holds the verified backup.
pub fn can_move(from: Phase, to: Phase) -> bool {
    use Phase::*;
    matches!(
        (from, to),
        (Pending, Running)
            | (Pending, Completed)
            | (Running, Verifying)
            | (Verifying, Completed)
            | (Pending | Running | Verifying, Failed)
    )
}

pub fn is_terminal(phase: Phase) -> bool {
    matches!(phase, Phase::Completed | Phase::Failed)
}

/// An attempt's state, as watchers see it.
#[derive(Clone, Debug)]
pub struct State {
    pub snapshot: Snapshot,
    pub bytes_written: u64,
    /// What it is doing, or why it failed.
    pub message: String,
}

impl State {
    pub fn is_terminal(&self) -> bool {
        is_terminal(self.snapshot.phase())
    }
}

/// One attempt at a key's snapshot.
pub struct Attempt {
    request: SnapshotRequest,
    state: watch::Sender<State>,
}

fn timestamp(at: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.as_second(),
        nanos: at.subsec_nanosecond(),
    }
}

impl Attempt {
    fn new(request: SnapshotRequest) -> Self {
        let snapshot = Snapshot {
            idempotency_key: request.idempotency_key.clone(),
            service: Some(request.service_ref()),
            origin: request.origin as i32,
            backup_name: request.backup.backup_name.clone(),
            phase: Phase::Pending as i32,
            started_at: Some(timestamp(Timestamp::now())),
            ..Default::default()
        };
        let (state, _) = watch::channel(State {
            snapshot,
            bytes_written: 0,
            message: "waiting to start".to_owned(),
        });
        Self { request, state }
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    fn phase(&self) -> Phase {
        self.state.borrow().snapshot.phase()
    }

    fn move_to(&self, phase: Phase, message: String, update: impl FnOnce(&mut Snapshot)) {
        self.state.send_modify(|state| {
            let from = state.snapshot.phase();
            if !can_move(from, phase) {
                tracing::error!(?from, to = ?phase, "ignoring an impossible phase change");
                return;
            }
            state.snapshot.phase = phase as i32;
            state.message = message;
            update(&mut state.snapshot);
        });
    }

    fn complete(&self, manifest: &Manifest) {
        self.move_to(Phase::Completed, String::new(), |snapshot| {
            snapshot.location = manifest.location.clone();
            snapshot.size_bytes = manifest.size_bytes;
            snapshot.sha256 = manifest.sha256.clone();
            // A snapshot found in the store keeps the times it was taken at.
            let parse = |at: &str| at.parse::<Timestamp>().ok().map(timestamp);
            if let Some(started) = parse(&manifest.started_at) {
                snapshot.started_at = Some(started);
            }
            snapshot.completed_at =
                parse(&manifest.completed_at).or(Some(timestamp(Timestamp::now())));
            snapshot.message.clear();
        });
        self.state.send_modify(|state| {
            state.bytes_written = state.bytes_written.max(manifest.size_bytes);
        });
    }

    fn fail(&self, message: String) {
        self.move_to(Phase::Failed, message.clone(), |snapshot| {
            snapshot.message = message;
            snapshot.completed_at = Some(timestamp(Timestamp::now()));
        });
    }
}

impl Report for Attempt {
    fn phase(&self, phase: Phase, message: String) {
        self.move_to(phase, message, |_| {});
    }

    fn bytes(&self, written: u64) {
        self.state
            .send_modify(|state| state.bytes_written = written);
    }

    fn progress(&self, progress: DumpProgress) {
        self.state
            .send_modify(|state| state.snapshot.progress = Some(progress));
    }

    fn test_restore(&self, result: TestRestore) {
        self.state
            .send_modify(|state| state.snapshot.test_restore = Some(result));
    }
}

/// Every snapshot this process was asked for, by idempotency key.
pub struct Snapshots {
    engine: Arc<Engine>,
    status: StatusWriter,
    attempts: Mutex<HashMap<String, Arc<Attempt>>>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Snapshots {
    /// `cancel` stops running attempts (their uploads are aborted).
    pub fn new(engine: Arc<Engine>, cancel: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            status: StatusWriter::new(engine.client().clone()),
            engine,
            attempts: Mutex::default(),
            cancel,
            tasks: TaskTracker::new(),
        })
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn status_writer(&self) -> &StatusWriter {
        &self.status
    }

    fn attempts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Attempt>>> {
        self.attempts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the snapshot or returns the key's current one ([`decide`]).
    /// Decided under one lock, so concurrent duplicates never start two.
    pub fn request(
        self: &Arc<Self>,
        request: SnapshotRequest,
        retry_failed: bool,
    ) -> Result<Snapshot, Error> {
        if self.cancel.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        let mut attempts = self.attempts();
        let key = request.idempotency_key.clone();
        if let Some(current) = attempts.get(&key) {
            if current.request.backup != request.backup {
                return Err(Error::KeyReused {
                    key,
                    existing: current.request.backup.backup_name.clone(),
                    existing_service: current.request.backup.service_display(),
                });
            }
            if decide(Some(current.phase()), retry_failed) == Decision::Existing {
                return Ok(current.state().snapshot);
            }
        }
        if let Some(other) = attempts.values().find(|other| {
            other.request.backup == request.backup
                && other.request.idempotency_key != key
                && other.phase() != Phase::Failed
        }) {
            return Err(Error::BackupNameTaken {
                backup: request.backup.backup_name.clone(),
                service: request.backup.service_display(),
                other: other.request.idempotency_key.clone(),
            });
        }
        let attempt = Arc::new(Attempt::new(request));
        attempts.insert(key.clone(), attempt.clone());
        drop(attempts);
        let snapshot = attempt.state().snapshot;
        let span = tracing::info_span!(
            "snapshot",
            idempotency_key = %key,
            backup = %attempt.request.backup.archive()
        );
        self.tasks.spawn(self.clone().run(attempt).instrument(span));
        Ok(snapshot)
    }

    async fn run(self: Arc<Self>, attempt: Arc<Attempt>) {
        let metrics = self.engine.metrics().clone();
        metrics.started.inc();
        let clock = Instant::now();
        let recording = tokio::spawn(
            follow(
                self.status.clone(),
                attempt.request.backup.clone(),
                attempt.state.subscribe(),
                self.engine.progress_interval(),
            )
            .in_current_span(),
        );
        let started_at = attempt
            .state()
            .snapshot
            .started_at
            .and_then(|t| Timestamp::new(t.seconds, t.nanos).ok())
            .unwrap_or_else(Timestamp::now);
        let outcome = self
            .engine
            .snapshot(&attempt.request, started_at, &*attempt, &self.cancel)
            .await;
        metrics.duration.observe(clock.elapsed().as_secs_f64());
        match outcome {
            Ok(manifest) => {
                metrics.completed.inc();
                tracing::info!(location = %manifest.location, size = manifest.size_bytes, "snapshot completed");
                attempt.complete(&manifest);
            }
            Err(Error::ShuttingDown) => {
                metrics.snapshot_failed(&Error::ShuttingDown);
                // The record keeps its phase: whoever asked asks again
                // after the restart, and the attempt starts over.
                recording.abort();
                attempt.fail(Error::ShuttingDown.to_string());
                return;
            }
            Err(e) => {
                metrics.snapshot_failed(&e);
                let message = navique_runtime::one_line(&e);
                tracing::warn!(error = %message, "snapshot failed");
                attempt.fail(message);
            }
        }
        let _ = recording.await;
    }

    /// The key's current snapshot.
    pub fn get(&self, key: &str) -> Result<Snapshot, Error> {
        self.attempts()
            .get(key)
            .map(|attempt| attempt.state().snapshot)
            .ok_or_else(|| Error::UnknownKey(key.to_owned()))
    }

    /// Follows the key's current attempt.
    pub fn watch(&self, key: &str) -> Result<watch::Receiver<State>, Error> {
        self.attempts()
            .get(key)
            .map(|attempt| attempt.state.subscribe())
            .ok_or_else(|| Error::UnknownKey(key.to_owned()))
    }

    /// Waits (a bounded time) for running attempts to abort after `cancel`.
    pub async fn drain(&self) {
        self.tasks.close();
        if tokio::time::timeout(DRAIN, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "snapshot attempts did not stop in time; their uploads may stay unfinished"
            );
        }
    }

    pub fn shutdown(&self) -> &CancellationToken {
        &self.cancel
    }
}

/// Writes the status each time the record's phase or message changes, and
/// its progress at most every `interval`, until the snapshot is COMPLETED
/// or FAILED. PENDING is not written: it lasts while the store is searched,
/// and a snapshot found there completed must not flip its record back to
/// Pending.
async fn follow(
    writer: StatusWriter,
    backup: BackupKey,
    mut state: watch::Receiver<State>,
    interval: Duration,
) {
    let mut written: Option<(BackupPhase, String)> = None;
    let mut progress_written: Option<(Instant, Option<DumpProgress>)> = None;
    loop {
        let current = state.borrow_and_update().clone();
        let key = (
            backup_phase(current.snapshot.phase()),
            current.message.clone(),
        );
        let progress = current.snapshot.progress;
        let progress_due = progress_written
            .as_ref()
            .is_some_and(|(at, last)| *last != progress && at.elapsed() >= interval);
        if key.0 != BackupPhase::Pending && (written.as_ref() != Some(&key) || progress_due) {
            writer
                .write_retrying(&backup, &backup_status(&current.snapshot, &current.message))
                .await;
            written = Some(key);
            progress_written = Some((Instant::now(), progress));
        }
        if current.is_terminal() {
            return;
        }
        // Wake for the next change, or when progress not yet written is due.
        let changed = match &progress_written {
            Some((at, last)) if *last != progress => {
                let due = (*at + interval).saturating_duration_since(Instant::now());
                tokio::select! {
                    changed = state.changed() => changed,
                    () = tokio::time::sleep(due) => Ok(()),
                }
            }
            _ => state.changed().await,
        };
        if changed.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_return_what_exists_and_retry_only_failures() {
        assert_eq!(decide(None, false), Decision::Start);
        for phase in [
            Phase::Pending,
            Phase::Running,
            Phase::Verifying,
            Phase::Completed,
        ] {
            assert_eq!(decide(Some(phase), true), Decision::Existing, "{phase:?}");
        }
        assert_eq!(decide(Some(Phase::Failed), true), Decision::Start);
        // Manual backups: a failed one is final.
        assert_eq!(decide(Some(Phase::Failed), false), Decision::Existing);
    }

    #[test]
    fn attempts_only_move_forwards_or_fail() {
        use Phase::*;
        assert!(can_move(Pending, Running));
        assert!(can_move(Pending, Completed));
        assert!(can_move(Running, Verifying));
        assert!(can_move(Verifying, Completed));
        assert!(can_move(Running, Failed));
        assert!(!can_move(Running, Completed), "never completed unverified");
        assert!(!can_move(Completed, Failed));
        assert!(!can_move(Failed, Running));
        assert!(!can_move(Verifying, Running));
    }
}
