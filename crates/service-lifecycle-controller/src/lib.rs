//! service-lifecycle-controller: reconciles ManagedServices (provisioning and
//! the deletion-policy machine), ServiceBindings, ServiceCredentialPolicies,
//! Project deletion, and Stacks with their deletion-approval gate; serves the
//! `ApprovalEvents` gRPC stream.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

use anyhow::Context as _;
use navique_runtime::grpc_tls::{self, ClientCertificates, GrpcTlsArgs};
use navique_runtime::{CommonArgs, Component, LeaderElectionArgs};
use tokio::net::TcpListener;
use tonic::transport::Server;

use crate::managed_service::{final_backup, reconcile};
use crate::postgres::catalogue;
use crate::stack::access::Access;
use crate::stack::approvals::Approvals;
use crate::stack::notifications::{Notifier, Template};

pub mod binding;
pub mod credential_policy;
pub mod dependents;
mod error;
mod gauges;
pub mod managed_service;
mod plan_status;
pub mod stack;

pub use error::Error;
pub use navique_provider_postgres as postgres;

pub const NAME: &str = "service-lifecycle-controller";

/// The Event recorder every controller of this component reports with.
pub fn event_recorder(client: &kube::Client) -> navique_runtime::events::Recorder {
    navique_runtime::events::Recorder::new(client.clone(), NAME)
}

/// Reconciles ManagedServices, bindings, credential policies and Stacks, and
/// carries out deletion policies and approvals.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
    /// The provider's namespace: a ServiceClass's admin Secret is read only
    /// from here, never from a namespace a Project can write.
    #[arg(
        long,
        env = "NAVIQUE_PROVIDER_NAMESPACE",
        default_value = catalogue::DEFAULT_PROVIDER_NAMESPACE,
        value_name = "NAMESPACE"
    )]
    pub provider_namespace: String,
    /// The container image of `InProject` PostgreSQL engines.
    #[arg(long, env = "NAVIQUE_POSTGRES_IMAGE", default_value = reconcile::DEFAULT_POSTGRES_IMAGE)]
    pub postgres_image: String,
    #[command(flatten)]
    pub backup_runner: final_backup::BackupRunnerArgs,
    #[command(flatten)]
    pub approvals: ApprovalArgs,
    /// The ServiceAccount a Stack acts as when its `spec.serviceAccountName`
    /// is unset: the controller impersonates this account of the Stack's
    /// namespace to read, apply, prune and delete the Stack's resources.
    /// The controller creates it nowhere; where it does not exist or is
    /// bound to nothing, every request is refused and the refusal shows on
    /// the resource's row.
    #[arg(
        long,
        env = "NAVIQUE_STACK_DEFAULT_SERVICE_ACCOUNT",
        default_value = stack::identity::DEFAULT_SERVICE_ACCOUNT,
        value_name = "NAME"
    )]
    pub stack_default_service_account: String,
    /// TLS of the ApprovalEvents server and of the calls to backup-runner:
    /// self-managed by default, from the same gRPC CA as backup-runner's.
    #[command(flatten)]
    pub grpc_tls: GrpcTlsArgs,
}

/// The `ApprovalEvents` gRPC server and approval notifications.
#[derive(clap::Args, Debug, Clone)]
pub struct ApprovalArgs {
    /// Address of the ApprovalEvents gRPC server (every replica serves it;
    /// the leader's has the events). TLS with this component's gRPC
    /// certificate; its subscribers are people, who present no client
    /// certificate.
    #[arg(
        long,
        env = "NAVIQUE_APPROVALS_LISTEN_ADDR",
        default_value = "0.0.0.0:9091"
    )]
    pub approvals_listen_addr: SocketAddr,
    /// Where to POST the approval notifications (approval required,
    /// approved, removed); none when unset.
    #[arg(long, env = "NAVIQUE_APPROVAL_NOTIFICATION_URL", value_name = "URL")]
    pub approval_notification_url: Option<String>,
    /// The notifications' template: `json` (generic JSON with a
    /// Slack-compatible `text`), `slack`, `teams` (a Microsoft Teams
    /// workflow's Adaptive Card), or the path of a minijinja template of
    /// one's own (JSON auto-escaped; it must render JSON).
    #[arg(
        long,
        env = "NAVIQUE_APPROVAL_NOTIFICATION_TEMPLATE",
        default_value = "json",
        value_name = "NAME|PATH"
    )]
    pub approval_notification_template: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let tls = args.grpc_tls.settings()?;
    anyhow::ensure!(
        navique_api::names::is_object_name(&args.stack_default_service_account),
        "--stack-default-service-account {:?} is not a ServiceAccount name",
        args.stack_default_service_account
    );
    let notifier = args
        .approvals
        .approval_notification_url
        .as_deref()
        .map(|url| {
            let template = Template::from_arg(&args.approvals.approval_notification_template)
                .context("--approval-notification-template")?;
            Notifier::new(url, template).context("--approval-notification-url")
        })
        .transpose()?;
    let listener = TcpListener::bind(args.approvals.approvals_listen_addr)
        .await
        .with_context(|| {
            format!(
                "cannot serve ApprovalEvents on {}",
                args.approvals.approvals_listen_addr
            )
        })?;
    let approvals = Approvals::default();
    Component::run(NAME, &args.common, async |component, client| {
        let component_error = |e: anyhow::Error| navique_runtime::Error::Component(e.into());
        let Some(tls) = grpc_tls::start(tls, &client, NAME, component.shutdown())
            .await
            .map_err(|e| component_error(e.into()))?
        else {
            return Ok(());
        };
        let backup_runner = final_backup::BackupRunner::from_args(&args.backup_runner, &tls)
            .map_err(|e| component_error(e.into()))?;
        let metrics = reconcile::Metrics::register(component);
        let binding_metrics = binding::Metrics::register(component);
        let policy_metrics = credential_policy::Metrics::register(component);
        let stack_metrics = stack::register_metrics(component, &approvals, notifier.as_ref());
        let state_gauges = gauges::StateGauges::register(component);
        let plan_metrics = plan_status::register_metrics(component);
        // Each call is authenticated and authorised as its caller's own
        // Kubernetes identity (stack::access).
        let router = Server::builder()
            .add_service(approvals.clone().into_server(Access::new(client.clone())));
        let shutdown = component.shutdown().clone();
        let serving = tokio::spawn(async move {
            grpc_tls::serve(
                router,
                listener,
                &tls,
                ClientCertificates::NotAsked,
                shutdown,
            )
            .await
        });
        let approvals = approvals.clone();
        let identities = stack::identity::Identities::new(
            component.kube_config().clone(),
            &args.stack_default_service_account,
        );
        let led = component
            .run_as_leader(
                client.clone(),
                &args.leader_election,
                async move |leadership| {
                    let state =
                        gauges::run(client.clone(), state_gauges, leadership.token().clone());
                    let services =
                        reconcile::Context::new(client.clone(), metrics, leadership.clone())
                            .with_postgres_image(&args.postgres_image)
                            .with_provider_namespace(&args.provider_namespace)
                            .with_backup_runner(backup_runner);
                    let bindings =
                        binding::Context::new(client.clone(), binding_metrics, leadership.clone());
                    let policies = credential_policy::Context::new(
                        client.clone(),
                        policy_metrics,
                        leadership.clone(),
                    )
                    .with_provider_namespace(&args.provider_namespace);
                    let plans =
                        plan_status::Context::new(client.clone(), plan_metrics, leadership.clone());
                    let stacks = stack::Context::new(
                        client,
                        identities,
                        stack_metrics,
                        leadership,
                        approvals,
                        notifier,
                    );
                    // One leadership for all: each ends when it does.
                    let (services, bindings, policies, plans, stacks, ()) = tokio::join!(
                        reconcile::run(services),
                        binding::run(bindings),
                        credential_policy::run(policies),
                        plan_status::run(plans),
                        stack::run(stacks),
                        state,
                    );
                    services.and(bindings).and(policies).and(plans).and(stacks)
                },
            )
            .await;
        serving.abort();
        led
    })
    .await?;
    Ok(())
}
