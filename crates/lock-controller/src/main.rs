use clap::Parser;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let args = lock_controller::Args::parse();
    // One thread took a quarter less CPU per Lock in a burst, which the
    // API server then had (docs/locks.md, Performance); OTLP traces need
    // the workers (see `block_on_current_thread`).
    if args.common.otlp_endpoint.is_some() {
        navique_runtime::block_on(lock_controller::run(args))
    } else {
        navique_runtime::block_on_current_thread(lock_controller::run(args))
    }
}
