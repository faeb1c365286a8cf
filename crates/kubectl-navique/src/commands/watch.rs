//! `approvals --watch`: follows the `ApprovalEvents` gRPC stream when
//! given its address, else the same events through the API server
//! ([`kubectl_navique::follow`]).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};
use kubectl_navique::cli::{ApprovalsArgs, Output};
use kubectl_navique::events::{WatchEvent, line};
use kubectl_navique::follow::Follower;
use kubectl_navique::{credentials, render};
use navique_api::core::Stack;
use navique_api::grpc::approvals::v1::StreamApprovalEventsRequest;
use navique_api::grpc::approvals::v1::approval_events_client::ApprovalEventsClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use super::{Session, stdout};

/// Prints the pending approvals, then every event, until interrupted or
/// until the server ends the stream.
pub async fn run(session: &Session, args: &ApprovalsArgs) -> Result<ExitCode> {
    let Some(url) = args.approvals_url.as_deref() else {
        return through_api_server(session).await;
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
        print(session.output, &event)?;
    }
}

/// One event as `-o` says.
fn print(output: Output, event: &WatchEvent) -> Result<()> {
    stdout(&match output {
        Output::Table | Output::Wide => line(event) + "\n",
        Output::Name => match &event.approval {
            Some(a) => {
                render::object_name(&a.resource.kind, &a.resource.group, &a.resource.name) + "\n"
            }
            None => return Ok(()),
        },
        Output::Json => render::json_line(event)?,
        Output::Yaml => format!("---\n{}", render::yaml(event)?),
    })
}

/// Stacks and Events, watched with the user's credentials, in place of the
/// service; a watch that fails is retried with the watcher's backoff, its
/// cause printed on stderr once per failure in a row.
async fn through_api_server(session: &Session) -> Result<ExitCode> {
    let stacks = watcher::watcher(session.api::<Stack>(), watcher::Config::default())
        .default_backoff()
        .map(Change::Stack);
    let events = watcher::watcher(session.api::<Event>(), watcher::Config::default())
        .default_backoff()
        .map(Change::Event);
    let mut changes = std::pin::pin!(futures::stream::select(stacks, events));
    let mut follower = Follower::default();
    let mut listing_events = true;
    let mut failing = false;
    loop {
        let change = tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            change = changes.next() => change,
        };
        let Some(change) = change else {
            return Ok(ExitCode::SUCCESS);
        };
        let now = Timestamp::from_second(Timestamp::now().as_second())?.to_string();
        let out = match change {
            Change::Stack(Ok(watcher::Event::Apply(stack) | watcher::Event::InitApply(stack))) => {
                follower.stack(&stack, &now)
            }
            Change::Stack(Ok(watcher::Event::Delete(stack))) => {
                follower.stack_deleted(&stack);
                Vec::new()
            }
            Change::Event(Ok(watcher::Event::Init)) => {
                listing_events = true;
                Vec::new()
            }
            Change::Event(Ok(watcher::Event::InitApply(event))) => {
                follower.event(&event, listing_events)
            }
            Change::Event(Ok(watcher::Event::InitDone)) => {
                listing_events = false;
                Vec::new()
            }
            Change::Event(Ok(watcher::Event::Apply(event))) => follower.event(&event, false),
            Change::Stack(Ok(_)) | Change::Event(Ok(_)) => Vec::new(),
            Change::Stack(Err(e)) | Change::Event(Err(e)) => {
                if !failing {
                    eprintln!("{} (retrying)", render::watch_error(&e));
                }
                failing = true;
                continue;
            }
        };
        failing = false;
        for event in &out {
            print(session.output, event)?;
        }
    }
}

/// A change from one of the two watches.
// One at a time, moved straight into a match: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Change {
    Stack(Result<watcher::Event<Stack>, watcher::Error>),
    Event(Result<watcher::Event<Event>, watcher::Error>),
}
