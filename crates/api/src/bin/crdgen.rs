//! Writes every CRD as YAML into each directory given. `make crds` runs it
//! for `deploy/crds` and the chart's `crds/`; a test fails when the
//! committed files differ from what the types generate.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    if dirs.is_empty() || dirs.iter().any(|d| d.starts_with('-')) {
        eprintln!("usage: crdgen DIR...");
        return ExitCode::FAILURE;
    }
    for crd in navique_api::crds::all() {
        let yaml = match navique_api::crds::to_yaml(&crd) {
            Ok(yaml) => yaml,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        for dir in &dirs {
            let path = Path::new(dir).join(navique_api::crds::file_name(&crd));
            if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &yaml))
            {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
