//! TLS of internal gRPC (backup-runner's SnapshotService, the lifecycle
//! controller's ApprovalEvents): mutually authenticated by default, the
//! caller's identity read from its certificate. docs/grpc-tls.md tells the
//! whole story. Three modes, chosen by [`GrpcTlsArgs`]:
//!
//! - self-managed (the default, [`ca`]): each component ensures the CA
//!   Secret exists (creating it, or reading the one another component or
//!   replica created first), issues itself a certificate from it in memory
//!   and renews it before it expires;
//! - files ([`files`]): certificate, key and CA from a mounted Secret
//!   (cert-manager or an existing Secret), re-read when they change;
//! - plaintext, only when asked for (`--grpc-insecure-plaintext`).
//!
//! A component's identity is the URI SAN `spiffe://navique/component/<name>`
//! of its certificate ([`identity`]); servers check it per RPC, so that
//! reaching the port is not enough (the "unauthenticated inside" attack
//! class of ATTACKS.md).

mod args;
pub mod ca;
pub mod files;
pub mod identity;
mod transport;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use kube::Client;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_util::sync::CancellationToken;

pub use args::{GrpcTlsArgs, Settings};
pub use identity::{Caller, authorize, identity_uri};
pub use transport::{ClientCertificates, channel, serve};

/// Why internal gRPC TLS cannot be set up or kept.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidFlag(String),

    #[error("cannot read {what} {path}: {source}")]
    ReadFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    InvalidMaterial(String),

    #[error("cannot {action} the gRPC CA Secret {secret}: {source}")]
    Kube {
        action: &'static str,
        secret: String,
        #[source]
        source: kube::Error,
    },

    #[error(
        "this component may not {action} the gRPC CA Secret {secret} ({source}): grant its ServiceAccount get and patch on it and create on Secrets in its namespace (the chart's <release>-<component>-grpc-ca Role does), or use --grpc-tls-cert-file"
    )]
    Forbidden {
        action: &'static str,
        secret: String,
        #[source]
        source: kube::Error,
    },

    #[error("the gRPC CA Secret {secret} changed under each of {attempts} attempts to write it")]
    Contended { secret: String, attempts: usize },

    #[error("cannot issue the gRPC certificate: {0}")]
    Issue(String),

    #[error("{flag} {url}: {reason}")]
    Url {
        flag: &'static str,
        url: String,
        reason: String,
    },
}

/// How a component's gRPC servers and clients are secured.
#[derive(Clone)]
pub enum GrpcTls {
    /// Explicitly configured plaintext: no authentication.
    Plaintext,
    /// TLS with this component's current certificate.
    Tls(Arc<Credentials>),
}

/// Sets up the mode of `settings` for `component`: loads the files, or
/// obtains the self-managed certificate (retrying while the API server
/// cannot be reached), and keeps it current until `shutdown`. `None` when
/// shut down first.
pub async fn start(
    settings: Settings,
    client: &Client,
    component: &'static str,
    shutdown: &CancellationToken,
) -> Result<Option<GrpcTls>, Error> {
    match settings {
        Settings::Plaintext => {
            tracing::warn!(
                "--grpc-insecure-plaintext: internal gRPC is served and called in plaintext, without authentication; anyone who reaches its port may call it"
            );
            Ok(Some(GrpcTls::Plaintext))
        }
        Settings::Files(files) => {
            let credentials = files.load()?;
            tokio::spawn(files.watch(credentials.clone(), shutdown.clone()));
            Ok(Some(GrpcTls::Tls(credentials)))
        }
        Settings::SelfManaged(managed) => Ok(managed
            .start(client.clone(), component, shutdown)
            .await?
            .map(GrpcTls::Tls)),
    }
}

/// The certificate, key and trusted CAs of a component, replaced whole
/// when renewed or rotated; each new connection uses the current ones.
pub struct Credentials {
    current: RwLock<Arc<Configs>>,
}

struct Configs {
    /// Asks clients for a certificate and verifies one presented against
    /// the CAs; whether the RPC needs one is the service's decision.
    verifying_server: Arc<ServerConfig>,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// What they were made from: a change is a change of contents.
    pem: (String, String, String),
}

impl Credentials {
    /// Checks the PEM certificate chain, key and CA bundle and makes the
    /// rustls configurations.
    pub fn new(certificate: &str, key: &str, ca_bundle: &str) -> Result<Arc<Self>, Error> {
        Ok(Arc::new(Self {
            current: RwLock::new(Arc::new(Configs::new(certificate, key, ca_bundle)?)),
        }))
    }

    /// Uses the new material from now on when it differs: `Ok(true)` when
    /// it replaced the current one; on error the current one stays.
    pub fn replace(&self, certificate: &str, key: &str, ca_bundle: &str) -> Result<bool, Error> {
        let pem = (certificate.to_owned(), key.to_owned(), ca_bundle.to_owned());
        if self.configs().pem == pem {
            return Ok(false);
        }
        let configs = Configs::new(certificate, key, ca_bundle)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(configs);
        Ok(true)
    }

    /// The current server configuration.
    pub fn server_config(&self, clients: ClientCertificates) -> Arc<ServerConfig> {
        let configs = self.configs();
        match clients {
            ClientCertificates::Verified => configs.verifying_server.clone(),
            ClientCertificates::NotAsked => configs.server.clone(),
        }
    }

    /// The current client configuration: presents the certificate and
    /// verifies servers against the CAs.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.configs().client.clone()
    }

    fn configs(&self) -> Arc<Configs> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Configs {
    fn new(certificate: &str, key: &str, ca_bundle: &str) -> Result<Self, Error> {
        let invalid = |what: &str, e: &dyn std::fmt::Display| {
            Error::InvalidMaterial(format!("the gRPC {what} is not usable: {e}"))
        };
        let chain = CertificateDer::pem_slice_iter(certificate.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("certificate", &e))?;
        if chain.is_empty() {
            return Err(invalid("certificate", &"no PEM certificate"));
        }
        let key_der =
            PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| invalid("key", &e))?;
        let mut roots = RootCertStore::empty();
        for ca in crate::pki::certificates(ca_bundle) {
            roots.add(ca).map_err(|e| invalid("CA bundle", &e))?;
        }
        if roots.is_empty() {
            return Err(invalid("CA bundle", &"no PEM certificate"));
        }
        let roots = Arc::new(roots);
        let provider = provider();
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| invalid("CA bundle", &e))?;
        let server = |verifying: bool| {
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid("TLS setup", &e))?;
            let builder = if verifying {
                builder.with_client_cert_verifier(verifier.clone())
            } else {
                builder.with_no_client_auth()
            };
            let mut config = builder
                .with_single_cert(chain.clone(), key_der.clone_key())
                .map_err(|e| invalid("certificate and key", &e))?;
            config.alpn_protocols = vec![b"h2".to_vec()];
            Ok::<_, Error>(Arc::new(config))
        };
        let mut client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS setup", &e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain.clone(), key_der.clone_key())
            .map_err(|e| invalid("certificate and key", &e))?;
        client.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            verifying_server: server(true)?,
            server: server(false)?,
            client: Arc::new(client),
            pem: (certificate.to_owned(), key.to_owned(), ca_bundle.to_owned()),
        })
    }
}

/// ring, as everywhere in the workspace (kube uses it).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
