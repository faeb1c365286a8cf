//! The Kubernetes protobuf wire format, for every built-in kind.
//!
//! kubectl, client-go and Helm send the objects they build as [`CONTENT_TYPE`] and do not fall
//! back to JSON after a 415. The server stores JSON, so [`decode`] turns such a body into the
//! JSON kube-apiserver would show for it, and [`encode`] turns stored JSON back into protobuf
//! for clients whose `Accept` header prefers it. Both walk the generated schema
//! ([`crate::schema`]): field numbers and types from k8s-pb, JSON names from k8s-openapi.
//!
//! # Envelope
//!
//! A body is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message: `typeMeta`
//! (`apiVersion`, `kind`), `raw` (the object's own protobuf bytes, which carry no type
//! information), `contentEncoding` and `contentType` (both empty in practice).
//!
//! # JSON shape
//!
//! Go's marshaller writes every non-pointer field, zero or not, so [`decode`] writes what Go's
//! `encoding/json` would print of the decoded object:
//!
//! - a zero string, number or boolean is left out (`omitempty`), unless Go always prints the
//!   field (k8s-openapi has it as required) or the field is a pointer whose zero means
//!   something (the schema's `KEEP_ZERO`: `replicas: 0`, `automountServiceAccountToken:
//!   false`);
//! - a nested message is written whenever it is on the wire (`{}` when empty), as Go prints
//!   structs; empty lists and maps are left out, except a list's `items` (`[]`);
//! - `metav1.Time` is RFC 3339 in UTC with whole seconds; `metav1.MicroTime` has six
//!   fractional digits; a zero time is left out, or `null` where Go always prints it;
//! - `[]byte` is standard base64; `FieldsV1`, `RawExtension` and apiextensions `JSON` are the
//!   JSON they carry; `IntOrString` a number or a string; `Quantity` its string; a named
//!   slice (`ExtraValue`) its items; `json:",inline"` structs (a `Volume`'s source) are merged
//!   into their parent.
//!
//! [`encode`] reads that JSON back: `null` counts as absent, timestamps may use any RFC 3339
//! offset, unknown fields are ignored, and a list's items may carry `apiVersion` and `kind`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message as _;
use serde_json::{Map, Value};

use crate::gofmt;
use crate::schema::{self, Card, Field, Message, Shape, Ty};

/// The media type of Kubernetes protobuf bodies, as used in `Content-Type` and `Accept`.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf body: `k8s` and the encoding style 0 (a `runtime.Unknown`).
const MAGIC: [u8; 4] = *b"k8s\0";

/// `IntOrString.type` of a name.
const INT_OR_STRING_STRING: u64 = 1;

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
    /// The body carries a kind that is not built in (custom resources are JSON only).
    #[error("protobuf body for {api_version}/{kind} is not supported; send JSON")]
    UnsupportedBody {
        /// The envelope's apiVersion, such as `example.com/v1`.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The object's bytes do not parse as the kind the envelope declares.
    #[error("protobuf body for {api_version}/{kind} is malformed at `{field}`: {problem}")]
    MalformedObject {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
        /// Where the bytes stopped making sense, such as `spec.template`.
        field: String,
        /// What is wrong with them.
        problem: String,
    },
    /// [`encode`] was given something other than a JSON object with `apiVersion` and `kind`.
    #[error(
        "object cannot be encoded as protobuf: it must be a JSON object with string \
         `apiVersion` and `kind` fields"
    )]
    MissingKind,
    /// [`encode`] was given a kind that has no protobuf form.
    #[error("{api_version}/{kind} cannot be encoded as protobuf; serve it as JSON")]
    UnsupportedObject {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// A field holds a value that cannot be converted: a wrong JSON type, invalid base64, a
    /// malformed or out-of-range timestamp, or JSON bytes that are not JSON.
    #[error("field `{field}` {problem}")]
    InvalidField {
        /// The field's path, such as `metadata.labels.app` or `items[1].data.token`.
        field: String,
        /// What is wrong with it, phrased to follow the field name.
        problem: String,
    },
}

type Result<T, E = ProtobufError> = std::result::Result<T, E>;

/// Whether objects of this apiVersion/kind (a built-in kind, its list, a review, or `v1` /
/// `meta.k8s.io/v1` `Status` and `DeleteOptions`) have a protobuf form.
pub fn supports(api_version: &str, kind: &str) -> bool {
    schema::message_of(api_version, kind).is_some()
}

/// Decodes a request body: the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message.
/// Returns the object as kube-apiserver's JSON form, with "apiVersion" and "kind" set.
pub fn decode(body: &[u8]) -> Result<Value> {
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
    let Some(message) = schema::message_of(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedBody { api_version, kind });
    };
    let raw = unknown.raw.unwrap_or_default();
    let fields = Decoder {
        path: String::new(),
    }
    .message(message, &raw)
    .map_err(|(field, problem)| ProtobufError::MalformedObject {
        api_version: api_version.clone(),
        kind: kind.clone(),
        field,
        problem,
    })?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Ok(Value::Object(object))
}

/// Encodes a JSON object of a built-in kind (or its list, or a `Status`) into the same
/// envelope: the magic `k8s\0` and a `runtime.Unknown` naming its apiVersion and kind.
pub fn encode(object: &Value) -> Result<Vec<u8>> {
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
    let Some(message) = schema::message_of(api_version, kind) else {
        return Err(ProtobufError::UnsupportedObject {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        });
    };
    let mut raw = Vec::new();
    encode_struct(message, map, "", &mut raw)?;
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

// ---------------------------------------------------------------------------------------------
// The wire
// ---------------------------------------------------------------------------------------------

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH_DELIMITED: u8 = 2;
const FIXED32: u8 = 5;

/// One field as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// A field that cannot be read: its number, once known, and why.
type WireError = (Option<u32>, String);

/// Reads the fields of one message.
struct WireReader<'a>(&'a [u8]);

impl<'a> WireReader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .0
                .split_first()
                .ok_or_else(|| "the bytes end inside a number".to_owned())?;
            self.0 = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a number is longer than ten bytes".to_owned())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "a field says it has {n} bytes, but {} are left",
                self.0.len()
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// The next field, or why it cannot be read (with its number, once known).
    fn next(&mut self) -> Result<Option<(u32, Wire<'a>)>, WireError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint().map_err(|e| (None, e))?;
        let tag = u32::try_from(key >> 3)
            .map_err(|_| (None, "a field number is too large".to_owned()))?;
        self.value(key)
            .map(|wire| Some((tag, wire)))
            .map_err(|e| (Some(tag), e))
    }

    fn value(&mut self, key: u64) -> Result<Wire<'a>, String> {
        Ok(match (key & 7) as u8 {
            VARINT => Wire::Varint(self.varint()?),
            FIXED64 => Wire::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().expect("took eight bytes"),
            )),
            LENGTH_DELIMITED => {
                let n = usize::try_from(self.varint()?)
                    .map_err(|_| "a length is too large".to_owned())?;
                Wire::Bytes(self.take(n)?)
            }
            FIXED32 => {
                self.take(4)?;
                Wire::Fixed32
            }
            other => return Err(format!("wire type {other} is not protobuf")),
        })
    }
}

fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_key(tag: u32, wire: u8, out: &mut Vec<u8>) {
    put_varint(u64::from(tag) << 3 | u64::from(wire), out);
}

fn put_bytes(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    put_key(tag, LENGTH_DELIMITED, out);
    put_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

// ---------------------------------------------------------------------------------------------
// Protobuf -> JSON
// ---------------------------------------------------------------------------------------------

/// What went wrong where: the field path and the problem.
type Malformed = (String, String);

/// Decodes messages, keeping the path for errors.
struct Decoder {
    path: String,
}

impl Decoder {
    fn at(&self, key: &str) -> Decoder {
        Decoder {
            path: if self.path.is_empty() {
                key.to_owned()
            } else if key.is_empty() {
                self.path.clone()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }

    fn fail<T>(&self, problem: impl Into<String>) -> Result<T, Malformed> {
        Err((self.path.clone(), problem.into()))
    }

    /// The fields of a message in wire order; an error names the field it stopped in.
    fn read<'a>(
        &self,
        message: Option<&Message>,
        bytes: &'a [u8],
    ) -> Result<Vec<(u32, Wire<'a>)>, Malformed> {
        let mut reader = WireReader(bytes);
        let mut fields = Vec::new();
        loop {
            match reader.next() {
                Ok(Some(field)) => fields.push(field),
                Ok(None) => return Ok(fields),
                Err((tag, problem)) => {
                    let name = tag
                        .and_then(|t| message?.field_by_tag(t))
                        .map_or("", |f| f.json);
                    return self.at(name).fail(problem);
                }
            }
        }
    }

    /// A message's JSON form (an object, or the value of a special shape).
    fn message(&self, message: &Message, bytes: &[u8]) -> Result<Value, Malformed> {
        let wire = self.read(Some(message), bytes)?;
        let first = |tag: u32| wire.iter().rev().find(|(t, _)| *t == tag).map(|(_, w)| w);
        let varint = |tag| match first(tag) {
            Some(Wire::Varint(v)) => *v,
            _ => 0,
        };
        let bytes_of = |tag| match first(tag) {
            Some(Wire::Bytes(b)) => *b,
            _ => &[][..],
        };
        let text = |tag| String::from_utf8_lossy(bytes_of(tag)).into_owned();
        Ok(match message.shape {
            Shape::Struct => Value::Object(self.fields(message, &wire)?),
            Shape::Time => match time(varint(1) as i64, 0, false) {
                Some(t) => Value::String(t),
                None => Value::Null,
            },
            Shape::MicroTime => match time(varint(1) as i64, varint(2) as i64 as i32, true) {
                Some(t) => Value::String(t),
                None => Value::Null,
            },
            Shape::RawJson => {
                let raw = bytes_of(1);
                if raw.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(raw)
                        .or_else(|e| self.fail(format!("does not hold JSON: {e}")))?
                }
            }
            Shape::IntOrString if varint(1) == INT_OR_STRING_STRING => Value::String(text(3)),
            Shape::IntOrString => Value::from(varint(2) as i64 as i32),
            Shape::Quantity => Value::String(text(1)),
            Shape::Items => Value::Array(
                wire.iter()
                    .filter_map(|(tag, w)| match (tag, w) {
                        (1, Wire::Bytes(b)) => {
                            Some(Value::String(String::from_utf8_lossy(b).into()))
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            Shape::SchemaOrArray | Shape::SchemaOrBool | Shape::SchemaOrStringArray => {
                self.schema_or(message, &wire)?
            }
        })
    }

    /// A struct's fields, by Go's `encoding/json` rules (see the module documentation).
    fn fields(
        &self,
        message: &Message,
        wire: &[(u32, Wire<'_>)],
    ) -> Result<Map<String, Value>, Malformed> {
        let mut out = Map::new();
        for field in message.fields {
            let values: Vec<&Wire<'_>> = wire
                .iter()
                .filter(|(tag, _)| *tag == field.tag)
                .map(|(_, w)| w)
                .collect();
            let here = self.at(field.json);
            if field.inline() {
                let nested = field.message().expect("inline fields hold messages");
                let bytes = match values.last() {
                    Some(Wire::Bytes(b)) => *b,
                    _ => &[][..],
                };
                if let Value::Object(fields) = here.message(nested, bytes)? {
                    out.extend(fields);
                }
                continue;
            }
            let value = match field.card {
                Card::One => match values.last() {
                    Some(wire) => here.single(field, wire)?,
                    None if field.required() => zero(field),
                    None => None,
                },
                Card::Repeated => {
                    let mut items = Vec::new();
                    for (i, wire) in values.iter().enumerate() {
                        let item = here.at(&format!("[{i}]"));
                        items.extend(item.packed_or_one(field, wire)?);
                    }
                    (!items.is_empty() || field.required()).then_some(Value::Array(items))
                }
                Card::Map => {
                    let mut map = Map::new();
                    for wire in values {
                        let Wire::Bytes(entry) = wire else {
                            return here.fail("a map entry is not a message");
                        };
                        let entry = here.read(None, entry)?;
                        let key = entry.iter().rev().find_map(|(tag, w)| match (tag, w) {
                            (1, Wire::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                            _ => None,
                        });
                        let key = key.unwrap_or_default();
                        let value = entry
                            .iter()
                            .rev()
                            .find(|(tag, _)| *tag == 2)
                            .map(|(_, w)| w);
                        let entry_path = here.at(&key);
                        let value = match value {
                            Some(w) => entry_path.value(field, w)?,
                            None => zero(field).unwrap_or(Value::Null),
                        };
                        map.insert(key, value);
                    }
                    (!map.is_empty()).then_some(Value::Object(map))
                }
            };
            if let Some(value) = value {
                out.insert(field.json.to_owned(), value);
            }
        }
        Ok(out)
    }

    /// A single field's value, or None where Go's `omitempty` leaves it out.
    fn single(&self, field: &Field, wire: &Wire<'_>) -> Result<Option<Value>, Malformed> {
        let value = self.value(field, wire)?;
        let is_zero = match &value {
            Value::Null => true,
            Value::String(s) => s.is_empty() && !matches!(field.ty, Ty::Message(_)),
            Value::Number(n) => n.as_f64() == Some(0.0) && !matches!(field.ty, Ty::Message(_)),
            Value::Bool(b) => !b,
            _ => false,
        };
        Ok(if is_zero && !field.required() && !field.keeps_zero() {
            None
        } else {
            Some(value)
        })
    }

    /// The elements of a repeated field's wire value: numbers may come packed.
    fn packed_or_one(&self, field: &Field, wire: &Wire<'_>) -> Result<Vec<Value>, Malformed> {
        match (field.ty, wire) {
            (Ty::Int32 | Ty::Int64 | Ty::Bool, Wire::Bytes(packed)) => {
                let mut reader = WireReader(packed);
                let mut items = Vec::new();
                while !reader.0.is_empty() {
                    let v = reader.varint().or_else(|e| self.fail(e))?;
                    items.push(self.value(field, &Wire::Varint(v))?);
                }
                Ok(items)
            }
            _ => Ok(vec![self.value(field, wire)?]),
        }
    }

    /// The JSON of one value of a field's type.
    fn value(&self, field: &Field, wire: &Wire<'_>) -> Result<Value, Malformed> {
        Ok(match (field.ty, wire) {
            (Ty::String, Wire::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
            (Ty::Bytes, Wire::Bytes(b)) => Value::String(BASE64.encode(b)),
            (Ty::Bool, Wire::Varint(v)) => Value::Bool(*v != 0),
            (Ty::Int32, Wire::Varint(v)) => Value::from(*v as i64 as i32),
            (Ty::Int64, Wire::Varint(v)) => Value::from(*v as i64),
            (Ty::Double, Wire::Fixed64(v)) => {
                serde_json::Number::from_f64(f64::from_bits(*v)).map_or(Value::Null, Value::Number)
            }
            (Ty::Message(name), Wire::Bytes(b)) => {
                let message = schema::message(name).expect("generated types are complete");
                self.message(message, b)?
            }
            _ => return self.fail("has the wrong wire type for its field"),
        })
    }

    /// The apiextensions unions: a schema, or an array / boolean / string list.
    fn schema_or(&self, message: &Message, wire: &[(u32, Wire<'_>)]) -> Result<Value, Malformed> {
        let fields = self.fields(message, wire)?;
        let (schema, other) = match message.shape {
            Shape::SchemaOrArray => ("schema", "jSONSchemas"),
            Shape::SchemaOrBool => ("schema", "allows"),
            _ => ("schema", "property"),
        };
        Ok(match (fields.get(schema), fields.get(other)) {
            (Some(s), _) if !s.is_null() => s.clone(),
            (_, Some(o)) => o.clone(),
            // `allows: false` is left out as a zero; the union's JSON is then `false`.
            _ if message.shape == Shape::SchemaOrBool => Value::Bool(false),
            _ => Value::Array(Vec::new()),
        })
    }
}

/// What Go prints for a field that is not on the wire but always printed.
fn zero(field: &Field) -> Option<Value> {
    Some(match field.ty {
        Ty::String | Ty::Bytes => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::Int32 | Ty::Int64 | Ty::Double => Value::from(0),
        Ty::Message(name) => match schema::message(name)?.shape {
            Shape::Struct => Value::Object(Map::new()),
            Shape::Time | Shape::MicroTime => Value::Null,
            _ => return None,
        },
    })
}

/// A time as kube-apiserver prints it, or None for Go's zero time.
fn time(seconds: i64, nanos: i32, micro: bool) -> Option<String> {
    if nanos == 0 && (seconds == 0 || seconds == gofmt::ZERO_TIME_UNIX) {
        return None;
    }
    let nanos = if micro { nanos - nanos % 1_000 } else { 0 };
    let timestamp = jiff::Timestamp::new(seconds, nanos).ok()?;
    Some(if micro {
        gofmt::micro_time(timestamp)
    } else {
        gofmt::time(timestamp)
    })
}

// ---------------------------------------------------------------------------------------------
// JSON -> protobuf
// ---------------------------------------------------------------------------------------------

fn path_of(path: &str, key: &str) -> String {
    match (path.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (_, true) => path.to_owned(),
        _ if key.starts_with('[') => format!("{path}{key}"),
        _ => format!("{path}.{key}"),
    }
}

fn invalid(path: &str, problem: impl Into<String>) -> ProtobufError {
    ProtobufError::InvalidField {
        field: path.to_owned(),
        problem: problem.into(),
    }
}

/// Writes a struct's fields from a JSON object, in field-number order.
fn encode_struct(
    message: &Message,
    object: &Map<String, Value>,
    path: &str,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut fields: Vec<&Field> = message.fields.iter().collect();
    fields.sort_by_key(|f| f.tag);
    for field in fields {
        if field.inline() {
            let nested = field.message().expect("inline fields hold messages");
            let mut bytes = Vec::new();
            encode_struct(nested, object, path, &mut bytes)?;
            put_bytes(field.tag, &bytes, out);
            continue;
        }
        let Some(value) = object.get(field.json).filter(|v| !v.is_null()) else {
            continue;
        };
        let here = path_of(path, field.json);
        match field.card {
            Card::One => encode_value(field, value, &here, out)?,
            Card::Repeated => {
                let items = value
                    .as_array()
                    .ok_or_else(|| invalid(&here, "must be an array"))?;
                for (i, item) in items.iter().enumerate() {
                    encode_value(field, item, &format!("{here}[{i}]"), out)?;
                }
            }
            Card::Map => {
                let map = value
                    .as_object()
                    .ok_or_else(|| invalid(&here, "must be an object"))?;
                for (key, item) in map {
                    let mut entry = Vec::new();
                    put_bytes(1, key.as_bytes(), &mut entry);
                    if !item.is_null() {
                        encode_value_as(field, 2, item, &path_of(&here, key), &mut entry)?;
                    }
                    put_bytes(field.tag, &entry, out);
                }
            }
        }
    }
    Ok(())
}

fn encode_value(field: &Field, value: &Value, path: &str, out: &mut Vec<u8>) -> Result<()> {
    encode_value_as(field, field.tag, value, path, out)
}

/// Writes one value of `field`'s type under field number `tag`.
fn encode_value_as(
    field: &Field,
    tag: u32,
    value: &Value,
    path: &str,
    out: &mut Vec<u8>,
) -> Result<()> {
    match field.ty {
        Ty::String => {
            let s = value
                .as_str()
                .ok_or_else(|| invalid(path, "must be a string"))?;
            put_bytes(tag, s.as_bytes(), out);
        }
        Ty::Bytes => {
            let s = value
                .as_str()
                .ok_or_else(|| invalid(path, "must be a base64 string"))?;
            let bytes = BASE64
                .decode(s)
                .map_err(|e| invalid(path, format!("is not valid base64: {e}")))?;
            put_bytes(tag, &bytes, out);
        }
        Ty::Bool => {
            let b = value
                .as_bool()
                .ok_or_else(|| invalid(path, "must be true or false"))?;
            put_key(tag, VARINT, out);
            put_varint(u64::from(b), out);
        }
        Ty::Int32 | Ty::Int64 => {
            let n = value
                .as_i64()
                .filter(|n| field.ty == Ty::Int64 || i32::try_from(*n).is_ok())
                .ok_or_else(|| invalid(path, "must be an integer in range"))?;
            put_key(tag, VARINT, out);
            put_varint(n as u64, out);
        }
        Ty::Double => {
            let f = value
                .as_f64()
                .ok_or_else(|| invalid(path, "must be a number"))?;
            put_key(tag, FIXED64, out);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Ty::Message(name) => {
            let message = schema::message(name).expect("generated types are complete");
            let mut bytes = Vec::new();
            encode_message(message, value, path, &mut bytes)?;
            put_bytes(tag, &bytes, out);
        }
    }
    Ok(())
}

/// Writes a message's bytes from its JSON form.
fn encode_message(message: &Message, value: &Value, path: &str, out: &mut Vec<u8>) -> Result<()> {
    let varint = |tag: u32, v: u64, out: &mut Vec<u8>| {
        put_key(tag, VARINT, out);
        put_varint(v, out);
    };
    match message.shape {
        Shape::Struct => {
            let object = value
                .as_object()
                .ok_or_else(|| invalid(path, "must be an object"))?;
            encode_struct(message, object, path, out)?;
        }
        Shape::Time | Shape::MicroTime => {
            let text = value
                .as_str()
                .ok_or_else(|| invalid(path, "must be an RFC 3339 time"))?;
            let ts: jiff::Timestamp = text
                .parse()
                .map_err(|e| invalid(path, format!("is not an RFC 3339 time: {e}")))?;
            // Go writes both, and drops the nanoseconds of a Time.
            let nanos = match message.shape {
                Shape::MicroTime => ts.subsec_nanosecond(),
                _ => 0,
            };
            varint(1, ts.as_second() as u64, out);
            varint(2, i64::from(nanos) as u64, out);
        }
        Shape::RawJson => put_bytes(1, gofmt::json(value).as_bytes(), out),
        Shape::IntOrString => match value {
            Value::String(s) => {
                varint(1, INT_OR_STRING_STRING, out);
                put_bytes(3, s.as_bytes(), out);
            }
            _ => {
                let n = value
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| invalid(path, "must be an integer or a string"))?;
                varint(1, 0, out);
                varint(2, n as u64, out);
            }
        },
        Shape::Quantity => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(invalid(path, "must be a quantity")),
            };
            put_bytes(1, text.as_bytes(), out);
        }
        Shape::Items => {
            let items = value
                .as_array()
                .ok_or_else(|| invalid(path, "must be an array"))?;
            for (i, item) in items.iter().enumerate() {
                let s = item
                    .as_str()
                    .ok_or_else(|| invalid(&format!("{path}[{i}]"), "must be a string"))?;
                put_bytes(1, s.as_bytes(), out);
            }
        }
        Shape::SchemaOrArray | Shape::SchemaOrBool | Shape::SchemaOrStringArray => {
            let key = match (message.shape, value) {
                (_, Value::Object(_)) => "schema",
                (Shape::SchemaOrArray, _) => "jSONSchemas",
                (Shape::SchemaOrBool, _) => "allows",
                _ => "property",
            };
            let mut object = Map::new();
            object.insert(key.to_owned(), value.clone());
            encode_struct(message, &object, path, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
