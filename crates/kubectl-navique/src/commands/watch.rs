//! `approvals --watch`: follows the `ApprovalEvents` gRPC stream.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kubectl_navique::cli::{ApprovalsArgs, Output};
use kubectl_navique::events::{WatchEvent, line};
use kubectl_navique::{credentials, render};
use navique_api::grpc::approvals::v1::StreamApprovalEventsRequest;
use navique_api::grpc::approvals::v1::approval_events_client::ApprovalEventsClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use super::{Session, stdout};

/// Prints the pending approvals, then every event, until interrupted or
/// until the server ends the stream.
pub async fn run(session: &Session, args: &ApprovalsArgs) -> Result<ExitCode> {
    let Some(url) = args.approvals_url.as_deref() else {
        bail!(
            "--watch follows the ApprovalEvents service: give its address with --approvals-url or NAVIQUE_APPROVALS_URL, e.g. http://127.0.0.1:9091"
        );
    };
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("invalid --approvals-url {url:?}"))?;
    match &args.approvals_ca_file {
        Some(file) => {
            let pem = std::fs::read(file)
                .with_context(|| format!("cannot read --approvals-ca-file {}", file.display()))?;
            endpoint = endpoint
                .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
                .context("cannot set up TLS for the ApprovalEvents service")?;
        }
        None if url.starts_with("https:") => bail!(
            "--approvals-url {url} uses TLS: give the CA that signed its certificate with --approvals-ca-file"
        ),
        None => {}
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("cannot connect to the ApprovalEvents service at {url}"))?;
    // The user's own token on every call: the service shows what this user
    // may list, not what the controller may.
    let authorization: MetadataValue<Ascii> =
        credentials::bearer(&session.config)
            .await?
            .parse()
            .context("the kubeconfig user's token is not a valid gRPC metadata value")?;
    let with_token = move |mut request: tonic::Request<()>| {
        request
            .metadata_mut()
            .insert("authorization", authorization.clone());
        Ok(request)
    };
    let request = StreamApprovalEventsRequest {
        namespace: session.scope().unwrap_or_default().to_owned(),
        include_existing: true,
    };
    let mut stream = ApprovalEventsClient::with_interceptor(channel, with_token)
        .stream_approval_events(request)
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))
        .with_context(|| format!("the ApprovalEvents service at {url} refused the stream"))?
        .into_inner();
    loop {
        let message = tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            message = stream.message() => message,
        };
        let event = match message {
            Ok(Some(event)) => WatchEvent::from(&event),
            Ok(None) => return Ok(ExitCode::SUCCESS),
            Err(status) => bail!("the approval event stream failed: {}", status.message()),
        };
        stdout(&match session.output {
            Output::Table | Output::Wide => line(&event) + "\n",
            Output::Name => match &event.approval {
                Some(a) => {
                    render::object_name(&a.resource.kind, &a.resource.group, &a.resource.name)
                        + "\n"
                }
                None => continue,
            },
            Output::Json => render::json_line(&event)?,
            Output::Yaml => format!("---\n{}", render::yaml(&event)?),
        })?;
    }
}
