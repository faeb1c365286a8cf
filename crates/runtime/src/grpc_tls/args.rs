//! The flags of internal gRPC TLS, the same in every component that serves
//! or calls internal gRPC (backup-runner, service-lifecycle-controller).

use std::path::PathBuf;
use std::time::Duration;

use crate::pki::{Lifetimes, parse_days};

use super::Error;
use super::ca::SelfManaged;
use super::files::Files;

/// How this component's internal gRPC is secured. Without flags:
/// self-managed mutual TLS from the CA Secret `navique-system/navique-grpc-ca`.
#[derive(clap::Args, Debug, Clone)]
pub struct GrpcTlsArgs {
    /// Serve and call internal gRPC in plaintext: no authentication, anyone
    /// who reaches the port may call. For a network you trust entirely;
    /// logged as a warning at start.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_INSECURE_PLAINTEXT",
        conflicts_with_all = ["grpc_tls_cert_file", "grpc_tls_key_file", "grpc_tls_ca_file"]
    )]
    pub grpc_insecure_plaintext: bool,

    /// Self-managed mode (the default): the Secret holding the gRPC CA,
    /// created if absent; this component issues itself a certificate from
    /// it, in memory, and renews it.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_CA_SECRET",
        default_value = "navique-system/navique-grpc-ca",
        value_name = "NAMESPACE/NAME"
    )]
    pub grpc_ca_secret: String,

    /// Self-managed mode: the DNS names and IP addresses clients dial this
    /// component's gRPC server at, comma-separated, e.g.
    /// navique-backup-runner.navique-system.svc. Required in that mode.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_DNS_NAMES",
        value_delimiter = ',',
        value_name = "NAMES"
    )]
    pub grpc_dns_names: Vec<String>,

    /// Self-managed mode: days the CA is valid; it is replaced once a
    /// certificate issued from it would outlive it. Fractions allowed.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_CA_VALIDITY_DAYS",
        default_value = "3650",
        value_parser = parse_days,
        value_name = "DAYS"
    )]
    pub grpc_ca_validity_days: Duration,

    /// Self-managed mode: days the component's own certificate is valid.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_CERT_VALIDITY_DAYS",
        default_value = "30",
        value_parser = parse_days,
        value_name = "DAYS"
    )]
    pub grpc_cert_validity_days: Duration,

    /// Self-managed mode: days before its certificate expires at which the
    /// component issues itself the next.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_CERT_RENEW_BEFORE_DAYS",
        default_value = "10",
        value_parser = parse_days,
        value_name = "DAYS"
    )]
    pub grpc_cert_renew_before_days: Duration,

    /// Self-managed mode: seconds between reads of the CA Secret (a CA
    /// rotated by another component is picked up then) and checks of the
    /// certificate's renewal.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_TLS_CHECK_INTERVAL",
        default_value_t = 300,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub grpc_tls_check_interval: u64,

    /// Files mode (cert-manager, an existing Secret): this component's PEM
    /// certificate chain. Its identity is its URI SAN
    /// spiffe://navique/component/<name>. Re-read when it changes.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_TLS_CERT_FILE",
        value_name = "PATH",
        requires_all = ["grpc_tls_key_file", "grpc_tls_ca_file"]
    )]
    pub grpc_tls_cert_file: Option<PathBuf>,

    /// Files mode: the PEM private key of --grpc-tls-cert-file.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_TLS_KEY_FILE",
        value_name = "PATH",
        requires_all = ["grpc_tls_cert_file", "grpc_tls_ca_file"]
    )]
    pub grpc_tls_key_file: Option<PathBuf>,

    /// Files mode: the PEM CA bundle that signed the peers' certificates.
    #[arg(
        long,
        env = "NAVIQUE_GRPC_TLS_CA_FILE",
        value_name = "PATH",
        requires_all = ["grpc_tls_cert_file", "grpc_tls_key_file"]
    )]
    pub grpc_tls_ca_file: Option<PathBuf>,
}

/// The mode the flags select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settings {
    Plaintext,
    Files(Files),
    SelfManaged(SelfManaged),
}

impl GrpcTlsArgs {
    /// The mode, or an error naming the flag when it cannot work.
    pub fn settings(&self) -> Result<Settings, Error> {
        if self.grpc_insecure_plaintext {
            return Ok(Settings::Plaintext);
        }
        if let (Some(certificate), Some(key), Some(ca)) = (
            &self.grpc_tls_cert_file,
            &self.grpc_tls_key_file,
            &self.grpc_tls_ca_file,
        ) {
            return Ok(Settings::Files(Files {
                certificate: certificate.clone(),
                key: key.clone(),
                ca: ca.clone(),
            }));
        }
        let invalid =
            |reason: String| Error::InvalidFlag(format!("self-managed gRPC TLS: {reason}"));
        let (namespace, name) = self
            .grpc_ca_secret
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
            .ok_or_else(|| {
                invalid(format!(
                    "--grpc-ca-secret {:?} is not NAMESPACE/NAME",
                    self.grpc_ca_secret
                ))
            })?;
        let dns_names: Vec<String> = self
            .grpc_dns_names
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if dns_names.is_empty() {
            return Err(invalid(
                "--grpc-dns-names is required: the names clients dial this component's gRPC server at, e.g. navique-backup-runner.navique-system.svc (or give --grpc-tls-cert-file, --grpc-tls-key-file and --grpc-tls-ca-file, or --grpc-insecure-plaintext)".to_owned(),
            ));
        }
        if let Err(e) = rcgen::CertificateParams::new(dns_names.clone()) {
            return Err(invalid(format!(
                "--grpc-dns-names {dns_names:?} cannot go into a certificate: {e}"
            )));
        }
        let lifetimes = Lifetimes {
            ca: self.grpc_ca_validity_days,
            certificate: self.grpc_cert_validity_days,
            renew_before: self.grpc_cert_renew_before_days,
        };
        lifetimes.check().map_err(invalid)?;
        let check_interval = Duration::from_secs(self.grpc_tls_check_interval);
        if check_interval >= lifetimes.renew_before {
            return Err(invalid(format!(
                "--grpc-tls-check-interval ({} s) must be shorter than --grpc-cert-renew-before-days ({})",
                check_interval.as_secs(),
                crate::pki::days(lifetimes.renew_before)
            )));
        }
        Ok(Settings::SelfManaged(SelfManaged {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            dns_names,
            lifetimes,
            check_interval,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        tls: GrpcTlsArgs,
    }

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let all = std::iter::once("test").chain(args.iter().copied());
        let flags = Flags::try_parse_from(all).map_err(|e| e.to_string())?;
        flags.tls.settings().map_err(|e| e.to_string())
    }

    #[test]
    fn without_flags_it_is_self_managed_and_needs_the_servers_names() {
        let error = settings(&[]).unwrap_err();
        assert!(
            error.starts_with("self-managed gRPC TLS: --grpc-dns-names is required"),
            "{error}"
        );
        let Settings::SelfManaged(managed) =
            settings(&["--grpc-dns-names", "a.svc, 127.0.0.1"]).unwrap()
        else {
            panic!("not self-managed");
        };
        assert_eq!(
            (managed.namespace.as_str(), managed.name.as_str()),
            ("navique-system", "navique-grpc-ca")
        );
        assert_eq!(managed.dns_names, ["a.svc", "127.0.0.1"]);
        assert_eq!(
            managed.lifetimes.certificate,
            Duration::from_secs(30 * 86_400)
        );
    }

    #[test]
    fn plaintext_only_when_asked_and_never_with_files() {
        assert_eq!(
            settings(&["--grpc-insecure-plaintext"]).unwrap(),
            Settings::Plaintext
        );
        assert!(
            settings(&[
                "--grpc-insecure-plaintext",
                "--grpc-tls-cert-file=c",
                "--grpc-tls-key-file=k",
                "--grpc-tls-ca-file=ca"
            ])
            .unwrap_err()
            .contains("cannot be used with")
        );
    }

    #[test]
    fn files_need_all_three() {
        assert!(
            settings(&["--grpc-tls-cert-file=c", "--grpc-tls-key-file=k"])
                .unwrap_err()
                .contains("--grpc-tls-ca-file")
        );
        assert_eq!(
            settings(&[
                "--grpc-tls-cert-file=c",
                "--grpc-tls-key-file=k",
                "--grpc-tls-ca-file=ca"
            ])
            .unwrap(),
            Settings::Files(Files {
                certificate: "c".into(),
                key: "k".into(),
                ca: "ca".into()
            })
        );
    }

    #[test]
    fn settings_that_cannot_work_name_the_flag() {
        for (args, message) in [
            (
                &["--grpc-dns-names=a", "--grpc-ca-secret=navique-grpc-ca"][..],
                "--grpc-ca-secret \"navique-grpc-ca\" is not NAMESPACE/NAME",
            ),
            (
                &["--grpc-dns-names=a", "--grpc-cert-renew-before-days=30"][..],
                "the renewal before expiry (30 days) must be shorter than the certificate validity (30 days)",
            ),
            (
                &["--grpc-dns-names=a", "--grpc-tls-check-interval=900000"][..],
                "--grpc-tls-check-interval (900000 s) must be shorter",
            ),
        ] {
            let error = settings(args).unwrap_err();
            assert!(error.contains(message), "{args:?}: {error}");
        }
    }
}
