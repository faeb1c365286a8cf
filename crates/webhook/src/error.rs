use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can go wrong in the webhook: at start-up (flags,
/// certificate files, the listen address), while reloading a rotated
/// certificate, and with a request body that is not an AdmissionReview.
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

/// `": reason"`, or nothing for an empty reason.
fn detail(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}
