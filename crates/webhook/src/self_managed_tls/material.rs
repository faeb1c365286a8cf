//! The self-managed CA's decisions, without I/O: what the Secret holds,
//! whether it must change and why, and issuing what replaces it. Times are
//! Unix seconds, passed in, so that tests choose the clock. The certificate
//! primitives are [`navique_runtime::pki`]'s, shared with the gRPC CA.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use navique_runtime::pki::{
    Leaf, bundle_pem, ca_problem, certificates, key_matches, leaf_certificate, lifetime_problem,
    names_of, new_ca, normalize, parse, pem, rotated_at,
};
pub use navique_runtime::pki::{Lifetimes, same_issuer};
use rcgen::{ExtendedKeyUsagePurpose, KeyPair};

/// The Secret's keys: the CA bundle (the current CA first, then earlier
/// CAs until they expire) and the current CA's key, besides the serving
/// certificate and key of a `kubernetes.io/tls` Secret.
pub const CA_BUNDLE: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const CERTIFICATE: &str = "tls.crt";
pub const KEY: &str = "tls.key";

/// The common name of the CAs the webhook creates (each made unique).
const CA_NAME: &str = "navique-webhook-ca";

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
    if let Some(problem) = ca_problem(&material.ca_bundle, &material.ca_key, lifetimes, now) {
        return Plan::NewCa(problem);
    }
    let bundle = certificates(&material.ca_bundle);
    let (Some(ca_der), Some(rotated_at)) = (bundle.first(), rotated_at(&material.ca_bundle)) else {
        return Plan::NewCa("its CA certificate does not parse".to_owned());
    };
    let Some(ca) = parse(ca_der) else {
        return Plan::NewCa("its CA certificate does not parse".to_owned());
    };

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

    if bundle_pem(
        &pem(ca_der),
        rotated_at,
        &material.ca_bundle,
        lifetimes,
        now,
    ) != material.ca_bundle
    {
        return Plan::PruneBundle;
    }
    Plan::Keep
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
        match (der, rotated_at(&material.ca_bundle)) {
            (Some(der), Some(rotated_at)) => Ok((pem(&der), rotated_at)),
            _ => Err("the Secret holds no CA".to_owned()),
        }
    };
    let (ca_pem, ca_key, rotated_at) = match plan {
        Plan::Keep => return Ok(material.clone()),
        Plan::PruneBundle => {
            let (ca_pem, rotated_at) = current()?;
            return Ok(Material {
                ca_bundle: bundle_pem(&ca_pem, rotated_at, &material.ca_bundle, lifetimes, now),
                ..material.clone()
            });
        }
        Plan::NewCertificate(_) => {
            let (ca_pem, rotated_at) = current()?;
            let key = KeyPair::from_pem(&material.ca_key).map_err(|e| e.to_string())?;
            (ca_pem, key, rotated_at)
        }
        Plan::NewCa(_) => {
            let (ca_pem, key) = new_ca(CA_NAME, lifetimes.ca, now).map_err(|e| e.to_string())?;
            (ca_pem, key, now)
        }
    };
    let ca_key_pem = ca_key.serialize_pem();
    let leaf = Leaf {
        names,
        uri: None,
        usages: &[ExtendedKeyUsagePurpose::ServerAuth],
    };
    let (certificate, key) = leaf_certificate(&ca_pem, ca_key, &leaf, lifetimes.certificate, now)
        .map_err(|e| e.to_string())?;
    Ok(Material {
        ca_bundle: bundle_pem(&ca_pem, rotated_at, &material.ca_bundle, lifetimes, now),
        ca_key: ca_key_pem,
        certificate,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use navique_runtime::pki::{BACKDATE, LEEWAY};
    use std::time::Duration;

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
            is_new_ca(&plan, "a certificate issued now would outlive it"),
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
