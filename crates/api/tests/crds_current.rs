//! The CRD YAML committed under `deploy/crds` and the chart's `crds/` is what
//! the types generate: change a type, run `make crds`, commit both.

use std::collections::BTreeSet;
use std::path::PathBuf;

use navique_api::crds;

const DIRS: [&str; 2] = ["deploy/crds", "charts/navique/files/crds"];

fn repo_dir(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

#[test]
fn committed_crds_match_the_types() {
    for dir in DIRS {
        for crd in crds::all() {
            let path = repo_dir(dir).join(crds::file_name(&crd));
            let committed = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}; run `make crds`", path.display()));
            assert!(
                committed == crds::to_yaml(&crd).unwrap(),
                "{} is stale: run `make crds`",
                path.display()
            );
        }
    }
}

#[test]
fn no_committed_crd_lacks_a_type() {
    let expected: BTreeSet<String> = crds::all().iter().map(crds::file_name).collect();
    for dir in DIRS {
        let found: BTreeSet<String> = std::fs::read_dir(repo_dir(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(found, expected, "files in {dir}");
    }
}

#[test]
fn every_kind_has_a_status_subresource_short_name_and_printer_columns() {
    for crd in crds::all() {
        let name = crd.metadata.name.clone().unwrap();
        let version = &crd.spec.versions[0];
        let columns = version
            .additional_printer_columns
            .as_ref()
            .map_or(0, Vec::len);
        assert!(columns >= 2, "{name} has {columns} printer columns");
        assert!(
            crd.spec
                .names
                .short_names
                .as_ref()
                .is_some_and(|s| !s.is_empty()),
            "{name} short name"
        );
        // ServiceClass is a provider-written spec with no observed state;
        // a ServicePlan's status holds its POLICIES column.
        assert_eq!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            name != "serviceclasses.services.kube-dc.com",
            "{name} status subresource"
        );
    }
}
