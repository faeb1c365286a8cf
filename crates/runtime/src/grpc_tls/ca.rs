//! Self-managed mode: the gRPC CA lives in a Secret (`ca.crt`, the bundle:
//! current CA first, then earlier CAs while what they signed may be valid;
//! `ca.key`, the current CA's key). Every component and replica:
//!
//! 1. reads the Secret; when it is missing it creates it (a create that
//!    loses the race, 409, reads the winner's); when its CA is unusable or
//!    so near its end that a certificate issued now would outlive it, it
//!    writes a new CA, keeping the old one in the bundle, with a merge patch
//!    carrying the `resourceVersion` read (a write that loses the race
//!    reads again and adopts what it finds);
//! 2. issues itself, in memory, a certificate from the current CA naming
//!    its identity (`spiffe://navique/component/<name>`) and its servers'
//!    DNS names, and trusts the whole bundle;
//! 3. every check interval reads the Secret again, and issues the next
//!    certificate when the bundle changed or its own is due for renewal.
//!
//! Only the components' own ServiceAccounts may read the Secret: whoever
//! reads the CA key can mint any identity.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use rcgen::{ExtendedKeyUsagePurpose, KeyPair};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Credentials, Error, identity_uri};
use crate::pki::{self, Leaf, Lifetimes};
use crate::retry::Backoff;

/// The Secret's keys.
pub const CA_BUNDLE: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
/// The common name of the CAs (each made unique).
const CA_NAME: &str = "navique-grpc-ca";
/// Writes of the Secret tried in one check, each lost to another writer.
const WRITE_ATTEMPTS: usize = 5;

/// What self-managed mode is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfManaged {
    pub namespace: String,
    pub name: String,
    /// The names this component's servers are dialled at.
    pub dns_names: Vec<String>,
    pub lifetimes: Lifetimes,
    pub check_interval: Duration,
}

/// The CA part of the Secret, as PEM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ca {
    pub bundle: String,
    pub key: String,
}

impl Ca {
    fn from_secret(secret: Option<&Secret>) -> Self {
        let text = |key: &str| {
            secret
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get(key))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .unwrap_or_default()
        };
        Self {
            bundle: text(CA_BUNDLE),
            key: text(CA_KEY),
        }
    }

    fn to_data(&self) -> BTreeMap<String, ByteString> {
        [(CA_BUNDLE, &self.bundle), (CA_KEY, &self.key)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ByteString(v.clone().into_bytes())))
            .collect()
    }
}

/// What the Secret's CA needs at `now`: `None` when it is good as it is,
/// else the next CA and why. A usable CA is kept, its bundle pruned of
/// earlier CAs no longer needed; an unusable or expiring one is replaced,
/// the earlier ones staying in the bundle meanwhile.
pub fn next_ca(ca: &Ca, lifetimes: &Lifetimes, now: i64) -> Result<Option<(Ca, String)>, String> {
    if let Some(problem) = pki::ca_problem(&ca.bundle, &ca.key, lifetimes, now) {
        let (current, key) = pki::new_ca(CA_NAME, lifetimes.ca, now).map_err(|e| e.to_string())?;
        let bundle = pki::bundle_pem(&current, now, &ca.bundle, lifetimes, now);
        let next = Ca {
            bundle,
            key: key.serialize_pem(),
        };
        return Ok(Some((next, problem)));
    }
    let current = pki::certificates(&ca.bundle).into_iter().next();
    let (Some(current), Some(rotated_at)) = (current, pki::rotated_at(&ca.bundle)) else {
        return Err("the CA does not parse".to_owned());
    };
    let pruned = pki::bundle_pem(&pki::pem(&current), rotated_at, &ca.bundle, lifetimes, now);
    if pruned == ca.bundle {
        return Ok(None);
    }
    let next = Ca {
        bundle: pruned,
        key: ca.key.clone(),
    };
    Ok(Some((next, "earlier CAs are no longer needed".to_owned())))
}

/// A certificate for `component` from the current CA of `ca`: its PEM and
/// key's PEM. Servers and clients alike: both usages.
pub fn issue(
    ca: &Ca,
    component: &str,
    dns_names: &[String],
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<(String, String), String> {
    let current = pki::certificates(&ca.bundle)
        .into_iter()
        .next()
        .ok_or("the Secret holds no CA")?;
    let key = KeyPair::from_pem(&ca.key).map_err(|e| e.to_string())?;
    let uri = identity_uri(component);
    let leaf = Leaf {
        names: dns_names,
        uri: Some(&uri),
        usages: &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    pki::leaf_certificate(&pki::pem(&current), key, &leaf, lifetimes.certificate, now)
        .map_err(|e| e.to_string())
}

impl SelfManaged {
    /// Obtains this component's certificate, retrying while the API server
    /// cannot be reached (a refusal, 401 or 403, fails at once: retrying
    /// does not grant a permission), and keeps it current in a task that
    /// ends at `shutdown`. `None` when shut down first.
    pub async fn start(
        self,
        client: Client,
        component: &'static str,
        shutdown: &CancellationToken,
    ) -> Result<Option<Arc<Credentials>>, Error> {
        let keeper = Keeper {
            secrets: Api::namespaced(client, &self.namespace),
            secret: format!("{}/{}", self.namespace, self.name),
            settings: self,
            component,
        };
        let mut backoff = Backoff::new();
        let (credentials, issued) = loop {
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                outcome = keeper.first() => outcome,
            };
            match outcome {
                Ok(first) => break first,
                Err(
                    e @ (Error::Forbidden { .. } | Error::Issue(_) | Error::InvalidMaterial(_)),
                ) => {
                    return Err(e);
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(error = %crate::one_line(&e), retry_in = ?delay, "cannot obtain this component's gRPC certificate yet");
                    if !Backoff::sleep(delay, shutdown).await {
                        return Ok(None);
                    }
                }
            }
        };
        tracing::info!(secret = %keeper.secret, identity = %identity_uri(component), "issued this component's gRPC certificate from the self-managed CA");
        tokio::spawn(keeper.keep(credentials.clone(), issued, shutdown.clone()));
        Ok(Some(credentials))
    }
}

/// What was issued last: from which bundle, valid until when.
struct Issued {
    bundle: String,
    not_after: i64,
}

/// Why the next certificate must be issued at `now`, if it must: the CA
/// bundle changed (a rotation by another component), or the current one
/// expires within `renew_before`.
fn renewal(issued: &Issued, ca: &Ca, renew_before: Duration, now: i64) -> Option<&'static str> {
    if ca.bundle != issued.bundle {
        Some("the CA bundle changed")
    } else if now >= issued.not_after - pki::seconds(renew_before) {
        Some("it is due for renewal")
    } else {
        None
    }
}

struct Keeper {
    secrets: Api<Secret>,
    /// `namespace/name`, for messages.
    secret: String,
    settings: SelfManaged,
    component: &'static str,
}

impl Keeper {
    async fn first(&self) -> Result<(Arc<Credentials>, Issued), Error> {
        let ca = self.settle().await?;
        let (certificate, key, issued) = self.issue(&ca)?;
        Ok((Credentials::new(&certificate, &key, &ca.bundle)?, issued))
    }

    /// Checks every interval (sooner after a failure) until `shutdown`.
    async fn keep(
        self,
        credentials: Arc<Credentials>,
        mut issued: Issued,
        shutdown: CancellationToken,
    ) {
        let mut backoff = Backoff::new();
        let mut delay = self.settings.check_interval;
        loop {
            if !Backoff::sleep(delay, &shutdown).await {
                return;
            }
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = self.check(&credentials, &issued) => outcome,
            };
            delay = match outcome {
                Ok(next) => {
                    backoff = Backoff::new();
                    if let Some(next) = next {
                        issued = next;
                    }
                    self.settings.check_interval
                }
                Err(e) => {
                    let delay = backoff.next_delay().min(self.settings.check_interval);
                    tracing::warn!(error = %crate::one_line(&e), retry_in = ?delay, "self-managed gRPC TLS check failed; keeping the current certificate");
                    delay
                }
            };
        }
    }

    /// Reads the Secret; issues the next certificate when the bundle
    /// changed or the current one is due.
    async fn check(
        &self,
        credentials: &Credentials,
        issued: &Issued,
    ) -> Result<Option<Issued>, Error> {
        let ca = self.settle().await?;
        let renew_before = self.settings.lifetimes.renew_before;
        let Some(reason) = renewal(issued, &ca, renew_before, pki::unix_now()) else {
            return Ok(None);
        };
        let (certificate, key, next) = self.issue(&ca)?;
        credentials.replace(&certificate, &key, &ca.bundle)?;
        tracing::info!(secret = %self.secret, reason, "issued this component's next gRPC certificate");
        Ok(Some(next))
    }

    fn issue(&self, ca: &Ca) -> Result<(String, String, Issued), Error> {
        let now = pki::unix_now();
        let settings = &self.settings;
        let (certificate, key) = issue(
            ca,
            self.component,
            &settings.dns_names,
            &settings.lifetimes,
            now,
        )
        .map_err(Error::Issue)?;
        let issued = Issued {
            bundle: ca.bundle.clone(),
            not_after: now.saturating_add(pki::seconds(settings.lifetimes.certificate)),
        };
        Ok((certificate, key, issued))
    }

    /// Reads the Secret and writes it until it needs nothing: its CA.
    async fn settle(&self) -> Result<Ca, Error> {
        for _ in 0..WRITE_ATTEMPTS {
            let secret = self
                .secrets
                .get_opt(&self.settings.name)
                .await
                .map_err(|e| self.kube_error("read", e))?;
            let ca = Ca::from_secret(secret.as_ref());
            let Some((next, reason)) =
                next_ca(&ca, &self.settings.lifetimes, pki::unix_now()).map_err(Error::Issue)?
            else {
                return Ok(ca);
            };
            let written = match &secret {
                None => self.create(&next).await,
                Some(secret) => self.update(secret, &next).await,
            };
            match written {
                Ok(()) => {
                    tracing::info!(secret = %self.secret, reason = %reason, "wrote the gRPC CA Secret");
                    return Ok(next);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::info!(secret = %self.secret, "another component wrote the gRPC CA Secret first; reading it again");
                }
                Err(e) => return Err(self.kube_error("write", e)),
            }
        }
        Err(Error::Contended {
            secret: self.secret.clone(),
            attempts: WRITE_ATTEMPTS,
        })
    }

    async fn create(&self, ca: &Ca) -> Result<(), kube::Error> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.settings.name.clone()),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/part-of".to_owned(), "navique".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        self.component.to_owned(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(ca.to_data()),
            ..Secret::default()
        };
        self.secrets.create(&PostParams::default(), &secret).await?;
        Ok(())
    }

    /// Writes `ca` into `secret` unless it changed since it was read.
    async fn update(&self, secret: &Secret, ca: &Ca) -> Result<(), kube::Error> {
        let patch = json!({
            "metadata": {"resourceVersion": secret.resource_version()},
            "data": ca.to_data(),
        });
        self.secrets
            .patch(
                &self.settings.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }

    fn kube_error(&self, action: &'static str, source: kube::Error) -> Error {
        let secret = self.secret.clone();
        match &source {
            kube::Error::Api(status) if status.code == 401 || status.code == 403 => {
                Error::Forbidden {
                    action,
                    secret,
                    source,
                }
            }
            _ => Error::Kube {
                action,
                secret,
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc_tls::identity::identity_of;

    const T0: i64 = 1_700_000_000;
    const DAY: i64 = 86_400;

    fn lifetimes() -> Lifetimes {
        let days = |d: u64| Duration::from_secs(d * 86_400);
        Lifetimes {
            ca: days(100),
            certificate: days(10),
            renew_before: days(3),
        }
    }

    #[test]
    fn an_empty_secret_gets_a_ca_that_then_needs_nothing() {
        let (ca, reason) = next_ca(&Ca::default(), &lifetimes(), T0).unwrap().unwrap();
        assert_eq!(reason, "the Secret holds no CA");
        assert_eq!(pki::certificates(&ca.bundle).len(), 1);
        assert_eq!(next_ca(&ca, &lifetimes(), T0 + DAY), Ok(None));
        assert_eq!(
            Ca::from_secret(Some(&Secret {
                data: Some(ca.to_data()),
                ..Secret::default()
            })),
            ca
        );
    }

    #[test]
    fn a_ca_near_its_end_is_replaced_the_old_one_kept_until_what_it_signed_expires() {
        let (old, _) = next_ca(&Ca::default(), &lifetimes(), T0).unwrap().unwrap();
        let rotation = T0 + 90 * DAY + 1;
        let (rotated, reason) = next_ca(&old, &lifetimes(), rotation).unwrap().unwrap();
        assert!(
            reason.contains("a certificate issued now would outlive it"),
            "{reason}"
        );
        assert_ne!(rotated.key, old.key);
        assert_eq!(pki::certificates(&rotated.bundle).len(), 2);
        assert!(rotated.bundle.ends_with(&old.bundle));
        // The old CA goes once certificates it signed have expired.
        let (pruned, reason) = next_ca(&rotated, &lifetimes(), T0 + 100 * DAY)
            .unwrap()
            .unwrap();
        assert_eq!(reason, "earlier CAs are no longer needed");
        assert_eq!(pki::certificates(&pruned.bundle).len(), 1);
        assert_eq!(pruned.key, rotated.key);
    }

    #[test]
    fn the_next_certificate_is_issued_before_expiry_or_when_the_ca_changes() {
        let (ca, _) = next_ca(&Ca::default(), &lifetimes(), T0).unwrap().unwrap();
        let issued = Issued {
            bundle: ca.bundle.clone(),
            not_after: T0 + 10 * DAY,
        };
        let renew_before = lifetimes().renew_before;
        assert_eq!(renewal(&issued, &ca, renew_before, T0 + 7 * DAY - 1), None);
        assert_eq!(
            renewal(&issued, &ca, renew_before, T0 + 7 * DAY),
            Some("it is due for renewal")
        );
        let (rotated, _) = next_ca(&ca, &lifetimes(), T0 + 95 * DAY).unwrap().unwrap();
        assert_eq!(
            renewal(&issued, &rotated, renew_before, T0 + DAY),
            Some("the CA bundle changed")
        );
    }

    #[test]
    fn a_component_certificate_names_its_identity_and_names_and_chains_to_the_ca() {
        let (ca, _) = next_ca(&Ca::default(), &lifetimes(), T0).unwrap().unwrap();
        let names = vec!["navique-backup-runner.navique-system.svc".to_owned()];
        let (certificate, key) = issue(&ca, "backup-runner", &names, &lifetimes(), T0).unwrap();
        let der = pki::certificates(&certificate).remove(0);
        assert_eq!(identity_of(&der).unwrap(), "backup-runner");
        assert_eq!(pki::names_of(&pki::parse(&der).unwrap()), names);
        Credentials::new(&certificate, &key, &ca.bundle).unwrap();
    }
}
