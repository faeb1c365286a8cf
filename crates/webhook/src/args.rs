//! The webhook's flags, besides those every component takes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use navique_runtime::CommonArgs;

use crate::NAME;
use std::sync::Arc;

use crate::locks::LockGuard;
use crate::self_managed_tls::{ConfigurationRef, Lifetimes, Settings};
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
    pub self_managed_tls: SelfManagedTlsArgs,
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
    /// it changes. Without it and --tls-key-file, or --tls-secret, the
    /// admission server is off and only the admin server runs.
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

/// The self-managed CA: the webhook creates and renews its serving
/// certificate and CA in a Secret and keeps the CA bundle in its webhook
/// configurations (the chart's `webhook.tls.mode: selfManaged`).
#[derive(clap::Args, Debug, Clone)]
pub struct SelfManagedTlsArgs {
    /// kubernetes.io/tls Secret holding the serving certificate and the CA
    /// that signs it, which the webhook creates, renews and serves from
    /// (instead of --tls-cert-file and --tls-key-file).
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_SECRET",
        value_name = "NAME",
        conflicts_with_all = ["tls_cert_file", "tls_key_file"],
        requires = "tls_dns_names"
    )]
    pub tls_secret: Option<String>,

    /// Namespace of --tls-secret; the kubeconfig's namespace (in a pod, its
    /// own) when unset.
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub tls_secret_namespace: Option<String>,

    /// Names the serving certificate is for, comma-separated: the webhook
    /// Service's DNS names.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_DNS_NAMES",
        value_delimiter = ',',
        value_name = "NAMES"
    )]
    pub tls_dns_names: Vec<String>,

    /// Webhook configurations whose webhooks get the CA bundle as
    /// clientConfig.caBundle, comma-separated, each
    /// validatingwebhookconfigurations/NAME or
    /// mutatingwebhookconfigurations/NAME.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_CA_BUNDLE_CONFIGURATIONS",
        value_delimiter = ',',
        value_name = "RESOURCE/NAME"
    )]
    pub ca_bundle_configurations: Vec<String>,

    /// Days the CA is valid; it is replaced once it has less than
    /// --cert-validity-days left. Fractions of a day are allowed.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_CA_VALIDITY_DAYS",
        default_value = "3650",
        value_parser = navique_runtime::pki::parse_days,
        value_name = "DAYS"
    )]
    pub ca_validity_days: Duration,

    /// Days each serving certificate is valid.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_CERT_VALIDITY_DAYS",
        default_value = "365",
        value_parser = navique_runtime::pki::parse_days,
        value_name = "DAYS"
    )]
    pub cert_validity_days: Duration,

    /// Days before a serving certificate expires at which the next is
    /// issued.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_CERT_RENEW_BEFORE_DAYS",
        default_value = "30",
        value_parser = navique_runtime::pki::parse_days,
        value_name = "DAYS"
    )]
    pub cert_renew_before_days: Duration,

    /// Seconds between checks of the Secret and the webhook configurations
    /// (sooner after a failed one).
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_TLS_CHECK_INTERVAL",
        default_value_t = 300,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub tls_check_interval: u64,
}

impl SelfManagedTlsArgs {
    /// The settings, when --tls-secret is given; an error naming the flag
    /// when they cannot work.
    pub fn settings(&self) -> Result<Option<Settings>, String> {
        let Some(secret) = self.tls_secret.clone() else {
            return Ok(None);
        };
        let configurations = self
            .ca_bundle_configurations
            .iter()
            .filter(|c| !c.trim().is_empty())
            .map(|c| c.parse::<ConfigurationRef>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--ca-bundle-configurations: {e}"))?;
        let settings = Settings {
            secret,
            namespace: self.tls_secret_namespace.clone().filter(|n| !n.is_empty()),
            dns_names: self
                .tls_dns_names
                .iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect(),
            configurations,
            lifetimes: Lifetimes {
                ca: self.ca_validity_days,
                certificate: self.cert_validity_days,
                renew_before: self.cert_renew_before_days,
            },
            check_interval: Duration::from_secs(self.tls_check_interval),
        };
        settings
            .check()
            .map_err(|e| format!("self-managed TLS (--tls-secret {}): {e}", settings.secret))?;
        Ok(Some(settings))
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
        default_value = "system:serviceaccount:navique-system:navique-lock-controller",
        value_name = "USER"
    )]
    pub lock_controller_username: String,

    /// Deny deleting any object sent here whose Namespace carries
    /// core.navique.com/namespace-locked (namespace-wide Locks), read from
    /// the Namespace cache; refused while the cache cannot tell.
    #[arg(
        long,
        env = "NAVIQUE_WEBHOOK_NAMESPACE_LOCKS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub namespace_locks: bool,
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
        assert!(
            !args.lock_guard.namespace_locks,
            "namespace-wide Locks are opt-in"
        );
        assert_eq!(
            LockGuard::from(&args.lock_guard),
            LockGuard {
                protect_namespaces: true,
                protect_marker: true,
                lock_controller_username:
                    "system:serviceaccount:navique-system:navique-lock-controller".to_owned(),
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
    fn self_managed_tls_is_off_without_a_secret_and_defaults_to_the_charts_lifetimes() {
        let args = Args::try_parse_from(["webhook"]).unwrap();
        assert_eq!(args.self_managed_tls.settings(), Ok(None));
        let args = Args::try_parse_from([
            "webhook",
            "--tls-secret",
            "navique-webhook-tls",
            "--tls-dns-names",
            "navique-webhook,navique-webhook.navique-system.svc,",
            "--ca-bundle-configurations",
            "validatingwebhookconfigurations/navique-services,mutatingwebhookconfigurations/navique-services-defaults",
        ])
        .unwrap();
        let settings = args.self_managed_tls.settings().unwrap().unwrap();
        assert_eq!(settings.secret, "navique-webhook-tls");
        assert_eq!(settings.namespace, None);
        assert_eq!(
            settings.dns_names,
            ["navique-webhook", "navique-webhook.navique-system.svc"]
        );
        assert_eq!(
            settings
                .configurations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "validatingwebhookconfigurations/navique-services",
                "mutatingwebhookconfigurations/navique-services-defaults"
            ]
        );
        let day = Duration::from_secs(86_400);
        assert_eq!(
            settings.lifetimes,
            Lifetimes {
                ca: day * 3650,
                certificate: day * 365,
                renew_before: day * 30
            }
        );
        assert_eq!(settings.check_interval, Duration::from_secs(300));
    }

    #[test]
    fn self_managed_tls_takes_fractions_of_days_and_refuses_what_cannot_work() {
        let parse = |extra: &[&str]| {
            let mut all = vec![
                "webhook",
                "--tls-secret",
                "tls",
                "--tls-dns-names",
                "localhost",
                "--tls-secret-namespace",
                "ops",
            ];
            all.extend_from_slice(extra);
            Args::try_parse_from(all).map(|a| a.self_managed_tls.settings())
        };
        let settings = parse(&[
            "--ca-validity-days",
            "0.01",
            "--cert-validity-days",
            "0.001",
            "--cert-renew-before-days",
            "0.0005",
            "--tls-check-interval",
            "1",
        ])
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(settings.namespace.as_deref(), Some("ops"));
        assert_eq!(settings.lifetimes.ca, Duration::from_secs(864));
        assert_eq!(
            settings.lifetimes.certificate,
            Duration::from_millis(86_400)
        );
        assert_eq!(
            settings.lifetimes.renew_before,
            Duration::from_millis(43_200)
        );

        for days in ["0", "-1", "x", "36501"] {
            let error = parse(&[&format!("--cert-validity-days={days}")]).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{days}"
            );
        }
        assert!(
            parse(&["--cert-renew-before-days", "400"])
                .unwrap()
                .unwrap_err()
                .starts_with(
                    "self-managed TLS (--tls-secret tls): the renewal before expiry (400 days)"
                )
        );
        assert_eq!(
            parse(&["--ca-bundle-configurations", "webhooks/x"])
                .unwrap()
                .unwrap_err(),
            "--ca-bundle-configurations: \"webhooks/x\" is not validatingwebhookconfigurations/<name> or mutatingwebhookconfigurations/<name>"
        );
        // The Secret needs names, and replaces the certificate files.
        let error = Args::try_parse_from(["webhook", "--tls-secret", "tls"]).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        let error =
            parse(&["--tls-cert-file", "tls.crt", "--tls-key-file", "tls.key"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
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
