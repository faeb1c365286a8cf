//! The serving certificate. cert-manager rotates it by rewriting the Secret
//! mounted as files, so the certificate is read again while serving and new
//! TLS handshakes use the new one; connections already open keep theirs.
//! The self-managed CA ([`crate::self_managed_tls`]) hands its renewed
//! certificates to the same [`ServedCertificate`].

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::error::PairError;

/// Where the PEM certificate chain and private key are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// The certificate handed to every new TLS handshake, replaced whole.
#[derive(Debug)]
pub struct ServedCertificate {
    current: RwLock<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The PEM it was made from: a change is a change of contents.
    certificate_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl ServedCertificate {
    /// Checks the pair and serves it.
    pub fn new(certificate_pem: Vec<u8>, key_pem: Vec<u8>) -> Result<Arc<Self>, PairError> {
        let key = certified_key(&certificate_pem, &key_pem)?;
        Ok(Arc::new(Self {
            current: RwLock::new(Loaded {
                key,
                certificate_pem,
                key_pem,
            }),
        }))
    }

    /// Serves the pair from now on if it is new and valid: `Ok(true)` when
    /// it replaced the one served; on error the one served stays.
    pub fn replace(&self, certificate_pem: Vec<u8>, key_pem: Vec<u8>) -> Result<bool, PairError> {
        {
            let current = self.loaded();
            if current.certificate_pem == certificate_pem && current.key_pem == key_pem {
                return Ok(false);
            }
        }
        let key = certified_key(&certificate_pem, &key_pem)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Loaded {
            key,
            certificate_pem,
            key_pem,
        };
        Ok(true)
    }

    /// The PEM certificate chain served.
    pub fn certificate_pem(&self) -> Vec<u8> {
        self.loaded().certificate_pem.clone()
    }

    /// A rustls configuration that takes its certificate from `self` at
    /// every handshake and offers HTTP/2 and HTTP/1.1.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, Error> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(Error::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    fn loaded(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        // A panic while holding the lock cannot leave a half-written pair:
        // it is replaced whole.
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl ResolvesServerCert for ServedCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.loaded().key.clone())
    }
}

/// The certificate of a pair of files, replaced when the files change and
/// the new pair is valid. A broken or half-written pair (the certificate
/// rewritten, the key not yet) keeps the previous one. Modification times
/// are not compared, as the kubelet updates a Secret volume by swapping a
/// symlink and times can be equal across quick rewrites; the files are
/// small and read every few seconds at most.
#[derive(Debug)]
pub struct ReloadingCertificate {
    files: CertificateFiles,
    served: Arc<ServedCertificate>,
}

impl ReloadingCertificate {
    /// Reads and checks the pair; fails, naming the file, when either is
    /// missing, unreadable, not PEM, or they do not belong together.
    pub fn load(files: CertificateFiles) -> Result<Arc<Self>, Error> {
        let (certificate_pem, key_pem) = read(&files)?;
        let served =
            ServedCertificate::new(certificate_pem, key_pem).map_err(|e| file_error(&files, e))?;
        Ok(Arc::new(Self { files, served }))
    }

    /// Reads the files again and installs their pair if it changed and is
    /// valid: `Ok(true)` when a new certificate is served from now on.
    pub fn reload(&self) -> Result<bool, Error> {
        let (certificate_pem, key_pem) = read(&self.files)?;
        self.served
            .replace(certificate_pem, key_pem)
            .map_err(|e| file_error(&self.files, e))
    }

    /// Calls [`Self::reload`] every `interval` until `shutdown`, logging
    /// each new certificate and each new failure (a failure that repeats is
    /// logged once).
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: CancellationToken) {
        let mut last_error = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let this = self.clone();
            let outcome = match tokio::task::spawn_blocking(move || this.reload()).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    tracing::warn!(error = %e, "certificate reload task failed");
                    continue;
                }
            };
            match outcome {
                Ok(true) => {
                    tracing::info!(certificate = %self.files.certificate.display(), "reloaded the TLS certificate");
                    last_error = None;
                }
                Ok(false) => last_error = None,
                Err(e) => {
                    let message = e.to_string();
                    if last_error.as_ref() != Some(&message) {
                        tracing::warn!(error = %message, "cannot reload the TLS certificate; still serving the previous one");
                        last_error = Some(message);
                    }
                }
            }
        }
    }

    /// The certificate served, to hand to the server.
    pub fn served(&self) -> &Arc<ServedCertificate> {
        &self.served
    }

    /// A rustls configuration serving the files' certificate (see
    /// [`ServedCertificate::server_config`]).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, Error> {
        self.served.server_config()
    }
}

/// ring, as everywhere in the workspace (kube uses it).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(files: &CertificateFiles) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let certificate =
        std::fs::read(&files.certificate).map_err(|source| Error::ReadCertificate {
            path: files.certificate.clone(),
            source,
        })?;
    let key = std::fs::read(&files.key).map_err(|source| Error::ReadKey {
        path: files.key.clone(),
        source,
    })?;
    Ok((certificate, key))
}

/// A pair's failure, naming the file at fault.
fn file_error(files: &CertificateFiles, error: PairError) -> Error {
    match error {
        PairError::Certificate(reason) => Error::InvalidCertificate {
            path: files.certificate.clone(),
            reason,
        },
        PairError::Key(reason) => Error::InvalidKey {
            path: files.key.clone(),
            reason,
        },
        PairError::Mismatch(source) => Error::KeyMismatch {
            certificate: files.certificate.clone(),
            key: files.key.clone(),
            source,
        },
    }
}

fn certified_key(certificate_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, PairError> {
    let chain = CertificateDer::pem_slice_iter(certificate_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PairError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(PairError::Certificate(String::new()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => PairError::Key(String::new()),
        e => PairError::Key(e.to_string()),
    })?;
    let key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| PairError::Key(e.to_string()))?;
    let certified = CertifiedKey::new(chain, key);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(Arc::new(certified))
        }
        Err(source @ rustls::Error::InconsistentKeys(_)) => Err(PairError::Mismatch(source)),
        Err(e) => Err(PairError::Certificate(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    struct Pair {
        certificate: String,
        key: String,
    }

    fn generate(name: &str) -> Pair {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        let certificate = params.self_signed(&key).unwrap();
        Pair {
            certificate: certificate.pem(),
            key: key.serialize_pem(),
        }
    }

    fn write(dir: &Path, pair: &Pair) -> CertificateFiles {
        let files = CertificateFiles {
            certificate: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&files.certificate, &pair.certificate).unwrap();
        std::fs::write(&files.key, &pair.key).unwrap();
        files
    }

    fn served(certificate: &ReloadingCertificate) -> CertificateDer<'static> {
        certificate.served.loaded().key.cert[0].clone()
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = write(dir.path(), &generate("a"));
        std::fs::remove_file(&files.key).unwrap();
        assert_eq!(
            ReloadingCertificate::load(files.clone())
                .unwrap_err()
                .to_string(),
            format!(
                "cannot read TLS key file {}: No such file or directory (os error 2)",
                files.key.display()
            )
        );
    }

    #[test]
    fn files_without_pem_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = write(dir.path(), &generate("a"));
        std::fs::write(&files.certificate, "not a certificate\n").unwrap();
        assert_eq!(
            ReloadingCertificate::load(files.clone())
                .unwrap_err()
                .to_string(),
            format!(
                "TLS certificate file {} holds no PEM certificate",
                files.certificate.display()
            )
        );
        let files = write(dir.path(), &generate("a"));
        std::fs::write(&files.key, generate("b").certificate).unwrap();
        assert_eq!(
            ReloadingCertificate::load(files.clone())
                .unwrap_err()
                .to_string(),
            format!(
                "TLS key file {} holds no usable private key",
                files.key.display()
            )
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = write(dir.path(), &generate("a"));
        std::fs::write(&files.key, generate("b").key).unwrap();
        let error = ReloadingCertificate::load(files.clone())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "TLS key file {} does not match certificate file {}: ",
                files.key.display(),
                files.certificate.display()
            )),
            "{error}"
        );
    }

    #[test]
    fn a_rotated_pair_is_served_and_a_broken_one_keeps_the_previous() {
        let dir = tempfile::tempdir().unwrap();
        let first = generate("first");
        let files = write(dir.path(), &first);
        let certificate = ReloadingCertificate::load(files.clone()).unwrap();
        assert_eq!(served(&certificate), der(&first.certificate));
        assert!(!certificate.reload().unwrap(), "unchanged files");

        // Half-way through a rotation: new certificate, old key.
        let second = generate("second");
        std::fs::write(&files.certificate, &second.certificate).unwrap();
        assert!(matches!(
            certificate.reload(),
            Err(Error::KeyMismatch { .. })
        ));
        assert_eq!(served(&certificate), der(&first.certificate));

        std::fs::write(&files.key, &second.key).unwrap();
        assert!(certificate.reload().unwrap());
        assert_eq!(served(&certificate), der(&second.certificate));

        // Files gone (a Secret being recreated): keep serving.
        std::fs::remove_file(&files.certificate).unwrap();
        assert!(matches!(
            certificate.reload(),
            Err(Error::ReadCertificate { .. })
        ));
        assert_eq!(served(&certificate), der(&second.certificate));
    }

    #[tokio::test]
    async fn the_watcher_reloads_and_stops_on_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let files = write(dir.path(), &generate("first"));
        let certificate = ReloadingCertificate::load(files.clone()).unwrap();
        let shutdown = CancellationToken::new();
        let watcher = tokio::spawn(
            certificate
                .clone()
                .watch(Duration::from_millis(20), shutdown.clone()),
        );
        let second = generate("second");
        write(dir.path(), &second);
        for _ in 0..250 {
            if served(&certificate) == der(&second.certificate) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(served(&certificate), der(&second.certificate));
        shutdown.cancel();
        watcher.await.unwrap();
    }
}
