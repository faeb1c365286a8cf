//! What every Navique component shares: command-line flags, logs and traces,
//! the admin server (`/metrics`, `/healthz`, `/readyz`), graceful shutdown,
//! the cluster connection, Lease-based leader election, and the TLS of
//! internal gRPC ([`grpc_tls`], on the certificate code of [`pki`]).
//!
//! A component's `main` is one line, [`block_on`] of its `run`; `run` starts a
//! [`Component`], connects, and hands its reconcilers or servers to it.
#![forbid(unsafe_code)]

mod admin;
mod args;
mod cluster;
mod component;
pub mod controller;
mod error;
pub mod events;
mod failures;
mod finalizers;
pub mod grpc_tls;
mod leader;
pub mod pki;
mod process;
mod retry;
mod telemetry;

pub use admin::Readiness;
pub use args::{CommonArgs, LeaderElectionArgs, LogFormat};
pub use component::Component;
pub use error::Error;
pub use failures::{Attempts, FailureBackoff, Retry, intent};
pub use finalizers::{set_finalizers, write_finalizers};
pub use leader::Leadership;
pub use telemetry::trace_headers;

use std::error::Error as StdError;
use std::future::Future;
use std::process::ExitCode;

/// Runs a component's entry point on a multi-threaded Tokio runtime and turns
/// its outcome into an exit code. A failure is printed as one line on stderr,
/// with its causes joined, never as a panic or a backtrace.
pub fn block_on<F, E>(future: F) -> ExitCode
where
    F: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    block_on_runtime(tokio::runtime::Builder::new_multi_thread(), future)
}

/// [`block_on`] on the calling thread alone, for a component that mostly
/// waits on the API server: no work moves between threads, which costs
/// system calls (docs/locks.md, Performance). Not with OTLP traces: their
/// exporter flushes at shutdown by blocking the thread that would have to
/// drive its gRPC channel.
pub fn block_on_current_thread<F, E>(future: F) -> ExitCode
where
    F: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    block_on_runtime(tokio::runtime::Builder::new_current_thread(), future)
}

fn block_on_runtime<F, E>(mut builder: tokio::runtime::Builder, future: F) -> ExitCode
where
    F: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    // kube uses ring; other dependencies may pull aws-lc-rs. With two
    // providers linked, rustls refuses to pick one: choose before any TLS.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&*e.into()));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line. Many errors already repeat their
/// source in their own message, so a cause already said is not said again,
/// and multi-line messages (YAML snippets) keep only their first line.
pub fn one_line(error: &(dyn StdError + 'static)) -> String {
    let mut line = String::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let message = error.to_string();
        let message = message.lines().next().unwrap_or_default().trim_end();
        if !message.is_empty() && !line.contains(message) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(message);
        }
        next = error.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Chain {
        message: &'static str,
        #[source]
        source: Option<Box<Chain>>,
    }

    fn chain(messages: &[&'static str]) -> Chain {
        messages
            .iter()
            .rev()
            .fold(None, |source, message| {
                Some(Chain {
                    message,
                    source: source.map(Box::new),
                })
            })
            .unwrap()
    }

    #[test]
    fn causes_are_joined_on_one_line() {
        let error = chain(&["cannot start", "connection refused"]);
        assert_eq!(one_line(&error), "cannot start: connection refused");
    }

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let error = chain(&["cannot load kubeconfig: no such file", "no such file"]);
        assert_eq!(one_line(&error), "cannot load kubeconfig: no such file");
    }

    #[test]
    fn multi_line_messages_keep_their_first_line() {
        let error = chain(&["bad YAML: line 1 column 10\n --> <input>:1:10\n  |"]);
        assert_eq!(one_line(&error), "bad YAML: line 1 column 10");
    }
}
