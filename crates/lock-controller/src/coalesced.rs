//! Lines of writes per object. Those of objects every Lock of a namespace
//! or kind stamps are coalesced: n Locks changing at once cost a few
//! writes of their Namespace and CRD, not n. A target's run one at a time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::decision::GroupKind;

/// The key of a target's line of writes, kept apart
/// from Namespaces' and CRDs'.
pub fn target_line(kind: &GroupKind, namespace: &str, name: &str) -> String {
    format!("target {}/{} {namespace}/{name}", kind.group, kind.kind)
}

/// The key of Namespace `name`'s line of `core.navique.com/locked` writes
/// (CRDs' names hold a dot, Namespaces' cannot).
pub fn namespace_line(name: &str) -> String {
    format!("namespace {name}")
}

/// The key of Namespace `name`'s line of namespace-wide marker writes.
pub fn namespace_wide_line(name: &str) -> String {
    format!("namespace-wide {name}")
}

/// The writes of each object, by a key naming it.
#[derive(Default)]
pub struct Coalesced {
    turns: Mutex<HashMap<String, Arc<Turn>>>,
}

#[derive(Default)]
struct Turn {
    /// Requests so far, and how many of them the last write covered.
    requested: AtomicU64,
    covered: AtomicU64,
    /// Callers waiting for their turn to write, none of which has read
    /// `requested` yet: each will cover every request made before it does.
    queued: AtomicUsize,
    writing: tokio::sync::Mutex<()>,
}

/// A caller counted in `queued` until its turn comes, or until it is
/// dropped while it waits: a caller that is gone must not be counted on to
/// write. (One that left counting on it is then not covered; reconciles are
/// dropped only when the controller stops.)
struct InLine<'a>(&'a AtomicUsize);

impl<'a> InLine<'a> {
    fn join(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::SeqCst);
        Self(queued)
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a caller waits for a write that covers its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Until a write computed after it asked has succeeded (or its own
    /// write failed): for a caller that needs what the write found.
    Always,
    /// Not when another caller is already queued to write: that write is
    /// computed after this request and covers it. For writes computed from
    /// shared state whose outcome only the writer needs: should it fail,
    /// the writer's reconcile is retried, and writes what this one would
    /// have. So a reconcile does not hold one of the controller's slots
    /// waiting in a line of writes of the same object.
    UnlessQueued,
}

impl Coalesced {
    /// Runs `write` (which reads the shared state when it starts) unless
    /// every request so far is covered by a write that succeeded; see
    /// [`Wait`] for when this returns without either.
    pub async fn write<Fut, E>(
        &self,
        key: &str,
        wait: Wait,
        write: impl FnOnce() -> Fut,
    ) -> Result<(), E>
    where
        Fut: Future<Output = Result<(), E>>,
    {
        let turn = self.enter(key);
        turn.requested.fetch_add(1, Ordering::SeqCst);
        // A queued caller leaves `queued` before it reads `requested`, so
        // one still counted there reads this request (SeqCst orders both).
        let result = if wait == Wait::UnlessQueued && turn.queued.load(Ordering::SeqCst) > 0 {
            Ok(())
        } else {
            let in_line = InLine::join(&turn.queued);
            let _writing = turn.writing.lock().await;
            drop(in_line);
            let covers = turn.requested.load(Ordering::SeqCst);
            if turn.covered.load(Ordering::SeqCst) >= covers {
                Ok(())
            } else {
                let result = write().await;
                if result.is_ok() {
                    turn.covered.store(covers, Ordering::SeqCst);
                }
                result
            }
        };
        self.leave(key, turn);
        result
    }

    /// Runs `run` in `key`'s line, alone, whatever the others asked: for
    /// writes whose every caller needs what its own found, and computes
    /// them from shared state once its turn has come, so that a write
    /// computed earlier never lands after one computed later.
    pub async fn alone<Fut: Future>(&self, key: &str, run: impl FnOnce() -> Fut) -> Fut::Output {
        let turn = self.enter(key);
        let output = {
            let _writing = turn.writing.lock().await;
            run().await
        };
        self.leave(key, turn);
        output
    }

    fn enter(&self, key: &str) -> Arc<Turn> {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.entry(key.to_owned()).or_default().clone()
    }

    /// The last one out forgets the object, so that gone namespaces and
    /// objects do not accumulate.
    fn leave(&self, key: &str, turn: Arc<Turn>) {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        if Arc::strong_count(&turn) == 2 {
            turns.remove(key);
        }
    }

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.turns.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;

    use super::*;

    type Result = std::result::Result<(), &'static str>;

    const FORGE: &str = "namespace forge";

    /// Starts a write of `key` that holds its turn until `release` fires.
    fn hold(
        shared: &Arc<Coalesced>,
        writes: &Arc<AtomicUsize>,
        key: &'static str,
        outcome: Result,
    ) -> (oneshot::Sender<()>, JoinHandle<Result>) {
        let (release, released) = oneshot::channel();
        let (shared, writes) = (shared.clone(), writes.clone());
        let task = tokio::spawn(async move {
            shared
                .write(key, Wait::Always, || async move {
                    writes.fetch_add(1, Ordering::SeqCst);
                    released.await.unwrap();
                    outcome
                })
                .await
        });
        (release, task)
    }

    /// Lets spawned tasks run up to their next wait.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    fn counting(
        writes: &Arc<AtomicUsize>,
        outcome: Result,
    ) -> impl FnOnce() -> std::future::Ready<Result> + use<> {
        let writes = writes.clone();
        move || {
            writes.fetch_add(1, Ordering::SeqCst);
            std::future::ready(outcome)
        }
    }

    /// Starts a write of `key` that counts itself in `writes` and returns
    /// `outcome`.
    fn spawn_write(
        shared: &Arc<Coalesced>,
        writes: &Arc<AtomicUsize>,
        key: &'static str,
        wait: Wait,
        outcome: Result,
    ) -> JoinHandle<Result> {
        let (shared, write) = (shared.clone(), counting(writes, outcome));
        tokio::spawn(async move { shared.write(key, wait, write).await })
    }

    /// A write of `namespace forge` held in progress, and a caller queued
    /// behind it (`Wait::UnlessQueued`).
    async fn held_with_one_queued() -> (
        Arc<Coalesced>,
        Arc<AtomicUsize>,
        oneshot::Sender<()>,
        JoinHandle<Result>,
        JoinHandle<Result>,
    ) {
        let shared = Arc::new(Coalesced::default());
        let writes = Arc::new(AtomicUsize::new(0));
        let (release, first) = hold(&shared, &writes, FORGE, Ok(()));
        settle().await;
        let queued = spawn_write(&shared, &writes, FORGE, Wait::UnlessQueued, Ok(()));
        settle().await;
        (shared, writes, release, first, queued)
    }

    #[tokio::test]
    async fn requests_made_during_a_write_cost_one_more_write_and_a_queued_one_lets_the_rest_go() {
        let (shared, writes, release, first, queued) = held_with_one_queued().await;
        // Waits, whoever is queued.
        let waiting = spawn_write(&shared, &writes, FORGE, Wait::Always, Err("wrote"));
        settle().await;
        // Returns at once, without writing: the queued write covers it.
        let left: Result = shared
            .write(FORGE, Wait::UnlessQueued, counting(&writes, Err("wrote")))
            .await;
        assert_eq!(left, Ok(()));
        assert_eq!(
            writes.load(Ordering::SeqCst),
            1,
            "only the held write so far"
        );
        assert!(!waiting.is_finished());
        // Another object has its own line.
        let other: Result = shared
            .write(
                "namespace shop",
                Wait::UnlessQueued,
                counting(&writes, Ok(())),
            )
            .await;
        assert_eq!(other, Ok(()));
        assert_eq!(writes.load(Ordering::SeqCst), 2);
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(()));
        assert_eq!(queued.await.unwrap(), Ok(()));
        // The first queued write covered the waiting caller's request.
        assert_eq!(waiting.await.unwrap(), Ok(()));
        // The held write, the other object's and one for the three
        // requests made while it was held.
        assert_eq!(writes.load(Ordering::SeqCst), 3);
        assert_eq!(shared.keys(), 0, "nothing is remembered once all are out");
    }

    #[tokio::test]
    async fn callers_alone_in_a_line_run_one_at_a_time_in_turn() {
        let shared = Arc::new(Coalesced::default());
        let writes = Arc::new(AtomicUsize::new(0));
        let (release, first) = hold(&shared, &writes, FORGE, Ok(()));
        settle().await;
        let (seen, second) = {
            let (shared, writes) = (shared.clone(), writes.clone());
            let (tx, rx) = oneshot::channel();
            let task = tokio::spawn(async move {
                shared
                    .alone(FORGE, || async move {
                        // Runs once the held write is done, and sees it.
                        tx.send(writes.load(Ordering::SeqCst)).unwrap();
                        "second"
                    })
                    .await
            });
            (rx, task)
        };
        settle().await;
        assert!(!second.is_finished(), "waits for the write in progress");
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(()));
        assert_eq!(second.await.unwrap(), "second");
        assert_eq!(seen.await.unwrap(), 1);
        // Each caller runs its own, even with nobody else in line.
        for _ in 0..2 {
            assert_eq!(shared.alone(FORGE, || async { 7 }).await, 7);
        }
        assert_eq!(shared.keys(), 0);
    }

    #[tokio::test]
    async fn a_caller_dropped_while_queued_is_not_counted_on_to_write() {
        let (shared, writes, release, first, queued) = held_with_one_queued().await;
        queued.abort();
        assert!(queued.await.unwrap_err().is_cancelled());
        // Nobody is queued now: this caller waits and writes.
        let waiting = spawn_write(&shared, &writes, FORGE, Wait::UnlessQueued, Ok(()));
        settle().await;
        assert!(!waiting.is_finished(), "waits for the write in progress");
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(()));
        assert_eq!(waiting.await.unwrap(), Ok(()));
        assert_eq!(
            writes.load(Ordering::SeqCst),
            2,
            "the held write and its own"
        );
    }

    #[tokio::test]
    async fn with_no_writer_queued_a_caller_waits_and_a_failed_write_leaves_its_requests_to_the_next()
     {
        let shared = Arc::new(Coalesced::default());
        let writes = Arc::new(AtomicUsize::new(0));
        let (release, first) = hold(&shared, &writes, "crd", Err("conflict"));
        settle().await;
        // Nobody is queued: this caller waits and writes itself.
        let waiting = spawn_write(&shared, &writes, "crd", Wait::UnlessQueued, Err("refused"));
        settle().await;
        assert!(!waiting.is_finished(), "waits for the write in progress");
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Err("conflict"));
        // The failed write covered nothing, so the queued one writes, and
        // its own failure is its caller's.
        assert_eq!(waiting.await.unwrap(), Err("refused"));
        assert_eq!(writes.load(Ordering::SeqCst), 2);
        let retried: Result = shared
            .write("crd", Wait::UnlessQueued, counting(&writes, Ok(())))
            .await;
        assert_eq!(retried, Ok(()));
        assert_eq!(writes.load(Ordering::SeqCst), 3);
    }
}
