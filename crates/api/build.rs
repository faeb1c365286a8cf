//! Compiles `proto/` with protox (pure Rust; no `protoc` needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "../../proto";
    let files = [
        "navique/snapshot/v1/snapshot.proto",
        "navique/approvals/v1/approvals.proto",
    ];
    println!("cargo:rerun-if-changed={root}");
    let descriptors = protox::compile(files, [root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
