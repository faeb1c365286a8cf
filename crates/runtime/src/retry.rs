//! Exponential backoff for the loops that wait for the cluster.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

const FIRST: Duration = Duration::from_millis(500);
const MAX: Duration = Duration::from_secs(30);

/// Delays that double from half a second up to thirty seconds.
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub fn new() -> Self {
        Self { next: FIRST }
    }

    /// The delay before the next attempt, advancing the sequence.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX);
        delay
    }

    /// Sleeps for `delay`; false if shut down meanwhile.
    pub async fn sleep(delay: Duration, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            () = shutdown.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let mut backoff = Backoff::new();
        let delays: Vec<_> = (0..9).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(
            delays,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
    }
}
