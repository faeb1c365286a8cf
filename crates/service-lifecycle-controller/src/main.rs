use clap::Parser;

fn main() -> std::process::ExitCode {
    navique_runtime::block_on(service_lifecycle_controller::run(
        service_lifecycle_controller::Args::parse(),
    ))
}
