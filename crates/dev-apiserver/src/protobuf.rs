//! The Kubernetes protobuf wire format, for the few kinds clients insist on sending that way.
//!
//! `kubectl create namespace|configmap|secret` and Helm's Secret-backed release storage send
//! request bodies as [`CONTENT_TYPE`] and do not fall back to JSON after a 415. The server
//! stores JSON, so [`decode`] turns such a body into the JSON kube-apiserver would show for it,
//! and [`encode`] turns stored JSON back into protobuf for clients whose `Accept` header prefers
//! it. Only the kinds listed in [`supports`] are converted; everything else should be served as
//! JSON.
//!
//! # Envelope
//!
//! A body is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message: `typeMeta`
//! (`apiVersion`, `kind`), `raw` (the object's own protobuf bytes, which carry no type
//! information), `contentEncoding` and `contentType` (both empty in practice).
//!
//! # JSON shape
//!
//! [`decode`] produces what kube-apiserver's JSON encoder (Go `encoding/json` over the typed Go
//! object) prints, so a protobuf request becomes the JSON the same client would have sent had it
//! used JSON:
//!
//! - Scalars, slices and maps tagged `omitempty` are left out when empty or zero. Go pointer
//!   fields (`*bool`, `*string`, `*int32`, `*int64`, nested `*Struct`) are written whenever they
//!   are present on the wire, even when `false`, `""` or `0`.
//! - Fields without `omitempty` are always written, with the zero value when unset: for example
//!   `OwnerReference.uid`, `ServicePort.port`, `Event.reportingComponent`, and list `items`
//!   (`[]`, never `null`).
//! - Nested structs that are not pointers are always written, as Go does even with
//!   `omitempty`: `metadata`, Namespace `spec` and `status` (`{}` for a fresh namespace), Service
//!   `spec` and `status` (with `status.loadBalancer` `{}`), Event `involvedObject` and `source`.
//! - `metav1.Time` is RFC 3339 in UTC with seconds precision (`2026-11-30T10:00:00Z`); protobuf
//!   carries only its seconds. `metav1.MicroTime` (Event `eventTime`, `series.lastObservedTime`)
//!   has exactly six fractional digits (`2026-11-30T10:00:00.123456Z`). A zero time (an empty
//!   message on the wire) is omitted for `metadata.creationTimestamp` (tagged `omitzero` since
//!   Kubernetes 1.34) and for pointer fields (`deletionTimestamp`, managed fields' `time`), and
//!   is `null` for the other, non-pointer timestamps (Event `firstTimestamp`, `lastTimestamp`,
//!   `eventTime`, conditions' `lastTransitionTime`), as kube-apiserver prints them.
//! - `[]byte` values (Secret `data`, ConfigMap `binaryData`) are standard base64 with padding.
//!   Secret `stringData` is carried as-is in both directions.
//! - A zero `targetPort` (neither a port number nor a name) is omitted rather than printed as
//!   `0`, so the server's defaulting sees it as unset.
//! - `managedFields[].fieldsV1` is the raw JSON object it holds on the wire.
//!
//! [`encode`] reads that JSON back: `null` counts as absent, timestamps may use any RFC 3339
//! offset, and the `apiVersion`/`kind` of list items are ignored (typed lists carry none).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::authorization::v1 as authorization;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value};

use crate::gofmt;

/// The media type of Kubernetes protobuf bodies, as used in `Content-Type` and `Accept`.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf body: `k8s` and the encoding style 0 (a `runtime.Unknown`).
const MAGIC: [u8; 4] = *b"k8s\0";

/// `IntOrString.type` of a port number.
const INT_OR_STRING_INT: i64 = 0;
/// `IntOrString.type` of a port name.
const INT_OR_STRING_STRING: i64 = 1;

/// Why a body could not be decoded or an object could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with the 4-byte magic `k8s\0`.
    #[error(
        "body is not Kubernetes protobuf: it does not start with the magic prefix `k8s\\0`; \
         send JSON, or protobuf as written by a Kubernetes client"
    )]
    MissingMagic,
    /// The `runtime.Unknown` envelope after the magic does not parse.
    #[error("protobuf envelope (runtime.Unknown) is malformed: {0}")]
    MalformedEnvelope(#[source] prost::DecodeError),
    /// The envelope does not say which apiVersion and kind it carries.
    #[error("protobuf envelope does not name the object's apiVersion and kind; send JSON")]
    MissingTypeMeta,
    /// The envelope declares a content encoding (such as gzip) that is not undone here.
    #[error(
        "protobuf body uses content encoding {0:?}, which is not supported; \
         send it unencoded, or send JSON"
    )]
    UnsupportedContentEncoding(String),
    /// The body carries a kind this module cannot convert.
    #[error("protobuf body for {api_version}/{kind} is not supported; send JSON")]
    UnsupportedBody {
        /// The envelope's apiVersion, such as `apps/v1`.
        api_version: String,
        /// The envelope's kind, such as `Deployment`.
        kind: String,
    },
    /// The object's bytes do not parse as the kind the envelope declares.
    #[error("protobuf body for {api_version}/{kind} is malformed: {source}")]
    MalformedObject {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
        /// What the protobuf parser rejected.
        source: prost::DecodeError,
    },
    /// [`encode`] was given something other than a JSON object with `apiVersion` and `kind`.
    #[error(
        "object cannot be encoded as protobuf: it must be a JSON object with string \
         `apiVersion` and `kind` fields"
    )]
    MissingKind,
    /// [`encode`] was given a kind this module cannot convert.
    #[error("{api_version}/{kind} cannot be encoded as protobuf; serve it as JSON")]
    UnsupportedObject {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// A field holds a value that cannot be converted: a wrong JSON type, invalid base64, a
    /// malformed or out-of-range timestamp, or `fieldsV1` bytes that are not JSON.
    #[error("field `{field}` {problem}")]
    InvalidField {
        /// The field's path, such as `metadata.labels.app` or `items[1].data.token`.
        field: String,
        /// What is wrong with it, phrased to follow the field name.
        problem: String,
    },
}

type Result<T, E = ProtobufError> = std::result::Result<T, E>;

/// Whether objects of this apiVersion/kind (and their `...List` kinds) can be encoded and
/// decoded: core `v1` Namespace, ConfigMap, Secret, ServiceAccount, Service and Event, their
/// lists, and `v1` (or `meta.k8s.io/v1`) `Status`; and, decoded only, DeleteOptions,
/// TokenReview and the access reviews.
pub fn supports(api_version: &str, kind: &str) -> bool {
    Shape::of(api_version, kind).is_some()
}

/// Decodes a request body: the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
/// (typeMeta{apiVersion,kind}, raw = the object's protobuf bytes, contentEncoding, contentType).
/// Returns the object as kube-apiserver's JSON form, with "apiVersion" and "kind" set.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(&MAGIC)
        .ok_or(ProtobufError::MissingMagic)?;
    let unknown = Unknown::decode(envelope).map_err(ProtobufError::MalformedEnvelope)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta);
    }
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(ProtobufError::UnsupportedContentEncoding(encoding));
    }
    let Some(shape) = Shape::of(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedBody { api_version, kind });
    };
    let raw = unknown.raw.unwrap_or_default();
    let declared = Declared {
        api_version: &api_version,
        kind: &kind,
    };
    let fields = match shape {
        Shape::Object(Kind::Namespace) => namespace_to_json(declared.parse(&raw)?)?,
        Shape::Object(Kind::ConfigMap) => config_map_to_json(declared.parse(&raw)?)?,
        Shape::Object(Kind::Secret) => secret_to_json(declared.parse(&raw)?)?,
        Shape::Object(Kind::ServiceAccount) => service_account_to_json(declared.parse(&raw)?)?,
        Shape::Object(Kind::Service) => service_to_json(declared.parse(&raw)?)?,
        Shape::Object(Kind::Event) => event_to_json(declared.parse(&raw)?)?,
        Shape::List(Kind::Namespace) => {
            let list: core::NamespaceList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, namespace_to_json)?
        }
        Shape::List(Kind::ConfigMap) => {
            let list: core::ConfigMapList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, config_map_to_json)?
        }
        Shape::List(Kind::Secret) => {
            let list: core::SecretList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, secret_to_json)?
        }
        Shape::List(Kind::ServiceAccount) => {
            let list: core::ServiceAccountList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, service_account_to_json)?
        }
        Shape::List(Kind::Service) => {
            let list: core::ServiceList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, service_to_json)?
        }
        Shape::List(Kind::Event) => {
            let list: core::EventList = declared.parse(&raw)?;
            list_to_json(list.metadata, list.items, event_to_json)?
        }
        Shape::Status => status_to_json(declared.parse(&raw)?)?,
        Shape::DeleteOptions => delete_options_to_json(declared.parse(&raw)?),
        Shape::TokenReview => {
            let review: authentication::TokenReview = declared.parse(&raw)?;
            let spec = review.spec.unwrap_or_default();
            let mut fields = Map::new();
            if let Some(token) = spec.token {
                fields.insert("token".into(), Value::String(token));
            }
            if !spec.audiences.is_empty() {
                fields.insert(
                    "audiences".into(),
                    spec.audiences.into_iter().map(Value::String).collect(),
                );
            }
            let mut out = Map::new();
            out.insert("spec".into(), Value::Object(fields));
            out
        }
        Shape::SelfSubjectAccessReview => {
            let review: authorization::SelfSubjectAccessReview = declared.parse(&raw)?;
            let spec = review.spec.unwrap_or_default();
            let mut out = Map::new();
            out.insert(
                "spec".into(),
                access_review_spec(
                    spec.resource_attributes,
                    spec.non_resource_attributes,
                    Map::new(),
                ),
            );
            out
        }
        Shape::SubjectAccessReview => {
            let review: authorization::SubjectAccessReview = declared.parse(&raw)?;
            let spec = review.spec.unwrap_or_default();
            let mut subject = Map::new();
            if let Some(user) = spec.user {
                subject.insert("user".into(), Value::String(user));
            }
            if !spec.groups.is_empty() {
                subject.insert(
                    "groups".into(),
                    spec.groups.into_iter().map(Value::String).collect(),
                );
            }
            if let Some(uid) = spec.uid {
                subject.insert("uid".into(), Value::String(uid));
            }
            if !spec.extra.is_empty() {
                let extra: Map<String, Value> = spec
                    .extra
                    .into_iter()
                    .map(|(k, v)| (k, v.items.into_iter().map(Value::String).collect()))
                    .collect();
                subject.insert("extra".into(), Value::Object(extra));
            }
            let mut out = Map::new();
            out.insert(
                "spec".into(),
                access_review_spec(
                    spec.resource_attributes,
                    spec.non_resource_attributes,
                    subject,
                ),
            );
            out
        }
    };
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

/// Encodes a JSON object of a supported kind (including its List form and meta/v1 `Status`)
/// into the same envelope: the magic `k8s\0` and a `runtime.Unknown` naming its apiVersion and
/// kind.
pub fn encode(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let Some(map) = object.as_object() else {
        return Err(ProtobufError::MissingKind);
    };
    let type_field = |key| {
        map.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(api_version), Some(kind)) = (type_field("apiVersion"), type_field("kind")) else {
        return Err(ProtobufError::MissingKind);
    };
    let Some(shape) = Shape::of(api_version, kind) else {
        return Err(ProtobufError::UnsupportedObject {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        });
    };
    let object = Reader::root(map);
    let raw = match shape {
        Shape::Object(Kind::Namespace) => namespace_from_json(&object)?.encode_to_vec(),
        Shape::Object(Kind::ConfigMap) => config_map_from_json(&object)?.encode_to_vec(),
        Shape::Object(Kind::Secret) => secret_from_json(&object)?.encode_to_vec(),
        Shape::Object(Kind::ServiceAccount) => service_account_from_json(&object)?.encode_to_vec(),
        Shape::Object(Kind::Service) => service_from_json(&object)?.encode_to_vec(),
        Shape::Object(Kind::Event) => event_from_json(&object)?.encode_to_vec(),
        Shape::List(Kind::Namespace) => {
            let (metadata, items) = list_from_json(&object, namespace_from_json)?;
            core::NamespaceList { metadata, items }.encode_to_vec()
        }
        Shape::List(Kind::ConfigMap) => {
            let (metadata, items) = list_from_json(&object, config_map_from_json)?;
            core::ConfigMapList { metadata, items }.encode_to_vec()
        }
        Shape::List(Kind::Secret) => {
            let (metadata, items) = list_from_json(&object, secret_from_json)?;
            core::SecretList { metadata, items }.encode_to_vec()
        }
        Shape::List(Kind::ServiceAccount) => {
            let (metadata, items) = list_from_json(&object, service_account_from_json)?;
            core::ServiceAccountList { metadata, items }.encode_to_vec()
        }
        Shape::List(Kind::Service) => {
            let (metadata, items) = list_from_json(&object, service_from_json)?;
            core::ServiceList { metadata, items }.encode_to_vec()
        }
        Shape::List(Kind::Event) => {
            let (metadata, items) = list_from_json(&object, event_from_json)?;
            core::EventList { metadata, items }.encode_to_vec()
        }
        Shape::Status => status_from_json(&object)?.encode_to_vec(),
        Shape::DeleteOptions
        | Shape::TokenReview
        | Shape::SelfSubjectAccessReview
        | Shape::SubjectAccessReview => {
            return Err(ProtobufError::UnsupportedObject {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            });
        }
    };
    // Go's marshaller writes every field of the envelope, the empty strings included.
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    Ok(body)
}

/// The object kinds converted here, each also in its `...List` form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Namespace,
    ConfigMap,
    Secret,
    ServiceAccount,
    Service,
    Event,
}

/// What an apiVersion/kind pair names: an object, a list of objects, or a `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Object(Kind),
    List(Kind),
    Status,
    /// Sent as the body of a delete (Helm does); decoded only.
    DeleteOptions,
    /// Sent by client-go's typed clients (authenticating proxies); decoded only.
    TokenReview,
    /// `kubectl auth can-i` sends these; decoded only.
    SelfSubjectAccessReview,
    SubjectAccessReview,
}

impl Shape {
    fn of(api_version: &str, kind: &str) -> Option<Shape> {
        if kind == "Status" {
            return matches!(api_version, "v1" | "meta.k8s.io/v1").then_some(Shape::Status);
        }
        if api_version == "authentication.k8s.io/v1" {
            return (kind == "TokenReview").then_some(Shape::TokenReview);
        }
        if api_version == "authorization.k8s.io/v1" {
            return match kind {
                "SelfSubjectAccessReview" => Some(Shape::SelfSubjectAccessReview),
                "SubjectAccessReview" => Some(Shape::SubjectAccessReview),
                _ => None,
            };
        }
        if kind == "DeleteOptions" {
            return matches!(api_version, "v1" | "meta.k8s.io/v1").then_some(Shape::DeleteOptions);
        }
        if api_version != "v1" {
            return None;
        }
        let (base, is_list) = match kind.strip_suffix("List") {
            Some(base) => (base, true),
            None => (kind, false),
        };
        let base = match base {
            "Namespace" => Kind::Namespace,
            "ConfigMap" => Kind::ConfigMap,
            "Secret" => Kind::Secret,
            "ServiceAccount" => Kind::ServiceAccount,
            "Service" => Kind::Service,
            "Event" => Kind::Event,
            _ => return None,
        };
        Some(if is_list {
            Shape::List(base)
        } else {
            Shape::Object(base)
        })
    }
}

/// The apiVersion and kind an envelope declares, for parsing its raw bytes.
struct Declared<'a> {
    api_version: &'a str,
    kind: &'a str,
}

impl Declared<'_> {
    fn parse<M: Message + Default>(&self, raw: &[u8]) -> Result<M> {
        M::decode(raw).map_err(|source| ProtobufError::MalformedObject {
            api_version: self.api_version.to_owned(),
            kind: self.kind.to_owned(),
            source,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Protobuf -> JSON
// ---------------------------------------------------------------------------------------------

/// A JSON object being built from protobuf, one Go `encoding/json` rule per method.
#[derive(Default)]
struct Writer(Map<String, Value>);

impl Writer {
    /// A non-pointer scalar tagged `omitempty`: written only when set to a non-zero value.
    fn omitempty<T: Into<Value> + Default + PartialEq>(
        &mut self,
        key: &str,
        value: Option<T>,
    ) -> &mut Self {
        match value {
            Some(value) if value != T::default() => self.value(key, value),
            _ => self,
        }
    }

    /// A non-pointer scalar without `omitempty`: always written, as the zero value when unset.
    fn always<T: Into<Value> + Default>(&mut self, key: &str, value: Option<T>) -> &mut Self {
        self.value(key, value.unwrap_or_default())
    }

    /// A pointer (`*T`, `omitempty`): written whenever present, even when zero.
    fn pointer<T: Into<Value>>(&mut self, key: &str, value: Option<T>) -> &mut Self {
        match value {
            Some(value) => self.value(key, value),
            None => self,
        }
    }

    /// A non-pointer timestamp without `omitzero`: Go prints a zero time as `null`.
    fn time_or_null(&mut self, key: &str, value: Option<String>) -> &mut Self {
        self.value(key, value.map_or(Value::Null, Value::String))
    }

    /// A value written unconditionally, such as a nested non-pointer struct.
    fn value(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.0.insert(key.to_owned(), value.into());
        self
    }

    /// A slice tagged `omitempty`: written only when it has elements.
    fn list(&mut self, key: &str, values: Vec<impl Into<Value>>) -> &mut Self {
        if values.is_empty() {
            return self;
        }
        self.value(
            key,
            values.into_iter().map(Into::into).collect::<Vec<Value>>(),
        )
    }

    /// A `map[string]string` tagged `omitempty`.
    fn string_map(&mut self, key: &str, values: BTreeMap<String, String>) -> &mut Self {
        if values.is_empty() {
            return self;
        }
        let map = values
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect::<Map<_, _>>();
        self.value(key, map)
    }

    /// A `map[string][]byte` tagged `omitempty`; each value is base64 in JSON.
    fn bytes_map(&mut self, key: &str, values: BTreeMap<String, Vec<u8>>) -> &mut Self {
        if values.is_empty() {
            return self;
        }
        let map = values
            .into_iter()
            .map(|(k, v)| (k, Value::String(BASE64.encode(v))))
            .collect::<Map<_, _>>();
        self.value(key, map)
    }

    fn finish(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.0)
    }
}

/// Converts every element with a fallible converter.
fn convert_all<T>(
    items: Vec<T>,
    convert: fn(T) -> Result<Map<String, Value>>,
) -> Result<Vec<Value>> {
    items
        .into_iter()
        .map(|item| convert(item).map(Value::Object))
        .collect()
}

/// A `metav1.Time` as RFC 3339 with seconds precision in UTC, or `None` for Go's zero time.
/// The wire carries only seconds; like Kubernetes, any `nanos` are ignored.
fn time_to_json(field: &str, time: Option<meta::Time>) -> Result<Option<String>> {
    let Some(meta::Time { seconds, nanos }) = time else {
        return Ok(None);
    };
    if seconds.is_none() && nanos.is_none() {
        return Ok(None);
    }
    let seconds = seconds.unwrap_or_default();
    if seconds == gofmt::ZERO_TIME_UNIX {
        return Ok(None);
    }
    let timestamp = jiff::Timestamp::from_second(seconds).map_err(|e| out_of_range(field, e))?;
    Ok(Some(gofmt::time(timestamp)))
}

/// A `metav1.MicroTime` as RFC 3339 with six fractional digits in UTC, or `None` for Go's zero
/// time. Precision beyond microseconds is truncated, as Kubernetes does.
fn micro_time_to_json(field: &str, time: Option<meta::MicroTime>) -> Result<Option<String>> {
    let Some(meta::MicroTime { seconds, nanos }) = time else {
        return Ok(None);
    };
    if seconds.is_none() && nanos.is_none() {
        return Ok(None);
    }
    let seconds = seconds.unwrap_or_default();
    let nanos = nanos.unwrap_or_default();
    let nanos = nanos - nanos % 1_000;
    if seconds == gofmt::ZERO_TIME_UNIX && nanos == 0 {
        return Ok(None);
    }
    let timestamp = jiff::Timestamp::new(seconds, nanos).map_err(|e| out_of_range(field, e))?;
    Ok(Some(gofmt::micro_time(timestamp)))
}

fn out_of_range(field: &str, error: jiff::Error) -> ProtobufError {
    ProtobufError::InvalidField {
        field: field.to_owned(),
        problem: format!("holds a timestamp outside the supported range: {error}"),
    }
}

/// An `intstr.IntOrString`, or `None` when it is zero (the number 0 or the empty name).
fn int_or_string_to_json(value: Option<IntOrString>) -> Option<Value> {
    let IntOrString {
        r#type,
        int_val,
        str_val,
    } = value?;
    if r#type == Some(INT_OR_STRING_STRING) {
        str_val.filter(|s| !s.is_empty()).map(Value::String)
    } else {
        int_val.filter(|n| *n != 0).map(Value::from)
    }
}

fn object_meta_to_json(metadata: Option<meta::ObjectMeta>) -> Result<Map<String, Value>> {
    let meta::ObjectMeta {
        name,
        generate_name,
        namespace,
        self_link,
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        deletion_grace_period_seconds,
        labels,
        annotations,
        owner_references,
        finalizers,
        managed_fields,
    } = metadata.unwrap_or_default();
    let managed_fields = convert_all(managed_fields, managed_fields_entry_to_json)?;
    Ok(Writer::default()
        .omitempty("name", name)
        .omitempty("generateName", generate_name)
        .omitempty("namespace", namespace)
        .omitempty("selfLink", self_link)
        .omitempty("uid", uid)
        .omitempty("resourceVersion", resource_version)
        .omitempty("generation", generation)
        .pointer(
            "creationTimestamp",
            time_to_json("metadata.creationTimestamp", creation_timestamp)?,
        )
        .pointer(
            "deletionTimestamp",
            time_to_json("metadata.deletionTimestamp", deletion_timestamp)?,
        )
        .pointer("deletionGracePeriodSeconds", deletion_grace_period_seconds)
        .string_map("labels", labels)
        .string_map("annotations", annotations)
        .list(
            "ownerReferences",
            owner_references
                .into_iter()
                .map(owner_reference_to_json)
                .collect(),
        )
        .list("finalizers", finalizers)
        .list("managedFields", managed_fields)
        .finish())
}

fn owner_reference_to_json(reference: meta::OwnerReference) -> Map<String, Value> {
    let meta::OwnerReference {
        api_version,
        kind,
        name,
        uid,
        controller,
        block_owner_deletion,
    } = reference;
    Writer::default()
        .always("apiVersion", api_version)
        .always("kind", kind)
        .always("name", name)
        .always("uid", uid)
        .pointer("controller", controller)
        .pointer("blockOwnerDeletion", block_owner_deletion)
        .finish()
}

fn managed_fields_entry_to_json(entry: meta::ManagedFieldsEntry) -> Result<Map<String, Value>> {
    let meta::ManagedFieldsEntry {
        manager,
        operation,
        api_version,
        time,
        fields_type,
        fields_v1,
        subresource,
    } = entry;
    let fields_v1 = match fields_v1.and_then(|f| f.raw).filter(|raw| !raw.is_empty()) {
        Some(raw) => Some(serde_json::from_slice::<Value>(&raw).map_err(|e| {
            ProtobufError::InvalidField {
                field: "metadata.managedFields.fieldsV1".to_owned(),
                problem: format!("is not valid JSON: {e}"),
            }
        })?),
        None => None,
    };
    Ok(Writer::default()
        .omitempty("manager", manager)
        .omitempty("operation", operation)
        .omitempty("apiVersion", api_version)
        .pointer("time", time_to_json("metadata.managedFields.time", time)?)
        .omitempty("fieldsType", fields_type)
        .pointer("fieldsV1", fields_v1)
        .omitempty("subresource", subresource)
        .finish())
}

fn list_meta_to_json(metadata: Option<meta::ListMeta>) -> Map<String, Value> {
    let meta::ListMeta {
        self_link,
        resource_version,
        r#continue,
        remaining_item_count,
    } = metadata.unwrap_or_default();
    Writer::default()
        .omitempty("selfLink", self_link)
        .omitempty("resourceVersion", resource_version)
        .omitempty("continue", r#continue)
        .pointer("remainingItemCount", remaining_item_count)
        .finish()
}

/// A typed list: `metadata` (always) and `items` (always, `[]` when empty). Items carry no
/// apiVersion/kind, as in kube-apiserver's JSON.
fn list_to_json<T>(
    metadata: Option<meta::ListMeta>,
    items: Vec<T>,
    item: fn(T) -> Result<Map<String, Value>>,
) -> Result<Map<String, Value>> {
    Ok(Writer::default()
        .value("metadata", list_meta_to_json(metadata))
        .value("items", convert_all(items, item)?)
        .finish())
}

fn namespace_to_json(namespace: core::Namespace) -> Result<Map<String, Value>> {
    let core::Namespace {
        metadata,
        spec,
        status,
    } = namespace;
    let core::NamespaceSpec { finalizers } = spec.unwrap_or_default();
    let core::NamespaceStatus { phase, conditions } = status.unwrap_or_default();
    let status = Writer::default()
        .omitempty("phase", phase)
        .list(
            "conditions",
            convert_all(conditions, namespace_condition_to_json)?,
        )
        .finish();
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .value(
            "spec",
            Writer::default().list("finalizers", finalizers).finish(),
        )
        .value("status", status)
        .finish())
}

fn namespace_condition_to_json(condition: core::NamespaceCondition) -> Result<Map<String, Value>> {
    let core::NamespaceCondition {
        r#type,
        status,
        last_transition_time,
        reason,
        message,
    } = condition;
    let last_transition_time =
        time_to_json("status.conditions.lastTransitionTime", last_transition_time)?;
    Ok(Writer::default()
        .always("type", r#type)
        .always("status", status)
        .time_or_null("lastTransitionTime", last_transition_time)
        .omitempty("reason", reason)
        .omitempty("message", message)
        .finish())
}

fn config_map_to_json(config_map: core::ConfigMap) -> Result<Map<String, Value>> {
    let core::ConfigMap {
        metadata,
        immutable,
        data,
        binary_data,
    } = config_map;
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .pointer("immutable", immutable)
        .string_map("data", data)
        .bytes_map("binaryData", binary_data)
        .finish())
}

fn secret_to_json(secret: core::Secret) -> Result<Map<String, Value>> {
    let core::Secret {
        metadata,
        immutable,
        data,
        string_data,
        r#type,
    } = secret;
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .pointer("immutable", immutable)
        .bytes_map("data", data)
        .string_map("stringData", string_data)
        .omitempty("type", r#type)
        .finish())
}

fn service_account_to_json(account: core::ServiceAccount) -> Result<Map<String, Value>> {
    let core::ServiceAccount {
        metadata,
        secrets,
        image_pull_secrets,
        automount_service_account_token,
    } = account;
    let image_pull_secrets = image_pull_secrets
        .into_iter()
        .map(|core::LocalObjectReference { name }| {
            Writer::default().omitempty("name", name).finish()
        })
        .collect();
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .list(
            "secrets",
            secrets.into_iter().map(object_reference_to_json).collect(),
        )
        .list("imagePullSecrets", image_pull_secrets)
        .pointer(
            "automountServiceAccountToken",
            automount_service_account_token,
        )
        .finish())
}

fn object_reference_to_json(reference: core::ObjectReference) -> Map<String, Value> {
    let core::ObjectReference {
        kind,
        namespace,
        name,
        uid,
        api_version,
        resource_version,
        field_path,
    } = reference;
    Writer::default()
        .omitempty("kind", kind)
        .omitempty("namespace", namespace)
        .omitempty("name", name)
        .omitempty("uid", uid)
        .omitempty("apiVersion", api_version)
        .omitempty("resourceVersion", resource_version)
        .omitempty("fieldPath", field_path)
        .finish()
}

fn service_to_json(service: core::Service) -> Result<Map<String, Value>> {
    let core::Service {
        metadata,
        spec,
        status,
    } = service;
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .value("spec", service_spec_to_json(spec.unwrap_or_default()))
        .value(
            "status",
            service_status_to_json(status.unwrap_or_default())?,
        )
        .finish())
}

fn service_spec_to_json(spec: core::ServiceSpec) -> Map<String, Value> {
    let core::ServiceSpec {
        ports,
        selector,
        cluster_ip,
        cluster_ips,
        r#type,
        external_ips,
        session_affinity,
        load_balancer_ip,
        load_balancer_source_ranges,
        external_name,
        external_traffic_policy,
        health_check_node_port,
        publish_not_ready_addresses,
        session_affinity_config,
        ip_families,
        ip_family_policy,
        allocate_load_balancer_node_ports,
        load_balancer_class,
        internal_traffic_policy,
        traffic_distribution,
    } = spec;
    let session_affinity_config =
        session_affinity_config.map(|core::SessionAffinityConfig { client_ip }| {
            let client_ip = client_ip.map(|core::ClientIpConfig { timeout_seconds }| {
                Writer::default()
                    .pointer("timeoutSeconds", timeout_seconds)
                    .finish()
            });
            Writer::default().pointer("clientIP", client_ip).finish()
        });
    Writer::default()
        .list(
            "ports",
            ports.into_iter().map(service_port_to_json).collect(),
        )
        .string_map("selector", selector)
        .omitempty("clusterIP", cluster_ip)
        .list("clusterIPs", cluster_ips)
        .omitempty("type", r#type)
        .list("externalIPs", external_ips)
        .omitempty("sessionAffinity", session_affinity)
        .omitempty("loadBalancerIP", load_balancer_ip)
        .list("loadBalancerSourceRanges", load_balancer_source_ranges)
        .omitempty("externalName", external_name)
        .omitempty("externalTrafficPolicy", external_traffic_policy)
        .omitempty("healthCheckNodePort", health_check_node_port)
        .omitempty("publishNotReadyAddresses", publish_not_ready_addresses)
        .pointer("sessionAffinityConfig", session_affinity_config)
        .list("ipFamilies", ip_families)
        .pointer("ipFamilyPolicy", ip_family_policy)
        .pointer(
            "allocateLoadBalancerNodePorts",
            allocate_load_balancer_node_ports,
        )
        .pointer("loadBalancerClass", load_balancer_class)
        .pointer("internalTrafficPolicy", internal_traffic_policy)
        .pointer("trafficDistribution", traffic_distribution)
        .finish()
}

fn service_port_to_json(port: core::ServicePort) -> Map<String, Value> {
    let core::ServicePort {
        name,
        protocol,
        app_protocol,
        port,
        target_port,
        node_port,
    } = port;
    Writer::default()
        .omitempty("name", name)
        .omitempty("protocol", protocol)
        .pointer("appProtocol", app_protocol)
        .always("port", port)
        .pointer("targetPort", int_or_string_to_json(target_port))
        .omitempty("nodePort", node_port)
        .finish()
}

fn service_status_to_json(status: core::ServiceStatus) -> Result<Map<String, Value>> {
    let core::ServiceStatus {
        load_balancer,
        conditions,
    } = status;
    let core::LoadBalancerStatus { ingress } = load_balancer.unwrap_or_default();
    let load_balancer = Writer::default()
        .list(
            "ingress",
            ingress
                .into_iter()
                .map(load_balancer_ingress_to_json)
                .collect(),
        )
        .finish();
    Ok(Writer::default()
        .value("loadBalancer", load_balancer)
        .list("conditions", convert_all(conditions, condition_to_json)?)
        .finish())
}

fn load_balancer_ingress_to_json(ingress: core::LoadBalancerIngress) -> Map<String, Value> {
    let core::LoadBalancerIngress {
        ip,
        hostname,
        ip_mode,
        ports,
    } = ingress;
    let ports = ports
        .into_iter()
        .map(
            |core::PortStatus {
                 port,
                 protocol,
                 error,
             }| {
                Writer::default()
                    .always("port", port)
                    .always("protocol", protocol)
                    .pointer("error", error)
                    .finish()
            },
        )
        .collect();
    Writer::default()
        .omitempty("ip", ip)
        .omitempty("hostname", hostname)
        .pointer("ipMode", ip_mode)
        .list("ports", ports)
        .finish()
}

fn condition_to_json(condition: meta::Condition) -> Result<Map<String, Value>> {
    let meta::Condition {
        r#type,
        status,
        observed_generation,
        last_transition_time,
        reason,
        message,
    } = condition;
    let last_transition_time =
        time_to_json("status.conditions.lastTransitionTime", last_transition_time)?;
    Ok(Writer::default()
        .always("type", r#type)
        .always("status", status)
        .omitempty("observedGeneration", observed_generation)
        .time_or_null("lastTransitionTime", last_transition_time)
        .always("reason", reason)
        .always("message", message)
        .finish())
}

fn event_to_json(event: core::Event) -> Result<Map<String, Value>> {
    let core::Event {
        metadata,
        involved_object,
        reason,
        message,
        source,
        first_timestamp,
        last_timestamp,
        count,
        r#type,
        event_time,
        series,
        action,
        related,
        reporting_component,
        reporting_instance,
    } = event;
    let core::EventSource { component, host } = source.unwrap_or_default();
    let source = Writer::default()
        .omitempty("component", component)
        .omitempty("host", host)
        .finish();
    let series = match series {
        Some(core::EventSeries {
            count,
            last_observed_time,
        }) => {
            let last_observed_time =
                micro_time_to_json("series.lastObservedTime", last_observed_time)?;
            Some(
                Writer::default()
                    .omitempty("count", count)
                    .time_or_null("lastObservedTime", last_observed_time)
                    .finish(),
            )
        }
        None => None,
    };
    Ok(Writer::default()
        .value("metadata", object_meta_to_json(metadata)?)
        .value(
            "involvedObject",
            object_reference_to_json(involved_object.unwrap_or_default()),
        )
        .omitempty("reason", reason)
        .omitempty("message", message)
        .value("source", source)
        .time_or_null(
            "firstTimestamp",
            time_to_json("firstTimestamp", first_timestamp)?,
        )
        .time_or_null(
            "lastTimestamp",
            time_to_json("lastTimestamp", last_timestamp)?,
        )
        .omitempty("count", count)
        .omitempty("type", r#type)
        .time_or_null("eventTime", micro_time_to_json("eventTime", event_time)?)
        .pointer("series", series)
        .omitempty("action", action)
        .pointer("related", related.map(object_reference_to_json))
        .always("reportingComponent", reporting_component)
        .always("reportingInstance", reporting_instance)
        .finish())
}

/// An access review's spec: what is asked, and (for SubjectAccessReview)
/// about whom.
fn access_review_spec(
    resource: Option<authorization::ResourceAttributes>,
    non_resource: Option<authorization::NonResourceAttributes>,
    mut spec: Map<String, Value>,
) -> Value {
    if let Some(r) = resource {
        let mut attributes = Map::new();
        for (key, value) in [
            ("namespace", r.namespace),
            ("verb", r.verb),
            ("group", r.group),
            ("version", r.version),
            ("resource", r.resource),
            ("subresource", r.subresource),
            ("name", r.name),
        ] {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                attributes.insert(key.into(), Value::String(value));
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(attributes));
    }
    if let Some(n) = non_resource {
        let mut attributes = Map::new();
        for (key, value) in [("path", n.path), ("verb", n.verb)] {
            if let Some(value) = value {
                attributes.insert(key.into(), Value::String(value));
            }
        }
        spec.insert("nonResourceAttributes".into(), Value::Object(attributes));
    }
    Value::Object(spec)
}

fn delete_options_to_json(options: meta::DeleteOptions) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(grace) = options.grace_period_seconds {
        out.insert("gracePeriodSeconds".into(), Value::from(grace));
    }
    if let Some(preconditions) = options.preconditions {
        let mut p = Map::new();
        if let Some(uid) = preconditions.uid {
            p.insert("uid".into(), Value::String(uid));
        }
        if let Some(rv) = preconditions.resource_version {
            p.insert("resourceVersion".into(), Value::String(rv));
        }
        out.insert("preconditions".into(), Value::Object(p));
    }
    if let Some(orphan) = options.orphan_dependents {
        out.insert("orphanDependents".into(), Value::Bool(orphan));
    }
    if let Some(policy) = options.propagation_policy {
        out.insert("propagationPolicy".into(), Value::String(policy));
    }
    if !options.dry_run.is_empty() {
        out.insert(
            "dryRun".into(),
            options.dry_run.into_iter().map(Value::String).collect(),
        );
    }
    out
}

fn status_to_json(status: meta::Status) -> Result<Map<String, Value>> {
    let meta::Status {
        metadata,
        status,
        message,
        reason,
        details,
        code,
    } = status;
    let details = details.map(
        |meta::StatusDetails {
             name,
             group,
             kind,
             uid,
             causes,
             retry_after_seconds,
         }| {
            let causes = causes
                .into_iter()
                .map(
                    |meta::StatusCause {
                         reason,
                         message,
                         field,
                     }| {
                        Writer::default()
                            .omitempty("reason", reason)
                            .omitempty("message", message)
                            .omitempty("field", field)
                            .finish()
                    },
                )
                .collect();
            Writer::default()
                .omitempty("name", name)
                .omitempty("group", group)
                .omitempty("kind", kind)
                .omitempty("uid", uid)
                .list("causes", causes)
                .omitempty("retryAfterSeconds", retry_after_seconds)
                .finish()
        },
    );
    Ok(Writer::default()
        .value("metadata", list_meta_to_json(metadata))
        .omitempty("status", status)
        .omitempty("message", message)
        .omitempty("reason", reason)
        .pointer("details", details)
        .omitempty("code", code)
        .finish())
}

// ---------------------------------------------------------------------------------------------
// JSON -> protobuf
// ---------------------------------------------------------------------------------------------

/// A JSON object being converted to protobuf, remembering its path for error messages. Absent
/// fields and `null` both read as unset, as in Go.
struct Reader<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Reader<'a> {
    fn root(map: &'a Map<String, Value>) -> Self {
        Reader {
            map,
            path: String::new(),
        }
    }

    fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn invalid(&self, key: &str, problem: impl Into<String>) -> ProtobufError {
        ProtobufError::InvalidField {
            field: self.path_of(key),
            problem: problem.into(),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        self.get(key)
            .map(|value| {
                value
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.invalid(key, "must be a string"))
            })
            .transpose()
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)
            .map(|value| {
                value
                    .as_bool()
                    .ok_or_else(|| self.invalid(key, "must be true or false"))
            })
            .transpose()
    }

    fn int64(&self, key: &str) -> Result<Option<i64>> {
        self.get(key)
            .map(|value| {
                value
                    .as_i64()
                    .ok_or_else(|| self.invalid(key, "must be a 64-bit integer"))
            })
            .transpose()
    }

    fn int32(&self, key: &str) -> Result<Option<i32>> {
        self.get(key)
            .map(|value| {
                value
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| self.invalid(key, "must be a 32-bit integer"))
            })
            .transpose()
    }

    fn strings(&self, key: &str) -> Result<Vec<String>> {
        let Some(value) = self.get(key) else {
            return Ok(Vec::new());
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.invalid(key, "must be an array of strings"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.invalid(&format!("{key}[{i}]"), "must be a string"))
            })
            .collect()
    }

    /// A JSON object of strings; `null` values read as `""`, as Go decodes them.
    fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>> {
        self.map_of(key, |entry, value| match value {
            Value::Null => Ok(String::new()),
            Value::String(text) => Ok(text.clone()),
            _ => Err(self.invalid(&format!("{key}.{entry}"), "must be a string")),
        })
    }

    /// A JSON object of base64 strings; `null` values read as empty bytes, as Go decodes them.
    fn bytes_map(&self, key: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        self.map_of(key, |entry, value| match value {
            Value::Null => Ok(Vec::new()),
            Value::String(text) => BASE64.decode(text).map_err(|e| {
                self.invalid(
                    &format!("{key}.{entry}"),
                    format!("is not valid base64: {e}"),
                )
            }),
            _ => Err(self.invalid(&format!("{key}.{entry}"), "must be a base64 string")),
        })
    }

    fn map_of<T>(
        &self,
        key: &str,
        convert: impl Fn(&str, &Value) -> Result<T>,
    ) -> Result<BTreeMap<String, T>> {
        let Some(value) = self.get(key) else {
            return Ok(BTreeMap::new());
        };
        let map = value
            .as_object()
            .ok_or_else(|| self.invalid(key, "must be a JSON object"))?;
        map.iter()
            .map(|(entry, value)| Ok((entry.clone(), convert(entry, value)?)))
            .collect()
    }

    /// A nested message, converted by `convert` when present.
    fn object<T>(
        &self,
        key: &str,
        convert: impl Fn(&Reader<'a>) -> Result<T>,
    ) -> Result<Option<T>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let map = value
            .as_object()
            .ok_or_else(|| self.invalid(key, "must be a JSON object"))?;
        convert(&Reader {
            map,
            path: self.path_of(key),
        })
        .map(Some)
    }

    /// A repeated message, each element converted by `convert`.
    fn objects<T>(&self, key: &str, convert: impl Fn(&Reader<'a>) -> Result<T>) -> Result<Vec<T>> {
        let Some(value) = self.get(key) else {
            return Ok(Vec::new());
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.invalid(key, "must be an array of objects"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let element = format!("{key}[{i}]");
                let map = item
                    .as_object()
                    .ok_or_else(|| self.invalid(&element, "must be a JSON object"))?;
                convert(&Reader {
                    map,
                    path: self.path_of(&element),
                })
            })
            .collect()
    }

    /// An RFC 3339 timestamp as (Unix seconds, non-negative nanoseconds), or `None` when absent
    /// or Go's zero time.
    fn timestamp(&self, key: &str) -> Result<Option<(i64, i32)>> {
        let Some(text) = self.string(key)? else {
            return Ok(None);
        };
        let timestamp: jiff::Timestamp = text.parse().map_err(|e| {
            self.invalid(
                key,
                format!("must be an RFC 3339 timestamp such as 2026-11-30T10:00:00Z: {e}"),
            )
        })?;
        let (mut seconds, mut nanos) = (timestamp.as_second(), timestamp.subsec_nanosecond());
        if nanos < 0 {
            seconds -= 1;
            nanos += 1_000_000_000;
        }
        if seconds == gofmt::ZERO_TIME_UNIX && nanos == 0 {
            return Ok(None);
        }
        Ok(Some((seconds, nanos)))
    }

    /// A `metav1.Time`: whole seconds only, as Go's marshaller writes it.
    fn time(&self, key: &str) -> Result<Option<meta::Time>> {
        Ok(self.timestamp(key)?.map(|(seconds, _)| meta::Time {
            seconds: Some(seconds),
            nanos: Some(0),
        }))
    }

    /// A `metav1.MicroTime`: seconds and nanoseconds truncated to microseconds.
    fn micro_time(&self, key: &str) -> Result<Option<meta::MicroTime>> {
        Ok(self
            .timestamp(key)?
            .map(|(seconds, nanos)| meta::MicroTime {
                seconds: Some(seconds),
                nanos: Some(nanos - nanos % 1_000),
            }))
    }

    fn int_or_string(&self, key: &str) -> Result<Option<IntOrString>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(name)) => Ok(Some(IntOrString {
                r#type: Some(INT_OR_STRING_STRING),
                int_val: Some(0),
                str_val: Some(name.clone()),
            })),
            Some(value) => {
                let number = value
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| self.invalid(key, "must be a 32-bit integer or a string"))?;
                Ok(Some(IntOrString {
                    r#type: Some(INT_OR_STRING_INT),
                    int_val: Some(number),
                    str_val: Some(String::new()),
                }))
            }
        }
    }

    /// Any JSON value, as the raw JSON bytes `fieldsV1` carries.
    fn raw_json(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.get(key)
            .map(|value| {
                serde_json::to_vec(value)
                    .map_err(|e| self.invalid(key, format!("cannot be serialized: {e}")))
            })
            .transpose()
    }
}

fn object_meta_from_json(object: &Reader<'_>) -> Result<meta::ObjectMeta> {
    Ok(meta::ObjectMeta {
        name: object.string("name")?,
        generate_name: object.string("generateName")?,
        namespace: object.string("namespace")?,
        self_link: object.string("selfLink")?,
        uid: object.string("uid")?,
        resource_version: object.string("resourceVersion")?,
        generation: object.int64("generation")?,
        creation_timestamp: object.time("creationTimestamp")?,
        deletion_timestamp: object.time("deletionTimestamp")?,
        deletion_grace_period_seconds: object.int64("deletionGracePeriodSeconds")?,
        labels: object.string_map("labels")?,
        annotations: object.string_map("annotations")?,
        owner_references: object.objects("ownerReferences", owner_reference_from_json)?,
        finalizers: object.strings("finalizers")?,
        managed_fields: object.objects("managedFields", managed_fields_entry_from_json)?,
    })
}

fn owner_reference_from_json(object: &Reader<'_>) -> Result<meta::OwnerReference> {
    Ok(meta::OwnerReference {
        api_version: object.string("apiVersion")?,
        kind: object.string("kind")?,
        name: object.string("name")?,
        uid: object.string("uid")?,
        controller: object.boolean("controller")?,
        block_owner_deletion: object.boolean("blockOwnerDeletion")?,
    })
}

fn managed_fields_entry_from_json(object: &Reader<'_>) -> Result<meta::ManagedFieldsEntry> {
    Ok(meta::ManagedFieldsEntry {
        manager: object.string("manager")?,
        operation: object.string("operation")?,
        api_version: object.string("apiVersion")?,
        time: object.time("time")?,
        fields_type: object.string("fieldsType")?,
        fields_v1: object
            .raw_json("fieldsV1")?
            .map(|raw| meta::FieldsV1 { raw: Some(raw) }),
        subresource: object.string("subresource")?,
    })
}

fn list_meta_from_json(object: &Reader<'_>) -> Result<meta::ListMeta> {
    Ok(meta::ListMeta {
        self_link: object.string("selfLink")?,
        resource_version: object.string("resourceVersion")?,
        r#continue: object.string("continue")?,
        remaining_item_count: object.int64("remainingItemCount")?,
    })
}

fn list_from_json<T>(
    object: &Reader<'_>,
    item: fn(&Reader<'_>) -> Result<T>,
) -> Result<(Option<meta::ListMeta>, Vec<T>)> {
    Ok((
        object.object("metadata", list_meta_from_json)?,
        object.objects("items", item)?,
    ))
}

fn namespace_from_json(object: &Reader<'_>) -> Result<core::Namespace> {
    Ok(core::Namespace {
        metadata: object.object("metadata", object_meta_from_json)?,
        spec: object.object("spec", |spec| {
            Ok(core::NamespaceSpec {
                finalizers: spec.strings("finalizers")?,
            })
        })?,
        status: object.object("status", |status| {
            Ok(core::NamespaceStatus {
                phase: status.string("phase")?,
                conditions: status.objects("conditions", namespace_condition_from_json)?,
            })
        })?,
    })
}

fn namespace_condition_from_json(object: &Reader<'_>) -> Result<core::NamespaceCondition> {
    Ok(core::NamespaceCondition {
        r#type: object.string("type")?,
        status: object.string("status")?,
        last_transition_time: object.time("lastTransitionTime")?,
        reason: object.string("reason")?,
        message: object.string("message")?,
    })
}

fn config_map_from_json(object: &Reader<'_>) -> Result<core::ConfigMap> {
    Ok(core::ConfigMap {
        metadata: object.object("metadata", object_meta_from_json)?,
        immutable: object.boolean("immutable")?,
        data: object.string_map("data")?,
        binary_data: object.bytes_map("binaryData")?,
    })
}

fn secret_from_json(object: &Reader<'_>) -> Result<core::Secret> {
    Ok(core::Secret {
        metadata: object.object("metadata", object_meta_from_json)?,
        immutable: object.boolean("immutable")?,
        data: object.bytes_map("data")?,
        string_data: object.string_map("stringData")?,
        r#type: object.string("type")?,
    })
}

fn service_account_from_json(object: &Reader<'_>) -> Result<core::ServiceAccount> {
    Ok(core::ServiceAccount {
        metadata: object.object("metadata", object_meta_from_json)?,
        secrets: object.objects("secrets", object_reference_from_json)?,
        image_pull_secrets: object.objects("imagePullSecrets", |reference| {
            Ok(core::LocalObjectReference {
                name: reference.string("name")?,
            })
        })?,
        automount_service_account_token: object.boolean("automountServiceAccountToken")?,
    })
}

fn object_reference_from_json(object: &Reader<'_>) -> Result<core::ObjectReference> {
    Ok(core::ObjectReference {
        kind: object.string("kind")?,
        namespace: object.string("namespace")?,
        name: object.string("name")?,
        uid: object.string("uid")?,
        api_version: object.string("apiVersion")?,
        resource_version: object.string("resourceVersion")?,
        field_path: object.string("fieldPath")?,
    })
}

fn service_from_json(object: &Reader<'_>) -> Result<core::Service> {
    Ok(core::Service {
        metadata: object.object("metadata", object_meta_from_json)?,
        spec: object.object("spec", service_spec_from_json)?,
        status: object.object("status", service_status_from_json)?,
    })
}

fn service_spec_from_json(object: &Reader<'_>) -> Result<core::ServiceSpec> {
    Ok(core::ServiceSpec {
        ports: object.objects("ports", service_port_from_json)?,
        selector: object.string_map("selector")?,
        cluster_ip: object.string("clusterIP")?,
        cluster_ips: object.strings("clusterIPs")?,
        r#type: object.string("type")?,
        external_ips: object.strings("externalIPs")?,
        session_affinity: object.string("sessionAffinity")?,
        load_balancer_ip: object.string("loadBalancerIP")?,
        load_balancer_source_ranges: object.strings("loadBalancerSourceRanges")?,
        external_name: object.string("externalName")?,
        external_traffic_policy: object.string("externalTrafficPolicy")?,
        health_check_node_port: object.int32("healthCheckNodePort")?,
        publish_not_ready_addresses: object.boolean("publishNotReadyAddresses")?,
        session_affinity_config: object.object("sessionAffinityConfig", |config| {
            Ok(core::SessionAffinityConfig {
                client_ip: config.object("clientIP", |client_ip| {
                    Ok(core::ClientIpConfig {
                        timeout_seconds: client_ip.int32("timeoutSeconds")?,
                    })
                })?,
            })
        })?,
        ip_families: object.strings("ipFamilies")?,
        ip_family_policy: object.string("ipFamilyPolicy")?,
        allocate_load_balancer_node_ports: object.boolean("allocateLoadBalancerNodePorts")?,
        load_balancer_class: object.string("loadBalancerClass")?,
        internal_traffic_policy: object.string("internalTrafficPolicy")?,
        traffic_distribution: object.string("trafficDistribution")?,
    })
}

fn service_port_from_json(object: &Reader<'_>) -> Result<core::ServicePort> {
    Ok(core::ServicePort {
        name: object.string("name")?,
        protocol: object.string("protocol")?,
        app_protocol: object.string("appProtocol")?,
        port: object.int32("port")?,
        target_port: object.int_or_string("targetPort")?,
        node_port: object.int32("nodePort")?,
    })
}

fn service_status_from_json(object: &Reader<'_>) -> Result<core::ServiceStatus> {
    Ok(core::ServiceStatus {
        load_balancer: object.object("loadBalancer", |load_balancer| {
            Ok(core::LoadBalancerStatus {
                ingress: load_balancer.objects("ingress", load_balancer_ingress_from_json)?,
            })
        })?,
        conditions: object.objects("conditions", condition_from_json)?,
    })
}

fn load_balancer_ingress_from_json(object: &Reader<'_>) -> Result<core::LoadBalancerIngress> {
    Ok(core::LoadBalancerIngress {
        ip: object.string("ip")?,
        hostname: object.string("hostname")?,
        ip_mode: object.string("ipMode")?,
        ports: object.objects("ports", |port| {
            Ok(core::PortStatus {
                port: port.int32("port")?,
                protocol: port.string("protocol")?,
                error: port.string("error")?,
            })
        })?,
    })
}

fn condition_from_json(object: &Reader<'_>) -> Result<meta::Condition> {
    Ok(meta::Condition {
        r#type: object.string("type")?,
        status: object.string("status")?,
        observed_generation: object.int64("observedGeneration")?,
        last_transition_time: object.time("lastTransitionTime")?,
        reason: object.string("reason")?,
        message: object.string("message")?,
    })
}

fn event_from_json(object: &Reader<'_>) -> Result<core::Event> {
    Ok(core::Event {
        metadata: object.object("metadata", object_meta_from_json)?,
        involved_object: object.object("involvedObject", object_reference_from_json)?,
        reason: object.string("reason")?,
        message: object.string("message")?,
        source: object.object("source", |source| {
            Ok(core::EventSource {
                component: source.string("component")?,
                host: source.string("host")?,
            })
        })?,
        first_timestamp: object.time("firstTimestamp")?,
        last_timestamp: object.time("lastTimestamp")?,
        count: object.int32("count")?,
        r#type: object.string("type")?,
        event_time: object.micro_time("eventTime")?,
        series: object.object("series", |series| {
            Ok(core::EventSeries {
                count: series.int32("count")?,
                last_observed_time: series.micro_time("lastObservedTime")?,
            })
        })?,
        action: object.string("action")?,
        related: object.object("related", object_reference_from_json)?,
        reporting_component: object.string("reportingComponent")?,
        reporting_instance: object.string("reportingInstance")?,
    })
}

fn status_from_json(object: &Reader<'_>) -> Result<meta::Status> {
    Ok(meta::Status {
        metadata: object.object("metadata", list_meta_from_json)?,
        status: object.string("status")?,
        message: object.string("message")?,
        reason: object.string("reason")?,
        details: object.object("details", |details| {
            Ok(meta::StatusDetails {
                name: details.string("name")?,
                group: details.string("group")?,
                kind: details.string("kind")?,
                uid: details.string("uid")?,
                causes: details.objects("causes", |cause| {
                    Ok(meta::StatusCause {
                        reason: cause.string("reason")?,
                        message: cause.string("message")?,
                        field: cause.string("field")?,
                    })
                })?,
                retry_after_seconds: details.int32("retryAfterSeconds")?,
            })
        })?,
        code: object.int32("code")?,
    })
}

#[cfg(test)]
mod tests;
