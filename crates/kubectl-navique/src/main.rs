//! `kubectl-navique`: see the library's docs and `docs/kubectl-plugin.md`.

use std::process::ExitCode;

use clap::Parser;
use kubectl_navique::cli::Cli;

mod commands;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // kube and tonic use ring; with two rustls providers linked, rustls
    // refuses to pick one, so choose before any TLS.
    let _ = rustls::crypto::ring::default_provider().install_default();
    commands::run(cli).await.unwrap_or_else(|e| {
        eprintln!("{}", commands::describe(&e));
        ExitCode::FAILURE
    })
}
