//! The plain manifests in deploy/ are what the Helm chart renders with its
//! defaults: change the chart, run `make manifests`, commit both.

use std::process::Command;

use navique_e2e::repo_root;

/// Asserts that `file` ends with what `helm template` of the chart, with
/// its defaults and `args`, renders (the file starts with a header of its
/// own).
fn assert_rendered(file: &str, args: &[&str]) {
    let helm = repo_root().join(".tools/bin/helm");
    assert!(
        helm.exists(),
        "{} is missing: run scripts/tools.sh (make test does)",
        helm.display()
    );
    let output = Command::new(&helm)
        .args([
            "template",
            "navique",
            "charts/navique",
            "--namespace",
            "navique-system",
        ])
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let committed = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let rendered = String::from_utf8(output.stdout).unwrap();
    assert!(
        committed.ends_with(&rendered),
        "{file} is stale: run `make manifests`"
    );
}

#[test]
fn the_lock_guard_manifest_is_rendered_from_the_chart() {
    assert_rendered(
        "deploy/lock-guard.yaml",
        &[
            "--show-only",
            "templates/lock-guard-policy.yaml",
            "--show-only",
            "templates/lock-suspension-policy.yaml",
        ],
    );
}

#[test]
fn the_whole_install_is_rendered_from_the_chart() {
    assert_rendered("deploy/navique.yaml", &[]);
}
