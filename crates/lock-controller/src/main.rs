use clap::Parser;

fn main() -> std::process::ExitCode {
    navique_runtime::block_on(lock_controller::run(lock_controller::Args::parse()))
}
