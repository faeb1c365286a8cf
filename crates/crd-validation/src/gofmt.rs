//! Go's renderings of values, as kube-apiserver prints them in error messages.

use serde_json::{Number, Value};

/// A JSON number the way kube-apiserver decodes it: integers as `int64`, the rest as `float64`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(crate) fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// `field.Error`'s rendering of a bad value: `%q` for strings, `%v` for numbers and
/// booleans, `json.Marshal` for everything else.
pub(crate) fn bad_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_v(Num::of(n)),
        _ => json(v),
    }
}

/// Go's `%v` of an `int64` or `float64`.
pub(crate) fn number_v(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => float(f, false),
    }
}

/// Go's `%v` (`strconv` 'g' with the shortest precision: exponent form when the
/// exponent is < -4 or >= 6, like `1e+06`) or, with `json`, `encoding/json`'s float
/// form (exponent form below 1e-6 or from 1e21 on, like `1e-7` and `1e+21`).
fn float(f: f64, json: bool) -> String {
    if f == 0.0 || !f.is_finite() {
        return f.to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let exponent_form = if json {
        f.abs() < 1e-6 || f.abs() >= 1e21
    } else {
        !(-4..6).contains(&exp)
    };
    if !exponent_form {
        return f.to_string();
    }
    let sign = if exp < 0 { '-' } else { '+' };
    if json {
        format!("{mantissa}e{sign}{}", exp.abs())
    } else {
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Go's `unicode.IsPrint`, approximately: no control, format or non-ASCII space characters.
fn printable(c: char) -> bool {
    let format = matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}');
    !(c.is_control() || (c.is_whitespace() && c != ' ') || format)
}

/// Go's `strconv.Quote` (`%q`), or with `json` the string form of Go's `json.Marshal`.
fn escape(s: &str, json: bool) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        let code = c as u32;
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' if json => {
                out.push_str(&format!("\\u{code:04x}"))
            }
            _ if json && code < 0x20 => out.push_str(&format!("\\u{code:04x}")),
            _ if json || printable(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{b}' => out.push_str("\\v"),
            _ if code < 0x20 || code == 0x7f => out.push_str(&format!("\\x{code:02x}")),
            _ if code < 0x10000 => out.push_str(&format!("\\u{code:04x}")),
            _ => out.push_str(&format!("\\U{code:08x}")),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.Quote` (`%q`).
pub(crate) fn quote(s: &str) -> String {
    escape(s, false)
}

/// Go's `json.Marshal` of a decoded JSON value (sorted keys, HTML characters escaped).
pub(crate) fn json(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => float(f, true),
        },
        Value::String(s) => escape(s, true),
        Value::Array(a) => format!("[{}]", a.iter().map(json).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", escape(k, true), json(&m[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}
