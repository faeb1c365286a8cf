use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags every component takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Kubeconfig file to connect with. Without it: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of the current one.
    #[arg(long, env = "NAVIQUE_KUBE_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,

    /// Address of the admin server that serves /metrics, /healthz and /readyz.
    #[arg(long, env = "NAVIQUE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// Log format: `text` for people, `json` for log pipelines.
    #[arg(long, env = "NAVIQUE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter in tracing's EnvFilter syntax, e.g. `info` or `info,kube=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "info", value_name = "FILTER")]
    pub log_level: String,

    /// OTLP/gRPC endpoint to export traces to, e.g. http://otel-collector:4317.
    /// Traces are off when it is unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

/// Log output formats.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Flags of the components that elect a leader, so that two replicas never
/// reconcile at once.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderElectionArgs {
    /// Elect a leader through a coordination.k8s.io Lease before
    /// reconciling. Turn off only when a single replica runs.
    #[arg(
        long,
        env = "NAVIQUE_LEADER_ELECT",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub leader_elect: bool,

    /// Namespace of the Lease. Defaults to $POD_NAMESPACE, then the
    /// kubeconfig's namespace.
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// This replica's identity in the Lease. Defaults to $POD_NAME, then
    /// the host name and process id.
    #[arg(long, env = "POD_NAME", value_name = "ID")]
    pub lease_identity: Option<String>,

    /// Seconds a Lease stays valid after its last renewal.
    #[arg(
        long,
        env = "NAVIQUE_LEASE_DURATION",
        default_value_t = 15,
        value_name = "SECONDS"
    )]
    pub lease_duration: u64,

    /// Seconds before expiry at which the leader renews the Lease; also the
    /// clock skew tolerated between replicas.
    #[arg(
        long,
        env = "NAVIQUE_LEASE_GRACE",
        default_value_t = 5,
        value_name = "SECONDS"
    )]
    pub lease_grace: u64,
}

impl LeaderElectionArgs {
    /// This replica's identity: the flag, or host name and process id.
    pub fn identity(&self) -> String {
        self.lease_identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME")
                .ok()
                .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "navique".to_owned());
            format!("{host}-{}", std::process::id())
        })
    }
}
