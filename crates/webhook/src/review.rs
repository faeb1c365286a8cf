//! Reading an `admission.k8s.io/v1` AdmissionReview and answering it. The
//! validators never see JSON or HTTP: they get the parsed request and return
//! a [`Decision`], which is what keeps them pure and testable from fixtures.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{META_API_VERSION_V1, META_KIND, Operation};
use kube::core::{DynamicObject, GroupVersionKind, TypeMeta};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use navique_api::messages;

use crate::Error;

/// An admission request as the validators see it: the fields of
/// `admission.k8s.io/v1` AdmissionRequest that a rule reads, under kube's
/// names. Read by [`parse`] in one pass: kube's own `AdmissionReview` and
/// `DynamicObject` flatten fields, which makes serde buffer the whole body
/// and each object before reading them again, and that was most of a
/// review's CPU (bench-webhook).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    pub user_info: UserInfo,
    #[serde(default, deserialize_with = "object")]
    pub object: Option<DynamicObject>,
    #[serde(default, deserialize_with = "object")]
    pub old_object: Option<DynamicObject>,
}

/// The body: an AdmissionReview's type and its request.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: String,
    kind: String,
    #[serde(default)]
    request: Option<Request>,
}

/// An object as kube's `DynamicObject` reads it (`apiVersion` and `kind`
/// as its type when both are there, `metadata`, every other field in
/// `data`), without buffering it first.
fn object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DynamicObject>, D::Error> {
    struct Object(DynamicObject);

    impl<'de> Deserialize<'de> for Object {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(ObjectVisitor)
        }
    }

    struct ObjectVisitor;

    impl<'de> Visitor<'de> for ObjectVisitor {
        type Value = Object;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a Kubernetes object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
            use serde::de::Error as _;
            let (mut api_version, mut kind, mut metadata) = (None, None, None);
            let mut data = serde_json::Map::new();
            while let Some(key) = map.next_key::<Key>()? {
                let duplicate = |set: bool, field: &'static str| {
                    if set {
                        Err(A::Error::duplicate_field(field))
                    } else {
                        Ok(())
                    }
                };
                match key {
                    Key::ApiVersion => {
                        duplicate(api_version.is_some(), "apiVersion")?;
                        api_version = Some(map.next_value::<String>()?);
                    }
                    Key::Kind => {
                        duplicate(kind.is_some(), "kind")?;
                        kind = Some(map.next_value::<String>()?);
                    }
                    Key::Metadata => {
                        duplicate(metadata.is_some(), "metadata")?;
                        metadata = Some(map.next_value::<ObjectMeta>()?);
                    }
                    Key::Other(key) => {
                        data.insert(key, map.next_value()?);
                    }
                }
            }
            Ok(Object(DynamicObject {
                types: api_version
                    .zip(kind)
                    .map(|(api_version, kind)| TypeMeta { api_version, kind }),
                metadata: metadata.unwrap_or_default(),
                data: serde_json::Value::Object(data),
            }))
        }
    }

    /// A field's name: the three read apart, any other kept.
    enum Key {
        ApiVersion,
        Kind,
        Metadata,
        Other(String),
    }

    impl<'de> Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct KeyVisitor;

            impl Visitor<'_> for KeyVisitor {
                type Value = Key;

                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a field name")
                }

                fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                    Ok(match key {
                        "apiVersion" => Key::ApiVersion,
                        "kind" => Key::Kind,
                        "metadata" => Key::Metadata,
                        _ => Key::Other(key.to_owned()),
                    })
                }
            }

            deserializer.deserialize_str(KeyVisitor)
        }
    }

    Ok(Option::<Object>::deserialize(deserializer)?.map(|Object(object)| object))
}

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
    let review: Review = serde_json::from_slice(body).map_err(Error::MalformedReview)?;
    if review.api_version != META_API_VERSION_V1 || review.kind != META_KIND {
        return Err(Error::UnsupportedReview {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    review.request.ok_or(Error::MissingRequest)
}

/// The AdmissionReview answering `request` with `decision`: the request's
/// uid echoed, and for a denial a `Forbidden` status with code 403 (without
/// the reason and code, kubectl prints the message without "(Forbidden)"),
/// for an undecidable request `InternalError` with 500. Written straight
/// from the request and decision it borrows: this is on every review's path.
pub fn answer<'a>(request: &'a Request, decision: &'a Decision) -> Answer<'a> {
    let failure = |code, reason, message: &'a String| Status {
        status: Some("Failure"),
        code: Some(code),
        reason: Some(reason),
        message: Some(message),
    };
    let (allowed, status) = match decision {
        Decision::Allow | Decision::Patch(_) | Decision::Warn(_) => (true, Status::default()),
        Decision::Deny(message) => (false, failure(403, "Forbidden", message)),
        Decision::Error(message) => (false, failure(500, "InternalError", message)),
    };
    let (warnings, patch) = match decision {
        Decision::Warn(warnings) => (Some(warnings.as_slice()), None),
        Decision::Patch(operations) => {
            let patch = serde_json::to_vec(operations).expect("JSON serializes");
            (None, Some(BASE64.encode(patch)))
        }
        _ => (None, None),
    };
    Answer {
        api_version: META_API_VERSION_V1,
        kind: META_KIND,
        response: Response {
            uid: &request.uid,
            allowed,
            status,
            warnings,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
        },
    }
}

/// An `admission.k8s.io/v1` AdmissionReview carrying a response.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    status: Status<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
}

/// A `meta.k8s.io/v1` Status: empty (`{}`) for an allowance.
#[derive(Debug, Default, serde::Serialize)]
struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
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

    /// The one-pass reading gives the validators what kube's types read
    /// from the same body: a full UPDATE review as kube-apiserver sends it.
    #[test]
    fn a_review_reads_as_kubes_admission_review_does() {
        let object = |generation: u64| {
            json!({
                "apiVersion": "core.navique.com/v1alpha1",
                "kind": "Lock",
                "metadata": {
                    "name": "keep", "namespace": "shop", "uid": "u-1", "generation": generation,
                    "creationTimestamp": "2026-12-01T10:00:00Z",
                    "labels": {"team": "shop"}, "annotations": {"a": "c"},
                    "finalizers": ["core.navique.com/lock"],
                    "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
                },
                "spec": {"target": {"kind": "Namespace", "name": "shop"}, "reason": "prod é"},
                "status": {"active": true}
            })
        };
        let body = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "core.navique.com", "version": "v1alpha1", "kind": "Lock"},
                "resource": {"group": "core.navique.com", "version": "v1alpha1", "resource": "locks"},
                "requestKind": {"group": "core.navique.com", "version": "v1alpha1", "kind": "Lock"},
                "name": "keep",
                "namespace": "shop",
                "operation": "UPDATE",
                "userInfo": {"username": "alice", "uid": "a-1", "groups": ["dev", "system:authenticated"], "extra": {"scope": ["x"]}},
                "object": object(2),
                "oldObject": object(1),
                "dryRun": false,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}
            }
        })
        .to_string()
        // Escaped names, as any JSON writer may send them.
        .replace(r#""kind":"Lock""#, r#""kin\u0064":"Lock""#)
        .replace(r#""spec":"#, r#""sp\u0065c":"#);
        assert!(body.contains("kin\\u0064") && body.contains("sp\\u0065c"));
        let ours = parse(body.as_bytes()).unwrap();
        let kubes: kube::core::admission::AdmissionReview<DynamicObject> =
            serde_json::from_str(&body).unwrap();
        let kubes = kubes.request.unwrap();
        assert_eq!(ours.uid, kubes.uid);
        assert_eq!(ours.kind, kubes.kind);
        assert_eq!(ours.name, kubes.name);
        assert_eq!(ours.namespace, kubes.namespace);
        assert_eq!(ours.operation, kubes.operation);
        assert_eq!(ours.user_info, kubes.user_info);
        assert_eq!(ours.object, kubes.object);
        assert_eq!(ours.old_object, kubes.old_object);
        assert_eq!(ours.object.unwrap().data["spec"]["reason"], "prod é");

        // A DELETE's null object, and an object without its type.
        let mut delete: serde_json::Value = serde_json::from_str(&body).unwrap();
        delete["request"]["operation"] = json!("DELETE");
        delete["request"]["object"] = json!(null);
        delete["request"]["oldObject"] = json!({"metadata": {"name": "keep"}, "spec": {}});
        let request = parse(delete.to_string().as_bytes()).unwrap();
        assert_eq!(request.object, None);
        let old = request.old_object.unwrap();
        assert_eq!(old.types, None);
        assert_eq!(old.metadata.name.as_deref(), Some("keep"));
        assert_eq!(old.data, json!({"spec": {}}));
    }

    #[test]
    fn an_object_with_a_field_twice_is_refused() {
        let mut body: serde_json::Value =
            serde_json::from_slice(&review("admission.k8s.io/v1")).unwrap();
        body["request"]["oldObject"] = json!(null);
        let body = body.to_string().replace(
            r#""oldObject":null"#,
            r#""oldObject":{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
        );
        assert!(
            parse(body.as_bytes()).unwrap_err().to_string().starts_with(
                "the request body is not an AdmissionReview: duplicate field `metadata`"
            ),
        );
    }

    #[test]
    fn a_denial_is_forbidden_with_code_403_and_echoes_the_uid() {
        let request = parse(&review("admission.k8s.io/v1")).unwrap();
        let deny = Decision::Deny("no".to_owned());
        assert_eq!(
            serde_json::to_value(answer(&request, &deny)).unwrap(),
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
        let patch = Decision::Patch(operations);
        let answer = serde_json::to_value(answer(&request, &patch)).unwrap();
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
        let error = Decision::Error("later".to_owned());
        let answer = serde_json::to_value(answer(&request, &error)).unwrap();
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
        assert_eq!(
            answer,
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true, "status": {}}
            })
        );
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
        let warn = Decision::Warn(vec!["not applied".to_owned()]);
        let answer = serde_json::to_value(answer(&request, &warn)).unwrap();
        assert_eq!(
            answer["response"],
            json!({
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "allowed": true,
                "status": {},
                "warnings": ["not applied"]
            })
        );
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
