use std::net::SocketAddr;

/// Why a component could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidFlag(String),

    #[error("cannot set up logging: {0}")]
    Logging(String),

    #[error("cannot set up the OTLP trace exporter for {endpoint}: {source}")]
    Tracing {
        endpoint: String,
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },

    #[error("cannot load kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },

    #[error("cannot find cluster configuration: {0}")]
    InferConfig(#[source] kube::config::InferConfigError),

    #[error("cannot build a Kubernetes client for {cluster_url}: {source}")]
    Client {
        cluster_url: String,
        #[source]
        source: kube::Error,
    },

    #[error("cannot listen on admin address {addr}: {source}")]
    AdminBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },

    #[error("admin server failed: {0}")]
    AdminServe(#[source] std::io::Error),

    #[error("leader election on Lease {namespace}/{name} failed: {source}")]
    LeaderElection {
        namespace: String,
        name: String,
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },

    #[error(
        "lost leadership of Lease {namespace}/{name}; stopping so that only the new leader reconciles"
    )]
    LeadershipLost { namespace: String, name: String },

    #[error("cannot read Lease {namespace}/{name} to confirm leadership: {source}")]
    LeaseRead {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },

    #[error("shutting down")]
    ShuttingDown,

    #[error("{0}")]
    Component(#[source] Box<dyn std::error::Error + Send + Sync>),
}
