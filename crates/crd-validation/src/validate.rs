//! Value validation as kube-openapi's `validate` package does it, with its errors
//! converted to field errors as apiextensions-apiserver does, plus the
//! `x-kubernetes-list-type` set/map uniqueness checks.

use crate::gofmt::{Num, json, number_v, quote};
use crate::{Additional, FieldError, FieldErrorKind as Kind, META_FIELDS, Node, join_key};
use serde_json::{Map, Value};

/// kube-openapi names errors by a path such as `spec.x` (`.x` below the root);
/// apiextensions-apiserver drops a leading dot, and an empty name is the nil path.
fn error(name: &str, kind: Kind, value: Value, detail: String) -> FieldError {
    let path = name.strip_prefix('.').unwrap_or(name);
    let path = if path.is_empty() { "<nil>" } else { path };
    FieldError::new(path, kind, value, detail)
}

/// Errors of `anyOf`/`oneOf`/`allOf`/`not` are not field errors in kube-openapi; they
/// become `field.Invalid(nil, "", message)`.
fn composite(detail: String) -> FieldError {
    error("", Kind::Invalid, "".into(), detail)
}

fn type_error(name: &str, expected: &str, actual: &str) -> FieldError {
    let detail = format!(
        "{name} in body must be of type {expected}: {}",
        quote(actual)
    );
    error(name, Kind::TypeInvalid, actual.into(), detail)
}

fn too_many(max: u64) -> String {
    let noun = if max == 1 { "item" } else { "items" };
    format!("must have at most {max} {noun}")
}

/// `swag.IsFloat64AJSONInteger`, approximately.
fn is_json_integer(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0
}

/// The keys of `m` in name order, without `apiVersion`, `kind` and `metadata` at the root.
fn sorted_keys(m: &Map<String, Value>, root: bool) -> Vec<&String> {
    let meta = |k: &str| root && META_FIELDS.contains(&k);
    let mut keys: Vec<&String> = m.keys().filter(|k| !meta(k)).collect();
    keys.sort();
    keys
}

impl Node {
    /// Validates `v` at kube-openapi path `path`, in kube-openapi's validator order:
    /// type, composition, string, number, array, enum, object.
    pub(crate) fn validate(&self, v: &Value, path: &str, root: bool, out: &mut Vec<FieldError>) {
        self.check_type(v, path, out);
        if !v.is_null() {
            self.check_composition(v, path, out);
        }
        match v {
            Value::String(s) => self.check_string(s, path, out),
            Value::Number(n) => self.check_number(v, Num::of(n), path, out),
            Value::Array(a) => self.check_array(a, path, out),
            _ => {}
        }
        self.check_enum(v, path, out);
        if let Value::Object(m) = v {
            self.check_object(m, path, root, out);
        }
    }

    /// kube-openapi's type validator, including its treatment of `format` (a boolean
    /// for `type: integer, format: int32` must be "of type int32").
    fn check_type(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        if v.is_null() {
            if !self.types.is_empty() && !self.nullable {
                out.push(type_error(path, &self.types.join(","), "null"));
            }
            return;
        }
        let has = |t: &str| self.types.contains(&t);
        let (actual, actual_format) = match v {
            Value::Bool(_) => ("boolean", ""),
            Value::String(_) => ("string", ""),
            Value::Number(n) if matches!(Num::of(n), Num::Int(_)) => ("integer", "int64"),
            Value::Number(_) => ("number", "double"),
            Value::Array(_) => ("array", ""),
            _ => ("object", ""),
        };
        let float_int =
            actual == "number" && has("integer") && v.as_f64().is_some_and(is_json_integer);
        let int_float = actual == "integer" && has("number");
        let ok = has(actual) || float_int || int_float;
        let textual = v.is_string() || v.is_array();
        match &self.format {
            None if self.types.is_empty() => {}
            Some(f) if !textual && !ok && actual_format != f => {
                out.push(type_error(path, f, actual_format))
            }
            Some(_) if textual && !has("number") && !has("integer") => {}
            _ if !ok => out.push(type_error(path, &self.types.join(","), actual)),
            _ => {}
        }
    }

    fn check_composition(&self, v: &Value, path: &str, out: &mut Vec<FieldError>) {
        let run = |n: &Node| {
            let mut errors = Vec::new();
            n.validate(v, path, false, &mut errors);
            errors
        };
        // kube-openapi adds the failures of the branch that passed the most checks;
        // this takes the branch with the fewest errors (the first on a tie).
        let best = |results: Vec<Vec<FieldError>>| {
            results.into_iter().min_by_key(Vec::len).unwrap_or_default()
        };
        let q = quote(path);
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
            let found = match valid {
                0 => "Found none valid".to_owned(),
                1 => String::new(),
                n => format!("Found {n} valid alternatives"),
            };
            if valid != 1 {
                out.push(composite(format!(
                    "{q} must validate one and only one schema (oneOf). {found}"
                )));
            }
            if valid == 0 {
                out.extend(best(results));
            }
        }
        if !self.all_of.is_empty() {
            let results: Vec<_> = self.all_of.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            out.extend(results.into_iter().flatten());
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

    /// Lengths count characters; kube-openapi stops at the first failing check.
    fn check_string(&self, s: &str, path: &str, out: &mut Vec<FieldError>) {
        let len = s.chars().count() as u64;
        if let Some(max) = self.max_length.filter(|max| len > *max) {
            let unit = if max == 1 { "byte" } else { "bytes" };
            let detail = format!("may not be more than {max} {unit}");
            return out.push(error(path, Kind::TooLong, s.into(), detail));
        }
        let detail = if let Some(min) = self.min_length.filter(|min| len < *min) {
            format!("{path} in body should be at least {min} chars long")
        } else if let Some((pattern, _)) = self.pattern.as_ref().filter(|(_, re)| !re.is_match(s)) {
            format!("{path} in body should match '{pattern}'")
        } else {
            return;
        };
        out.push(error(path, Kind::Invalid, s.into(), detail));
    }

    /// Integers are compared with bounds and factors truncated to integers, as in kube-openapi.
    fn check_number(&self, v: &Value, n: Num, path: &str, out: &mut Vec<FieldError>) {
        let mut invalid = |detail: String| out.push(error(path, Kind::Invalid, v.clone(), detail));
        let not_multiple = match (n, self.multiple_of) {
            (_, None) => None,
            (Num::Int(i), Some(f)) if f as i64 != 0 => i
                .checked_rem(f as i64)
                .is_some_and(|r| r != 0)
                .then(|| (f as i64).to_string()),
            (_, Some(f)) => {
                let quotient = if f < 1.0 {
                    1.0 / f * n.as_f64()
                } else {
                    n.as_f64() / f
                };
                (!is_json_integer(quotient)).then(|| number_v(Num::Float(f)))
            }
        };
        if let Some(f) = not_multiple {
            invalid(format!("{path} in body should be a multiple of {f}"));
        }
        let compare = |b: f64| match n {
            Num::Int(i) => (i.cmp(&(b as i64)), (b as i64).to_string()),
            Num::Float(x) => (x.total_cmp(&b), number_v(Num::Float(b))),
        };
        let (excl_min, excl_max) = (self.exclusive_minimum, self.exclusive_maximum);
        let low = self
            .minimum
            .map(compare)
            .filter(|(o, _)| o.is_lt() || (excl_min && o.is_eq()));
        if let Some((_, b)) = low {
            let eq = if excl_min { "" } else { " or equal to" };
            invalid(format!("{path} in body should be greater than{eq} {b}"));
        }
        let high = self
            .maximum
            .map(compare)
            .filter(|(o, _)| o.is_gt() || (excl_max && o.is_eq()));
        if let Some((_, b)) = high {
            let eq = if excl_max { "" } else { " or equal to" };
            invalid(format!("{path} in body should be less than{eq} {b}"));
        }
    }

    fn check_array(&self, a: &[Value], path: &str, out: &mut Vec<FieldError>) {
        if let Some(items) = self.items.as_deref() {
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
        if v.is_null() || !values.iter().any(same) {
            let text = |e: &Value| quote(&e.as_str().map_or_else(|| json(e), str::to_owned));
            let supported: Vec<String> = values.iter().map(text).collect();
            let detail = format!("supported values: {}", supported.join(", "));
            out.push(error(path, Kind::NotSupported, v.clone(), detail));
        }
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
        for k in sorted_keys(m, root)
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
        let meta = |k: &str| root && META_FIELDS.contains(&k);
        for (name, prop) in self.properties.iter().filter(|(k, _)| !meta(k)) {
            if let Some(v) = m.get(name) {
                prop.validate(v, &join_key(path, name), false, out);
            }
        }
        for name in self
            .required
            .iter()
            .filter(|k| !meta(k) && !m.contains_key(*k))
        {
            out.push(error(
                &format!("{path}.{name}"),
                Kind::Required,
                "".into(),
                String::new(),
            ));
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

/// apiextensions-apiserver's `ValidateListSetsAndMaps`. Its paths are `field.Path`s,
/// which write map keys as `labels[key]`.
pub(crate) fn list_types(s: &Node, v: &Value, path: &str, root: bool, out: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            let keys = sorted_keys(m, root);
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
            let at = |i: usize| format!("{path}[{i}]");
            let not_object = a.iter().position(|x| !x.is_null() && !x.is_object());
            match (s.list_type.as_deref(), not_object) {
                (Some("set"), _) => {
                    let dup = |i: usize| FieldError::new(at(i), Kind::Duplicate, a[i].clone(), "");
                    out.extend(repeats(a).into_iter().map(dup));
                }
                (Some("map"), Some(i)) => {
                    let detail = "must be an object for an array of list-type map";
                    out.push(FieldError::new(at(i), Kind::Invalid, a[i].clone(), detail));
                }
                (Some("map"), None) => {
                    let keys: Vec<Value> = a.iter().map(|x| map_key(s, x)).collect();
                    let dup =
                        |i: usize| FieldError::new(at(i), Kind::Duplicate, keys[i].clone(), "");
                    out.extend(repeats(&keys).into_iter().map(dup));
                }
                _ => {}
            }
            if let Some(items) = s.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    list_types(items, x, &at(i), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The `x-kubernetes-list-map-keys` fields an item has (`{}` for a `null` item).
fn map_key(s: &Node, item: &Value) -> Value {
    let fields = s
        .list_map_keys
        .iter()
        .filter_map(|f| Some((f.clone(), item.get(f)?.clone())));
    Value::Object(fields.collect())
}
