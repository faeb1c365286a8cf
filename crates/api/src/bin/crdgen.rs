//! Writes every CRD as YAML into each directory given, or checks that the
//! files there are current with `--check` (exits non-zero naming the stale
//! file). `make crds` runs it for `deploy/crds` and the chart's `crds/`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    let mut dirs = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!("usage: crdgen [--check] DIR...");
                return ExitCode::SUCCESS;
            }
            _ => dirs.push(PathBuf::from(arg)),
        }
    }
    if dirs.is_empty() {
        eprintln!("error: name at least one output directory (usage: crdgen [--check] DIR...)");
        return ExitCode::FAILURE;
    }
    match run(check, &dirs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(check: bool, dirs: &[PathBuf]) -> Result<(), String> {
    for crd in navique_api::crds::all() {
        let yaml = navique_api::crds::to_yaml(&crd).map_err(|e| e.to_string())?;
        for dir in dirs {
            let path = dir.join(navique_api::crds::file_name(&crd));
            if check {
                compare(&path, &yaml)?;
            } else {
                std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(&path, &yaml))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
        }
    }
    Ok(())
}

fn compare(path: &Path, expected: &str) -> Result<(), String> {
    match std::fs::read_to_string(path) {
        Ok(actual) if actual == expected => Ok(()),
        Ok(_) => Err(format!("{} is stale: run `make crds`", path.display())),
        Err(e) => Err(format!(
            "cannot read {}: {e}; run `make crds`",
            path.display()
        )),
    }
}
