//! The webhook's flags, besides those every component takes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use navique_runtime::CommonArgs;

use crate::NAME;
use std::sync::Arc;

use crate::locks::LockGuard;
use crate::services::{Cluster, ServiceGuard};
use crate::tls::CertificateFiles;

/// Validating admission webhook for Navique's deletion-safety rules.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub lock_guard: LockGuardArgs,
    #[command(flatten)]
    pub service_guard: ServiceGuardArgs,
}

/// Where and how the admission server listens.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Address of the HTTPS admission server.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_LISTEN_ADDR",
        default_value = "0.0.0.0:8443"
    )]
    pub listen_addr: SocketAddr,

    /// PEM certificate chain the admission server presents; read again when
    /// it changes. Without it and --tls-key-file the admission server is off
    /// and only the admin server runs.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_CERT_FILE",
        value_name = "PATH",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Seconds between checks of the certificate files for a new certificate.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_RELOAD_INTERVAL",
        default_value_t = 10,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub tls_reload_interval: u64,
}

impl ServerArgs {
    /// The certificate files, when both are given.
    pub fn certificate_files(&self) -> Option<CertificateFiles> {
        Some(CertificateFiles {
            certificate: self.tls_cert_file.clone()?,
            key: self.tls_key_file.clone()?,
        })
    }

    pub fn reload_interval(&self) -> Duration {
        Duration::from_secs(self.tls_reload_interval)
    }
}

/// The Lock guard (`POST /validate/locks`).
#[derive(clap::Args, Debug, Clone)]
pub struct LockGuardArgs {
    /// Deny deleting a namespace that holds Locks.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_PROTECT_NAMESPACES",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub protect_namespaces: bool,

    /// Deny changes of the core.navique.com/locked annotation and label and
    /// the core.navique.com/lock-reasons annotation by anyone but the
    /// lock-controller.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_PROTECT_MARKER",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub protect_marker: bool,

    /// User name of the lock-controller, the only one allowed to change the
    /// lock markers.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_LOCK_CONTROLLER_USERNAME",
        default_value = "system:serviceaccount:navique-system:lock-controller",
        value_name = "USER"
    )]
    pub lock_controller_username: String,
}

impl From<&LockGuardArgs> for LockGuard {
    fn from(args: &LockGuardArgs) -> Self {
        Self {
            protect_namespaces: args.protect_namespaces,
            protect_marker: args.protect_marker,
            lock_controller_username: args.lock_controller_username.clone(),
        }
    }
}

/// The managed-service guard (`POST /validate/services`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServiceGuardArgs {
    /// Groups whose members are the provider, comma-separated: they may
    /// change and delete retained objects and ServiceBackup records, and
    /// record Scheduled and Final backups. Everyone else is a Project
    /// identity. Kubernetes' namespace controller and garbage collector are
    /// kube-system service accounts and must be included, or a Project's
    /// deletion cannot remove them.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_PROVIDER_GROUPS",
        value_delimiter = ',',
        default_value = "system:masters,system:serviceaccounts:navique-system,system:serviceaccounts:kube-system",
        value_name = "GROUPS"
    )]
    pub provider_groups: Vec<String>,
}

impl ServiceGuardArgs {
    /// The guard, reading the cluster through `cluster`.
    pub fn guard(&self, cluster: Arc<dyn Cluster>) -> ServiceGuard {
        ServiceGuard {
            provider_groups: self
                .provider_groups
                .iter()
                .map(|g| g.trim().to_owned())
                .filter(|g| !g.is_empty())
                .collect(),
            cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn defaults() {
        let args = Args::try_parse_from(["webhook"]).unwrap();
        assert_eq!(args.server.listen_addr.to_string(), "0.0.0.0:8443");
        assert_eq!(args.server.certificate_files(), None);
        assert_eq!(args.server.reload_interval(), Duration::from_secs(10));
        assert_eq!(
            LockGuard::from(&args.lock_guard),
            LockGuard {
                protect_namespaces: true,
                protect_marker: true,
                lock_controller_username: "system:serviceaccount:navique-system:lock-controller"
                    .to_owned(),
            }
        );
    }

    #[test]
    fn provider_groups_default_to_admins_the_operator_and_kube_system() {
        let args = Args::try_parse_from(["webhook"]).unwrap();
        let guard = args
            .service_guard
            .guard(Arc::new(crate::services::NoCluster));
        assert_eq!(
            guard.provider_groups,
            crate::services::DEFAULT_PROVIDER_GROUPS.map(str::to_owned)
        );
        let args = Args::try_parse_from([
            "webhook",
            "--provider-groups",
            "platform-ops, system:masters,",
        ])
        .unwrap();
        let guard = args
            .service_guard
            .guard(Arc::new(crate::services::NoCluster));
        assert_eq!(guard.provider_groups, ["platform-ops", "system:masters"]);
    }

    #[test]
    fn the_certificate_and_key_go_together() {
        let error = Args::try_parse_from(["webhook", "--tls-cert-file", "tls.crt"]).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        let args = Args::try_parse_from([
            "webhook",
            "--tls-cert-file",
            "tls.crt",
            "--tls-key-file",
            "tls.key",
            "--protect-namespaces",
            "false",
            "--protect-marker=false",
        ])
        .unwrap();
        assert_eq!(
            args.server.certificate_files(),
            Some(CertificateFiles {
                certificate: "tls.crt".into(),
                key: "tls.key".into()
            })
        );
        assert!(!args.lock_guard.protect_namespaces);
        assert!(!args.lock_guard.protect_marker);
    }
}
