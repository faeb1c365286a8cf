//! `version`: the plugin's own version, the API server's, and the Navique
//! release installed in the cluster, read from the label the chart puts on
//! the Lock CRD (`app.kubernetes.io/version`, the chart's appVersion).

use std::collections::BTreeMap;

use serde::Serialize;

/// The CRD whose label names the installed release: every install has it.
pub const CRD: &str = "locks.core.navique.com";
/// The label the chart sets on its CRDs.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// What `version` prints, in kubectl's shape (`clientVersion`, `serverVersion`).
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VersionReport {
    pub client_version: ClientVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<ServerVersion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub navique_version: Option<Installed>,
}

/// This binary.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClientVersion {
    /// `v` and the crate's version.
    pub git_version: String,
    /// `os/arch`, as Go names them (`linux/amd64`).
    pub platform: String,
}

impl ClientVersion {
    /// The running binary's.
    pub fn current() -> Self {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        Self {
            git_version: format!("v{}", env!("CARGO_PKG_VERSION")),
            platform: format!("{}/{arch}", std::env::consts::OS),
        }
    }
}

/// The API server's `/version`.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServerVersion {
    pub git_version: String,
    pub platform: String,
}

/// The Navique release in the cluster, or why it is not known.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_version: Option<String>,
    /// Why there is no version: not installed, not labelled, not readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Installed {
    /// From the Lock CRD's labels (`None`: the CRD does not exist).
    pub fn from_crd(labels: Option<&BTreeMap<String, String>>) -> Self {
        match labels.map(|l| l.get(VERSION_LABEL)) {
            Some(Some(version)) => Self {
                git_version: Some(format!("v{}", version.trim_start_matches('v'))),
                error: None,
            },
            Some(None) => Self::unknown(format!(
                "the CustomResourceDefinition {CRD} has no {VERSION_LABEL} label (installed without the chart?)"
            )),
            None => Self::unknown(format!("not installed: no CustomResourceDefinition {CRD}")),
        }
    }

    /// The CRD could not be read, for `why`.
    pub fn unknown(why: String) -> Self {
        Self {
            git_version: None,
            error: Some(why),
        }
    }
}

/// The lines `version` prints; a warning when the plugin and the release
/// differ in major or minor version (a plugin may not know the fields of
/// another release).
pub fn render(report: &VersionReport) -> String {
    let mut out = format!("Client Version: {}\n", report.client_version.git_version);
    if let Some(server) = &report.server_version {
        out.push_str(&format!("Server Version: {}\n", server.git_version));
    }
    if let Some(navique) = &report.navique_version {
        match (&navique.git_version, &navique.error) {
            (Some(version), _) => {
                out.push_str(&format!("Navique Version: {version}\n"));
                let client = &report.client_version.git_version;
                if minor(client) != minor(version) {
                    out.push_str(&format!(
                        "WARNING: kubectl-navique {client} and Navique {version} are different releases; use the plugin of the installed release\n"
                    ));
                }
            }
            (None, Some(error)) => out.push_str(&format!("Navique Version: unknown ({error})\n")),
            (None, None) => {}
        }
    }
    out
}

/// `vMAJOR.MINOR` of a version.
fn minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(navique: Option<Installed>) -> VersionReport {
        VersionReport {
            client_version: ClientVersion {
                git_version: "v0.1.0".into(),
                platform: "linux/amd64".into(),
            },
            server_version: Some(ServerVersion {
                git_version: "v1.33.0".into(),
                platform: "linux/amd64".into(),
            }),
            navique_version: navique,
        }
    }

    #[test]
    fn the_release_comes_from_the_crd_label() {
        let labels = BTreeMap::from([(VERSION_LABEL.to_owned(), "0.1.0".to_owned())]);
        assert_eq!(
            render(&report(Some(Installed::from_crd(Some(&labels))))),
            "Client Version: v0.1.0\nServer Version: v1.33.0\nNavique Version: v0.1.0\n"
        );
        let labels = BTreeMap::from([(VERSION_LABEL.to_owned(), "0.2.1".to_owned())]);
        assert_eq!(
            render(&report(Some(Installed::from_crd(Some(&labels))))),
            "Client Version: v0.1.0\nServer Version: v1.33.0\nNavique Version: v0.2.1\n\
             WARNING: kubectl-navique v0.1.0 and Navique v0.2.1 are different releases; use the plugin of the installed release\n"
        );
    }

    #[test]
    fn a_missing_or_unlabelled_crd_is_said() {
        assert_eq!(
            render(&report(Some(Installed::from_crd(None)))),
            "Client Version: v0.1.0\nServer Version: v1.33.0\nNavique Version: unknown (not installed: no CustomResourceDefinition locks.core.navique.com)\n"
        );
        assert!(
            render(&report(Some(Installed::from_crd(Some(&BTreeMap::new())))))
                .ends_with("Navique Version: unknown (the CustomResourceDefinition locks.core.navique.com has no app.kubernetes.io/version label (installed without the chart?))\n")
        );
    }

    #[test]
    fn client_only_and_json_shape() {
        let client = VersionReport {
            server_version: None,
            navique_version: None,
            ..report(None)
        };
        assert_eq!(render(&client), "Client Version: v0.1.0\n");
        assert_eq!(
            serde_json::to_value(report(Some(Installed::from_crd(None)))).unwrap(),
            serde_json::json!({
                "clientVersion": {"gitVersion": "v0.1.0", "platform": "linux/amd64"},
                "serverVersion": {"gitVersion": "v1.33.0", "platform": "linux/amd64"},
                "naviqueVersion": {"error": "not installed: no CustomResourceDefinition locks.core.navique.com"}
            })
        );
    }
}
