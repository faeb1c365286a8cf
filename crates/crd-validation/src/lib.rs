//! Validates, prunes and defaults JSON objects against a CustomResourceDefinition
//! version's `openAPIV3Schema` the way kube-apiserver does for custom resources.
//!
//! kube-apiserver handles a custom resource in this order, and so should callers:
//! [`Schema::prune`] (structural pruning, then dropping non-nullable nulls that have
//! no default), [`Schema::apply_defaults`], then [`Schema::validate`]. Error texts are
//! those of kube-apiserver (k8s.io/apimachinery `field.Error`, kube-openapi's
//! `validate` package and apiextensions-apiserver's conversion between the two), see
//! [`FieldError`]. [`Schema::validate_rules`] then evaluates the
//! `x-kubernetes-validations` (CEL) rules; see the `cel` module for what it supports.
#![forbid(unsafe_code)]

mod cel;
mod gofmt;
mod validate;

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// Fields kube-apiserver never prunes at the resource root or in an embedded resource.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Why a schema could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A schema node is not a JSON object.
    #[error("{path}: schema must be an object")]
    NotAnObject {
        /// Where in the schema, e.g. `openAPIV3Schema.properties[spec]`.
        path: String,
    },
    /// `type` is not one of the OpenAPI types.
    #[error("{path}: unknown type {name:?}")]
    UnknownType {
        /// Where in the schema.
        path: String,
        /// The unknown type name.
        name: String,
    },
    /// A keyword has a value of the wrong shape (or an invalid `pattern`).
    #[error("{path}.{keyword}: {reason}")]
    InvalidKeyword {
        /// Where in the schema.
        path: String,
        /// The keyword, e.g. `minLength`.
        keyword: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An `x-kubernetes-validations` rule kube-apiserver would not accept, e.g. one
    /// whose CEL expression does not compile.
    #[error("{path}.x-kubernetes-validations[{index}].{field}: {reason}")]
    InvalidRule {
        /// Where in the schema.
        path: String,
        /// The rule's index in `x-kubernetes-validations`.
        index: usize,
        /// The rule's member at fault: `rule`, `messageExpression` or `reason`.
        field: &'static str,
        /// What is wrong with it, e.g. `compilation failed: ERROR: <input>:1:5: ...`.
        reason: String,
    },
}

/// A parsed `openAPIV3Schema`, ready to prune, default and validate objects.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
}

#[derive(Debug, Clone)]
enum Additional {
    Allows(bool),
    Schema(Box<Node>),
}

#[derive(Debug, Clone, Default)]
struct Node {
    /// Empty means any type; `x-kubernetes-int-or-string` gives `["integer", "string"]`.
    types: Vec<&'static str>,
    /// The `type` keyword as written (`""` if absent), which CEL rule errors print.
    type_name: &'static str,
    int_or_string: bool,
    nullable: bool,
    format: Option<String>,
    properties: BTreeMap<String, Node>,
    required: Vec<String>,
    items: Option<Box<Node>>,
    additional: Option<Additional>,
    enumeration: Option<Vec<Value>>,
    /// `default: null` counts as no default, as in kube-apiserver.
    default: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<(String, Regex)>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    preserve_unknown: bool,
    embedded: bool,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    /// The compiled `x-kubernetes-validations` rules of this node.
    rules: Vec<cel::Rule>,
    /// Whether this node or a node below it has rules.
    has_rules: bool,
}

impl Node {
    /// The schema of a map value that is not a declared property, if there is one.
    fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema kube-apiserver uses for field `k`: its property, else additionalProperties.
    fn field_schema(&self, k: &str) -> Option<&Node> {
        self.properties.get(k).or_else(|| self.additional_schema())
    }
}

fn invalid(path: &str, keyword: &'static str, reason: &str) -> Error {
    Error::InvalidKeyword {
        path: path.into(),
        keyword,
        reason: reason.into(),
    }
}

/// The value of keyword `k` converted by `f`, or an error if it has the wrong shape.
fn get<'a, T>(
    o: &'a Map<String, Value>,
    path: &str,
    k: &'static str,
    f: impl FnOnce(&'a Value) -> Option<T>,
) -> Result<Option<T>, Error> {
    o.get(k)
        .map(|v| f(v).ok_or_else(|| invalid(path, k, "has the wrong type")))
        .transpose()
}

fn strings(o: &Map<String, Value>, path: &str, k: &'static str) -> Result<Vec<String>, Error> {
    let all = get(o, path, k, Value::as_array)?.into_iter().flatten();
    all.map(|v| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(path, k, "must hold strings"))
    })
    .collect()
}

fn schemas(o: &Map<String, Value>, path: &str, k: &'static str) -> Result<Vec<Node>, Error> {
    let all = get(o, path, k, Value::as_array)?.into_iter().flatten();
    all.enumerate()
        .map(|(i, s)| parse(s, &format!("{path}.{k}[{i}]")))
        .collect()
}

fn parse(v: &Value, path: &str) -> Result<Node, Error> {
    let o = v
        .as_object()
        .ok_or_else(|| Error::NotAnObject { path: path.into() })?;
    let uint = |k| get(o, path, k, Value::as_u64);
    let num = |k| get(o, path, k, Value::as_f64);
    let flag = |k| Ok::<_, Error>(get(o, path, k, Value::as_bool)?.unwrap_or(false));
    let text = |k| get(o, path, k, |v| v.as_str().map(str::to_owned));
    let child = |v, name: &str| parse(v, &format!("{path}.{name}")).map(Box::new);
    let mut n = Node::default();
    if let Some(t) = text("type")? {
        let known = ["object", "array", "string", "integer", "number", "boolean"];
        let unknown = || Error::UnknownType {
            path: path.into(),
            name: t.clone(),
        };
        n.type_name = known.into_iter().find(|k| *k == t).ok_or_else(unknown)?;
        n.types = vec![n.type_name];
    }
    if flag("x-kubernetes-int-or-string")? {
        n.types = vec!["integer", "string"];
        n.int_or_string = true;
    }
    for (k, s) in get(o, path, "properties", Value::as_object)?
        .into_iter()
        .flatten()
    {
        n.properties
            .insert(k.clone(), parse(s, &format!("{path}.properties[{k}]"))?);
    }
    n.items = o.get("items").map(|s| child(s, "items")).transpose()?;
    n.additional = match o.get("additionalProperties") {
        None => None,
        Some(Value::Bool(b)) => Some(Additional::Allows(*b)),
        Some(s) => Some(Additional::Schema(child(s, "additionalProperties")?)),
    };
    n.not = o.get("not").map(|s| child(s, "not")).transpose()?;
    (n.all_of, n.any_of, n.one_of) = (
        schemas(o, path, "allOf")?,
        schemas(o, path, "anyOf")?,
        schemas(o, path, "oneOf")?,
    );
    (n.required, n.list_map_keys) = (
        strings(o, path, "required")?,
        strings(o, path, "x-kubernetes-list-map-keys")?,
    );
    n.enumeration = get(o, path, "enum", |v| v.as_array().cloned())?;
    n.default = o.get("default").filter(|d| !d.is_null()).cloned();
    (n.nullable, n.format) = (flag("nullable")?, text("format")?);
    (n.minimum, n.maximum, n.multiple_of) = (num("minimum")?, num("maximum")?, num("multipleOf")?);
    (n.exclusive_minimum, n.exclusive_maximum) =
        (flag("exclusiveMinimum")?, flag("exclusiveMaximum")?);
    (n.min_length, n.max_length) = (uint("minLength")?, uint("maxLength")?);
    (n.min_items, n.max_items) = (uint("minItems")?, uint("maxItems")?);
    (n.min_properties, n.max_properties) = (uint("minProperties")?, uint("maxProperties")?);
    n.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields")?;
    n.embedded = flag("x-kubernetes-embedded-resource")?;
    if let Some(p) = text("pattern")? {
        let re = Regex::new(&p).map_err(|e| invalid(path, "pattern", &e.to_string()))?;
        n.pattern = Some((p, re));
    }
    n.list_type = text("x-kubernetes-list-type")?;
    if n.list_type
        .as_deref()
        .is_some_and(|t| !["atomic", "set", "map"].contains(&t))
    {
        return Err(invalid(
            path,
            "x-kubernetes-list-type",
            "must be atomic, set or map",
        ));
    }
    n.rules = cel::rules(o, path, &n)?;
    let below = n.properties.values().chain(n.items.as_deref());
    let below = below.chain(n.additional_schema()).chain(&n.all_of);
    n.has_rules = !n.rules.is_empty() || below.into_iter().any(|c| c.has_rules);
    Ok(n)
}

fn join_key(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_owned()
    } else {
        format!("{path}.{k}")
    }
}

impl Schema {
    /// Parses an `openAPIV3Schema` object, compiling its `x-kubernetes-validations`
    /// rules (a rule that does not compile is an [`Error::InvalidRule`]). Unknown
    /// keywords (`description`, `example`, ...) are ignored.
    pub fn from_value(v: &Value) -> Result<Schema, Error> {
        Ok(Schema {
            root: parse(v, "openAPIV3Schema")?,
        })
    }

    /// Drops fields the schema does not declare, as kube-apiserver's structural pruning
    /// does when it decodes a custom resource, then drops `null` values of non-nullable
    /// fields that have no default (its `PruneNonNullableNullsWithoutDefaults`).
    ///
    /// `apiVersion`, `kind` and `metadata` are kept at the root and in
    /// `x-kubernetes-embedded-resource` objects; nodes with
    /// `x-kubernetes-preserve-unknown-fields: true` keep unknown fields. Returns the
    /// sorted paths of the pruned fields, e.g. `spec.foo` or `spec.items[0].bar`; see
    /// [`unknown_field_warning`] and [`strict_decoding_message`].
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune(obj, Some(&self.root), "", true, &mut pruned);
        pruned.sort();
        prune_nulls(obj, Some(&self.root));
        pruned
    }

    /// Fills in `default` values where a field is absent, or `null` while the field is
    /// not nullable, recursing into objects, map values and array items, including
    /// inside the defaults just applied (kube-apiserver's structural defaulting).
    pub fn apply_defaults(&self, obj: &mut Value) {
        apply_defaults(obj, &self.root);
    }

    /// Validates `obj` and returns every error, schema errors first and then
    /// `x-kubernetes-list-type` set/map duplicates, as kube-apiserver orders them.
    /// Properties are visited in name order (kube-apiserver's order is Go map order).
    /// The root `apiVersion`, `kind` and `metadata` are not validated.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.root.validate(obj, "", true, &mut errors);
        validate::list_types(&self.root, obj, "", true, &mut errors);
        errors
    }
}

fn prune(x: &mut Value, s: Option<&Node>, path: &str, root: bool, out: &mut Vec<String>) {
    prune_in(x, s, path, root, s.is_some_and(|s| s.preserve_unknown), out);
}

/// kube-apiserver's `prune`, or with `keep_unknown` its `skipPrune` for nodes with
/// `x-kubernetes-preserve-unknown-fields`: unknown fields stay there, known ones are
/// pruned by their own schemas, and so are array items.
fn prune_in(
    x: &mut Value,
    s: Option<&Node>,
    path: &str,
    root: bool,
    keep_unknown: bool,
    out: &mut Vec<String>,
) {
    match x {
        Value::Object(m) => m.retain(|k, v| {
            let p = join_key(path, k);
            let Some(s) = s else {
                out.push(p);
                return false;
            };
            if (root || s.embedded) && META_FIELDS.contains(&k.as_str()) {
                return true;
            }
            match (s.properties.get(k), &s.additional) {
                (Some(prop), _) => prune(v, Some(prop), &p, false, out),
                (None, Some(Additional::Schema(a))) => prune(v, Some(a), &p, false, out),
                (None, Some(Additional::Allows(_))) => prune(v, None, &p, false, out),
                (None, None) if keep_unknown => {}
                (None, None) => {
                    out.push(p);
                    return false;
                }
            }
            true
        }),
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for (i, v) in a.iter_mut().enumerate() {
                let p = format!("{path}[{i}]");
                match (keep_unknown, items) {
                    (false, _) => prune(v, items, &p, false, out),
                    (true, Some(items)) => prune_in(v, Some(items), &p, false, true, out),
                    (true, None) => {}
                }
            }
        }
        _ => {}
    }
}

fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(m) => m.retain(|k, v| {
            let sub = s.and_then(|s| s.field_schema(k));
            if v.is_null() && sub.is_some_and(|n| !n.nullable && n.default.is_none()) {
                return false;
            }
            prune_nulls(v, sub);
            true
        }),
        Value::Array(a) => {
            for v in a {
                prune_nulls(v, s.and_then(|s| s.items.as_deref()));
            }
        }
        _ => {}
    }
}

/// Replaces a `null` that `s` does not allow by `s`'s default (or leaves it `null`).
fn default_null(v: &mut Value, s: &Node) {
    if v.is_null() && !s.nullable {
        *v = s.default.clone().unwrap_or(Value::Null);
    }
}

fn apply_defaults(x: &mut Value, s: &Node) {
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                if let Some(d) = &prop.default
                    && m.get(k).is_none_or(|v| v.is_null() && !prop.nullable)
                {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply_defaults(v, prop);
                } else if let Some(a) = s.additional_schema() {
                    default_null(v, a);
                    apply_defaults(v, a);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for v in a {
                    default_null(v, items);
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}

/// The kind of a [`FieldError`], as k8s.io/apimachinery's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Required value` (a `required` property is missing).
    Required,
    /// `Invalid value` (bounds, lengths, pattern, item counts, composition).
    Invalid,
    /// `Invalid value` for a value of the wrong type or format.
    TypeInvalid,
    /// `Unsupported value` (not in `enum`).
    NotSupported,
    /// `Too long` (over `maxLength`).
    TooLong,
    /// `Too many` (over `maxItems` or `maxProperties`).
    TooMany,
    /// `Duplicate value` (in an `x-kubernetes-list-type` set or map, or a CEL rule
    /// with `reason: FieldValueDuplicate`).
    Duplicate,
    /// `Forbidden` (a CEL rule with `reason: FieldValueForbidden`).
    Forbidden,
}

impl FieldErrorKind {
    /// The `reason` of the Status cause, e.g. `FieldValueRequired`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Forbidden => "FieldValueForbidden",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One field error; `Display` gives kube-apiserver's text, e.g.
/// `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
///
/// The value is printed as `field.Error.ErrorBody` prints it: strings with Go's `%q`,
/// numbers and booleans plain (floats as Go's `%v`), anything else as Go's
/// `json.Marshal` (sorted keys, `<>&` escaped). Errors of `anyOf`/`oneOf`/`allOf`/`not`
/// have the path `<nil>`, as in kube-apiserver.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `spec.resources[0].name`.
    pub path: String,
    /// What went wrong.
    pub kind: FieldErrorKind,
    /// The offending value (not printed for `Required`, `Forbidden` and `TooLong`).
    pub value: Value,
    /// The detail after the value, e.g. `supported values: "A", "B"`.
    pub detail: String,
}

/// One entry of a Status's `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCause {
    /// `reason`, e.g. `FieldValueRequired`.
    pub reason: &'static str,
    /// `message`: the error text without the field path.
    pub message: String,
    /// `field`: the field path.
    pub field: String,
}

impl FieldError {
    /// A field error at `path` with the given value and detail.
    pub fn new(
        path: impl Into<String>,
        kind: FieldErrorKind,
        value: Value,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            path: path.into(),
            kind,
            value,
            detail: detail.into(),
        }
    }

    /// The text without the path (`field.Error.ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_owned();
        if !matches!(
            self.kind,
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong
        ) {
            s.push_str(": ");
            s.push_str(&gofmt::bad_value(&self.value));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The Status cause kube-apiserver reports for this error.
    pub fn cause(&self) -> StatusCause {
        StatusCause {
            reason: self.kind.reason(),
            message: self.body(),
            field: self.path.clone(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// kube-apiserver's message for an Invalid (422) Status, e.g.
/// `Lock.core.navique.com "x" is invalid: spec.targetRef.kind: Required value`, or
/// `... is invalid: [err1, err2]` for several distinct errors (duplicates are dropped).
pub fn invalid_message(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> String {
    let mut distinct: Vec<String> = Vec::new();
    for e in errors.iter().map(ToString::to_string) {
        if !distinct.contains(&e) {
            distinct.push(e);
        }
    }
    let all = match distinct.len() {
        0 => "<nil>".to_owned(),
        1 => distinct.remove(0),
        _ => format!("[{}]", distinct.join(", ")),
    };
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    format!("{qualified} {} is invalid: {all}", gofmt::quote(name))
}

/// The warning kube-apiserver sends for a pruned field with `fieldValidation=Warn`:
/// `unknown field "spec.foo"`.
pub fn unknown_field_warning(path: &str) -> String {
    format!("unknown field \"{path}\"")
}

/// kube-apiserver's BadRequest message for pruned fields with `fieldValidation=Strict`,
/// e.g. `Lock in version "v1" cannot be handled as a Lock: strict decoding error:
/// unknown field "spec.foo", unknown field "spec.bar"`.
pub fn strict_decoding_message(kind: &str, version: &str, pruned: &[String]) -> String {
    let errors: Vec<String> = pruned.iter().map(|p| unknown_field_warning(p)).collect();
    format!(
        "{kind} in version {} cannot be handled as a {kind}: strict decoding error: {}",
        gofmt::quote(version),
        errors.join(", ")
    )
}

#[cfg(test)]
mod tests;
