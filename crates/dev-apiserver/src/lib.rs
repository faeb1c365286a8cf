//! dev-apiserver: an in-memory server that kubectl, kube-rs and Helm use as
//! they would kube-apiserver, faithful where Navique depends on Kubernetes
//! semantics. See `docs/dev-apiserver.md` for what it implements, what it
//! simplifies and what it does not do.
#![forbid(unsafe_code)]

mod admission;
mod aggregation;
mod apply;
mod attributes;
mod auth;
mod authorizer;
mod cel;
mod crds;
mod defaults;
mod discovery;
mod events;
mod faults;
mod gc;
mod gofmt;
mod names;
mod namespaces;
mod openapi;
mod patch;
mod policy;
mod protobuf;
mod rbac;
mod request;
mod resources;
mod respond;
mod rest;
mod scale;
mod schema;
mod selectors;
mod server;
mod state;
mod status;
mod store;
mod table;
mod termination;
mod tls;
mod validation;
mod watch;
mod webhook;
mod workloads;
mod write;

pub use state::Authorization;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::TcpListener;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// An in-memory Kubernetes API server for tests and local runs.
#[derive(clap::Parser, Debug)]
#[command(name = "dev-apiserver", version, about, long_about = None)]
pub struct Args {
    /// Address to serve HTTPS on; port 0 picks a free port.
    #[arg(long, env = "DEV_APISERVER_ADDR", default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,

    /// Directory for the generated CA (`ca.crt`) and `kubeconfig`.
    #[arg(long, env = "DEV_APISERVER_DIR", default_value = ".dev/apiserver")]
    pub dir: PathBuf,

    /// Bearer token clients must present; random when unset.
    #[arg(long, env = "DEV_APISERVER_TOKEN")]
    pub token: Option<String>,

    /// YAML file of users: `users: [{token, name, uid?, groups?}]`. The
    /// generated token's user is always an admin in `system:masters`.
    #[arg(long, env = "DEV_APISERVER_USERS", value_name = "FILE")]
    pub users: Option<PathBuf>,

    /// How requests are authorized.
    #[arg(long, value_enum, default_value_t = Authorization::AlwaysAllow)]
    pub authorization: Authorization,

    /// Resolves a webhook's service reference to a local address:
    /// `NAMESPACE/NAME=HOST:PORT`. Repeatable.
    #[arg(long = "webhook-service", value_name = "NS/NAME=ADDR", value_parser = parse_service)]
    pub webhook_services: Vec<((String, String), SocketAddr)>,

    /// Seconds between watch bookmarks, for clients that allow them.
    #[arg(long, default_value_t = 60)]
    pub bookmark_interval: u64,

    /// Exit when this process exits (so a test run leaves no server behind).
    #[arg(long, value_name = "PID")]
    pub parent_pid: Option<u32>,

    /// Log filter in tracing's EnvFilter syntax.
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,
}

fn parse_service(value: &str) -> Result<((String, String), SocketAddr), String> {
    let (service, addr) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?}: expected NAMESPACE/NAME=HOST:PORT"))?;
    let (namespace, name) = service
        .split_once('/')
        .ok_or_else(|| format!("{service:?}: expected NAMESPACE/NAME"))?;
    let addr = addr.parse().map_err(|e| format!("{addr:?}: {e}"))?;
    Ok(((namespace.to_owned(), name.to_owned()), addr))
}

/// Starts the server; returns once it listens, with its address and the
/// task serving it.
pub async fn start(args: &Args) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let certificates = tls::Certificates::generate()?;
    let config = certificates.server_config()?;
    let listener = TcpListener::bind(args.addr)
        .await
        .map_err(|source| Error::Bind {
            addr: args.addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: args.addr,
        source,
    })?;

    let io = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(&args.dir).map_err(io(&args.dir))?;
    let ca_path = args.dir.join("ca.crt");
    std::fs::write(&ca_path, &certificates.ca_pem).map_err(io(&ca_path))?;
    let token = args
        .token
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let kubeconfig = args.dir.join("kubeconfig");
    tls::write_kubeconfig(
        &kubeconfig,
        &format!("https://{addr}"),
        &certificates.ca_pem,
        &token,
    )?;

    let users = auth::Users::load(&token, args.users.as_deref()).map_err(Error::Config)?;
    let (terminations, queue) = tokio::sync::mpsc::unbounded_channel();
    let state = state::State::new(
        users,
        args.authorization,
        args.webhook_services.iter().cloned().collect(),
        Duration::from_secs(args.bookmark_interval),
        terminations,
    );
    namespaces::create_defaults(&state);
    tokio::spawn(gc::run(state.clone()));
    tokio::spawn(termination::run(state.clone(), queue));
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let task = tokio::spawn(server::serve(listener, acceptor, state));
    Ok((addr, task))
}

/// Runs until SIGTERM/SIGINT, or until the parent process exits.
pub async fn run(args: Args) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log_level)?)
        .with_ansi(false)
        .init();
    let (addr, server) = start(&args).await?;
    // One line for scripts to wait on.
    println!(
        "dev-apiserver listening on https://{addr}; kubeconfig {}",
        args.dir.join("kubeconfig").display()
    );
    let parent = async {
        match args.parent_pid {
            Some(pid) => loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    tracing::info!(pid, "parent process exited; stopping");
                    return;
                }
            },
            None => std::future::pending().await,
        }
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
        () = parent => {}
    }
    server.abort();
    Ok(())
}
