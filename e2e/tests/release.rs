//! The release workflow (.github/workflows/release.yml) cannot run here; this
//! checks that it is valid YAML and names what the repository has: an image
//! build of each component from its Containerfile, the plugin for Linux and
//! macOS on amd64 and arm64, every placeholder of the krew manifest, and a
//! CHANGELOG section for the workspace's version (the release notes).

use std::collections::BTreeSet;

use navique_e2e::repo_root;
use serde_yaml::Value;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn workflow() -> Value {
    serde_yaml::from_str(&read(".github/workflows/release.yml")).expect("valid YAML")
}

fn steps<'a>(workflow: &'a Value, job: &str) -> &'a Vec<Value> {
    workflow["jobs"][job]["steps"]
        .as_sequence()
        .unwrap_or_else(|| panic!("job {job} has steps"))
}

fn workspace_version() -> String {
    read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_owned()
}

#[test]
fn every_component_image_is_built_multi_arch_with_provenance() {
    let workflow = workflow();
    assert!(workflow["on"]["push"]["tags"].as_sequence().is_some());
    let builds: Vec<&Value> = steps(&workflow, "images")
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("docker/build-push-action"))
        })
        .collect();
    for component in navique_e2e::COMPONENTS {
        let file = format!("images/{component}/Containerfile");
        assert!(repo_root().join(&file).exists(), "{file}");
        let build = builds
            .iter()
            .find(|s| s["with"]["file"] == file.as_str())
            .unwrap_or_else(|| panic!("no image build of {component}"));
        let with = &build["with"];
        assert_eq!(with["platforms"], "linux/amd64,linux/arm64", "{component}");
        assert_eq!(with["provenance"], "mode=max", "{component}");
        assert_eq!(with["sbom"], true, "{component}");
        assert!(
            with["tags"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/{component}:${{{{ env.VERSION }}}}")),
            "{component}"
        );
        // Signed provenance of the pushed digest.
        let id = build["id"].as_str().unwrap();
        assert!(
            steps(&workflow, "images")
                .iter()
                .any(|s| s["with"]["subject-digest"]
                    == format!("${{{{ steps.{id}.outputs.digest }}}}").as_str()),
            "no attestation of {component}"
        );
    }
    // The images are what the chart names: <registry>/navique/<component>.
    let values: Value = serde_yaml::from_str(&read("charts/navique/values.yaml")).unwrap();
    assert_eq!(values["webhook"]["image"]["repository"], "navique/webhook");
}

#[test]
fn the_plugin_is_built_for_linux_and_macos_and_the_krew_manifest_is_complete() {
    let workflow = workflow();
    let matrix = workflow["jobs"]["plugin"]["strategy"]["matrix"]["include"]
        .as_sequence()
        .unwrap();
    let platforms: BTreeSet<String> = matrix
        .iter()
        .map(|m| {
            format!(
                "{}_{}",
                m["os"].as_str().unwrap(),
                m["arch"].as_str().unwrap()
            )
        })
        .collect();
    let expected = ["darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"];
    assert_eq!(platforms, expected.map(String::from).into());
    assert!(repo_root().join("crates/kubectl-navique").exists());

    // Every ${...} of the template is exported by the release job.
    let template = read("deploy/krew/navique.yaml.tmpl");
    let release = serde_yaml::to_string(&workflow["jobs"]["release"]).unwrap();
    let mut placeholders = BTreeSet::new();
    for part in template.split("${").skip(1) {
        placeholders.insert(part.split_once('}').unwrap().0.to_owned());
    }
    for placeholder in &placeholders {
        assert!(
            release.contains(&format!("{placeholder}="))
                || release.contains(&format!("{placeholder} ")),
            "the release job does not set {placeholder}"
        );
    }
    // Filled in, it is a krew Plugin with one archive per platform.
    let mut filled = template.clone();
    for placeholder in &placeholders {
        filled = filled.replace(&format!("${{{placeholder}}}"), "x");
    }
    let plugin: Value = serde_yaml::from_str(&filled).unwrap();
    assert_eq!(plugin["kind"], "Plugin");
    let uris: BTreeSet<String> = plugin["spec"]["platforms"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["uri"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(uris.len(), 4, "{uris:?}");
}

#[test]
fn the_release_attaches_the_manifests_and_the_license_and_changelog_exist() {
    let workflow = workflow();
    let release = steps(&workflow, "release")
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("softprops/action-gh-release"))
        })
        .unwrap();
    let files = release["with"]["files"].as_str().unwrap();
    for file in [
        "dist/navique.yaml",
        "dist/navique-*.tgz",
        "dist/navique.krew.yaml",
    ] {
        assert!(files.contains(file), "{file}");
    }
    let chart = serde_yaml::to_string(&workflow["jobs"]["chart"]).unwrap();
    assert!(chart.contains("helm push"), "the chart is pushed as OCI");
    assert!(chart.contains("oci://ghcr.io/"), "{chart}");
    assert!(read("LICENSE").trim_start().starts_with("Apache License"));
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog.contains(&format!("\n## [{}]", workspace_version())),
        "CHANGELOG.md has no section for {}",
        workspace_version()
    );
}
