use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can go wrong in the webhook: at start-up (flags,
/// certificate files, the listen address), while reloading a rotated
/// certificate, while keeping the self-managed CA, and with a request body
/// that is not an AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read TLS certificate file {path}: {source}")]
    ReadCertificate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot read TLS key file {path}: {source}")]
    ReadKey {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("TLS certificate file {path} holds no PEM certificate{}", detail(.reason))]
    InvalidCertificate { path: PathBuf, reason: String },

    #[error("TLS key file {path} holds no usable private key{}", detail(.reason))]
    InvalidKey { path: PathBuf, reason: String },

    #[error("TLS key file {key} does not match certificate file {certificate}: {source}")]
    KeyMismatch {
        certificate: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },

    #[error("cannot set up TLS: {0}")]
    Tls(#[source] rustls::Error),

    #[error("cannot listen on webhook address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },

    #[error("cannot issue the webhook's certificate: {0}")]
    Issue(String),

    #[error("Secret {secret} changed under each of {attempts} attempts to write it")]
    SecretContended { secret: String, attempts: usize },

    #[error("Secret {secret} {source}")]
    InvalidSecret {
        secret: String,
        #[source]
        source: PairError,
    },

    #[error("the CA bundle is not in every webhook configuration yet: {0}")]
    CaBundle(String),

    #[error("the request body is not an AdmissionReview: {0}")]
    MalformedReview(#[source] serde_json::Error),

    #[error(
        "unsupported AdmissionReview {api_version:?} kind {kind:?}; this webhook answers admission.k8s.io/v1 AdmissionReview"
    )]
    UnsupportedReview { api_version: String, kind: String },

    #[error("the AdmissionReview has no request")]
    MissingRequest,

    #[error(transparent)]
    Runtime(#[from] navique_runtime::Error),
}

/// Why a PEM certificate chain and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// The certificate is not PEM (reason, empty when there is none).
    #[error("holds no PEM certificate{}", detail(.0))]
    Certificate(String),
    /// The key is not a usable PEM private key (reason, empty when there is
    /// none).
    #[error("holds no usable private key{}", detail(.0))]
    Key(String),
    /// The key is not the certificate's.
    #[error("holds a key that is not the certificate's: {0}")]
    Mismatch(#[source] rustls::Error),
}

/// `": reason"`, or nothing for an empty reason.
pub(crate) fn detail(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}
