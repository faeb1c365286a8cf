//! Reading an `admission.k8s.io/v1` AdmissionReview and answering it. The
//! validators never see JSON or HTTP: they get the parsed request and return
//! a [`Decision`], which is what keeps them pure and testable from fixtures.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::core::DynamicObject;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, META_API_VERSION_V1, META_KIND, Operation,
};
use kube::core::response::StatusSummary;

use navique_api::messages;

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
    /// Allowed, with warnings the client shows (kubectl prints
    /// `Warning: <text>`): what the request asks for that is not applied.
    Warn(Vec<String>),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(
            self,
            Decision::Allow | Decision::Patch(_) | Decision::Warn(_)
        )
    }
}

/// One admission rule (validating, or mutating with [`Decision::Patch`]),
/// served on its own path. Implementations decide from
/// the request alone (plus configuration or a snapshot they hold), never
/// with I/O, so that a slow dependency cannot stall the API server.
pub trait Validator: Send + Sync + 'static {
    fn validate(&self, request: &Request) -> Decision;
}

/// A rule that needs one answer from the API server before it decides (an
/// authorization check for the requesting user), bounded by a timeout of
/// its own. Every [`Validator`] is one that asks nothing.
pub trait AsyncValidator: Send + Sync + 'static {
    fn validate<'a>(
        &'a self,
        request: &'a Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Decision> + Send + 'a>>;
}

impl<T: Validator> AsyncValidator for T {
    fn validate<'a>(
        &'a self,
        request: &'a Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Decision> + Send + 'a>> {
        Box::pin(std::future::ready(Validator::validate(self, request)))
    }
}

/// What makes a parsed request unfit for any rule, if anything: a DELETE
/// without the object being deleted (`oldObject`), a CREATE or UPDATE
/// without the object, an UPDATE without the stored one, or a `spec` that
/// is not an object. The API server never sends these; a rule that went on
/// would judge nothing, so the request is refused (fail closed).
pub fn malformed(request: &Request) -> Option<String> {
    let missing = match request.operation {
        Operation::Delete if request.old_object.is_none() => Some(DELETE_WITHOUT_OLD_OBJECT),
        Operation::Create if request.object.is_none() => Some("a CREATE without object"),
        Operation::Update if request.object.is_none() => Some("an UPDATE without object"),
        Operation::Update if request.old_object.is_none() => Some("an UPDATE without oldObject"),
        _ => None,
    };
    if let Some(missing) = missing {
        return Some(messages::malformed_review(missing));
    }
    [
        ("object", &request.object),
        ("oldObject", &request.old_object),
    ]
    .into_iter()
    .find_map(|(name, object)| {
        let spec = object.as_ref()?.data.get("spec")?;
        (!spec.is_object())
            .then(|| messages::malformed_review(&format!("{name}.spec is {spec}, not an object")))
    })
}

const DELETE_WITHOUT_OLD_OBJECT: &str = "a DELETE without oldObject";

/// The refusal of a DELETE without `oldObject`, for a rule that reads it
/// (the server refuses such a request before any rule: see [`decide`]).
pub fn delete_without_old_object() -> Decision {
    Decision::Deny(messages::malformed_review(DELETE_WITHOUT_OLD_OBJECT))
}

/// Decides `request` with `validator`, unless it is [`malformed`].
pub fn decide(validator: &dyn Validator, request: &Request) -> Decision {
    match malformed(request) {
        Some(problem) => Decision::Deny(problem),
        None => validator.validate(request),
    }
}

/// The answer to a body that [`parse`] refused but that names a request
/// uid: a denial with code 400 (`BadRequest`) that the API server shows,
/// whatever the webhook configuration's failurePolicy says about a
/// webhook that fails. Without a uid there is nothing to answer.
pub fn refuse_unreadable(body: &[u8], error: &Error) -> Option<serde_json::Value> {
    let review: serde_json::Value = serde_json::from_slice(body).ok()?;
    let uid = review.get("request")?.get("uid")?.as_str()?;
    Some(serde_json::json!({
        "apiVersion": META_API_VERSION_V1,
        "kind": META_KIND,
        "response": {
            "uid": uid,
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 400,
                "reason": "BadRequest",
                "message": messages::malformed_review(&error.to_string()),
            },
        },
    }))
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
        Decision::Warn(warnings) => {
            let mut response = response;
            response.warnings = Some(warnings.clone());
            response
        }
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

    #[test]
    fn an_unreadable_review_with_a_uid_is_denied_as_a_bad_request() {
        // metadata.name is a number: not an object kube can read.
        let mut body: serde_json::Value =
            serde_json::from_slice(&review("admission.k8s.io/v1")).unwrap();
        body["request"]["oldObject"]["metadata"]["name"] = json!(7);
        let body = body.to_string().into_bytes();
        let error = parse(&body).unwrap_err();
        let answer = refuse_unreadable(&body, &error).unwrap();
        assert_eq!(
            answer["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(answer["response"]["status"]["code"], 400);
        assert_eq!(answer["response"]["status"]["reason"], "BadRequest");
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "malformed admission request: the request body is not an AdmissionReview: invalid type: integer `7`"
            ),
            "{message}"
        );
        assert!(message.ends_with("; the request is refused"), "{message}");
        // Without a uid there is no review to answer.
        assert_eq!(refuse_unreadable(b"{", &parse(b"{").unwrap_err()), None);
    }

    #[test]
    fn a_warning_is_an_allowance_with_the_warnings() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let answer = answer(&request, &Decision::Warn(vec!["not applied".to_owned()]));
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["warnings"], json!(["not applied"]));
    }

    proptest::proptest! {
        /// Fuzzing: any body is parsed or refused, never a panic, and an
        /// unreadable one is never answered as allowed.
        #[test]
        fn any_body_is_read_or_refused(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            if let Err(error) = parse(&body)
                && let Some(answer) = refuse_unreadable(&body, &error)
            {
                proptest::prop_assert_eq!(&answer["response"]["allowed"], &json!(false));
            }
        }
    }
}
