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

use serde_json::Value;

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
/// and kind; `meta.k8s.io/v1` kinds (Status, DeleteOptions) and the
/// `autoscaling/v1` Scale too.
pub fn message_of(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if matches!(group, "" | "meta.k8s.io") && matches!(kind, "Status" | "DeleteOptions") {
        return message(&format!("io.k8s.apimachinery.pkg.apis.meta.v1.{kind}"));
    }
    if api_version == "autoscaling/v1" && kind == "Scale" {
        return message("io.k8s.api.autoscaling.v1.Scale");
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

/// Drops the fields a built-in object's kind does not have, as
/// kube-apiserver's decoder does, and returns their paths
/// (`spec.template.spec.containers[0].bogus`), sorted. Objects of other
/// kinds are left alone.
pub fn prune(object: &mut Value) -> Vec<String> {
    let message = message_of(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    );
    let mut pruned = Vec::new();
    if let Some(message) = message {
        prune_value(object, message, "", true, &mut pruned);
    }
    pruned.sort();
    pruned
}

fn prune_value(
    value: &mut Value,
    message: &'static Message,
    path: &str,
    top: bool,
    out: &mut Vec<String>,
) {
    let (Value::Object(map), Shape::Struct) = (value, message.shape) else {
        return;
    };
    let fields = message.json_fields();
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    map.retain(|key, _| {
        let known = fields.iter().any(|f| f.json == key)
            || top && matches!(key.as_str(), "apiVersion" | "kind");
        if !known {
            out.push(at(key));
        }
        known
    });
    for field in fields {
        let (Some(value), Some(nested)) = (map.get_mut(field.json), field.message()) else {
            continue;
        };
        let here = at(field.json);
        match (field.card, value) {
            (Card::Repeated, Value::Array(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item, nested, &format!("{here}[{i}]"), false, out);
                }
            }
            (Card::Map, Value::Object(entries)) => {
                for (key, item) in entries.iter_mut() {
                    prune_value(item, nested, &format!("{here}.{key}"), false, out);
                }
            }
            (_, value) => prune_value(value, nested, &here, false, out),
        }
    }
}

/// Adds a k8s-openapi type's schema to `generator`'s definitions.
pub fn openapi_of<T: schemars::JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    generator.subschema_for::<T>()
}

impl Message {
    /// The fields of its JSON object in Go's order, those of `json:",inline"`
    /// structs in their place.
    pub fn json_fields(&'static self) -> Vec<&'static Field> {
        let mut out = Vec::new();
        for field in self.fields {
            match field.message().filter(|_| field.inline()) {
                Some(nested) => out.extend(nested.json_fields()),
                None => out.push(field),
            }
        }
        out
    }

    /// The field with this JSON name.
    pub fn field(&self, json: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.json == json)
    }

    /// The field with this protobuf number.
    pub fn field_by_tag(&self, tag: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.tag == tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_built_in_object_loses_the_fields_its_kind_lacks_and_they_are_named() {
        let mut deployment = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"any-key": "kept"}, "colour": "red"},
            "spec": {
                "replicas": 1,
                "template": {"spec": {
                    "containers": [{"name": "web", "image": "nginx", "bogus": true}],
                    "volumes": [{"name": "config", "configMap": {"name": "settings"}, "extra": 1}]
                }}
            }
        });
        assert_eq!(
            prune(&mut deployment),
            [
                "metadata.colour",
                "spec.template.spec.containers[0].bogus",
                "spec.template.spec.volumes[0].extra"
            ]
        );
        assert_eq!(
            deployment,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"any-key": "kept"}},
                "spec": {
                    "replicas": 1,
                    "template": {"spec": {
                        "containers": [{"name": "web", "image": "nginx"}],
                        "volumes": [{"name": "config", "configMap": {"name": "settings"}}]
                    }}
                }
            })
        );
        let mut widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "x": 1});
        assert!(prune(&mut widget).is_empty());
    }

    #[test]
    fn kinds_lists_reviews_and_status_have_messages_by_api_version() {
        let name = |api_version, kind| message_of(api_version, kind).map(|m| m.name);
        assert_eq!(
            name("batch/v1", "CronJobList"),
            Some("io.k8s.api.batch.v1.CronJobList")
        );
        assert_eq!(
            name("v1", "Status"),
            Some("io.k8s.apimachinery.pkg.apis.meta.v1.Status")
        );
        assert_eq!(
            name("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
            Some("io.k8s.api.authorization.v1.SelfSubjectAccessReview")
        );
        assert_eq!(
            name("autoscaling/v2", "HorizontalPodAutoscaler"),
            Some("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler")
        );
        assert_eq!(name("apps/v1beta1", "Deployment"), None);
    }
}
