//! The built-in kinds of Kubernetes 1.33, generated from k8s-pb (protobuf
//! field numbers and types, in Go's struct field order) joined with
//! k8s-openapi (JSON names, which fields Go always writes, the served
//! resources): see `generate.rs`, whose test keeps `generated.rs` current.
//!
//! Everything that must know a built-in type's shape reads it here: the
//! protobuf codec, the Go-ordered JSON writer, pruning, discovery and
//! OpenAPI.

#[rustfmt::skip]
mod generated;
#[cfg(test)]
mod generate;

pub use generated::{MESSAGES, RESOURCES};

/// A protobuf message: a Go struct of the API, or one of apimachinery's
/// types with a JSON form of its own.
#[derive(Debug)]
pub struct Message {
    /// The OpenAPI definition name, e.g. `io.k8s.api.batch.v1.JobSpec`.
    pub name: &'static str,
    pub shape: Shape,
    /// In Go's struct field order.
    pub fields: &'static [Field],
}

/// How a message reads in JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A JSON object of its fields.
    Struct,
    /// `metav1.Time`: RFC 3339 with whole seconds.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with six fractional digits.
    MicroTime,
    /// `metav1.FieldsV1`, `runtime.RawExtension`, apiextensions `JSON`: JSON
    /// carried as bytes.
    RawJson,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `resource.Quantity`: its string.
    Quantity,
    /// A named slice type (`ExtraValue`, `Verbs`): its `items` as an array.
    Items,
    /// apiextensions `JSONSchemaPropsOrArray`: a schema or an array of them.
    SchemaOrArray,
    /// apiextensions `JSONSchemaPropsOrBool`: a schema or a boolean.
    SchemaOrBool,
    /// apiextensions `JSONSchemaPropsOrStringArray`: a schema or strings.
    SchemaOrStringArray,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// The JSON name (the protobuf name of the special shapes' fields).
    pub json: &'static str,
    pub tag: u32,
    pub ty: Ty,
    pub card: Card,
    /// `REQUIRED`, `KEEP_ZERO` and `INLINE` bits.
    pub flags: u8,
}

/// Go writes the field even when empty (no `omitempty`): k8s-openapi has it
/// as required.
pub const REQUIRED: u8 = 1;
/// A number or boolean whose zero differs from unset (a Go pointer, by its
/// documentation: "a pointer to distinguish", "Defaults to 1", "Defaults to
/// true"): a zero on the wire is kept.
pub const KEEP_ZERO: u8 = 2;
/// Go's `json:",inline"`: the field's message's fields are written into
/// the parent object (`RuleWithOperations` in a webhook's rules, a
/// `VolumeSource` in a `Volume`); its `json` is empty.
pub const INLINE: u8 = 4;

impl Field {
    pub fn required(&self) -> bool {
        self.flags & REQUIRED != 0
    }

    pub fn inline(&self) -> bool {
        self.flags & INLINE != 0
    }

    pub fn keeps_zero(&self) -> bool {
        self.flags & KEEP_ZERO != 0
    }

    /// The message of a message-typed field (or map value, or element).
    pub fn message(&self) -> Option<&'static Message> {
        match self.ty {
            Ty::Message(name) => message(name),
            _ => None,
        }
    }
}

/// A field's protobuf scalar type, or the message it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    Message(&'static str),
}

/// One value, a list, or a map with string keys (of the field's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Card {
    One,
    Repeated,
    Map,
}

/// A served built-in resource.
#[derive(Debug)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Its message, e.g. `io.k8s.api.batch.v1.Job`.
    pub message: &'static str,
    /// Its list kind's message; None for the create-only reviews.
    pub list: Option<&'static str>,
    /// Adds its k8s-openapi type's schema, and those it refers to, to an
    /// OpenAPI v3 generator's definitions (named as `message`).
    pub openapi: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl Resource {
    pub fn message(&self) -> &'static Message {
        message(self.message).expect("the generated resources name generated messages")
    }
}

/// The message with this OpenAPI definition name.
pub fn message(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}

/// The message of a served kind (or its list, or a review), by apiVersion
/// and kind; `meta.k8s.io/v1` kinds (Status, DeleteOptions) too.
pub fn message_of(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if matches!(group, "" | "meta.k8s.io") && matches!(kind, "Status" | "DeleteOptions") {
        return message(&format!("io.k8s.apimachinery.pkg.apis.meta.v1.{kind}"));
    }
    RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .find_map(|r| {
            if r.kind == kind {
                Some(r.message)
            } else if kind.strip_suffix("List") == Some(r.kind) {
                r.list
            } else {
                None
            }
        })
        .and_then(message)
}

/// Adds a k8s-openapi type's schema to `generator`'s definitions.
pub fn openapi_of<T: schemars::JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    generator.subschema_for::<T>()
}

impl Message {
    /// The field with this JSON name.
    pub fn field(&self, json: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.json == json)
    }

    /// The field with this protobuf number.
    pub fn field_by_tag(&self, tag: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.tag == tag)
    }
}
