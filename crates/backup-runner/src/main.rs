use clap::Parser;

fn main() -> std::process::ExitCode {
    navique_runtime::block_on(backup_runner::run(backup_runner::Args::parse()))
}
