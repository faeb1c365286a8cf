//! Files mode: the certificate, key and CA bundle of a mounted Secret
//! (cert-manager's, or one the platform team provides), re-read every few
//! seconds: the kubelet updates a Secret volume by swapping a symlink, and
//! new connections use the new files once all three form a usable set.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Credentials, Error};

/// How often the files are read again.
const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// Where the PEM files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl Files {
    /// Reads the files now, so that a missing or broken one stops start-up.
    pub fn load(&self) -> Result<Arc<Credentials>, Error> {
        let (certificate, key, ca) = self.read()?;
        Credentials::new(&certificate, &key, &ca).map_err(|e| self.named(e))
    }

    /// Re-reads the files until `shutdown`, logging each change and each new
    /// failure (a broken set keeps the previous one).
    pub async fn watch(self, credentials: Arc<Credentials>, shutdown: CancellationToken) {
        let mut last_error = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(RELOAD_INTERVAL) => {}
            }
            let outcome = self.read().and_then(|(certificate, key, ca)| {
                credentials
                    .replace(&certificate, &key, &ca)
                    .map_err(|e| self.named(e))
            });
            match outcome {
                Ok(true) => {
                    tracing::info!(certificate = %self.certificate.display(), "reloaded the gRPC certificate files");
                    last_error = None;
                }
                Ok(false) => last_error = None,
                Err(e) => {
                    let message = e.to_string();
                    if last_error.as_ref() != Some(&message) {
                        tracing::warn!(error = %message, "cannot reload the gRPC certificate files; keeping the previous ones");
                        last_error = Some(message);
                    }
                }
            }
        }
    }

    fn read(&self) -> Result<(String, String, String), Error> {
        let read = |what: &'static str, path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
                what,
                path: path.clone(),
                source,
            })
        };
        Ok((
            read("--grpc-tls-cert-file", &self.certificate)?,
            read("--grpc-tls-key-file", &self.key)?,
            read("--grpc-tls-ca-file", &self.ca)?,
        ))
    }

    /// An error about the material, naming the files it came from.
    fn named(&self, error: Error) -> Error {
        Error::InvalidMaterial(format!(
            "{error} (files {}, {}, {})",
            self.certificate.display(),
            self.key.display(),
            self.ca.display()
        ))
    }
}
