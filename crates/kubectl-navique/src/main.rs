//! `kubectl-navique`: see the library's docs and `docs/kubectl-plugin.md`.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use kubectl_navique::cli::Cli;
use kubectl_navique::completion;

mod commands;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // kubectl's plugin completion (`kubectl_complete-navique`): the words
    // are an unfinished command line, so they are not parsed as one.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(completion::REQUEST) {
        print!("{}", completion::complete(&Cli::command(), &args[1..]));
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    // kube and tonic use ring; with two rustls providers linked, rustls
    // refuses to pick one, so choose before any TLS.
    let _ = rustls::crypto::ring::default_provider().install_default();
    commands::run(cli).await.unwrap_or_else(|e| {
        eprintln!("{}", commands::describe(&e));
        ExitCode::FAILURE
    })
}
