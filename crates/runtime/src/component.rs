//! The start-up and shutdown sequence every component shares.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use kube::Client;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::leader::{Election, Leadership};
use crate::telemetry::TelemetryGuard;
use crate::{CommonArgs, Error, LeaderElectionArgs, Readiness, admin, cluster};

/// The readiness check that passes once the API server has answered.
const KUBE_API_CHECK: &str = "kube-api";

/// A running component: telemetry installed, signals handled, admin server
/// listening, cluster configuration loaded.
pub struct Component {
    name: &'static str,
    config: kube::Config,
    shutdown: CancellationToken,
    readiness: Readiness,
    registry: Arc<RwLock<Registry>>,
    admin_addr: SocketAddr,
    admin: JoinHandle<Result<(), Error>>,
    connect_failures: Counter,
    leader: Gauge,
    // Dropped last: flushes traces.
    _telemetry: TelemetryGuard,
}

impl Component {
    /// Starts the parts every component has. Fails fast, before any retry
    /// loop, on what retrying cannot fix: a bad flag, an unreadable
    /// kubeconfig, a taken admin port.
    pub async fn start(name: &'static str, args: &CommonArgs) -> Result<Self, Error> {
        let telemetry = crate::telemetry::init(name, args)?;
        let config =
            cluster::load_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;

        // Unprefixed: the standard process_* set and one build_info that
        // every component shares, so that one query covers them all.
        let mut standard = Registry::default();
        standard.register(
            "navique_build",
            "Component and version of the running binary",
            Info::new(vec![
                ("component", name),
                ("version", env!("CARGO_PKG_VERSION")),
            ]),
        );
        standard.register_collector(Box::new(crate::process::ProcessCollector));
        // The component's own metrics: navique_<component>_*.
        let mut registry = Registry::with_prefix(format!("navique_{}", name.replace('-', "_")));
        let connect_failures = Counter::default();
        registry.register(
            "kube_connect_failures",
            "Failed attempts to reach the Kubernetes API at start-up",
            connect_failures.clone(),
        );
        let registry = Arc::new(RwLock::new(registry));

        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        let readiness = Readiness::default();
        readiness.register(KUBE_API_CHECK);
        let (admin_addr, admin) = admin::serve(
            args.admin_addr,
            readiness.clone(),
            Arc::new(standard),
            registry.clone(),
            shutdown.clone(),
        )
        .await?;
        tracing::info!(component = name, admin = %admin_addr, "started");

        Ok(Self {
            name,
            config,
            shutdown,
            readiness,
            registry,
            admin_addr,
            admin,
            connect_failures,
            leader: Gauge::default(),
            _telemetry: telemetry,
        })
    }

    /// The whole life of a component: starts it, connects to the cluster,
    /// runs `work` until it returns (it should return on shutdown), then
    /// stops. A shutdown while still connecting is a clean exit.
    pub async fn run<F>(name: &'static str, args: &CommonArgs, work: F) -> Result<(), Error>
    where
        F: AsyncFnOnce(&Component, Client) -> Result<(), Error>,
    {
        let mut component = Self::start(name, args).await?;
        let outcome = match component.connect().await {
            Ok(Some(client)) => work(&component, client).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        component.stop(outcome).await
    }

    /// The component's name, e.g. `lock-controller`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The address the admin server listens on.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The cluster configuration the component's client is built from:
    /// the base of clients that act as another identity (impersonation).
    pub fn kube_config(&self) -> &kube::Config {
        &self.config
    }

    /// Cancelled on SIGTERM or SIGINT.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Readiness checks behind `/readyz`.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Registers the component's own metrics under its prefix.
    pub fn register_metrics(&self, register: impl FnOnce(&mut Registry)) {
        register(&mut self.registry.write().unwrap_or_else(|p| p.into_inner()));
    }

    /// Connects to the API server, retrying with backoff while it cannot be
    /// reached; `/readyz` fails until it answers. `None` if shut down first.
    pub async fn connect(&mut self) -> Result<Option<Client>, Error> {
        let client =
            cluster::connect(self.config.clone(), &self.connect_failures, &self.shutdown).await?;
        if client.is_some() {
            self.readiness.set(KUBE_API_CHECK, true);
        }
        Ok(client)
    }

    /// Runs `work` while this replica leads (or at once when leader election
    /// is off). `work` gets the [`Leadership`], whose token is cancelled on
    /// shutdown or lost leadership; it must return soon after it fires.
    pub async fn run_as_leader<F, Fut, E>(
        &self,
        client: Client,
        args: &LeaderElectionArgs,
        work: F,
    ) -> Result<(), Error>
    where
        F: FnOnce(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.register_metrics(|registry| {
            registry.register(
                "leader",
                "1 while this replica holds the leader Lease",
                self.leader.clone(),
            );
        });
        if !args.leader_elect {
            self.leader.set(1);
            return work(Leadership::unelected(self.shutdown.child_token()))
                .await
                .map_err(|e| Error::Component(e.into()));
        }
        Election {
            component: self.name,
            client,
            args,
            leader: &self.leader,
            shutdown: &self.shutdown,
        }
        .run(work)
        .await
    }

    /// Stops the admin server and flushes telemetry. Call after the work has
    /// returned; `outcome` is passed through.
    pub async fn stop(self, outcome: Result<(), Error>) -> Result<(), Error> {
        self.shutdown.cancel();
        let admin = match self.admin.await {
            Ok(result) => result,
            Err(e) => Err(Error::AdminServe(std::io::Error::other(e))),
        };
        tracing::info!(component = self.name, "stopped");
        outcome.and(admin)
    }
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("received SIGINT; shutting down"),
        () = terminate => tracing::info!("received SIGTERM; shutting down"),
    }
    shutdown.cancel();
}
