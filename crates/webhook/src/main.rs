use clap::Parser;

fn main() -> std::process::ExitCode {
    navique_runtime::block_on(webhook::run(webhook::Args::parse()))
}
