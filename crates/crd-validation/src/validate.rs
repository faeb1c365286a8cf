//! Value validation as kube-openapi's `validate` package does it, with its errors
//! converted to field errors as apiextensions-apiserver does, plus the
//! `x-kubernetes-list-type` set/map uniqueness checks.

use crate::gofmt::{self, Num};
use crate::{Additional, FieldError, FieldErrorKind as Kind, META_FIELDS, Node, join_key};
use regex::Regex;
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// kube-openapi names errors by a path such as `spec.x` (`.x` below the root);
/// apiextensions-apiserver drops a leading dot, and an empty name becomes the nil path.
fn error(name: &str, kind: Kind, value: Value, detail: String) -> FieldError {
    let path = match name.strip_prefix('.').unwrap_or(name) {
        "" => "<nil>".to_owned(),
        p => p.to_owned(),
    };
    FieldError {
        path,
        kind,
        value,
        detail,
    }
}

/// Errors of `anyOf`/`oneOf`/`allOf`/`not` are not field errors in kube-openapi; they
/// become `field.Invalid(nil, "", message)`.
fn composite(detail: String) -> FieldError {
    FieldError {
        path: "<nil>".into(),
        kind: Kind::Invalid,
        value: "".into(),
        detail,
    }
}

fn type_error(name: &str, expected: &str, actual: &str) -> FieldError {
    let detail = format!(
        "{name} in body must be of type {expected}: {}",
        gofmt::quote(actual)
    );
    error(name, Kind::TypeInvalid, actual.into(), detail)
}

fn too_many(max: u64) -> String {
    format!(
        "must have at most {max} {}",
        if max == 1 { "item" } else { "items" }
    )
}

/// `swag.IsFloat64AJSONInteger`, approximately.
fn is_json_integer(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$",
    )
    .unwrap()
});
static DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])$").unwrap());
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[Tt](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d",
        r"(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)$"
    ))
    .unwrap()
});

impl Node {
    /// Validates `v` found at kube-openapi path `path`, in kube-openapi's validator order:
    /// type, composition, string, format, number, array, enum, object.
    pub(crate) fn validate(&self, v: &Value, path: &str, root: bool, out: &mut Vec<FieldError>) {
        self.check_type(v, path, out);
        if v.is_null() {
            return self.check_enum(v, path, out);
        }
        self.check_composition(v, path, out);
        match v {
            Value::String(s) => {
                self.check_string(s, path, out);
                self.check_format(s, path, out);
            }
            Value::Number(n) => self.check_number(v, Num::of(n), path, out),
            Value::Array(a) => self.check_array(a, path, out),
            _ => {}
        }
        self.check_enum(v, path, out);
        if let Value::Object(m) = v {
            self.check_object(m, path, root, out);
        }
    }

    fn check_type(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        if self.types.is_empty() && self.format.is_none() {
            return;
        }
        let has = |t: &str| self.types.contains(&t);
        let (actual, actual_format) = match v {
            Value::Null => {
                if !self.types.is_empty() && !self.nullable {
                    out.push(type_error(path, &self.types.join(","), "null"));
                }
                return;
            }
            Value::Bool(_) => ("boolean", ""),
            Value::String(_) => ("string", ""),
            Value::Number(n) => match Num::of(n) {
                Num::Int(_) => ("integer", "int64"),
                Num::Float(_) => ("number", "double"),
            },
            Value::Array(_) => ("array", ""),
            Value::Object(_) => ("object", ""),
        };
        let float_int =
            actual == "number" && has("integer") && v.as_f64().is_some_and(is_json_integer);
        let int_float = actual == "integer" && has("number");
        let textual = v.is_string() || v.is_array();
        if let Some(format) = &self.format {
            let matches = has(actual) || actual_format == format || float_int || int_float;
            if !(textual || matches) {
                return out.push(type_error(path, format, actual_format));
            }
            if textual && !has("number") && !has("integer") {
                return;
            }
        }
        if !(has(actual) || float_int || int_float) {
            out.push(type_error(path, &self.types.join(","), actual));
        }
    }

    fn check_composition(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        let run = |n: &Node| {
            let mut errors = Vec::new();
            n.validate(v, path, false, &mut errors);
            errors
        };
        // kube-openapi reports the failures of the branch with the most passed checks;
        // this takes the branch with the fewest errors (the first on a tie).
        let best = |results: Vec<Vec<FieldError>>| {
            results.into_iter().min_by_key(Vec::len).unwrap_or_default()
        };
        let q = gofmt::quote(path);
        if !self.any_of.is_empty() {
            let results: Vec<_> = self.any_of.iter().map(run).collect();
            if !results.iter().any(Vec::is_empty) {
                out.push(composite(format!(
                    "{q} must validate at least one schema (anyOf)"
                )));
                out.extend(best(results));
            }
        }
        if !self.one_of.is_empty() {
            let results: Vec<_> = self.one_of.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_owned()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(composite(format!(
                    "{q} must validate one and only one schema (oneOf). {found}"
                )));
                if valid == 0 {
                    out.extend(best(results));
                }
            }
        }
        if !self.all_of.is_empty() {
            let mut valid = 0;
            for errors in self.all_of.iter().map(run) {
                valid += usize::from(errors.is_empty());
                out.extend(errors);
            }
            if valid != self.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.push(composite(format!(
                    "{q} must validate all the schemas (allOf){none}"
                )));
            }
        }
        if self.not.as_deref().is_some_and(|n| run(n).is_empty()) {
            out.push(composite(format!("{q} must not validate the schema (not)")));
        }
    }

    /// kube-openapi stops at the first failing string check.
    fn check_string(&self, s: &str, path: &str, out: &mut Vec<FieldError>) {
        let len = s.chars().count() as u64;
        if let Some(max) = self.max_length.filter(|max| len > *max) {
            let detail = format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            );
            return out.push(error(path, Kind::TooLong, s.into(), detail));
        }
        if let Some(min) = self.min_length.filter(|min| len < *min) {
            let detail = format!("{path} in body should be at least {min} chars long");
            return out.push(error(path, Kind::Invalid, s.into(), detail));
        }
        if let Some((pattern, _)) = self.pattern.as_ref().filter(|(_, re)| !re.is_match(s)) {
            let detail = format!("{path} in body should match '{pattern}'");
            out.push(error(path, Kind::Invalid, s.into(), detail));
        }
    }

    /// Only `uuid`, `date`, `date-time` and `ipv4` are checked; other formats pass.
    fn check_format(&self, s: &str, path: &str, out: &mut Vec<FieldError>) {
        let Some(format) = &self.format else { return };
        let valid = match format.as_str() {
            "uuid" => UUID.is_match(s),
            "date" => DATE.is_match(s),
            "date-time" | "datetime" => DATE_TIME.is_match(s),
            "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
            _ => true,
        };
        if !valid {
            let detail = format!(
                "{path} in body must be of type {format}: {}",
                gofmt::quote(s)
            );
            out.push(error(path, Kind::TypeInvalid, s.into(), detail));
        }
    }

    /// Integers are checked against bounds truncated to integers, as kube-openapi does.
    fn check_number(&self, v: &Value, n: Num, path: &str, out: &mut Vec<FieldError>) {
        let mut invalid = |detail: String| out.push(error(path, Kind::Invalid, v.clone(), detail));
        if let Some(factor) = self.multiple_of {
            match n {
                Num::Int(i) if factor as i64 != 0 => {
                    if i.checked_rem(factor as i64).is_some_and(|r| r != 0) {
                        invalid(format!(
                            "{path} in body should be a multiple of {}",
                            factor as i64
                        ));
                    }
                }
                _ => {
                    let x = n.as_f64();
                    let quotient = if factor < 1.0 {
                        1.0 / factor * x
                    } else {
                        x / factor
                    };
                    if !is_json_integer(quotient) {
                        let factor = gofmt::number_v(Num::Float(factor));
                        invalid(format!("{path} in body should be a multiple of {factor}"));
                    }
                }
            }
        }
        let bound = |b: f64| match n {
            Num::Int(i) => (i.cmp(&(b as i64)), (b as i64).to_string()),
            Num::Float(x) => (x.total_cmp(&b), gofmt::number_v(Num::Float(b))),
        };
        if let Some(min) = self.minimum {
            let (ord, b) = bound(min);
            if ord.is_lt() || (self.exclusive_minimum && ord.is_eq()) {
                let or_equal = if self.exclusive_minimum {
                    ""
                } else {
                    " or equal to"
                };
                invalid(format!(
                    "{path} in body should be greater than{or_equal} {b}"
                ));
            }
        }
        if let Some(max) = self.maximum {
            let (ord, b) = bound(max);
            if ord.is_gt() || (self.exclusive_maximum && ord.is_eq()) {
                let or_equal = if self.exclusive_maximum {
                    ""
                } else {
                    " or equal to"
                };
                invalid(format!("{path} in body should be less than{or_equal} {b}"));
            }
        }
    }

    fn check_array(&self, a: &[Value], path: &str, out: &mut Vec<FieldError>) {
        if let Some(items) = &self.items {
            for (i, v) in a.iter().enumerate() {
                items.validate(v, &format!("{path}[{i}]"), false, out);
            }
        }
        let len = a.len() as u64;
        if let Some(min) = self.min_items.filter(|min| len < *min) {
            let detail = format!("{path} in body should have at least {min} items");
            out.push(error(path, Kind::Invalid, len.into(), detail));
        }
        if let Some(max) = self.max_items.filter(|max| len > *max) {
            out.push(error(path, Kind::TooMany, len.into(), too_many(max)));
        }
    }

    /// `null` never matches an enum in kube-openapi; numbers match by value.
    fn check_enum(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        let Some(values) = self.enumeration.as_ref().filter(|e| !e.is_empty()) else {
            return;
        };
        let same = |e: &Value| match (v, e) {
            (Value::Number(a), Value::Number(b)) => Num::of(a).as_f64() == Num::of(b).as_f64(),
            _ => v == e,
        };
        if !v.is_null() && values.iter().any(same) {
            return;
        }
        let supported: Vec<String> = values
            .iter()
            .map(|e| gofmt::quote(&e.as_str().map_or_else(|| gofmt::json(e), str::to_owned)))
            .collect();
        let detail = format!("supported values: {}", supported.join(", "));
        out.push(error(path, Kind::NotSupported, v.clone(), detail));
    }

    fn check_object(
        &self,
        m: &Map<String, Value>,
        path: &str,
        root: bool,
        out: &mut Vec<FieldError>,
    ) {
        let count = m.len() as u64;
        if let Some(min) = self.min_properties.filter(|min| count < *min) {
            let detail = format!("{path} in body should have at least {min} properties");
            out.push(error(path, Kind::Invalid, count.into(), detail));
        }
        if let Some(max) = self.max_properties.filter(|max| count > *max) {
            out.push(error(path, Kind::TooMany, count.into(), too_many(max)));
        }
        let mut keys: Vec<&String> = m
            .keys()
            .filter(|k| !(root && META_FIELDS.contains(&k.as_str())))
            .collect();
        keys.sort();
        for k in keys
            .into_iter()
            .filter(|k| !self.properties.contains_key(*k))
        {
            match &self.additional {
                Some(Additional::Allows(false)) => {
                    let detail = format!("{path}.{k} in body is a forbidden property");
                    out.push(error(path, Kind::Invalid, k.as_str().into(), detail));
                }
                Some(Additional::Schema(s)) => {
                    s.validate(&m[k], &format!("{path}.{k}"), false, out)
                }
                _ => {}
            }
        }
        for (name, prop) in &self.properties {
            if let Some(v) = m
                .get(name)
                .filter(|_| !(root && META_FIELDS.contains(&name.as_str())))
            {
                prop.validate(v, &join_key(path, name), false, out);
            }
        }
        for name in &self.required {
            let skipped = root && META_FIELDS.contains(&name.as_str());
            if !(m.contains_key(name) || skipped) {
                out.push(error(
                    &format!("{path}.{name}"),
                    Kind::Required,
                    "".into(),
                    String::new(),
                ));
            }
        }
    }
}

/// The indexes at which a value occurs for the second time (each value reported once).
fn repeats(values: &[Value]) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut found = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match seen.iter_mut().find(|(s, _)| *s == v) {
            Some((_, n)) => {
                if *n == 1 {
                    found.push(i);
                }
                *n += 1;
            }
            None => seen.push((v, 1)),
        }
    }
    found
}

/// apiextensions-apiserver's `ValidateListSetsAndMaps`. Paths here are `field.Path`s:
/// map keys are written `labels[key]`.
pub(crate) fn list_types(s: &Node, v: &Value, path: &str, root: bool, out: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m
                .keys()
                .filter(|k| !(root && META_FIELDS.contains(&k.as_str())))
                .collect();
            keys.sort();
            if let Some(a) = s.additional_schema() {
                for k in &keys {
                    list_types(a, &m[*k], &format!("{path}[{k}]"), false, out);
                }
            }
            for k in keys {
                if let Some(prop) = s.properties.get(k) {
                    list_types(prop, &m[k], &join_key(path, k), false, out);
                }
            }
        }
        Value::Array(a) => {
            let duplicate = |i: usize, value: Value| FieldError {
                path: format!("{path}[{i}]"),
                kind: Kind::Duplicate,
                value,
                detail: String::new(),
            };
            match s.list_type.as_deref() {
                Some("set") => {
                    out.extend(repeats(a).into_iter().map(|i| duplicate(i, a[i].clone())))
                }
                Some("map") => {
                    if let Some((i, x)) = a
                        .iter()
                        .enumerate()
                        .find(|(_, x)| !x.is_null() && !x.is_object())
                    {
                        let detail = "must be an object for an array of list-type map".to_owned();
                        out.push(FieldError {
                            path: format!("{path}[{i}]"),
                            kind: Kind::Invalid,
                            value: x.clone(),
                            detail,
                        });
                    } else {
                        let keys: Vec<Value> = a.iter().map(|x| map_key(s, x)).collect();
                        out.extend(
                            repeats(&keys)
                                .into_iter()
                                .map(|i| duplicate(i, keys[i].clone())),
                        );
                    }
                }
                _ => {}
            }
            if let Some(items) = s.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    list_types(items, x, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The `x-kubernetes-list-map-keys` fields an item has (`{}` for a `null` item).
fn map_key(s: &Node, item: &Value) -> Value {
    let mut key = Map::new();
    for f in &s.list_map_keys {
        if let Some(v) = item.get(f) {
            key.insert(f.clone(), v.clone());
        }
    }
    Value::Object(key)
}
