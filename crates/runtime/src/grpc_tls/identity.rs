//! Who is calling: the identity in the caller's certificate, and whether it
//! may call. A component's identity is the URI SAN
//! `spiffe://navique/component/<name>` of its certificate, which the
//! self-managed CA puts there and the chart's cert-manager Certificates ask
//! for (`uris`). The subject's CN is not read: a certificate issued by a
//! shared CA for another purpose must not pass for a component by its CN.
//!
//! Authorising on that identity, per RPC, is what stops the
//! "unauthenticated inside" attack class (ATTACKS.md): reaching the port
//! from the pod network, or holding some certificate of the CA, is not
//! enough to call.

use rustls::pki_types::CertificateDer;
use tonic::{Request, Status};

use crate::pki;

/// The scheme and path every component identity starts with.
pub const IDENTITY_PREFIX: &str = "spiffe://navique/component/";

/// The URI SAN naming `component`.
pub fn identity_uri(component: &str) -> String {
    format!("{IDENTITY_PREFIX}{component}")
}

/// The component a certificate (DER) names: the one URI SAN under
/// [`IDENTITY_PREFIX`]. An error says why there is none.
pub fn identity_of(certificate: &CertificateDer<'_>) -> Result<String, String> {
    let parsed = pki::parse(certificate).ok_or("the certificate does not parse")?;
    let mut names: Vec<String> = pki::uris_of(&parsed)
        .into_iter()
        .filter_map(|uri| uri.strip_prefix(IDENTITY_PREFIX).map(str::to_owned))
        .collect();
    match (names.pop(), names.is_empty()) {
        (Some(name), true) if is_component_name(&name) => Ok(name),
        (Some(name), true) => Err(format!(
            "the certificate's identity {:?} is not a component name",
            identity_uri(&name)
        )),
        (Some(_), false) => Err("the certificate names more than one component".to_owned()),
        (None, _) => Err(format!(
            "the certificate names no component (no URI SAN {IDENTITY_PREFIX}<name>)"
        )),
    }
}

/// Lowercase letters, digits and inner dashes, as Kubernetes names them.
fn is_component_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The caller's identity, put into the request's extensions by
/// [`authorize`] for the methods to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

/// Whether the caller that presented `peer` (its certificate chain, leaf
/// first, as the TLS handshake verified it; `None` without one) may call:
/// its identity when it is one of `allowed`; `Unauthenticated` without a
/// certificate; `PermissionDenied`, naming the identity, for any other.
pub fn decide(peer: Option<&[CertificateDer<'_>]>, allowed: &[String]) -> Result<String, Status> {
    let Some(leaf) = peer.and_then(<[_]>::first) else {
        return Err(Status::unauthenticated(
            "no client certificate: this service answers only Navique components presenting a certificate of the gRPC CA",
        ));
    };
    let identity = identity_of(leaf)
        .map_err(|reason| Status::permission_denied(format!("{reason}; no caller is allowed")))?;
    if allowed.contains(&identity) {
        Ok(identity)
    } else {
        Err(Status::permission_denied(format!(
            "{} may not call this service; allowed: {}",
            identity_uri(&identity),
            allowed.join(", ")
        )))
    }
}

/// A tonic interceptor that lets through only the `allowed` components
/// (see [`decide`]), for every RPC of the service it wraps.
pub fn authorize(
    allowed: Vec<String>,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        let peer = request.peer_certs();
        let identity = decide(peer.as_deref().map(Vec::as_slice), &allowed)
            .inspect_err(|status| tracing::info!(code = ?status.code(), reason = %status.message(), "refused a gRPC call"))?;
        request.extensions_mut().insert(Caller(identity));
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair, SanType};

    fn certificate(uris: &[&str], common_name: &str) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        for uri in uris {
            params
                .subject_alt_names
                .push(SanType::URI((*uri).to_owned().try_into().unwrap()));
        }
        params.self_signed(&key).unwrap().der().clone()
    }

    fn allowed() -> Vec<String> {
        vec!["service-lifecycle-controller".to_owned()]
    }

    #[test]
    fn the_identity_is_the_one_component_uri() {
        let slc = certificate(
            &[
                "https://example.com/other",
                "spiffe://navique/component/service-lifecycle-controller",
            ],
            "ignored",
        );
        assert_eq!(identity_of(&slc).unwrap(), "service-lifecycle-controller");
    }

    #[test]
    fn no_uri_two_uris_or_a_bad_name_is_no_identity_and_the_cn_is_never_read() {
        let by_cn = certificate(&[], "service-lifecycle-controller");
        assert!(
            identity_of(&by_cn)
                .unwrap_err()
                .contains("names no component")
        );
        let two = certificate(
            &[
                "spiffe://navique/component/a",
                "spiffe://navique/component/b",
            ],
            "x",
        );
        assert!(identity_of(&two).unwrap_err().contains("more than one"));
        let bad = certificate(&["spiffe://navique/component/a/../b"], "x");
        assert!(
            identity_of(&bad)
                .unwrap_err()
                .contains("not a component name")
        );
        let other_trust_domain = certificate(
            &["spiffe://other/component/service-lifecycle-controller"],
            "x",
        );
        assert!(identity_of(&other_trust_domain).is_err());
        assert!(identity_of(&CertificateDer::from(vec![1, 2, 3])).is_err());
    }

    /// "unauthenticated inside": no certificate, or another component's,
    /// never gets through.
    #[test]
    fn only_an_allowed_identity_may_call() {
        let status = decide(None, &allowed()).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert_eq!(
            decide(Some(&[]), &allowed()).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );

        let lock_controller = certificate(&["spiffe://navique/component/lock-controller"], "x");
        let status = decide(Some(&[lock_controller]), &allowed()).unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            status.message(),
            "spiffe://navique/component/lock-controller may not call this service; allowed: service-lifecycle-controller"
        );

        let by_cn = certificate(&[], "service-lifecycle-controller");
        let status = decide(Some(&[by_cn]), &allowed()).unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);

        let slc = certificate(
            &["spiffe://navique/component/service-lifecycle-controller"],
            "x",
        );
        assert_eq!(
            decide(Some(&[slc]), &allowed()).unwrap(),
            "service-lifecycle-controller"
        );
    }
}
