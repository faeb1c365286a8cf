//! `version`.

use std::process::ExitCode;

use anyhow::Result;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kubectl_navique::cli::Output;
use kubectl_navique::render;
use kubectl_navique::version::{
    CRD, ClientVersion, Installed, ServerVersion, VersionReport, render as lines,
};

use super::{Session, printed, stdout};

/// `version --client`: nothing asked of the cluster.
pub fn client(output: Output) -> Result<ExitCode> {
    let report = VersionReport {
        client_version: ClientVersion::current(),
        server_version: None,
        navique_version: None,
    };
    stdout(&printed(output, &report, |_| lines(&report))?)?;
    Ok(ExitCode::SUCCESS)
}

pub async fn run(session: &Session) -> Result<ExitCode> {
    let server = session.client.apiserver_version().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(session.client.clone());
    let navique = match crds.get_opt(CRD).await {
        Ok(crd) => {
            let labels = crd.map(|c| c.metadata.labels.unwrap_or_default());
            Installed::from_crd(labels.as_ref())
        }
        // A user who may not read CRDs still learns the rest.
        Err(e) => Installed::unknown(format!(
            "cannot read the CustomResourceDefinition {CRD}: {}",
            render::kube_error(&e)
        )),
    };
    let report = VersionReport {
        client_version: ClientVersion::current(),
        server_version: Some(ServerVersion {
            git_version: server.git_version,
            platform: server.platform,
        }),
        navique_version: Some(navique),
    };
    session.print(&report, |_| lines(&report))?;
    Ok(ExitCode::SUCCESS)
}
