//! Certificate material without I/O, shared by the self-managed CAs (the
//! webhook's, `webhook::self_managed_tls`, and the internal gRPC CA,
//! [`crate::grpc_tls`]): issuing CAs and leaf certificates, telling whether
//! a CA must be replaced, keeping earlier CAs in a bundle while what they
//! signed may still be valid. Times are Unix seconds, passed in, so that
//! tests choose the clock.

use std::net::IpAddr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// How far back what is issued starts to be valid, so that a peer whose
/// clock is behind ours accepts it at once.
pub const BACKDATE: i64 = 3600;
/// Leeway when telling whether something was issued for longer than the
/// configured lifetime (which is then replaced, so that a shorter setting
/// takes effect).
pub const LEEWAY: i64 = 60;

/// How long a CA and the certificates it signs live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub certificate: Duration,
    /// How long before a certificate expires the next is issued.
    pub renew_before: Duration,
}

impl Lifetimes {
    /// Renewal before expiry needs `renew_before < certificate`, and a
    /// certificate must not outlive its CA: `certificate < ca`.
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

/// A number of days as a flag gives it, fractions allowed, more than
/// nothing and at most a hundred years (so that the end fits in a
/// certificate).
pub fn parse_days(text: &str) -> Result<Duration, String> {
    let days: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of days"))?;
    if !(days > 0.0 && days <= 36_500.0) {
        return Err(format!(
            "{text:?} days: must be more than 0 and at most 36500"
        ));
    }
    Ok(Duration::from_secs_f64(days * 86_400.0))
}

/// Why the first CA of `bundle`, with its key `ca_key` (PEM), must be
/// replaced at `now`: missing, unusable, not a CA, its key missing or not
/// its own, not valid yet, issued for longer than `lifetimes.ca`, or so
/// near its end that a certificate issued now would outlive it. `None`
/// when it is good.
pub fn ca_problem(bundle: &str, ca_key: &str, lifetimes: &Lifetimes, now: i64) -> Option<String> {
    let bundle = certificates(bundle);
    let Some(ca_der) = bundle.first() else {
        return Some("the Secret holds no CA".to_owned());
    };
    let Some(ca) = parse(ca_der) else {
        return Some("its CA certificate does not parse".to_owned());
    };
    if !ca.is_ca() {
        return Some("its CA certificate is not a CA".to_owned());
    }
    if !key_matches(ca_key, &ca) {
        return Some("its CA key is missing or does not match the CA".to_owned());
    }
    lifetime_problem(
        &ca,
        (
            lifetimes.certificate,
            "a certificate issued now would outlive it",
        ),
        lifetimes.ca,
        now,
    )
    .map(|problem| format!("the CA {problem}"))
}

/// Why `certificate` must be replaced: it is not valid yet, has less than
/// `least_left` left (for the reason given), or was issued for longer than
/// `lifetime`.
pub fn lifetime_problem(
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

/// When the first CA of `bundle` replaced the earlier ones: its start of
/// validity (issued [`BACKDATE`] earlier than that).
pub fn rotated_at(bundle: &str) -> Option<i64> {
    let der = certificates(bundle).into_iter().next()?;
    Some(parse(&der)?.validity().not_before.timestamp() + BACKDATE)
}

/// A CA named `{name}@{now}-{tag}` valid for `lifetime`, as PEM, and its
/// key.
pub fn new_ca(name: &str, lifetime: Duration, now: i64) -> Result<(String, KeyPair), rcgen::Error> {
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
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{name}@{now}-{tag}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, lifetime, now);
    Ok((pem(params.self_signed(&key)?.der()), key))
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf<'a> {
    /// DNS names and IP addresses (servers); the first is also the CN.
    pub names: &'a [String],
    /// A URI SAN: the identity of the component holding it.
    pub uri: Option<&'a str>,
    pub usages: &'a [ExtendedKeyUsagePurpose],
}

/// A leaf certificate signed by the CA `ca_pem` (whose key is `ca_key`), as
/// PEM, and its key as PKCS#8 PEM.
pub fn leaf_certificate(
    ca_pem: &str,
    ca_key: KeyPair,
    leaf: &Leaf<'_>,
    lifetime: Duration,
    now: i64,
) -> Result<(String, String), rcgen::Error> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(leaf.names.to_vec())?;
    if let Some(uri) = leaf.uri {
        params
            .subject_alt_names
            .push(SanType::URI(uri.to_owned().try_into()?));
    }
    params.distinguished_name = DistinguishedName::new();
    if let Some(name) = leaf.names.first().map(String::as_str).or(leaf.uri) {
        params.distinguished_name.push(DnType::CommonName, name);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = leaf.usages.to_vec();
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, lifetime, now);
    let certificate = params.signed_by(&key, &issuer)?;
    Ok((pem(certificate.der()), key.serialize_pem()))
}

/// A bundle: `current` first (which replaced the earlier CAs at
/// `rotated_at`), then the CAs of `previous` as long as a certificate they
/// signed may still be valid: until they expire, and no longer than a
/// certificate lifetime after `rotated_at`. As PEM, each CA once.
pub fn bundle_pem(
    current: &str,
    rotated_at: i64,
    previous: &str,
    lifetimes: &Lifetimes,
    now: i64,
) -> String {
    let mut out = vec![current.to_owned()];
    if now >= rotated_at + seconds(lifetimes.certificate) + LEEWAY {
        return out.concat();
    }
    for der in certificates(previous) {
        let valid =
            parse(&der).is_some_and(|c| c.is_ca() && c.validity().not_after.timestamp() > now);
        let text = pem(&der);
        if valid && !out.contains(&text) {
            out.push(text);
        }
    }
    out.concat()
}

/// Whether the certificates `a` and `b` were signed by the same CA (the
/// same issuer name: each CA's is its own).
pub fn same_issuer(a: &str, b: &str) -> bool {
    let issuer = |pem: &str| {
        let der = certificates(pem).into_iter().next()?;
        Some(parse(&der)?.issuer().as_raw().to_vec())
    };
    matches!((issuer(a), issuer(b)), (Some(a), Some(b)) if a == b)
}

/// The certificates of a PEM text; blocks that are not certificates or do
/// not decode are skipped.
pub fn certificates(text: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(text.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// A DER certificate, parsed; `None` when it does not parse.
pub fn parse<'a>(der: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .map(|(_, certificate)| certificate)
}

/// Whether `key_pem` is the private key of `certificate`.
pub fn key_matches(key_pem: &str, certificate: &X509Certificate<'_>) -> bool {
    KeyPair::from_pem(key_pem)
        .is_ok_and(|key| key.subject_public_key_info() == certificate.public_key().raw)
}

/// The DNS names and IP addresses a certificate names, normalized.
pub fn names_of(certificate: &X509Certificate<'_>) -> Vec<String> {
    general_names(certificate)
        .into_iter()
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

/// The URIs a certificate names (its URI SANs).
pub fn uris_of(certificate: &X509Certificate<'_>) -> Vec<String> {
    general_names(certificate)
        .into_iter()
        .filter_map(|name| match name {
            GeneralName::URI(uri) => Some((*uri).to_owned()),
            _ => None,
        })
        .collect()
}

fn general_names<'a>(certificate: &'a X509Certificate<'_>) -> Vec<&'a GeneralName<'a>> {
    match certificate.subject_alternative_name() {
        Ok(Some(names)) => names.value.general_names.iter().collect(),
        _ => Vec::new(),
    }
}

/// DNS names compare without case; IP addresses in their usual form.
pub fn normalize(name: &str) -> String {
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

/// A duration in whole seconds.
pub fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// PEM of a certificate, 64 characters a line.
pub fn pem(der: &[u8]) -> String {
    let base64 = BASE64.encode(der);
    let mut text = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in base64.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str("-----END CERTIFICATE-----\n");
    text
}

/// The current Unix time in seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000;
    const DAY: i64 = 86_400;

    fn lifetimes() -> Lifetimes {
        Lifetimes {
            ca: Duration::from_secs(100 * 86_400),
            certificate: Duration::from_secs(10 * 86_400),
            renew_before: Duration::from_secs(2 * 86_400),
        }
    }

    #[test]
    fn a_leaf_names_its_uri_and_names_and_is_signed_by_the_ca() {
        let (ca_pem, ca_key) = new_ca("test-ca", lifetimes().ca, T0).unwrap();
        let ca_key_pem = ca_key.serialize_pem();
        let names = vec!["backup-runner.navique-system.svc".to_owned()];
        let (leaf_pem, key_pem) = leaf_certificate(
            &ca_pem,
            ca_key,
            &Leaf {
                names: &names,
                uri: Some("spiffe://navique/component/backup-runner"),
                usages: &[ExtendedKeyUsagePurpose::ServerAuth],
            },
            lifetimes().certificate,
            T0,
        )
        .unwrap();
        let der = certificates(&leaf_pem).remove(0);
        let leaf = parse(&der).unwrap();
        assert_eq!(names_of(&leaf), names);
        assert_eq!(uris_of(&leaf), ["spiffe://navique/component/backup-runner"]);
        assert!(key_matches(&key_pem, &leaf));
        let ca_der = certificates(&ca_pem).remove(0);
        let ca = parse(&ca_der).unwrap();
        assert!(leaf.verify_signature(Some(ca.public_key())).is_ok());
        assert_eq!(ca_problem(&ca_pem, &ca_key_pem, &lifetimes(), T0), None);
        assert_eq!(rotated_at(&ca_pem), Some(T0));
    }

    #[test]
    fn a_ca_is_replaced_when_missing_broken_or_before_a_certificate_would_outlive_it() {
        let (ca_pem, ca_key) = new_ca("test-ca", lifetimes().ca, T0).unwrap();
        let key = ca_key.serialize_pem();
        let problem = |bundle: &str, key: &str, now| ca_problem(bundle, key, &lifetimes(), now);
        assert_eq!(problem("", "", T0).unwrap(), "the Secret holds no CA");
        assert!(
            problem(&ca_pem, "", T0)
                .unwrap()
                .contains("CA key is missing")
        );
        assert_eq!(problem(&ca_pem, &key, T0 + 90 * DAY - 1), None);
        assert!(
            problem(&ca_pem, &key, T0 + 90 * DAY + 1)
                .unwrap()
                .contains("a certificate issued now would outlive it")
        );
    }

    #[test]
    fn days_take_fractions_and_refuse_nonsense() {
        assert_eq!(parse_days("0.5"), Ok(Duration::from_secs(43_200)));
        assert!(parse_days("0").is_err());
        assert!(
            parse_days("x")
                .unwrap_err()
                .contains("is not a number of days")
        );
        assert!(parse_days("36501").is_err());
    }
}
