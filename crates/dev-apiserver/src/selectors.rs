//! Label and field selectors, parsed and matched as kube-apiserver does,
//! and the pair a list or watch request filters with.

use serde_json::Value;

use crate::request::Req;
use crate::resources::ResourceType;
use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(selector) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term).ok_or_else(|| {
                ApiError::bad_request(format!("unable to parse requirement: {term}"))
            })?);
        }
        Ok(Self(requirements))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    pub fn from_json(selector: &Value) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            requirements.push(Requirement::Equals(
                key.clone(),
                value.as_str().unwrap_or_default().to_owned(),
            ));
        }
        for expression in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = expression["key"].as_str().unwrap_or_default().to_owned();
            let values: Vec<String> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            requirements.push(match expression["operator"].as_str() {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::DoesNotExist(key),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            });
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, labels: &Value) -> bool {
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

fn parse_requirement(term: &str) -> Option<Requirement> {
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim()).then(|| Requirement::DoesNotExist(key.trim().to_owned()));
    }
    for (op, ctor) in [
        (
            " notin ",
            Requirement::NotIn as fn(String, Vec<String>) -> Requirement,
        ),
        (" in ", Requirement::In),
    ] {
        if let Some((key, values)) = term.split_once(op) {
            let values = values.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values = values.split(',').map(|v| v.trim().to_owned()).collect();
            return valid_key(key.trim()).then(|| ctor(key.trim().to_owned(), values));
        }
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Some(Requirement::NotEquals(
            key.trim().to_owned(),
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Some(Requirement::Equals(
            key.trim().to_owned(),
            value.trim().to_owned(),
        ));
    }
    valid_key(term).then(|| Requirement::Exists(term.to_owned()))
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// A parsed `fieldSelector`: equality and inequality on supported fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `selector`, accepting only the fields `supported` says the
    /// resource can be selected by (kube-apiserver's rule).
    pub fn parse(selector: &str, supported: impl Fn(&str) -> bool) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                )));
            };
            if !supported(field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), equal, value.to_owned()));
        }
        Ok(Self(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field_value(object, field);
            (actual == *value) == *equal
        })
    }
}

/// A field's value as a selector compares it: a string, `""` when absent.
fn field_value(object: &Value, field: &str) -> String {
    let value = field
        .split('.')
        .try_fold(object, |v, part| v.get(part))
        .unwrap_or(&Value::Null);
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The fields a built-in resource can be selected by, beyond
/// `metadata.name` and `metadata.namespace`.
pub fn builtin_selectable(group: &str, plural: &str, field: &str) -> bool {
    match (group, plural) {
        ("", "events") => matches!(
            field,
            "involvedObject.kind"
                | "involvedObject.namespace"
                | "involvedObject.name"
                | "involvedObject.uid"
                | "involvedObject.apiVersion"
                | "involvedObject.resourceVersion"
                | "involvedObject.fieldPath"
                | "reason"
                | "reportingComponent"
                | "source"
                | "type"
        ),
        ("", "secrets") => field == "type",
        ("", "namespaces") => field == "status.phase",
        _ => false,
    }
}

/// Selectors of a list or watch request.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    pub fn from(req: &Req, rt: &ResourceType) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(req.param("labelSelector").unwrap_or_default())?;
        let fields =
            FieldSelector::parse(req.param("fieldSelector").unwrap_or_default(), |field| {
                matches!(field, "metadata.name" | "metadata.namespace")
                    || builtin_selectable(&rt.storage_key().0, &rt.storage_key().1, field)
            })?;
        Ok(Self { labels, fields })
    }

    /// Matches a stored object.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(&object["metadata"]["labels"]) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_inequality_and_sets_match_labels() {
        let labels = json!({"app": "web", "tier": "front"});
        let matches = |s: &str| LabelSelector::parse(s).unwrap().matches(&labels);
        assert!(matches("app=web"));
        assert!(matches("app==web,tier!=back"));
        assert!(matches("app in (web, api),tier"));
        assert!(matches("env notin (prod),!env"));
        assert!(!matches("app=api"));
        assert!(!matches("app notin (web)"));
        assert!(!matches("missing"));
    }

    #[test]
    fn a_malformed_label_selector_is_a_bad_request() {
        let error = LabelSelector::parse("app in web").unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message_text(),
            "unable to parse requirement: app in web"
        );
    }

    #[test]
    fn field_selectors_compare_nested_fields() {
        let event = json!({"involvedObject": {"name": "orders-db"}, "type": "Warning"});
        let selector =
            FieldSelector::parse("involvedObject.name=orders-db,type!=Normal", |_| true).unwrap();
        assert!(selector.matches(&event));
        let other = FieldSelector::parse("involvedObject.name=other", |_| true).unwrap();
        assert!(!other.matches(&event));
    }

    #[test]
    fn an_unsupported_field_is_refused_by_name() {
        let error = FieldSelector::parse("spec.foo=bar", |_| false).unwrap_err();
        assert_eq!(error.message_text(), "field label not supported: spec.foo");
    }
}
