//! The plain manifests in deploy/ are what the Helm chart renders with its
//! defaults: change the chart, run `make manifests`, commit both.

use std::process::Command;

use navique_e2e::repo_root;

#[test]
fn the_lock_guard_manifest_is_rendered_from_the_chart() {
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
        .args(["--show-only", "templates/lock-guard-policy.yaml"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let committed = std::fs::read_to_string(repo_root().join("deploy/lock-guard.yaml")).unwrap();
    let rendered = String::from_utf8(output.stdout).unwrap();
    assert!(
        committed.ends_with(&rendered),
        "deploy/lock-guard.yaml is stale: run `make manifests`"
    );
}
