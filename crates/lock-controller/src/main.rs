use clap::Parser;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    navique_runtime::block_on(lock_controller::run(lock_controller::Args::parse()))
}
