//! The self-managed CA's decisions, without I/O: what the Secret holds,
//! whether it must change and why, and issuing what replaces it. Times are
//! Unix seconds, passed in, so that tests choose the clock.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// The Secret's keys: the CA bundle (the current CA first, then earlier
/// CAs until they expire) and the current CA's key, besides the serving
/// certificate and key of a `kubernetes.io/tls` Secret.
pub const CA_BUNDLE: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const CERTIFICATE: &str = "tls.crt";
pub const KEY: &str = "tls.key";

/// How far back what is issued starts to be valid, so that a peer whose
/// clock is behind ours accepts it at once.
const BACKDATE: i64 = 3600;
/// Leeway when telling whether something was issued for longer than the
/// configured lifetime (which is then replaced, so that a shorter setting
/// takes effect).
const LEEWAY: i64 = 60;

/// How long the CA and the serving certificates live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub certificate: Duration,
    /// How long before the serving certificate expires the next is issued.
    pub renew_before: Duration,
}

impl Lifetimes {
    /// Renewal before expiry needs `renew_before < certificate`, and a
    /// serving certificate must not outlive its CA: `certificate < ca`.
    pub fn check(&self) -> Result<(), String> {
        if self.renew_before >= self.certificate {
            return Err(format!(
                "the renewal before expiry ({}) must be shorter than the certificate validity ({})",
                days(self.renew_before),
                days(self.certificate)
            ));
        }
        if self.certificate >= self.ca {
            return Err(format!(
                "the certificate validity ({}) must be shorter than the CA validity ({})",
                days(self.certificate),
                days(self.ca)
            ));
        }
        Ok(())
    }
}

/// A duration in days, as the settings give it.
pub fn days(duration: Duration) -> String {
    format!("{} days", duration.as_secs_f64() / 86_400.0)
}

/// What the Secret holds, as PEM text; empty when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Material {
    pub ca_bundle: String,
    pub ca_key: String,
    pub certificate: String,
    pub key: String,
}

impl Material {
    /// The Secret's data; keys missing or not UTF-8 are empty.
    pub fn from_data(data: Option<&BTreeMap<String, ByteString>>) -> Self {
        let text = |key: &str| {
            data.and_then(|d| d.get(key))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .unwrap_or_default()
        };
        Self {
            ca_bundle: text(CA_BUNDLE),
            ca_key: text(CA_KEY),
            certificate: text(CERTIFICATE),
            key: text(KEY),
        }
    }

    /// The Secret's data.
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        [
            (CA_BUNDLE, &self.ca_bundle),
            (CA_KEY, &self.ca_key),
            (CERTIFICATE, &self.certificate),
            (KEY, &self.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.clone().into_bytes())))
        .collect()
    }
}

/// What the Secret needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: the CA and the serving certificate are good.
    Keep,
    /// The bundle without the earlier CAs that expired (or that are not
    /// CAs); nothing new is issued.
    PruneBundle,
    /// A serving certificate from the current CA, for the reason given.
    NewCertificate(String),
    /// A CA and a serving certificate from it, for the reason given. The
    /// earlier CAs stay in the bundle until they expire, so that serving
    /// certificates they signed, still served by other replicas, are
    /// trusted meanwhile.
    NewCa(String),
}

/// What `material` needs at `now` to serve `names` with `lifetimes`.
///
/// The CA is replaced when it is missing, unusable, or when a serving
/// certificate issued now would outlive it (less than the certificate
/// validity left), so that no serving certificate outlives its CA. The
/// serving certificate is replaced when it is missing, unusable, not signed
/// by the current CA, does not name every one of `names`, or has less than
/// `renew_before` left. Either is also replaced when issued for longer than
/// `lifetimes` now says.
pub fn assess(material: &Material, names: &[String], lifetimes: &Lifetimes, now: i64) -> Plan {
    let bundle = certificates(&material.ca_bundle);
    let Some(ca_der) = bundle.first() else {
        return Plan::NewCa("the Secret holds no CA".to_owned());
    };
    let Some(ca) = parse(ca_der) else {
        return Plan::NewCa("its CA certificate does not parse".to_owned());
    };
    if !ca.is_ca() {
        return Plan::NewCa("its CA certificate is not a CA".to_owned());
    }
    if !key_matches(&material.ca_key, &ca) {
        return Plan::NewCa("its CA key is missing or does not match the CA".to_owned());
    }
    if let Some(problem) = lifetime_problem(
        &ca,
        (
            lifetimes.certificate,
            "a serving certificate issued now would outlive it",
        ),
        lifetimes.ca,
        now,
    ) {
        return Plan::NewCa(format!("the CA {problem}"));
    }

    let leaf = certificates(&material.certificate);
    let Some(leaf) = leaf.first().and_then(|der| parse(der)) else {
        return Plan::NewCertificate("the Secret holds no serving certificate".to_owned());
    };
    if !key_matches(&material.key, &leaf) {
        return Plan::NewCertificate(
            "its serving key is missing or does not match the certificate".to_owned(),
        );
    }
    if leaf.verify_signature(Some(ca.public_key())).is_err() {
        return Plan::NewCertificate(
            "the serving certificate was not signed by the current CA".to_owned(),
        );
    }
    let named = names_of(&leaf);
    let missing: Vec<&str> = names
        .iter()
        .map(|n| n.as_str())
        .filter(|n| !named.contains(&normalize(n)))
        .collect();
    if !missing.is_empty() {
        return Plan::NewCertificate(format!(
            "the serving certificate does not name {}",
            missing.join(", ")
        ));
    }
    if let Some(problem) = lifetime_problem(
        &leaf,
        (lifetimes.renew_before, "it is due for renewal"),
        lifetimes.certificate,
        now,
    ) {
        return Plan::NewCertificate(format!("the serving certificate {problem}"));
    }

    let rotated_at = ca.validity().not_before.timestamp() + BACKDATE;
    if bundle_pem(&pem(ca_der), rotated_at, material, lifetimes, now) != material.ca_bundle {
        return Plan::PruneBundle;
    }
    Plan::Keep
}

/// Why `certificate` must be replaced: it is not valid yet, has less than
/// `least_left` left (for the reason given), or was issued for longer than
/// `lifetime`.
fn lifetime_problem(
    certificate: &X509Certificate<'_>,
    (least_left, why): (Duration, &str),
    lifetime: Duration,
    now: i64,
) -> Option<String> {
    let validity = certificate.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if not_before > now {
        Some(format!("is not valid until {}", validity.not_before))
    } else if not_after - now < seconds(least_left) {
        Some(format!("expires on {}: {why}", validity.not_after))
    } else if not_after - not_before > seconds(lifetime) + BACKDATE + LEEWAY {
        Some(format!(
            "is valid until {}, longer than configured",
            validity.not_after
        ))
    } else {
        None
    }
}

/// Issues what `plan` says: the Secret's next material.
pub fn issue(
    plan: &Plan,
    material: &Material,
    names: &[String],
    lifetimes: &Lifetimes,
    now: i64,
) -> Result<Material, String> {
    let current = || {
        let der = certificates(&material.ca_bundle).into_iter().next();
        let not_before = der
            .as_ref()
            .and_then(|der| Some(parse(der)?.validity().not_before.timestamp()));
        match (der, not_before) {
            (Some(der), Some(not_before)) => Ok((pem(&der), not_before + BACKDATE)),
            _ => Err("the Secret holds no CA".to_owned()),
        }
    };
    let (ca_pem, ca_key, rotated_at) = match plan {
        Plan::Keep => return Ok(material.clone()),
        Plan::PruneBundle => {
            let (ca_pem, rotated_at) = current()?;
            return Ok(Material {
                ca_bundle: bundle_pem(&ca_pem, rotated_at, material, lifetimes, now),
                ..material.clone()
            });
        }
        Plan::NewCertificate(_) => {
            let (ca_pem, rotated_at) = current()?;
            let key = KeyPair::from_pem(&material.ca_key).map_err(|e| e.to_string())?;
            (ca_pem, key, rotated_at)
        }
        Plan::NewCa(_) => {
            let (ca_pem, key) = new_ca(lifetimes.ca, now).map_err(|e| e.to_string())?;
            (ca_pem, key, now)
        }
    };
    let ca_key_pem = ca_key.serialize_pem();
    let (certificate, key) =
        serving_certificate(&ca_pem, ca_key, names, lifetimes.certificate, now)
            .map_err(|e| e.to_string())?;
    Ok(Material {
        ca_bundle: bundle_pem(&ca_pem, rotated_at, material, lifetimes, now),
        ca_key: ca_key_pem,
        certificate,
        key,
    })
}

/// A CA valid for `lifetime`, as PEM, and its key.
fn new_ca(lifetime: Duration, now: i64) -> Result<(String, KeyPair), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    // Each CA's name is its own (a part of its random public key), so that
    // clients holding two (an overlap) tell them apart.
    let tag: String = key
        .public_key_raw()
        .iter()
        .skip(1)
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    params.distinguished_name.push(
        DnType::CommonName,
        format!("navique-webhook-ca@{now}-{tag}"),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, lifetime, now);
    Ok((pem(params.self_signed(&key)?.der()), key))
}

/// A serving certificate for `names` signed by the CA, as PEM, and its key
/// as PKCS#8 PEM.
fn serving_certificate(
    ca_pem: &str,
    ca_key: KeyPair,
    names: &[String],
    lifetime: Duration,
    now: i64,
) -> Result<(String, String), rcgen::Error> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name = DistinguishedName::new();
    if let Some(name) = names.first() {
        params.distinguished_name.push(DnType::CommonName, name);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, lifetime, now);
    let certificate = params.signed_by(&key, &issuer)?;
    Ok((pem(certificate.der()), key.serialize_pem()))
}

/// The bundle: the current CA first (which replaced the earlier ones at
/// `rotated_at`), then the earlier CAs of `material`'s bundle as long as a
/// serving certificate they signed may still be valid: until they expire,
/// and no longer than a certificate lifetime after `rotated_at`. As PEM,
/// each CA once.
fn bundle_pem(
    current: &str,
    rotated_at: i64,
    material: &Material,
    lifetimes: &Lifetimes,
    now: i64,
) -> String {
    let mut out = vec![current.to_owned()];
    if now >= rotated_at + seconds(lifetimes.certificate) + LEEWAY {
        return out.concat();
    }
    for der in certificates(&material.ca_bundle) {
        let valid =
            parse(&der).is_some_and(|c| c.is_ca() && c.validity().not_after.timestamp() > now);
        let text = pem(&der);
        if valid && !out.contains(&text) {
            out.push(text);
        }
    }
    out.concat()
}

/// Whether the serving certificates `a` and `b` were signed by the same CA
/// (the same issuer name: each CA's is its own). A new serving certificate
/// from the CA of the one served is trusted wherever that one is.
pub fn same_issuer(a: &str, b: &str) -> bool {
    let issuer = |pem: &str| {
        let der = certificates(pem).into_iter().next()?;
        Some(parse(&der)?.issuer().as_raw().to_vec())
    };
    matches!((issuer(a), issuer(b)), (Some(a), Some(b)) if a == b)
}

/// The certificates of a PEM text; blocks that are not certificates or do
/// not decode are skipped.
fn certificates(text: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(text.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .map(|(_, certificate)| certificate)
}

/// Whether `key_pem` is the private key of `certificate`.
fn key_matches(key_pem: &str, certificate: &X509Certificate<'_>) -> bool {
    KeyPair::from_pem(key_pem)
        .is_ok_and(|key| key.subject_public_key_info() == certificate.public_key().raw)
}

/// The DNS names and IP addresses a certificate names, normalized.
fn names_of(certificate: &X509Certificate<'_>) -> Vec<String> {
    let Ok(Some(names)) = certificate.subject_alternative_name() else {
        return Vec::new();
    };
    names
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(name) => Some(normalize(name)),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                _ => None,
            }
            .map(|ip| ip.to_string()),
            _ => None,
        })
        .collect()
}

/// DNS names compare without case; IP addresses in their usual form.
fn normalize(name: &str) -> String {
    name.parse::<IpAddr>()
        .map(|ip| ip.to_string())
        .unwrap_or_else(|_| name.to_ascii_lowercase())
}

/// Valid from a little before `now` for `lifetime`. Lifetimes are checked
/// to be at most a hundred years, so the end fits in a certificate.
fn set_validity(params: &mut CertificateParams, lifetime: Duration, now: i64) {
    let at = |t: i64| OffsetDateTime::from_unix_timestamp(t).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    params.not_before = at(now - BACKDATE);
    params.not_after = at(now.saturating_add(seconds(lifetime)));
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// PEM of a certificate, 64 characters a line.
fn pem(der: &[u8]) -> String {
    let base64 = BASE64.encode(der);
    let mut text = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in base64.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str("-----END CERTIFICATE-----\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000;
    const DAY: i64 = 86_400;

    fn names() -> Vec<String> {
        vec![
            "navique-webhook.navique-system.svc".to_owned(),
            "navique-webhook".to_owned(),
        ]
    }

    fn lifetimes(ca: u64, certificate: u64, renew_before: u64) -> Lifetimes {
        let days = |d: u64| Duration::from_secs(d * 86_400);
        Lifetimes {
            ca: days(ca),
            certificate: days(certificate),
            renew_before: days(renew_before),
        }
    }

    /// What a Secret holds after `plan` at `now`, checked to need nothing
    /// then.
    fn issued(plan: &Plan, from: &Material, lifetimes: &Lifetimes, now: i64) -> Material {
        let material = issue(plan, from, &names(), lifetimes, now).unwrap();
        assert_eq!(assess(&material, &names(), lifetimes, now), Plan::Keep);
        material
    }

    fn fresh(lifetimes: &Lifetimes) -> Material {
        issued(
            &Plan::NewCa("test".to_owned()),
            &Material::default(),
            lifetimes,
            T0,
        )
    }

    /// `material` with the serving certificate renewed at `at`, when it is
    /// due then.
    fn renewed_at(material: &Material, lifetimes: &Lifetimes, at: i64) -> Material {
        let plan = assess(material, &names(), lifetimes, at);
        assert!(is_new_certificate(&plan, "expires on"), "{plan:?}");
        issued(&plan, material, lifetimes, at)
    }

    fn bundle_len(material: &Material) -> usize {
        certificates(&material.ca_bundle).len()
    }

    fn is_new_certificate(plan: &Plan, reason: &str) -> bool {
        matches!(plan, Plan::NewCertificate(r) if r.contains(reason))
    }

    fn is_new_ca(plan: &Plan, reason: &str) -> bool {
        matches!(plan, Plan::NewCa(r) if r.contains(reason))
    }

    #[test]
    fn an_empty_secret_gets_a_ca_and_a_certificate_for_the_names() {
        let lifetimes = lifetimes(3650, 365, 30);
        assert_eq!(
            assess(&Material::default(), &names(), &lifetimes, T0),
            Plan::NewCa("the Secret holds no CA".to_owned())
        );
        let material = fresh(&lifetimes);
        assert_eq!(bundle_len(&material), 1);
        let ca_der = certificates(&material.ca_bundle).remove(0);
        let ca = parse(&ca_der).unwrap();
        assert!(ca.is_ca());
        assert!(key_matches(&material.ca_key, &ca));
        assert_eq!(ca.validity().not_after.timestamp(), T0 + 3650 * DAY);
        let leaf_der = certificates(&material.certificate).remove(0);
        let leaf = parse(&leaf_der).unwrap();
        assert!(!leaf.is_ca());
        assert!(key_matches(&material.key, &leaf));
        assert!(leaf.verify_signature(Some(ca.public_key())).is_ok());
        assert_eq!(leaf.validity().not_before.timestamp(), T0 - BACKDATE);
        assert_eq!(leaf.validity().not_after.timestamp(), T0 + 365 * DAY);
        assert_eq!(names_of(&leaf), names());
        // What the webhook serves it with accepts it.
        crate::tls::ServedCertificate::new(
            material.certificate.clone().into_bytes(),
            material.key.clone().into_bytes(),
        )
        .unwrap();
        assert_eq!(Material::from_data(Some(&material.to_data())), material);
        assert_eq!(Material::from_data(None), Material::default());
    }

    #[test]
    fn the_certificate_is_renewed_before_it_expires_and_the_ca_kept() {
        let lifetimes = lifetimes(100, 10, 2);
        let material = fresh(&lifetimes);
        assert_eq!(
            assess(&material, &names(), &lifetimes, T0 + 8 * DAY),
            Plan::Keep
        );
        let renewed = renewed_at(&material, &lifetimes, T0 + 8 * DAY + 1);
        assert_eq!(renewed.ca_bundle, material.ca_bundle);
        assert_eq!(renewed.ca_key, material.ca_key);
        assert_ne!(renewed.certificate, material.certificate);
        assert_ne!(renewed.key, material.key);
        assert!(same_issuer(&renewed.certificate, &material.certificate));
        // An expired certificate too.
        let plan = assess(&material, &names(), &lifetimes, T0 + 11 * DAY);
        assert!(is_new_certificate(&plan, "expires on"), "{plan:?}");
    }

    #[test]
    fn the_ca_is_replaced_before_a_certificate_would_outlive_it_keeping_the_old_one_meanwhile() {
        let lifetimes = lifetimes(30, 10, 2);
        let material = fresh(&lifetimes);
        // Serving certificates renewed at 8 and 16 days come from it...
        let material = renewed_at(&material, &lifetimes, T0 + 16 * DAY + 1);
        // ...but one issued after 20 days would outlive it.
        let rotation = T0 + 20 * DAY + 1;
        let plan = assess(&material, &names(), &lifetimes, rotation);
        assert!(
            is_new_ca(&plan, "a serving certificate issued now would outlive it"),
            "{plan:?}"
        );
        let rotated = issued(&plan, &material, &lifetimes, rotation);
        assert_ne!(rotated.ca_key, material.ca_key);
        assert!(!same_issuer(&rotated.certificate, &material.certificate));
        // The new CA first, then the old one, which other replicas' serving
        // certificates still chain to.
        assert_eq!(
            rotated.ca_bundle,
            format!(
                "{}{}",
                pem(&certificates(&rotated.ca_bundle)[0]),
                material.ca_bundle
            )
        );
        assert_eq!(
            assess(&rotated, &names(), &lifetimes, rotation + 8 * DAY),
            Plan::Keep
        );
        // Renewed from the new CA, the old one still in the bundle...
        let rotated = renewed_at(&rotated, &lifetimes, rotation + 8 * DAY + 1);
        assert_eq!(bundle_len(&rotated), 2);
        assert_eq!(
            assess(&rotated, &names(), &lifetimes, T0 + 30 * DAY - 1),
            Plan::Keep
        );
        // ...until it expires.
        let expired = T0 + 30 * DAY;
        assert_eq!(
            assess(&rotated, &names(), &lifetimes, expired),
            Plan::PruneBundle
        );
        let pruned = issued(&Plan::PruneBundle, &rotated, &lifetimes, expired);
        assert_eq!(bundle_len(&pruned), 1);
        assert_eq!(
            Material {
                ca_bundle: rotated.ca_bundle.clone(),
                ..pruned.clone()
            },
            rotated
        );
    }

    #[test]
    fn shorter_lifetimes_take_effect_and_an_old_ca_stays_only_while_it_may_be_served() {
        let material = fresh(&lifetimes(3650, 365, 30));
        // A shorter serving certificate validity: a new one, same CA.
        let shorter = lifetimes(3650, 90, 30);
        let plan = assess(&material, &names(), &shorter, T0 + DAY);
        assert!(
            is_new_certificate(&plan, "longer than configured"),
            "{plan:?}"
        );
        let renewed = issued(&plan, &material, &shorter, T0 + DAY);
        assert_eq!(renewed.ca_bundle, material.ca_bundle);
        // A shorter CA validity: a new CA.
        let shorter = lifetimes(1000, 90, 30);
        let at = T0 + 2 * DAY;
        let plan = assess(&renewed, &names(), &shorter, at);
        assert!(is_new_ca(&plan, "longer than configured"), "{plan:?}");
        let rotated = issued(&plan, &renewed, &shorter, at);
        assert_eq!(bundle_len(&rotated), 2);
        // The old CA signed serving certificates valid 90 days at most: it
        // goes then, long before it expires, after renewals that keep it.
        let rotated = renewed_at(&rotated, &shorter, at + 60 * DAY + 1);
        assert_eq!(bundle_len(&rotated), 2);
        let needed_until = at + 90 * DAY + LEEWAY;
        assert_eq!(
            assess(&rotated, &names(), &shorter, needed_until - 1),
            Plan::Keep
        );
        assert_eq!(
            assess(&rotated, &names(), &shorter, needed_until),
            Plan::PruneBundle
        );
    }

    #[test]
    fn names_keys_and_signatures_are_checked() {
        let lifetimes = lifetimes(3650, 365, 30);
        let material = fresh(&lifetimes);
        let other = fresh(&lifetimes);
        let assess =
            |material: &Material, names: &[String]| assess(material, names, &lifetimes, T0 + DAY);

        let mut more = names();
        more.push("navique-webhook.navique-system.svc.cluster.local".to_owned());
        let plan = assess(&material, &more);
        assert!(
            is_new_certificate(
                &plan,
                "does not name navique-webhook.navique-system.svc.cluster.local"
            ),
            "{plan:?}"
        );
        // Fewer names, or in another case, are still named.
        assert_eq!(assess(&material, &names()[..1]), Plan::Keep);
        assert_eq!(
            assess(&material, &["NAVIQUE-WEBHOOK".to_owned()]),
            Plan::Keep
        );

        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        type Expect = fn(&Plan, &str) -> bool;
        let cases: [(Material, Expect, &str); 6] = [
            (
                Material {
                    key: other.key.clone(),
                    ..material.clone()
                },
                is_new_certificate,
                "does not match",
            ),
            (
                Material {
                    certificate: other.certificate.clone(),
                    key: other.key.clone(),
                    ..material.clone()
                },
                is_new_certificate,
                "not signed by the current CA",
            ),
            (
                Material {
                    certificate: String::new(),
                    ..material.clone()
                },
                is_new_certificate,
                "no serving certificate",
            ),
            (
                Material {
                    ca_key: String::new(),
                    ..material.clone()
                },
                is_new_ca,
                "CA key is missing",
            ),
            (
                Material {
                    ca_bundle: material.certificate.clone(),
                    ca_key: material.key.clone(),
                    ..material.clone()
                },
                is_new_ca,
                "is not a CA",
            ),
            (
                Material {
                    ca_bundle: garbage.to_owned(),
                    ..material.clone()
                },
                is_new_ca,
                "does not parse",
            ),
        ];
        for (broken, expect, reason) in &cases {
            let plan = assess(broken, &names());
            assert!(expect(&plan, reason), "{reason}: {plan:?}");
        }
        // A CA replaced for a missing key keeps its certificate trusted
        // meanwhile.
        let no_ca_key = &cases[3].0;
        let plan = assess(no_ca_key, &names());
        let replaced = issue(&plan, no_ca_key, &names(), &lifetimes, T0 + DAY).unwrap();
        assert!(replaced.ca_bundle.ends_with(&material.ca_bundle));
    }

    #[test]
    fn a_certificate_not_valid_yet_is_replaced() {
        let lifetimes = lifetimes(3650, 365, 30);
        let material = fresh(&lifetimes);
        let plan = assess(&material, &names(), &lifetimes, T0 - BACKDATE - 10);
        assert!(is_new_ca(&plan, "is not valid until"), "{plan:?}");
    }

    #[test]
    fn ip_addresses_are_named_as_such() {
        let lifetimes = lifetimes(3650, 365, 30);
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let material = issue(
            &Plan::NewCa("test".to_owned()),
            &Material::default(),
            &names,
            &lifetimes,
            T0,
        )
        .unwrap();
        assert_eq!(assess(&material, &names, &lifetimes, T0), Plan::Keep);
    }

    #[test]
    fn lifetimes_must_renew_before_expiry_within_the_ca() {
        assert_eq!(lifetimes(3650, 365, 30).check(), Ok(()));
        assert!(
            lifetimes(3650, 30, 30)
                .check()
                .unwrap_err()
                .contains("the renewal before expiry (30 days) must be shorter than the certificate validity (30 days)")
        );
        assert!(lifetimes(365, 365, 30).check().unwrap_err().contains(
            "the certificate validity (365 days) must be shorter than the CA validity (365 days)"
        ));
    }

    #[test]
    fn same_issuer_needs_two_certificates_of_one_ca() {
        let lifetimes = lifetimes(3650, 365, 30);
        let material = fresh(&lifetimes);
        let renewed = issue(
            &Plan::NewCertificate("test".to_owned()),
            &material,
            &names(),
            &lifetimes,
            T0,
        )
        .unwrap();
        assert!(same_issuer(&material.certificate, &renewed.certificate));
        assert!(!same_issuer(
            &material.certificate,
            &fresh(&lifetimes).certificate
        ));
        assert!(!same_issuer(&material.certificate, ""));
    }
}
