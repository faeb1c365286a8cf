//! A check that what people read is free of Rust debug formatting: the
//! statuses of Navique's objects and the Events of a namespace must never
//! carry `GroupVersionKind { group: "", ... }`, `Some(...)` or `None`.

use serde_json::Value;

use crate::Cluster;

/// The debug-formatting pattern `text` carries, if any.
pub fn debug_formatting(text: &str) -> Option<&'static str> {
    const PATTERNS: [&str; 5] = [
        "{ group:",
        "GroupVersionKind {",
        "Some(",
        "ObjectRef {",
        "Error {",
    ];
    if let Some(pattern) = PATTERNS.iter().find(|p| text.contains(*p)) {
        return Some(pattern);
    }
    // `None` as a word: not part of a longer identifier.
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices("None")
        .any(|(at, _)| {
            !word(text[..at].chars().next_back()) && !word(text[at + 4..].chars().next())
        })
        .then_some("None")
}

/// Every string inside `value`, with its JSON path.
fn strings<'a>(value: &'a Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::String(s) => out.push((path, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                strings(field, format!("{path}.{key}"), out);
            }
        }
        _ => {}
    }
}

/// Fails when a status of a Navique object (category `navique`) or an
/// Event message in `ns` shows debug formatting.
pub fn assert_readable(cluster: &Cluster, ns: &str) {
    let mut found = Vec::new();
    let objects: Value =
        serde_json::from_str(&cluster.kubectl_ok(&["get", "navique", "-n", ns, "-o", "json"]))
            .expect("JSON list");
    let events: Value =
        serde_json::from_str(&cluster.kubectl_ok(&["get", "events", "-n", ns, "-o", "json"]))
            .expect("JSON list");
    let items = |list: &Value| list["items"].as_array().cloned().unwrap_or_default();
    let mut texts = Vec::new();
    let (objects, events) = (items(&objects), items(&events));
    for object in &objects {
        let name = format!(
            "{} {}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        strings(&object["status"], format!("{name} .status"), &mut texts);
    }
    for event in &events {
        let name = format!(
            "Event {} ({})",
            event["metadata"]["name"].as_str().unwrap_or_default(),
            event["reason"].as_str().unwrap_or_default()
        );
        strings(&event["message"], format!("{name} .message"), &mut texts);
        strings(&event["note"], format!("{name} .note"), &mut texts);
    }
    for (path, text) in texts {
        if let Some(pattern) = debug_formatting(text) {
            found.push(format!("{path}: {pattern:?} in {text:?}"));
        }
    }
    assert!(
        found.is_empty(),
        "debug formatting reaches what people read in {ns}:\n{}",
        found.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_strings_are_found_and_prose_is_not() {
        assert_eq!(
            debug_formatting(
                r#"Missing Kind: GroupVersionKind { group: "", version: "v1", kind: "Stak" }"#
            ),
            Some("{ group:")
        );
        assert_eq!(debug_formatting("retention Some(\"30d\")"), Some("Some("));
        assert_eq!(debug_formatting("reason: None"), Some("None"));
        assert_eq!(debug_formatting("protecting Stack forge"), None);
        assert_eq!(debug_formatting("NoneSuch and Nonexistent"), None);
        assert_eq!(
            debug_formatting("service not found: orders-db"),
            None,
            "a message naming a missing thing is fine"
        );
    }
}
