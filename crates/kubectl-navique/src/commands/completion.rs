//! `completion <shell>`: clap_complete's script for `kubectl-navique`.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;
use kubectl_navique::cli::{Cli, CompletionArgs};

pub fn run(args: &CompletionArgs) -> Result<ExitCode> {
    clap_complete::generate(
        args.shell,
        &mut Cli::command(),
        "kubectl-navique",
        &mut std::io::stdout(),
    );
    Ok(ExitCode::SUCCESS)
}
