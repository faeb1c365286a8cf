//! `x-kubernetes-validations` (CEL) rules, evaluated as kube-apiserver evaluates them
//! for custom resources (apiextensions-apiserver `pkg/apiserver/schema/cel`:
//! `validation.go`, `compilation.go`, and `k8s.io/apiserver/pkg/cel/common/values.go`
//! for how objects are seen from CEL), on the Rust `cel` crate with the Kubernetes
//! extension functions of `kube-cel` (strings, lists, sets, regex, quantity, URLs,
//! IPs, semver, format, math, base64).
//!
//! What kube-apiserver does and this module does too:
//! - `self` is the value at the rule's node, `oldSelf` the stored value there; a rule
//!   that mentions `oldSelf` (a transition rule) runs only when that old value exists
//!   and is not `null`. Old values follow object properties and map keys, and the items
//!   of `x-kubernetes-list-type: map` lists by their key fields (with the key fields'
//!   defaults); items of other lists have no old value.
//! - Rules on `null` values do not run; rules under `allOf` run on the same value.
//! - Property names are escaped as CEL identifiers (`x-y` is `self.x__dash__y`, `a.b`
//!   is `a__dot__b`, `a/b` is `a__slash__b`, `__` is `__underscores__`, a CEL keyword
//!   `k` is `__k__`); a property whose name cannot be escaped (it starts with a digit
//!   or has other characters) is not visible. Keys of maps (`additionalProperties`)
//!   are never escaped: `self.annotations['example.com/a.b']`.
//! - At the resource root and in `x-kubernetes-embedded-resource` objects, `self`
//!   shows `apiVersion`, `kind` and of `metadata` only `name` and `generateName`
//!   (unless the schema itself declares all four with those types); the other fields
//!   of the object count only for `==` and `size()`.
//! - `null` properties of objects are absent for `has()` and field selection, and an
//!   object with a `null` property is never `==` to another, as in kube-apiserver.
//! - JSON integers are `int` (or `double` under `type: number`), numbers with a
//!   fraction `double`; strings of format `date-time` and `date` are `timestamp`s,
//!   of format `duration` `duration`s.
//! - Messages: see [`Schema::validate_rules`].
//!
//! What differs from kube-apiserver:
//! - There is no type checker: a reference to an undeclared field, a wrong operand
//!   type or a non-boolean result is found when the rule runs (a runtime error, or a
//!   failed rule), not when the schema is parsed. Compile errors are syntax errors.
//! - Optional syntax (`self.?x`, `.orValue()`, `optional.of`) does not parse;
//!   `optionalOldSelf` is ignored (such rules still need an old value); `type()`,
//!   timestamps' and durations' accessor functions and `format: byte` are missing.
//! - `==` compares lists by position, also `x-kubernetes-list-type` `set` and `map`
//!   lists (kube-apiserver ignores their order), and `1 == 1.0` is false.
//! - An object's fields other than its declared properties (preserved unknown fields,
//!   `metadata.labels` at the root) are compared in key order and are reachable by
//!   `uint` keys; `'x-y' in self` needs the escaped name `'x__dash__y'`.
//! - No cost estimation or budget: every rule runs to the end.
//! - Runtime error texts are cel-go's for the common cases (`no such key: x`,
//!   `division by zero`, `modulus by zero`, `integer overflow`, `no such overload`,
//!   `index out of bounds: 3`), the `cel` crate's otherwise.

use crate::{Error, FieldError, FieldErrorKind as Kind, Node, Schema, join_key};
use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, Program, Value as Cel};
use regex::Regex;
use serde_json::{Map as JsonMap, Value};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// kube-apiserver's limit on the length of a `messageExpression` result.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// The `reason` of a rule: the kind of error a failed rule reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

/// One compiled `x-kubernetes-validations` rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// The rule as written, trimmed.
    source: String,
    program: Arc<Program>,
    /// `message`, trimmed; empty if absent.
    message: String,
    message_expression: Option<Arc<Program>>,
    reason: Reason,
    /// `fieldPath` as a field path relative to the node, e.g. `backup.enabled`, when it
    /// resolves against the node's schema (kube-apiserver ignores it otherwise).
    field_path: Option<String>,
    /// Whether the rule mentions `oldSelf`.
    transition: bool,
}

impl Rule {
    /// `ruleErrorString`: the message, else the rule.
    fn error_string(&self) -> &str {
        if self.message.is_empty() {
            &self.source
        } else {
            &self.message
        }
    }
}

/// Parses and compiles the `x-kubernetes-validations` of the schema node `o` at `path`,
/// whose other keywords are already parsed into `node`.
pub(crate) fn rules(
    o: &JsonMap<String, Value>,
    path: &str,
    node: &Node,
) -> Result<Vec<Rule>, Error> {
    let Some(list) = o.get("x-kubernetes-validations") else {
        return Ok(Vec::new());
    };
    let invalid = |index, field, reason: String| Error::InvalidRule {
        path: path.into(),
        index,
        field,
        reason,
    };
    let list = list.as_array().ok_or_else(|| Error::InvalidKeyword {
        path: path.into(),
        keyword: "x-kubernetes-validations",
        reason: "has the wrong type".into(),
    })?;
    let mut rules = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let text = |k: &'static str| -> Result<Option<&str>, Error> {
            match r.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(invalid(i, k, "must be a string".into())),
            }
        };
        let source = text("rule")?.unwrap_or_default().trim().to_owned();
        if source.is_empty() {
            return Err(invalid(
                i,
                "rule",
                "Required value: rule is not specified".into(),
            ));
        }
        let program = Program::compile(&source)
            .map_err(|e| invalid(i, "rule", format!("compilation failed: {e}")))?;
        let message_expression = match text("messageExpression")?.map(str::trim) {
            None | Some("") => None,
            Some(m) => Some(Arc::new(Program::compile(m).map_err(|e| {
                let reason = format!("messageExpression compilation failed: {e}");
                invalid(i, "messageExpression", reason)
            })?)),
        };
        let reason = match text("reason")? {
            None | Some("FieldValueInvalid") => Reason::Invalid,
            Some("FieldValueForbidden") => Reason::Forbidden,
            Some("FieldValueRequired") => Reason::Required,
            Some("FieldValueDuplicate") => Reason::Duplicate,
            Some(other) => {
                let supported = r#"supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#;
                let reason = format!(
                    "Unsupported value: {}: {supported}",
                    crate::gofmt::quote(other)
                );
                return Err(invalid(i, "reason", reason));
            }
        };
        let transition = program.references().has_variable("oldSelf");
        rules.push(Rule {
            message: text("message")?.unwrap_or_default().trim().to_owned(),
            field_path: text("fieldPath")?.and_then(|p| resolve_field_path(p, node)),
            source,
            program: Arc::new(program),
            message_expression,
            reason,
            transition,
        });
    }
    Ok(rules)
}

/// kube-apiserver's `ValidFieldPath`: `.a.b['c.d']` against the node's schema, as a
/// field path (`a.b.c.d`, with map keys as `[key]`), or `None` if it does not resolve.
fn resolve_field_path(path: &str, node: &Node) -> Option<String> {
    let mut tokens = tokenize(path).into_iter();
    let mut schema = node;
    let mut out = String::new();
    while let Some(t) = tokens.next() {
        let name = match t {
            "[" => {
                let quoted = tokens.next()?;
                let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
                let name = unescape_single_quoted(inner)?;
                (tokens.next()? == "]").then_some(name)?
            }
            "." => tokens.next()?.to_owned(),
            _ => return None,
        };
        if !schema.properties.is_empty() {
            schema = schema.properties.get(&name)?;
            out = join_key(&out, &name);
        } else if let Some(a) = schema.additional_schema() {
            schema = a;
            out = format!("{out}[{name}]");
        } else {
            return None;
        }
    }
    Some(out)
}

/// Splits a field path into `.`, `[`, `]` and the text between them, keeping
/// single-quoted strings whole.
fn tokenize(path: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let bytes = path.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let end = if bytes[start] == b'\'' {
            (start + 1..bytes.len())
                .find(|&i| bytes[i] == b'\'' && bytes[i - 1] != b'\\')
                .map_or(bytes.len(), |i| i + 1)
        } else if matches!(bytes[start], b'.' | b'[' | b']') {
            start + 1
        } else {
            (start..bytes.len())
                .find(|&i| matches!(bytes[i], b'.' | b'[' | b']'))
                .unwrap_or(bytes.len())
        };
        tokens.push(&path[start..end]);
        start = end;
    }
    tokens
}

fn unescape_single_quoted(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\x0b',
            '\'' => '\'',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}

/// CEL's reserved words, escaped as `__word__` when they are property names.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// kube-apiserver's escaping of a property name into a CEL identifier, or `None` if
/// the name cannot be one (then CEL does not see the property).
fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

fn string(s: &str) -> Cel {
    Cel::String(Arc::new(s.to_owned()))
}

fn map(entries: HashMap<Key, Cel>) -> Cel {
    Cel::Map(Map {
        map: Arc::new(entries),
    })
}

/// A JSON value as CEL sees a value without a schema.
fn plain(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => string(s),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(plain).collect())),
        Value::Object(m) => {
            let entries = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), plain(v)));
            map(entries.collect())
        }
    }
}

/// A property of an object-with-properties view: its CEL key and schema.
enum Field<'a> {
    Declared(&'a Node),
    /// `apiVersion`, `kind`, `metadata.name` and `metadata.generateName` at a resource
    /// root, and `metadata` itself.
    String,
    Metadata,
}

/// Whether a resource root's schema already declares what kube-apiserver adds to it
/// (`WithTypeAndObjectMeta`).
fn declares_type_and_meta(s: &Node) -> bool {
    let is = |n: Option<&Node>, t: &str| n.is_some_and(|n| n.type_name == t);
    let meta = s.properties.get("metadata");
    is(s.properties.get("kind"), "string")
        && is(s.properties.get("apiVersion"), "string")
        && is(meta, "object")
        && is(meta.and_then(|m| m.properties.get("name")), "string")
        && is(
            meta.and_then(|m| m.properties.get("generateName")),
            "string",
        )
}

/// An object whose visible fields are `field(name)`: each is under its escaped name,
/// the rest (and `null`s) under hidden `uint` keys so that `==` and `size()` still
/// count them, as kube-apiserver's `unstructuredMap` does.
fn object<'a>(m: &JsonMap<String, Value>, field: &dyn Fn(&str) -> Option<Field<'a>>) -> Cel {
    let mut entries = HashMap::with_capacity(m.len());
    let mut hidden = u64::MAX;
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let v = &m[k];
        let visible = field(k).zip(escape(k)).filter(|_| !v.is_null());
        let value = match visible {
            Some((f, escaped)) => {
                let value = match f {
                    Field::Declared(s) => to_cel(v, s, s.embedded),
                    Field::String => plain(v),
                    Field::Metadata => match v {
                        Value::Object(meta) => object(meta, &|k| {
                            ["name", "generateName"]
                                .contains(&k)
                                .then_some(Field::String)
                        }),
                        _ => plain(v),
                    },
                };
                entries.insert(Key::String(Arc::new(escaped)), value);
                continue;
            }
            // kube-apiserver never finds an object's null property equal to anything.
            None if v.is_null() => Cel::Float(f64::NAN),
            None => Cel::List(Arc::new(vec![string(k), plain(v)])),
        };
        entries.insert(Key::Uint(hidden), value);
        hidden -= 1;
    }
    map(entries)
}

/// kube-apiserver's `UnstructuredToVal`: `v` as CEL sees it under schema `s`;
/// `resource_root` for the resource root and embedded resources.
fn to_cel(v: &Value, s: &Node, resource_root: bool) -> Cel {
    match (v, s.type_name) {
        (Value::Null, _) => Cel::Null,
        (_, _) if s.int_or_string => plain(v),
        (Value::Object(m), "object") => {
            if resource_root && !declares_type_and_meta(s) {
                object(m, &|k| match k {
                    "apiVersion" | "kind" => Some(Field::String),
                    "metadata" => Some(Field::Metadata),
                    _ => s.properties.get(k).map(Field::Declared),
                })
            } else if !s.properties.is_empty() {
                object(m, &|k| s.properties.get(k).map(Field::Declared))
            } else if let Some(a) = s.additional_schema() {
                let entries = m
                    .iter()
                    .map(|(k, x)| (Key::String(Arc::new(k.clone())), to_cel(x, a, a.embedded)));
                map(entries.collect())
            } else {
                object(m, &|_| None)
            }
        }
        (Value::Array(a), "array") => match s.items.as_deref() {
            Some(items) => {
                let all = a.iter().map(|x| to_cel(x, items, items.embedded));
                Cel::List(Arc::new(all.collect()))
            }
            None => plain(v),
        },
        (Value::String(text), "string") => match s.format.as_deref() {
            Some("date-time") => timestamp(text).unwrap_or_else(|| plain(v)),
            Some("date") => date(text).unwrap_or_else(|| plain(v)),
            Some("duration") => duration(text).map_or_else(|| plain(v), Cel::Duration),
            _ => plain(v),
        },
        (Value::Number(n), "number") => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        _ => plain(v),
    }
}

fn timestamp(s: &str) -> Option<Cel> {
    Some(Cel::Timestamp(
        chrono::DateTime::parse_from_rfc3339(s).ok()?,
    ))
}

fn date(s: &str) -> Option<Cel> {
    let day = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc = chrono::FixedOffset::east_opt(0)?;
    Some(Cel::Timestamp(
        day.and_hms_opt(0, 0, 0)?.and_local_timezone(utc).single()?,
    ))
}

/// Nanoseconds per duration unit: Go's `time.ParseDuration` units, then the names
/// kube-openapi's `strfmt.ParseDuration` also accepts after a whole number.
fn unit_nanos(unit: &str) -> Option<i128> {
    const SECOND: i128 = 1_000_000_000;
    Some(match unit {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "us" | "µs" | "μs" | "micro" | "micros" | "microsecond" | "microseconds" => 1_000,
        "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => SECOND,
        "m" | "min" | "mins" | "minute" | "minutes" => 60 * SECOND,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600 * SECOND,
        "d" | "day" | "days" => 86_400 * SECOND,
        "w" | "wk" | "wks" | "week" | "weeks" => 7 * 86_400 * SECOND,
        _ => return None,
    })
}

/// A `format: duration` string: Go's syntax (`1h30m`, `-1.5s`), or a whole number and
/// a unit name (`3 days`), as kube-openapi's `strfmt.ParseDuration` reads it.
fn duration(s: &str) -> Option<chrono::Duration> {
    static LONG: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*([0-9]+)\s*([A-Za-zµ]+)\s*$").expect("valid regex"));
    let nanos = go_duration(s).or_else(|| {
        let c = LONG.captures(s)?;
        c[1].parse::<i128>()
            .ok()?
            .checked_mul(unit_nanos(&c[2].to_lowercase())?)
    })?;
    Some(chrono::Duration::nanoseconds(i64::try_from(nanos).ok()?))
}

/// Go's `time.ParseDuration`, in nanoseconds.
fn go_duration(s: &str) -> Option<i128> {
    static PART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)").expect("valid regex")
    });
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let c = PART.captures(rest)?;
        let (whole, frac) = (&c[1], c.get(2).map_or("", |m| m.as_str()));
        if whole.is_empty() && frac.is_empty() {
            return None;
        }
        let unit = unit_nanos(&c[3])?;
        total += whole.parse::<i128>().unwrap_or(0).checked_mul(unit)?;
        if !frac.is_empty() {
            let scale = 10i128.checked_pow(u32::try_from(frac.len()).ok()?)?;
            total += frac.parse::<i128>().ok()?.checked_mul(unit)? / scale;
        }
        rest = &rest[c[0].len()..];
    }
    Some(if negative { -total } else { total })
}

/// cel-go's text for the common runtime errors, the `cel` crate's for the others.
fn runtime_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload => "no such overload".into(),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(Cel::Int(i)) => format!("index out of bounds: {i}"),
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}' (in container '')")
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// A `messageExpression` result kube-apiserver uses, or `None` to fall back to the
/// rule's message.
fn message_from(program: &Program, ctx: &Context) -> Option<String> {
    let Ok(Cel::String(s)) = program.execute(ctx) else {
        return None;
    };
    let s = s.trim();
    let usable = !s.is_empty() && !s.contains('\n') && s.len() <= MAX_MESSAGE_EXPRESSION_BYTES;
    usable.then(|| s.to_owned())
}

/// The functions every rule can call; variables are added per node.
static FUNCTIONS: LazyLock<Context<'static>> = LazyLock::new(|| Context::default().with_all());

/// A field path as `field.Path.String()` prints it: the root is `<nil>`.
fn shown(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_owned()
    } else {
        path.to_owned()
    }
}

impl Schema {
    /// Evaluates every `x-kubernetes-validations` rule of the schema against `new`,
    /// with `old` (the stored object, on updates) for transition rules, and returns
    /// the errors kube-apiserver reports, in its order (a node's rules, then its
    /// `allOf` rules, then map values and properties in key order, list items in
    /// order). kube-apiserver appends them to the errors of [`Schema::validate`], and
    /// evaluates no rule when those include a `Required`, `TypeInvalid`,
    /// `NotSupported`, `TooLong` or `TooMany` error.
    ///
    /// A rule that is not true gives, at the rule's node or at its `fieldPath`,
    /// - `field.Invalid` with the node's schema `type` as the value and the rule's
    ///   `messageExpression` result, else its `message`, else `failed rule: <rule>`:
    ///   `spec.targetRef: Invalid value: "object": targetRef is immutable`;
    /// - with `reason: FieldValueForbidden`, `spec.x: Forbidden: <message>`;
    /// - with `reason: FieldValueRequired`, `spec.x: Required value: <message>`;
    /// - with `reason: FieldValueDuplicate`, `spec.x: Duplicate value: "object"`.
    ///
    /// A rule whose evaluation fails gives, at its node,
    /// `spec.x: Invalid value: "object": no such key: y evaluating rule: <message or rule>`
    /// (for `no such overload`: `'no such overload': call arguments did not match a
    /// supported operator, function or macro signature for rule: <message or rule>`).
    /// Rules at the root report the path `<nil>`.
    pub fn validate_rules(&self, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut out = Vec::new();
        if self.root.has_rules {
            let root = &self.root;
            eval(root, root, new, old, "", true, &mut out);
        }
        out
    }
}

/// Runs the rules of validation schema `v` (the node itself or one of its `allOf`
/// schemas) and those below it, on `x` whose structural schema is `s`.
fn eval(
    v: &Node,
    s: &Node,
    x: &Value,
    old: Option<&Value>,
    path: &str,
    resource_root: bool,
    out: &mut Vec<FieldError>,
) {
    if x.is_null() || !v.has_rules {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    if !v.rules.is_empty() {
        run_rules(&v.rules, s, x, old, path, resource_root, out);
    }
    for a in &v.all_of {
        eval(a, s, x, old, path, resource_root, out);
    }
    match x {
        Value::Object(m) => {
            let old = old.and_then(Value::as_object);
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            if let (Some(va), Some(sa)) = (v.additional_schema(), s.additional_schema()) {
                for k in &keys {
                    let was = old.and_then(|o| o.get(*k));
                    eval(
                        va,
                        sa,
                        &m[*k],
                        was,
                        &format!("{path}[{k}]"),
                        sa.embedded,
                        out,
                    );
                }
            }
            for k in keys {
                if let (Some(vp), Some(sp)) = (v.properties.get(k), s.properties.get(k)) {
                    let was = old.and_then(|o| o.get(k));
                    eval(vp, sp, &m[k], was, &join_key(path, k), sp.embedded, out);
                }
            }
        }
        Value::Array(a) => {
            if let (Some(vi), Some(si)) = (v.items.as_deref(), s.items.as_deref()) {
                let old = old.and_then(Value::as_array);
                for (i, item) in a.iter().enumerate() {
                    let was = old.and_then(|o| old_item(s, si, item, o));
                    eval(vi, si, item, was, &format!("{path}[{i}]"), si.embedded, out);
                }
            }
        }
        _ => {}
    }
}

/// The key of an `x-kubernetes-list-type: map` item: its key fields, or their defaults.
fn list_map_key(list: &Node, items: &Node, item: &Value) -> Option<Vec<Value>> {
    let item = item.as_object()?;
    let field = |k: &String| {
        item.get(k)
            .or_else(|| items.properties.get(k)?.default.as_ref())
            .cloned()
    };
    list.list_map_keys.iter().map(field).collect()
}

/// The old item correlated with `item` of a list with schema `list`: the one with the
/// same key in a list-type map, none in other lists.
fn old_item<'a>(list: &Node, items: &Node, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
    if list.list_type.as_deref() != Some("map") || list.list_map_keys.is_empty() {
        return None;
    }
    let key = list_map_key(list, items, item)?;
    old.iter()
        .find(|o| list_map_key(list, items, o).as_ref() == Some(&key))
}

fn run_rules(
    rules: &[Rule],
    s: &Node,
    x: &Value,
    old: Option<&Value>,
    path: &str,
    resource_root: bool,
    out: &mut Vec<FieldError>,
) {
    let mut ctx = FUNCTIONS.new_inner_scope();
    ctx.add_variable_from_value("self", to_cel(x, s, resource_root));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o, s, resource_root));
    }
    let type_name = Value::from(s.type_name);
    for rule in rules {
        if rule.transition && old.is_none() {
            continue;
        }
        match rule.program.execute(&ctx) {
            Ok(Cel::Bool(true)) => continue,
            Ok(_) => {}
            Err(e) => {
                let e = runtime_error(&e);
                let detail = if e.starts_with("no such overload") {
                    format!(
                        "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        rule.error_string()
                    )
                } else {
                    format!("{e} evaluating rule: {}", rule.error_string())
                };
                out.push(FieldError::new(
                    shown(path),
                    Kind::Invalid,
                    type_name.clone(),
                    detail,
                ));
                continue;
            }
        }
        let at = match &rule.field_path {
            Some(p) => join_key(path, p),
            None => shown(path),
        };
        let detail = rule
            .message_expression
            .as_deref()
            .and_then(|m| message_from(m, &ctx))
            .unwrap_or_else(|| match rule.message.as_str() {
                "" => format!("failed rule: {}", rule.source),
                m => m.to_owned(),
            });
        out.push(match rule.reason {
            Reason::Invalid => FieldError::new(at, Kind::Invalid, type_name.clone(), detail),
            Reason::Forbidden => FieldError::new(at, Kind::Forbidden, "".into(), detail),
            Reason::Required => FieldError::new(at, Kind::Required, "".into(), detail),
            Reason::Duplicate => FieldError::new(at, Kind::Duplicate, type_name.clone(), ""),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_message;

    fn json(text: &str) -> Value {
        serde_json::from_str(text).expect("test JSON parses")
    }

    fn schema(text: &str) -> Schema {
        Schema::from_value(&json(text)).expect("schema parses")
    }

    /// The messages of the rules of `s` for `new`, with `old` on updates.
    #[track_caller]
    fn expect(s: &Schema, new: &str, old: Option<&str>, want: &[&str]) {
        let old = old.map(json);
        let got: Vec<String> = s
            .validate_rules(&json(new), old.as_ref())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, want);
    }

    /// The Lock CRD's schema, as `deploy/crds/locks.core.navique.com.yaml` has it.
    const LOCK: &str = r#"{"type": "object", "properties": {"spec": {"type": "object", "required": ["targetRef"], "properties": {
        "reason": {"type": "string", "nullable": true},
        "targetRef": {"type": "object", "required": ["kind", "name"], "properties": {
            "apiVersion": {"type": "string", "default": "core.navique.com/v1alpha1"},
            "kind": {"type": "string"}, "name": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self == oldSelf",
                "message": "targetRef is immutable; create a new Lock to protect another object"}]}}}}}"#;

    fn lock(name: &str) -> String {
        format!(
            r#"{{"apiVersion": "core.navique.com/v1alpha1", "kind": "Lock", "metadata": {{"name": "l"}},
            "spec": {{"targetRef": {{"apiVersion": "core.navique.com/v1alpha1", "kind": "Stack", "name": "{name}"}}}}}}"#
        )
    }

    #[test]
    fn an_immutable_target_ref_cannot_change_on_update() {
        let s = schema(LOCK);
        let msg = r#"spec.targetRef: Invalid value: "object": targetRef is immutable; create a new Lock to protect another object"#;
        expect(&s, &lock("b"), Some(&lock("a")), &[msg]);
        expect(&s, &lock("a"), Some(&lock("a")), &[]);
        let errors = s.validate_rules(&json(&lock("b")), Some(&json(&lock("a"))));
        assert_eq!(
            invalid_message("Lock", "core.navique.com", "l", &errors),
            format!(r#"Lock.core.navique.com "l" is invalid: {msg}"#)
        );
        assert_eq!(errors[0].cause().reason, "FieldValueInvalid");
    }

    #[test]
    fn a_transition_rule_does_not_run_on_create() {
        expect(&schema(LOCK), &lock("a"), None, &[]);
    }

    #[test]
    fn an_object_with_a_null_property_is_never_equal_to_its_old_self() {
        // kube-apiserver's unstructuredMap treats a null property as absent when it
        // looks it up, so `self == oldSelf` is false even for identical objects.
        let s = schema(
            r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "uid": {"type": "string", "nullable": true}},
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}"#,
        );
        let obj = r#"{"spec": {"uid": null}}"#;
        expect(
            &s,
            obj,
            Some(obj),
            &[r#"spec: Invalid value: "object": immutable"#],
        );
        let obj = r#"{"spec": {"uid": "u"}}"#;
        expect(&s, obj, Some(obj), &[]);
    }

    /// The ServicePlan CRD's spec rule, with its `fieldPath`.
    const SERVICE_PLAN: &str = r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "allowedDeletionPolicies": {"type": "array", "x-kubernetes-list-type": "set",
            "items": {"type": "string", "enum": ["Retain", "SnapshotAndDelete", "Delete"]}},
        "backup": {"type": "object", "properties": {"enabled": {"type": "boolean", "default": false},
            "schedule": {"type": "string", "nullable": true}}}},
        "x-kubernetes-validations": [{"fieldPath": ".backup.enabled",
            "message": "allowedDeletionPolicies includes SnapshotAndDelete, which needs backup.enabled: true",
            "rule": "!('SnapshotAndDelete' in self.allowedDeletionPolicies) || self.backup.enabled"}]}}}"#;

    #[test]
    fn a_false_rule_is_reported_at_its_field_path_with_its_message() {
        let s = schema(SERVICE_PLAN);
        let obj = r#"{"spec": {"allowedDeletionPolicies": ["Retain", "SnapshotAndDelete"], "backup": {"enabled": false}}}"#;
        let msg = r#"spec.backup.enabled: Invalid value: "object": allowedDeletionPolicies includes SnapshotAndDelete, which needs backup.enabled: true"#;
        expect(&s, obj, None, &[msg]);
        let obj = r#"{"spec": {"allowedDeletionPolicies": ["SnapshotAndDelete"], "backup": {"enabled": true}}}"#;
        expect(&s, obj, None, &[]);
        let obj = r#"{"spec": {"allowedDeletionPolicies": ["Delete"], "backup": {}}}"#;
        expect(&s, obj, None, &[]);
    }

    #[test]
    fn a_rule_that_fails_to_evaluate_is_reported_at_its_node() {
        let s = schema(SERVICE_PLAN);
        let obj = r#"{"spec": {"allowedDeletionPolicies": ["SnapshotAndDelete"]}}"#;
        let msg = r#"spec: Invalid value: "object": no such key: backup evaluating rule: allowedDeletionPolicies includes SnapshotAndDelete, which needs backup.enabled: true"#;
        expect(&s, obj, None, &[msg]);
        let s = schema(
            r#"{"type": "object", "properties": {"n": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self / 0 == 1"}, {"rule": "self + 'a' == 1"}]}}}"#,
        );
        expect(
            &s,
            r#"{"n": 4}"#,
            None,
            &[
                r#"n: Invalid value: "integer": division by zero evaluating rule: self / 0 == 1"#,
                r#"n: Invalid value: "integer": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self + 'a' == 1"#,
            ],
        );
    }

    /// The Stack CRD's embedded-resource rule.
    const STACK: &str = r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "resources": {"type": "array", "items": {"type": "object", "required": ["apiVersion", "kind", "metadata"],
            "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [{"fieldPath": ".metadata.name", "message": "metadata.name is required",
                "reason": "FieldValueRequired", "rule": "has(self.metadata.name) && self.metadata.name != ''"}]}}}}}}"#;

    #[test]
    fn an_embedded_resource_rule_reports_its_reason() {
        let s = schema(STACK);
        let obj = r#"{"spec": {"resources": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "b-"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ""}}]}}"#;
        // `.metadata.name` is not a property of the item's schema, so kube-apiserver
        // reports at the item (and would reject the CRD: see the report).
        let msg = |i| format!("spec.resources[{i}]: Required value: metadata.name is required");
        let errors = s.validate_rules(&json(obj), None);
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(got, [msg(1), msg(2)]);
        assert_eq!(errors[0].cause().reason, "FieldValueRequired");
        assert_eq!(
            errors[0].cause().message,
            "Required value: metadata.name is required"
        );
    }

    #[test]
    fn map_keys_are_not_escaped_but_property_names_are() {
        let s = schema(
            r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "sync-wave": {"type": "integer"}, "namespace": {"type": "string"}, "my__field": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "!('cd.example.com/sync.wave' in self.annotations) || self.annotations['cd.example.com/sync.wave'] == string(self.sync__dash__wave)",
                 "message": "the annotation must match syncWave"},
                {"rule": "!has(self.__namespace__) || self.__namespace__ != self.my__underscores__field", "message": "differ"}]}}}"#,
        );
        let obj = |a: &str, w: i64| {
            format!(
                r#"{{"spec": {{"annotations": {{"cd.example.com/sync.wave": "{a}"}}, "sync-wave": {w},
                "namespace": "n", "my__field": "n"}}}}"#
            )
        };
        let differ = r#"spec: Invalid value: "object": differ"#;
        expect(&s, &obj("2", 2), None, &[differ]);
        let mismatch = r#"spec: Invalid value: "object": the annotation must match syncWave"#;
        expect(&s, &obj("1", 2), None, &[mismatch, differ]);
    }

    #[test]
    fn a_message_expression_gives_the_message_and_reasons_choose_the_error() {
        let s = schema(
            r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "max": {"type": "integer"}, "replicas": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.max", "message": "too many replicas",
                 "messageExpression": "'replicas must be at most ' + string(self.max) + ', not ' + string(self.replicas)"},
                {"rule": "self.replicas <= self.max", "message": "too many replicas", "messageExpression": "self.nope"},
                {"rule": "self.replicas <= self.max", "reason": "FieldValueForbidden", "fieldPath": ".replicas"},
                {"rule": "self.replicas <= self.max", "reason": "FieldValueDuplicate", "message": "dup"}]}}}"#,
        );
        expect(
            &s,
            r#"{"spec": {"max": 3, "replicas": 5}}"#,
            None,
            &[
                r#"spec: Invalid value: "object": replicas must be at most 3, not 5"#,
                r#"spec: Invalid value: "object": too many replicas"#,
                "spec.replicas: Forbidden: failed rule: self.replicas <= self.max",
                r#"spec: Duplicate value: "object""#,
            ],
        );
        expect(&s, r#"{"spec": {"max": 3, "replicas": 3}}"#, None, &[]);
    }

    const PORTS: &str = r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "LIST", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}}}}"#;

    #[test]
    fn list_map_items_see_the_old_item_with_the_same_key() {
        let s = schema(&PORTS.replace("LIST", "map"));
        let old = r#"{"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}}"#;
        let new = r#"{"spec": {"ports": [{"name": "b", "port": 3}, {"name": "a", "port": 1}, {"name": "c", "port": 9}]}}"#;
        expect(
            &s,
            new,
            Some(old),
            &[r#"spec.ports[0]: Invalid value: "object": port is immutable"#],
        );
        // Items of atomic lists have no old value, so transition rules skip them.
        let s = schema(&PORTS.replace("LIST", "atomic"));
        expect(&s, new, Some(old), &[]);
    }

    #[test]
    fn root_rules_see_type_meta_and_report_the_nil_path() {
        let s = schema(
            r#"{"type": "object", "properties": {"spec": {"type": "object"}},
            "x-kubernetes-validations": [{"rule": "self.kind == 'Lock' && self.metadata.name.startsWith('l-')"},
                {"rule": "!has(self.metadata.labels)"}]}"#,
        );
        let obj = r#"{"apiVersion": "v1", "kind": "Lock", "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {}}"#;
        let msg = r#"<nil>: Invalid value: "object": failed rule: self.kind == 'Lock' && self.metadata.name.startsWith('l-')"#;
        expect(&s, obj, None, &[msg]);
    }

    #[test]
    fn formats_and_kubernetes_functions_are_available() {
        let s = schema(
            r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
            "every": {"type": "string", "format": "duration"}, "size": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.start < self.end", "message": "start before end"},
                {"rule": "self.every >= duration('1h')", "message": "at least hourly"},
                {"rule": "quantity(self.size).isLessThan(quantity('1Gi'))", "message": "under 1Gi"}]}}}"#,
        );
        let obj = |end: &str, every: &str, size: &str| {
            format!(
                r#"{{"spec": {{"start": "2024-01-02T00:00:00Z", "end": "{end}", "every": "{every}", "size": "{size}"}}}}"#
            )
        };
        expect(
            &s,
            &obj("2024-01-02T01:00:00+00:00", "1h30m", "512Mi"),
            None,
            &[],
        );
        expect(
            &s,
            &obj("2024-01-01T23:00:00Z", "59m", "2Gi"),
            None,
            &[
                r#"spec: Invalid value: "object": start before end"#,
                r#"spec: Invalid value: "object": at least hourly"#,
                r#"spec: Invalid value: "object": under 1Gi"#,
            ],
        );
    }

    #[test]
    fn a_rule_that_does_not_compile_is_a_schema_error() {
        let with_rule = |rule: &str| {
            let rules = serde_json::json!([{"rule": rule}]);
            let text = format!(
                r#"{{"type": "object", "properties": {{"spec": {{"type": "object", "x-kubernetes-validations": {rules}}}}}}}"#
            );
            Schema::from_value(&json(&text)).expect_err("the rule does not compile")
        };
        let err = with_rule("self.?b == 1");
        assert!(matches!(
            err,
            Error::InvalidRule {
                index: 0,
                field: "rule",
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: compilation failed: \
             ERROR: <input>:1:5: unsupported syntax '.?'\n| self.?b == 1\n| ....^"
        );
        assert_eq!(
            with_rule(" ").to_string(),
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"
        );
    }

    #[test]
    fn field_paths_resolve_like_kube_apiservers() {
        let s = schema(
            r#"{"type": "object", "properties": {"a": {"type": "object", "properties": {
            "b.c": {"type": "object", "additionalProperties": {"type": "object", "properties": {"d": {"type": "string"}}}}}}}}"#,
        );
        let node = &s.root;
        assert_eq!(
            resolve_field_path(".a['b.c']['k'].d", node).as_deref(),
            Some("a.b.c[k].d")
        );
        assert_eq!(resolve_field_path(".a.x", node), None);
        assert_eq!(resolve_field_path("a", node), None);
        assert_eq!(
            escape("x-y/z.w"),
            Some("x__dash__y__slash__z__dot__w".into())
        );
        assert_eq!(escape("a_b__c"), Some("a_b__underscores__c".into()));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a@b"), None);
        assert_eq!(escape("in"), Some("__in__".into()));
    }
}
