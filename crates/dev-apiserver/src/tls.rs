//! A throwaway CA and serving certificate for loopback, and the kubeconfig
//! that trusts them.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Error;

/// The CA and the serving certificate it signed.
pub struct Certificates {
    pub ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl Certificates {
    /// A new CA and a certificate for `localhost` and 127.0.0.1.
    pub fn generate() -> Result<Self, Error> {
        let tls = |e: rcgen::Error| Error::Tls(e.to_string());
        let ca_key = KeyPair::generate().map_err(tls)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "dev-apiserver CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).map_err(tls)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let key = KeyPair::generate().map_err(tls)?;
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .map_err(tls)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "dev-apiserver");
        let cert = params.signed_by(&key, &issuer).map_err(tls)?;
        Ok(Self {
            ca_pem: ca.pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    /// A rustls server configuration offering HTTP/2 and HTTP/1.1.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, Error> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(self.cert_der.clone())], key)
            .map_err(|e| Error::Tls(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Writes a kubeconfig for `server`, trusting `ca_pem`, with a bearer token.
pub fn write_kubeconfig(path: &Path, server: &str, ca_pem: &str, token: &str) -> Result<(), Error> {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let body = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: dev-admin
  user:
    token: {token}
contexts:
- name: dev
  context:
    cluster: dev
    user: dev-admin
    namespace: default
current-context: dev
"
    );
    std::fs::write(path, body).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}
