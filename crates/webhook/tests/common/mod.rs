//! What the integration tests share: certificates from a throwaway CA, and
//! an HTTPS client that trusts only that CA.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// A CA and a serving certificate it signed for 127.0.0.1 and localhost.
pub struct Pki {
    pub ca_pem: String,
    pub certificate_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn generate() -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "webhook test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap();
        let certificate = params.signed_by(&key, &issuer).unwrap();
        Self {
            ca_pem: ca.pem(),
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes `tls.crt` and `tls.key` into `dir`, as a Secret volume holds
    /// them.
    pub fn write(&self, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let (certificate, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&certificate, &self.certificate_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (certificate, key)
    }
}

pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Which HTTP versions the client offers over ALPN.
#[derive(Clone, Copy, Debug)]
pub enum Versions {
    Http1,
    Http1AndHttp2,
}

/// An HTTPS client trusting only `ca_pem`.
pub fn client(ca_pem: &str, versions: Versions) -> HttpsClient {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only();
    let connector = match versions {
        Versions::Http1 => builder.enable_http1().build(),
        Versions::Http1AndHttp2 => builder.enable_http1().enable_http2().build(),
    };
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub version: http::Version,
    pub content_type: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `method url` with `body`.
pub async fn send(
    client: &HttpsClient,
    method: &str,
    url: &str,
    body: impl Into<Bytes>,
) -> Result<Answer, hyper_util::client::legacy::Error> {
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap();
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    let version = response.version();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok(Answer {
        status,
        version,
        content_type,
        body: String::from_utf8(body.to_vec()).unwrap(),
    })
}

/// A review fixture's text.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The exact answer to the `delete-locked-stack` fixture.
pub fn locked_stack_denial() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "b2a0d5b4-1c1e-4a55-9b0e-6c7d8e9f0a01",
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 403,
                "reason": "Forbidden",
                "message": "resource is protected by Lock(s) [protect-forge-stack, audit-hold]; delete the Lock(s) before deleting this resource (reasons: protect-forge-stack: Production environment — remove this Lock deliberately before deleting.; audit-hold: audit in progress)"
            }
        }
    })
}
