//! Reading an `admission.k8s.io/v1` AdmissionReview and answering it. The
//! validators never see JSON or HTTP: they get the parsed request and return
//! a [`Decision`], which is what keeps them pure and testable from fixtures.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::core::DynamicObject;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, META_API_VERSION_V1, META_KIND,
};
use kube::core::response::StatusSummary;

use crate::Error;

/// An admission request as the validators see it.
pub type Request = AdmissionRequest<DynamicObject>;

/// What a validator decides about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused, with the message kubectl prints after
    /// `admission webhook "..." denied the request: `.
    Deny(String),
    /// Cannot be decided now (a lookup the rule needs is unavailable):
    /// refused with code 500 and reason `InternalError`, so that the request
    /// fails closed whatever the webhook configuration's failurePolicy.
    Error(String),
    /// Allowed once these JSON Patch (RFC 6902) operations are applied to
    /// the object: a mutating rule's defaults.
    Patch(Vec<serde_json::Value>),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow | Decision::Patch(_))
    }
}

/// One admission rule (validating, or mutating with [`Decision::Patch`]),
/// served on its own path. Implementations decide from
/// the request alone (plus configuration or a snapshot they hold), never
/// with I/O, so that a slow dependency cannot stall the API server.
pub trait Validator: Send + Sync + 'static {
    fn validate(&self, request: &Request) -> Decision;
}

/// Parses a request body: an `admission.k8s.io/v1` AdmissionReview that
/// carries a request.
pub fn parse(body: &[u8]) -> Result<Request, Error> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(Error::MalformedReview)?;
    if review.types.api_version != META_API_VERSION_V1 || review.types.kind != META_KIND {
        return Err(Error::UnsupportedReview {
            api_version: review.types.api_version,
            kind: review.types.kind,
        });
    }
    review.try_into().map_err(|_| Error::MissingRequest)
}

/// The AdmissionReview answering `request` with `decision`: the request's
/// uid echoed, and for a denial a `Forbidden` status with code 403. kube's
/// `AdmissionResponse::deny` sets only the message; without the reason and
/// code, kubectl prints the message without "(Forbidden)". A patch is set
/// on the JSON: kube's own setter takes another json-patch version's type.
pub fn answer(request: &Request, decision: &Decision) -> serde_json::Value {
    let response = AdmissionResponse::from(request);
    let response = match decision {
        Decision::Allow | Decision::Patch(_) => response,
        Decision::Deny(message) => {
            let mut response = response.deny(message);
            response.result.status = Some(StatusSummary::Failure);
            response.result.code = 403;
            response.result.reason = "Forbidden".to_owned();
            response
        }
        Decision::Error(message) => {
            let mut response = response.deny(message);
            response.result.status = Some(StatusSummary::Failure);
            response.result.code = 500;
            response.result.reason = "InternalError".to_owned();
            response
        }
    };
    let mut review =
        serde_json::to_value(response.into_review()).expect("an AdmissionReview serializes");
    if let Decision::Patch(operations) = decision {
        let patch = serde_json::to_vec(operations).expect("JSON serializes");
        review["response"]["patchType"] = "JSONPatch".into();
        review["response"]["patch"] = BASE64.encode(patch).into();
    }
    review
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(api_version: &str) -> Vec<u8> {
        json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "name": "settings",
                "namespace": "forge",
                "operation": "DELETE",
                "userInfo": {"username": "alice"},
                "oldObject": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
            }
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_denial_is_forbidden_with_code_403_and_echoes_the_uid() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let answer = answer(&request, &Decision::Deny("no".to_owned()));
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "allowed": false,
                    "status": {"status": "Failure", "code": 403, "reason": "Forbidden", "message": "no"}
                }
            })
        );
    }

    #[test]
    fn a_patch_is_allowed_with_the_operations_in_base64() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let operations = vec![json!({"op": "add", "path": "/spec/x", "value": true})];
        let answer = answer(&request, &Decision::Patch(operations));
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let patch = BASE64
            .decode(answer["response"]["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(patch).unwrap(),
            r#"[{"op":"add","path":"/spec/x","value":true}]"#
        );
    }

    #[test]
    fn an_undecidable_request_is_refused_with_code_500() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let answer =
            serde_json::to_value(answer(&request, &Decision::Error("later".to_owned()))).unwrap();
        assert_eq!(
            answer["response"],
            json!({
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "allowed": false,
                "status": {"status": "Failure", "code": 500, "reason": "InternalError", "message": "later"}
            })
        );
    }

    #[test]
    fn an_allowance_echoes_the_uid() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let answer = serde_json::to_value(answer(&request, &Decision::Allow)).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(
            answer["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(answer["response"]["allowed"], true);
    }

    #[test]
    fn bodies_that_are_not_v1_reviews_with_a_request_are_refused_with_the_reason() {
        assert_eq!(
            parse(b"{").unwrap_err().to_string(),
            "the request body is not an AdmissionReview: EOF while parsing an object at line 1 column 1"
        );
        assert_eq!(
            parse(&review("admission.k8s.io/v1beta1"))
                .unwrap_err()
                .to_string(),
            "unsupported AdmissionReview \"admission.k8s.io/v1beta1\" kind \"AdmissionReview\"; this webhook answers admission.k8s.io/v1 AdmissionReview"
        );
        assert_eq!(
            parse(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#)
                .unwrap_err()
                .to_string(),
            "the AdmissionReview has no request"
        );
        assert!(
            parse(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}"#)
                .unwrap_err()
                .to_string()
                .starts_with("the request body is not an AdmissionReview: missing field `kind`"),
        );
    }
}
