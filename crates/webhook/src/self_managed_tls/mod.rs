//! The self-managed CA (`webhook.tls.mode: selfManaged`): the webhook keeps
//! its own CA and serving certificate in a `kubernetes.io/tls` Secret,
//! writes the CA bundle into its webhook configurations, and serves the
//! certificate from memory, renewed before it expires.
//!
//! At start and every check interval, each replica:
//!
//! 1. reads the Secret and [assesses](material::assess) it: when it is
//!    missing, unusable, its serving certificate is due for renewal or its
//!    CA nears expiry, issues what is needed and writes it: a create (a
//!    replica that loses the race, 409, reads the winner's), or a merge
//!    patch carrying the `resourceVersion` it read (a replica that loses the
//!    race, 409, reads the Secret again and adopts what it finds);
//! 2. puts the Secret's CA bundle into every webhook of the named webhook
//!    configurations ([`bundle_patch`]), again conditional on the
//!    `resourceVersion` read, so that a replica holding a Secret read before
//!    another replica's renewal cannot write an older bundle back;
//! 3. serves the Secret's certificate. A certificate from another CA than
//!    the one served is served only once step 2 succeeded for every
//!    configuration that exists, so that the API server trusts it first.
//!
//! A failed check is retried with a backoff from half a second up to the
//! check interval, so a configuration created after the webhook started
//! (the chart installs them after the Deployment) gets the bundle within
//! seconds.

mod material;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use navique_runtime::{FailureBackoff, one_line};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use material::{
    CA_BUNDLE, CA_KEY, CERTIFICATE, KEY, Lifetimes, Material, Plan, assess, issue, same_issuer,
};

use crate::Error;
use crate::tls::ServedCertificate;

/// Writes of the Secret tried in one check before giving up until the next
/// (each lost to another replica's write).
const WRITE_ATTEMPTS: usize = 5;

/// What the self-managed CA is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The Secret's name.
    pub secret: String,
    /// The Secret's namespace; the client's default namespace when `None`.
    pub namespace: Option<String>,
    /// The names the serving certificate is for (the Service's DNS names).
    pub dns_names: Vec<String>,
    /// The webhook configurations that get the CA bundle.
    pub configurations: Vec<ConfigurationRef>,
    pub lifetimes: Lifetimes,
    /// How often the Secret and the configurations are checked.
    pub check_interval: Duration,
}

impl Settings {
    /// Fails when the settings cannot work: no names, lifetimes that would
    /// renew at every check (see [`Lifetimes::check`]), or a check interval
    /// too long to renew in time.
    pub fn check(&self) -> Result<(), String> {
        if self.dns_names.is_empty() {
            return Err("the serving certificate needs at least one DNS name".to_owned());
        }
        if let Err(e) = rcgen::CertificateParams::new(self.dns_names.clone()) {
            return Err(format!(
                "the DNS names {:?} cannot go into a certificate: {e}",
                self.dns_names
            ));
        }
        self.lifetimes.check()?;
        if self.check_interval >= self.lifetimes.renew_before {
            return Err(format!(
                "the check interval ({} s) must be shorter than the renewal before expiry ({})",
                self.check_interval.as_secs(),
                navique_runtime::pki::days(self.lifetimes.renew_before)
            ));
        }
        Ok(())
    }
}

/// Validating or mutating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigurationKind {
    Validating,
    Mutating,
}

/// A webhook configuration, written `<resource>/<name>` as the chart lists
/// them: `validatingwebhookconfigurations/navique-services`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurationRef {
    pub kind: ConfigurationKind,
    pub name: String,
}

const VALIDATING: &str = "validatingwebhookconfigurations";
const MUTATING: &str = "mutatingwebhookconfigurations";

impl FromStr for ConfigurationRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (resource, name) = text.trim().split_once('/').unwrap_or_default();
        let kind = match resource {
            VALIDATING => ConfigurationKind::Validating,
            MUTATING => ConfigurationKind::Mutating,
            _ => {
                return Err(format!(
                    "{text:?} is not {VALIDATING}/<name> or {MUTATING}/<name>"
                ));
            }
        };
        if name.is_empty() || name.contains('/') {
            return Err(format!("{text:?} does not name one webhook configuration"));
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for ConfigurationRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = match self.kind {
            ConfigurationKind::Validating => VALIDATING,
            ConfigurationKind::Mutating => MUTATING,
        };
        write!(f, "{resource}/{}", self.name)
    }
}

/// The merge patch that sets every webhook's `clientConfig.caBundle` of
/// `configuration` (the object as JSON) to `bundle` (PEM), or `None` when
/// each already has it. It carries the whole `webhooks` list as read, each
/// field kept, and the `resourceVersion` read: the API server refuses it
/// (409) if the configuration changed since.
pub fn bundle_patch(configuration: &Value, bundle: &str) -> Option<Value> {
    let webhooks = configuration.get("webhooks")?.as_array()?;
    let has_bundle = |hook: &Value| {
        hook["clientConfig"]["caBundle"]
            .as_str()
            .and_then(|b| BASE64.decode(b).ok())
            .is_some_and(|b| b == bundle.as_bytes())
    };
    if webhooks.iter().all(has_bundle) {
        return None;
    }
    let encoded = BASE64.encode(bundle);
    let webhooks: Vec<Value> = webhooks
        .iter()
        .cloned()
        .map(|mut hook| {
            if hook.is_object() {
                hook["clientConfig"]["caBundle"] = encoded.clone().into();
            }
            hook
        })
        .collect();
    Some(json!({
        "metadata": {"resourceVersion": configuration["metadata"]["resourceVersion"]},
        "webhooks": webhooks,
    }))
}

/// Obtains the certificate to serve (creating or renewing the Secret's
/// material, retrying until it succeeds) and keeps it current from then on,
/// in a task that ends at `shutdown`. `None` when shut down first.
pub async fn start(
    client: Client,
    settings: Settings,
    shutdown: CancellationToken,
) -> Option<Arc<ServedCertificate>> {
    let keeper = Arc::new(Keeper::new(client, settings));
    let backoff = FailureBackoff::default();
    let (served, next_check) = loop {
        let outcome = tokio::select! {
            () = shutdown.cancelled() => return None,
            outcome = keeper.check() => outcome,
        };
        let delay = match &outcome {
            Ok(()) => keeper.settings.check_interval,
            Err(_) => backoff.failed(()),
        };
        if let Some(served) = keeper.served.get() {
            if let Err(e) = outcome {
                // Served, but some configuration lacks the bundle yet.
                tracing::warn!(error = %one_line(&e), retry_in = ?delay, "self-managed TLS check incomplete");
            }
            break (served.clone(), delay);
        }
        if let Err(e) = outcome {
            tracing::warn!(error = %one_line(&e), retry_in = ?delay, "cannot obtain the webhook's certificate yet");
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(delay) => {}
        }
    };
    tokio::spawn(keeper.keep(next_check, shutdown));
    Some(served)
}

/// Keeps the Secret, the configurations' bundle and the served certificate
/// current.
struct Keeper {
    client: Client,
    secrets: Api<Secret>,
    /// `namespace/name`, for messages.
    secret: String,
    settings: Settings,
    served: OnceLock<Arc<ServedCertificate>>,
}

impl Keeper {
    fn new(client: Client, settings: Settings) -> Self {
        let namespace = settings
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        Self {
            secrets: Api::namespaced(client.clone(), &namespace),
            secret: format!("{namespace}/{}", settings.secret),
            client,
            settings,
            served: OnceLock::new(),
        }
    }

    /// Checks after `delay`, then every interval (sooner after a failure)
    /// until `shutdown`.
    async fn keep(self: Arc<Self>, mut delay: Duration, shutdown: CancellationToken) {
        let backoff = FailureBackoff::default();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = self.check() => outcome,
            };
            delay = match outcome {
                Ok(()) => {
                    backoff.succeeded(&());
                    self.settings.check_interval
                }
                Err(e) => {
                    let delay = backoff.failed(()).min(self.settings.check_interval);
                    tracing::warn!(error = %one_line(&e), retry_in = ?delay, "self-managed TLS check failed");
                    delay
                }
            };
        }
    }

    /// One check: the Secret, the configurations, the served certificate.
    async fn check(&self) -> Result<(), Error> {
        let material = self.settle().await?;
        let (failed, missing) = self.publish(&material.ca_bundle).await;
        self.serve(&material, failed.is_empty())?;
        if failed.is_empty() && missing.is_empty() {
            return Ok(());
        }
        let missing = missing.into_iter().map(|c| format!("{c} not found"));
        Err(Error::CaBundle(
            failed
                .into_iter()
                .chain(missing)
                .collect::<Vec<_>>()
                .join("; "),
        ))
    }

    /// Reads the Secret and writes it until it needs nothing: its material.
    async fn settle(&self) -> Result<Material, Error> {
        let settings = &self.settings;
        for _ in 0..WRITE_ATTEMPTS {
            let secret = self
                .secrets
                .get_opt(&settings.secret)
                .await
                .map_err(|source| self.kube_error("read", source))?;
            let material = Material::from_data(secret.as_ref().and_then(|s| s.data.as_ref()));
            let now = navique_runtime::pki::unix_now();
            let plan = assess(&material, &settings.dns_names, &settings.lifetimes, now);
            if plan == Plan::Keep {
                return Ok(material);
            }
            let next = issue(
                &plan,
                &material,
                &settings.dns_names,
                &settings.lifetimes,
                now,
            )
            .map_err(Error::Issue)?;
            let written = match &secret {
                None => self.create(&next).await,
                Some(secret) => self.update(secret, &next).await,
            };
            match written {
                Ok(()) => {
                    log_written(&self.secret, &plan);
                    return Ok(next);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::info!(secret = %self.secret, "another replica wrote the Secret first; reading it again");
                }
                Err(source) => return Err(self.kube_error("write", source)),
            }
        }
        Err(Error::SecretContended {
            secret: self.secret.clone(),
            attempts: WRITE_ATTEMPTS,
        })
    }

    async fn create(&self, material: &Material) -> Result<(), kube::Error> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.settings.secret.clone()),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/part-of".to_owned(), "navique".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        crate::NAME.to_owned(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(material.to_data()),
            ..Secret::default()
        };
        self.secrets.create(&PostParams::default(), &secret).await?;
        Ok(())
    }

    /// Writes `material` into `secret` unless it changed since it was read.
    async fn update(&self, secret: &Secret, material: &Material) -> Result<(), kube::Error> {
        let patch = json!({
            "metadata": {"resourceVersion": secret.resource_version()},
            "data": material.to_data(),
        });
        self.secrets
            .patch(
                &self.settings.secret,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }

    /// Puts `bundle` into every configuration: the failures, and the
    /// configurations not found.
    async fn publish(&self, bundle: &str) -> (Vec<String>, Vec<String>) {
        let (mut failed, mut missing) = (Vec::new(), Vec::new());
        for configuration in &self.settings.configurations {
            match self.publish_to(configuration, bundle).await {
                Ok(true) => {
                    tracing::info!(configuration = %configuration, "wrote the CA bundle into the webhook configuration");
                }
                Ok(false) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    missing.push(configuration.to_string());
                }
                Err(e) => failed.push(format!("{configuration}: {}", one_line(&e))),
            }
        }
        (failed, missing)
    }

    /// Puts `bundle` into `configuration`; `Ok(true)` when it was written.
    /// Re-reads and tries again while another writer changes it meanwhile.
    async fn publish_to(
        &self,
        configuration: &ConfigurationRef,
        bundle: &str,
    ) -> Result<bool, kube::Error> {
        let resource = match configuration.kind {
            ConfigurationKind::Validating => {
                ApiResource::erase::<ValidatingWebhookConfiguration>(&())
            }
            ConfigurationKind::Mutating => ApiResource::erase::<MutatingWebhookConfiguration>(&()),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let mut attempts = 0;
        loop {
            let object = api.get(&configuration.name).await?;
            let object = serde_json::to_value(&object).map_err(kube::Error::SerdeError)?;
            let Some(patch) = bundle_patch(&object, bundle) else {
                return Ok(false);
            };
            match api
                .patch(
                    &configuration.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => return Ok(true),
                Err(kube::Error::Api(status))
                    if status.code == 409 && attempts < WRITE_ATTEMPTS =>
                {
                    attempts += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Serves the material's certificate: at once the first time, or when
    /// it comes from the CA of the one served; from another CA only when
    /// `published` (the bundle is in every configuration).
    fn serve(&self, material: &Material, published: bool) -> Result<(), Error> {
        let invalid = |source| Error::InvalidSecret {
            secret: self.secret.clone(),
            source,
        };
        let (certificate, key) = (
            material.certificate.clone().into_bytes(),
            material.key.clone().into_bytes(),
        );
        let Some(served) = self.served.get() else {
            let served = ServedCertificate::new(certificate, key).map_err(invalid)?;
            let _ = self.served.set(served);
            tracing::info!(secret = %self.secret, "serving the certificate of the self-managed CA");
            return Ok(());
        };
        if served.certificate_pem() == certificate {
            return Ok(());
        }
        let current = String::from_utf8_lossy(&served.certificate_pem()).into_owned();
        if !published && !same_issuer(&current, &material.certificate) {
            tracing::warn!(secret = %self.secret, "a certificate from a new CA waits until the CA bundle is in every webhook configuration");
            return Ok(());
        }
        if served.replace(certificate, key).map_err(invalid)? {
            tracing::info!(secret = %self.secret, "serving the renewed certificate");
        }
        Ok(())
    }

    fn kube_error(&self, verb: &str, source: kube::Error) -> Error {
        Error::Kube {
            action: format!("{verb} Secret {}", self.secret),
            source,
        }
    }
}

fn log_written(secret: &str, plan: &Plan) {
    match plan {
        Plan::Keep => {}
        Plan::PruneBundle => {
            tracing::info!(secret, "dropped CAs no longer needed from the CA bundle");
        }
        Plan::NewCertificate(reason) => {
            tracing::info!(secret, reason = %reason, "issued a serving certificate");
        }
        Plan::NewCa(reason) => {
            tracing::info!(secret, reason = %reason, "created a CA and issued a serving certificate");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_named_by_resource_and_name() {
        let validating: ConfigurationRef = "validatingwebhookconfigurations/navique-services"
            .parse()
            .unwrap();
        assert_eq!(
            validating,
            ConfigurationRef {
                kind: ConfigurationKind::Validating,
                name: "navique-services".to_owned()
            }
        );
        assert_eq!(
            validating.to_string(),
            "validatingwebhookconfigurations/navique-services"
        );
        let mutating: ConfigurationRef = " mutatingwebhookconfigurations/navique-services-defaults"
            .parse()
            .unwrap();
        assert_eq!(mutating.kind, ConfigurationKind::Mutating);
        assert_eq!(mutating.name, "navique-services-defaults");
        assert_eq!(
            "ValidatingWebhookConfiguration/x"
                .parse::<ConfigurationRef>()
                .unwrap_err(),
            "\"ValidatingWebhookConfiguration/x\" is not validatingwebhookconfigurations/<name> or mutatingwebhookconfigurations/<name>"
        );
        for text in [
            "navique-services",
            "validatingwebhookconfigurations/",
            "mutatingwebhookconfigurations/a/b",
        ] {
            assert!(text.parse::<ConfigurationRef>().is_err(), "{text}");
        }
    }

    fn configuration(bundles: &[Option<&str>]) -> Value {
        let webhooks: Vec<Value> = bundles
            .iter()
            .enumerate()
            .map(|(i, bundle)| {
                let mut hook = json!({
                    "name": format!("hook{i}.navique.com"),
                    "sideEffects": "None",
                    "rules": [{"apiGroups": [""], "operations": ["DELETE"]}],
                    "clientConfig": {"service": {"namespace": "navique-system", "name": "navique-webhook", "path": "/validate/services", "port": 443}},
                });
                if let Some(bundle) = bundle {
                    hook["clientConfig"]["caBundle"] = BASE64.encode(bundle).into();
                }
                hook
            })
            .collect();
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "navique-services", "resourceVersion": "42"},
            "webhooks": webhooks,
        })
    }

    #[test]
    fn the_bundle_patch_sets_every_webhooks_bundle_keeping_the_rest_if_the_object_is_unchanged() {
        let bundle = "-----BEGIN CERTIFICATE-----\nnew\n-----END CERTIFICATE-----\n";
        let old = "-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----\n";
        let object = configuration(&[None, Some(bundle), Some(old)]);
        let patch = bundle_patch(&object, bundle).unwrap();
        let expected = configuration(&[Some(bundle), Some(bundle), Some(bundle)]);
        assert_eq!(patch["webhooks"], expected["webhooks"]);
        assert_eq!(patch["metadata"], json!({"resourceVersion": "42"}));
        assert_eq!(patch.as_object().unwrap().len(), 2);
        // Applied, the patch gives the configuration with the bundle.
        let mut applied = object.clone();
        json_patch_merge(&mut applied, &patch);
        assert_eq!(applied, expected);

        assert_eq!(bundle_patch(&expected, bundle), None, "already there");
        assert_eq!(bundle_patch(&configuration(&[]), bundle), None);
        assert_eq!(bundle_patch(&json!({"metadata": {}}), bundle), None);
    }

    /// RFC 7386, as the API server applies a merge patch.
    fn json_patch_merge(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(target), Some(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        json_patch_merge(target.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
            (_, _) => *target = patch.clone(),
        }
    }

    fn settings() -> Settings {
        Settings {
            secret: "navique-webhook-tls".to_owned(),
            namespace: None,
            dns_names: vec!["navique-webhook.navique-system.svc".to_owned()],
            configurations: Vec::new(),
            lifetimes: Lifetimes {
                ca: Duration::from_secs(3650 * 86_400),
                certificate: Duration::from_secs(365 * 86_400),
                renew_before: Duration::from_secs(30 * 86_400),
            },
            check_interval: Duration::from_secs(300),
        }
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        assert_eq!(settings().check(), Ok(()));
        let no_names = Settings {
            dns_names: Vec::new(),
            ..settings()
        };
        assert_eq!(
            no_names.check().unwrap_err(),
            "the serving certificate needs at least one DNS name"
        );
        let bad_name = Settings {
            dns_names: vec!["naïve".to_owned()],
            ..settings()
        };
        assert!(
            bad_name
                .check()
                .unwrap_err()
                .starts_with("the DNS names [\"naïve\"] cannot go into a certificate")
        );
        let slow = Settings {
            check_interval: Duration::from_secs(30 * 86_400),
            ..settings()
        };
        assert!(
            slow.check()
                .unwrap_err()
                .starts_with("the check interval (2592000 s) must be shorter than the renewal before expiry (30 days)")
        );
    }
}
