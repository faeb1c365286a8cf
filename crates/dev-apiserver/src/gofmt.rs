//! Go's formatting, wherever this server's output must read as
//! kube-apiserver's: `metav1.Time`s, apimachinery's human durations, CEL's
//! duration strings, `fmt` and `encoding/json` floats, `json.Marshal` of
//! decoded JSON, and `%q`. One copy of each, so that every caller prints the
//! same text.

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::schema::{self, Card, Message, Shape};

// === times ===

/// Unix seconds of Go's zero `time.Time` (`0001-01-01T00:00:00Z`), which
/// Kubernetes treats as unset.
pub const ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Go's zero `time.Time`, which `metav1.Time.IsZero` reports.
pub fn is_zero_time(ts: Timestamp) -> bool {
    ts.as_second() == ZERO_TIME_UNIX && ts.subsec_nanosecond() == 0
}

/// How Kubernetes serializes a `metav1.Time`: RFC 3339 in UTC, whole
/// seconds (`2006-01-02T15:04:05Z`).
const TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// A `metav1.Time`.
pub fn time(ts: Timestamp) -> String {
    ts.strftime(TIME_FORMAT).to_string()
}

/// A `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits.
pub fn micro_time(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The current time as a `metav1.Time`.
pub fn now() -> String {
    time(Timestamp::now())
}

/// Unix seconds as a `metav1.Time`, for X.509 validity times. Computed as
/// a civil time: a `Timestamp` cannot hold RFC 5280's "no expiration",
/// `9999-12-31T23:59:59Z`. X.509 years have four digits, so the saturation
/// past year 9999 never shows.
pub fn unix_time(secs: u64) -> String {
    let epoch = jiff::civil::DateTime::constant(1970, 1, 1, 0, 0, 0, 0);
    let time = i64::try_from(secs)
        .ok()
        .and_then(|s| epoch.checked_add(SignedDuration::from_secs(s)).ok())
        .unwrap_or(jiff::civil::DateTime::MAX);
    time.strftime(TIME_FORMAT).to_string()
}

// === durations ===

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;

/// Go's `time.Duration`: nanoseconds in an `i64`, saturating.
fn go_duration(d: SignedDuration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(if d.is_negative() { i64::MIN } else { i64::MAX })
}

/// apimachinery's `duration.ShortHumanDuration` (CRD `date` columns): `59s`, `59m`, `23h`,
/// `364d`, `1y`; `0s` up to 2 s in the future, `<invalid>` beyond.
pub fn short_human_duration(d: SignedDuration) -> String {
    let d = go_duration(d);
    let seconds = d / NANOS_PER_SECOND;
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = d / NANOS_PER_MINUTE;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = d / NANOS_PER_HOUR;
    if hours < 24 {
        return format!("{hours}h");
    }
    if hours < 24 * 365 {
        return format!("{}d", hours / 24);
    }
    format!("{}y", hours / 24 / 365)
}

/// apimachinery's `duration.HumanDuration` (built-in `Age` columns): `119s`, `3m20s`,
/// `179m`, `7h59m`, `47h`, `2d3h`, `729d`, `2y10d`, `8y`.
pub fn human_duration(d: SignedDuration) -> String {
    let d = go_duration(d);
    let seconds = d / NANOS_PER_SECOND;
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / NANOS_PER_MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / NANOS_PER_HOUR;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// A CEL duration as JSON: a Go-style string of seconds (`1h0m0s` is
/// written `3600s`, 1.5 seconds `1.5s`).
pub fn cel_duration(seconds: i64, nanos: i32) -> String {
    if nanos == 0 {
        format!("{seconds}s")
    } else {
        let frac = format!("{:09}", nanos.unsigned_abs());
        format!("{seconds}.{}s", frac.trim_end_matches('0'))
    }
}

// === numbers and JSON ===

/// A float cell serialized like Go's `encoding/json` (integral values without `.0`).
pub fn float_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// Splits Rust's shortest `{:e}` rendering into mantissa and decimal exponent.
fn mantissa_exponent(f: f64) -> (String, i32) {
    let text = format!("{f:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text.as_str(), "0"));
    (mantissa.to_owned(), exponent.parse().unwrap_or(0))
}

/// Go's `%v` for a float64 (`strconv` `'g'`, shortest): exponent form below 1e-4 and from 1e6.
pub fn print_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_owned();
    }
    let (mantissa, exponent) = mantissa_exponent(f);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        format!("{f}")
    }
}

/// Go's `encoding/json` float64: fixed notation in [1e-6, 1e21), else `1e+21` / `1e-7`.
fn json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (mantissa, exponent) = mantissa_exponent(f);
        if exponent < 0 {
            format!("{mantissa}e-{}", exponent.unsigned_abs())
        } else {
            format!("{mantissa}e+{exponent:02}")
        }
    } else {
        format!("{f}")
    }
}

/// kube-apiserver's JSON encoding of an object: Go's `encoding/json` of the typed object,
/// ended by a newline (`json.Encoder`). A built-in kind (with its lists, Status and
/// DeleteOptions) has its fields in the Go struct's order; custom resources and anything
/// untyped are Go maps, whose keys are sorted.
pub fn object_json(value: &Value) -> String {
    let message = schema::message_of(
        value["apiVersion"].as_str().unwrap_or_default(),
        value["kind"].as_str().unwrap_or_default(),
    );
    let mut out = String::new();
    write_typed(value, message, &mut out);
    out.push('\n');
    out
}

/// A `watch.Event` line: `{"type":...,"object":...}` and a newline.
pub fn watch_event_json(kind: &str, object: &Value) -> String {
    let mut out = String::from("{\"type\":");
    write_json_string(kind, &mut out);
    out.push_str(",\"object\":");
    let message = schema::message_of(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    );
    write_typed(object, message, &mut out);
    out.push_str("}\n");
    out
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn write_typed(value: &Value, message: Option<&'static Message>, out: &mut String) {
    let (Value::Object(map), Some(message)) = (value, message) else {
        return write_json(value, out);
    };
    if message.shape != Shape::Struct {
        return write_json(value, out);
    }
    let fields = message.json_fields();
    let mut first = true;
    let mut key = |name: &str, out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
        write_json_string(name, out);
        out.push(':');
    };
    let mut body = String::new();
    // `TypeMeta` is inlined first in every Go object that has it.
    for type_field in ["kind", "apiVersion"] {
        if let Some(v) = map
            .get(type_field)
            .filter(|_| message.field(type_field).is_none())
        {
            key(type_field, &mut body);
            write_json(v, &mut body);
        }
    }
    for field in &fields {
        let Some(v) = map.get(field.json) else {
            // Go prints a zero `metav1.Time` as null; only a template's metadata lacks one.
            if message.name == OBJECT_META && field.json == "creationTimestamp" {
                key(field.json, &mut body);
                body.push_str("null");
            }
            continue;
        };
        key(field.json, &mut body);
        let element = field.message();
        match (field.card, v) {
            (Card::Repeated, Value::Array(items)) => {
                body.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        body.push(',');
                    }
                    write_typed(item, element, &mut body);
                }
                body.push(']');
            }
            (Card::Map, Value::Object(entries)) => {
                body.push('{');
                for (i, (k, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        body.push(',');
                    }
                    write_json_string(k, &mut body);
                    body.push(':');
                    write_typed(item, element, &mut body);
                }
                body.push('}');
            }
            _ => write_typed(v, element, &mut body),
        }
    }
    // What the schema does not know (1.33 lacks it), sorted as a map's keys.
    let known = |k: &str| fields.iter().any(|f| f.json == k) || matches!(k, "kind" | "apiVersion");
    for (k, v) in map.iter().filter(|(k, _)| !known(k)) {
        key(k, &mut body);
        write_json(v, &mut body);
    }
    out.push('{');
    out.push_str(&body);
    out.push('}');
}

/// Go's `json.Marshal` of decoded JSON: sorted keys, HTML-safe escaping.
pub fn json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => out.push_str(&json_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                write_json(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

// === strings ===

/// Go's `%q` of a string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    #[test]
    fn unix_times_cover_the_x509_range() {
        assert_eq!(unix_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_time(951_782_400), "2000-02-29T00:00:00Z");
        // RFC 5280's "no well-defined expiration date", past `Timestamp::MAX`.
        assert_eq!(unix_time(253_402_300_799), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn short_durations_match_short_human_duration() {
        let cases = [
            (-3, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (60, "1m"),
            (3599, "59m"),
            (3600, "1h"),
            (86_399, "23h"),
            (86_400, "1d"),
            (3 * 86_400 + 3 * 3600, "3d"),
            (365 * 86_400 - 1, "364d"),
            (365 * 86_400, "1y"),
        ];
        for (secs, expected) in cases {
            assert_eq!(short_human_duration(seconds(secs)), expected, "{secs}s");
        }
    }

    #[test]
    fn long_durations_match_human_duration() {
        let cases = [
            (-2, "<invalid>"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (8 * 3600 - 60, "7h59m"),
            (47 * 3600, "47h"),
            (51 * 3600, "2d3h"),
            (7 * 86_400, "7d"),
            (8 * 86_400, "8d"),
            (2 * 365 * 86_400 - 86_400, "729d"),
            (2 * 365 * 86_400 + 10 * 86_400, "2y10d"),
            (8 * 365 * 86_400, "8y"),
        ];
        for (secs, expected) in cases {
            assert_eq!(human_duration(seconds(secs)), expected, "{secs}s");
        }
    }
}
