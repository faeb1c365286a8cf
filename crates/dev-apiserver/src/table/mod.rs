//! Server-side `meta.k8s.io/v1` Table rendering, as `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//!
//! The shapes and cell formats follow kube-apiserver:
//!
//! * custom resources: the apiextensions table convertor (a `Name` column, then the CRD
//!   version's `additionalPrinterColumns`, or a lone `Age` column when it has none; cells are
//!   JSONPath results, `date` cells use the *short* human duration: `5s`, `3m`, `2d`, `4y`);
//! * built-in resources: the column sets and cell values of kube-apiserver's internal
//!   printers, always generated "wide" as the server does (kubectl hides `priority > 0`
//!   columns itself); ages use the *long* human duration (`90s`, `3m20s`, `2d3h`);
//! * anything else: the generic convertor (`Name`, `Created At` as an RFC 3339 string).
//!
//! Objects are `serde_json::Value`s exactly as kube-apiserver serializes them.
//!
//! CRD cells come from [`jsonpath`]; the built-in printers' columns are in [`columns`], their
//! cells in [`printers`]; Go's number, time and duration formats in [`crate::gofmt`].

mod columns;
mod jsonpath;
mod printers;

pub(crate) use printers::selector_string;
#[cfg(test)]
mod tests;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::gofmt;
use columns::Builtin;
use jsonpath::Path;

/// `ObjectMeta`'s documentation of `name`, used for every `Name` column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `ObjectMeta`'s documentation of `creationTimestamp`, used for every `Age` column.
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const META_API_VERSION: &str = "meta.k8s.io/v1";

/// A printer column, as in a CRD's `additionalPrinterColumns`.
///
/// For built-in printers `json_path` is empty: their cells are computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub json_path: String,
}

impl Column {
    /// Reads one entry of a CRD version's `additionalPrinterColumns`.
    ///
    /// `None` when `name`, `type` or `jsonPath` is missing. An empty description becomes
    /// `Custom resource definition column (in JSONPath format): <jsonPath>`, as the
    /// apiextensions convertor does.
    pub fn from_crd(column: &Value) -> Option<Column> {
        let name = column.get("name")?.as_str()?;
        let type_ = column.get("type")?.as_str()?;
        let json_path = column.get("jsonPath")?.as_str()?;
        let description = match column.get("description").and_then(Value::as_str) {
            Some(description) if !description.is_empty() => description.to_owned(),
            _ => format!("Custom resource definition column (in JSONPath format): {json_path}"),
        };
        let priority = column.get("priority").and_then(Value::as_i64).unwrap_or(0);
        Some(Column {
            name: name.to_owned(),
            type_: type_.to_owned(),
            format: str_at(column, &["format"]).to_owned(),
            description,
            priority: i32::try_from(priority).unwrap_or(0),
            json_path: json_path.to_owned(),
        })
    }

    /// The `Age` column kube-apiserver serves for a CRD version without printer columns.
    pub fn default_crd_age() -> Column {
        Column {
            name: "Age".to_owned(),
            type_: "date".to_owned(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".to_owned(),
        }
    }

    fn name_column() -> Column {
        Column::computed("Name", "string", NAME_DESCRIPTION, 0).with_format("name")
    }

    fn computed(name: &str, type_: &str, description: &str, priority: i32) -> Column {
        Column {
            name: name.to_owned(),
            type_: type_.to_owned(),
            format: String::new(),
            description: description.to_owned(),
            priority,
            json_path: String::new(),
        }
    }

    fn with_format(mut self, format: &str) -> Column {
        self.format = format.to_owned();
        self
    }

    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// What kind of table to build: one per resource, reusable for every response and event.
#[derive(Clone, Debug, PartialEq)]
pub enum TableKind {
    /// A custom resource: a `Name` column followed by these columns (JSONPath cells).
    /// Build it with [`TableKind::for_crd`] to get kube-apiserver's defaulting.
    Custom(Vec<Column>),
    /// A built-in resource, printed like kube-apiserver's printers (group `""` for core).
    /// Unknown resources get the generic `Name`, `Created At` table.
    Builtin { group: String, resource: String },
}

impl TableKind {
    pub fn builtin(group: &str, resource: &str) -> TableKind {
        TableKind::Builtin {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// The columns served for version `version` of a CustomResourceDefinition object:
    /// its `additionalPrinterColumns`, or a single `Age` column when there are none (or the
    /// version is unknown). As in kube-apiserver, a column whose JSONPath does not parse
    /// ends the list.
    pub fn for_crd(crd: &Value, version: &str) -> TableKind {
        let declared = array_at(crd, &["spec", "versions"])
            .iter()
            .find(|v| str_at(v, &["name"]) == version)
            .map(|v| array_at(v, &["additionalPrinterColumns"]))
            .unwrap_or_default();
        if declared.is_empty() {
            return TableKind::Custom(vec![Column::default_crd_age()]);
        }
        let mut columns = Vec::new();
        for raw in declared {
            let Some(column) = Column::from_crd(raw) else {
                continue;
            };
            if jsonpath::parse(&column.json_path).is_err() {
                break;
            }
            columns.push(column);
        }
        TableKind::Custom(columns)
    }

    /// Every column definition of this table, `Name` included.
    pub fn columns(&self) -> Vec<Column> {
        match self {
            TableKind::Custom(columns) => std::iter::once(Column::name_column())
                .chain(columns.iter().cloned())
                .collect(),
            TableKind::Builtin { group, resource } => builtin_columns(group, resource),
        }
    }
}

/// Columns kube-apiserver prints for a built-in resource (group `""` for core), `Name`
/// included; `json_path` is empty because the cells are computed (see [`table`]).
/// Resources without a dedicated printer (roles, clusterroles, customresourcedefinitions,
/// ...) get the generic `Name`, `Created At`.
pub fn builtin_columns(group: &str, resource: &str) -> Vec<Column> {
    Builtin::lookup(group, resource).columns()
}

/// Whether `include_object` is a value kube-apiserver accepts (`""` means `Metadata`).
pub fn is_valid_include_object(include_object: &str) -> bool {
    matches!(include_object, "" | "None" | "Metadata" | "Object")
}

/// Builds a `meta.k8s.io/v1` Table for objects of one resource (a list or a get).
///
/// * `include_object`: `"None"` (row `object` is `null`), `"Object"` (the object itself),
///   anything else means `"Metadata"` (a `PartialObjectMetadata` with
///   `apiVersion: meta.k8s.io/v1`); check with [`is_valid_include_object`] first to answer
///   400 for unknown values as kube-apiserver does.
/// * `list_meta`: the list's `metadata` (`resourceVersion`, `continue`,
///   `remainingItemCount` are copied). `Value::Null` for a single object: its own
///   `resourceVersion` is used.
/// * `now`: the reference time for ages.
pub fn table(
    kind: &TableKind,
    objects: &[Value],
    include_object: &str,
    list_meta: Value,
    now: Timestamp,
) -> Value {
    render(kind, objects, include_object, &list_meta, true, now)
}

/// The Table carried by one watch event: a single row, `metadata.resourceVersion` from the
/// object. kube-apiserver sends `columnDefinitions` only with the first event of a watch
/// and `null` afterwards: pass `with_headers` accordingly.
pub fn watch_event_table(
    kind: &TableKind,
    object: &Value,
    include_object: &str,
    with_headers: bool,
    now: Timestamp,
) -> Value {
    render(
        kind,
        std::slice::from_ref(object),
        include_object,
        &Value::Null,
        with_headers,
        now,
    )
}

fn render(
    kind: &TableKind,
    objects: &[Value],
    include_object: &str,
    list_meta: &Value,
    with_headers: bool,
    now: Timestamp,
) -> Value {
    let printer = Printer::new(kind);
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = Map::new();
            row.insert("cells".to_owned(), Value::Array(printer.cells(object, now)));
            if let Some(conditions) = printer.conditions(object) {
                row.insert("conditions".to_owned(), conditions);
            }
            row.insert("object".to_owned(), row_object(object, include_object));
            Value::Object(row)
        })
        .collect();
    let column_definitions = if with_headers {
        Value::Array(printer.columns.iter().map(Column::definition).collect())
    } else {
        Value::Null
    };
    json!({
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": table_metadata(list_meta, objects),
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

fn table_metadata(list_meta: &Value, objects: &[Value]) -> Value {
    let mut metadata = Map::new();
    match list_meta {
        Value::Object(list_meta) => {
            for key in ["resourceVersion", "continue"] {
                if let Some(Value::String(value)) = list_meta.get(key)
                    && !value.is_empty()
                {
                    metadata.insert(key.to_owned(), Value::String(value.clone()));
                }
            }
            if let Some(count @ Value::Number(_)) = list_meta.get("remainingItemCount") {
                metadata.insert("remainingItemCount".to_owned(), count.clone());
            }
        }
        _ => {
            if let [object] = objects {
                let rv = str_at(object, &["metadata", "resourceVersion"]);
                if !rv.is_empty() {
                    metadata.insert("resourceVersion".to_owned(), Value::from(rv));
                }
            }
        }
    }
    Value::Object(metadata)
}

fn row_object(object: &Value, include_object: &str) -> Value {
    match include_object {
        "None" => Value::Null,
        "Object" => object.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": META_API_VERSION,
            "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
    }
}

/// A [`TableKind`] resolved once per table.
struct Printer {
    columns: Vec<Column>,
    how: How,
}

enum How {
    /// JSONPath per column after `Name`; `None` when the path does not parse.
    Custom(Vec<Option<Path>>),
    Builtin(Builtin),
}

impl Printer {
    fn new(kind: &TableKind) -> Printer {
        match kind {
            TableKind::Custom(columns) => Printer {
                columns: kind.columns(),
                how: How::Custom(
                    columns
                        .iter()
                        .map(|c| jsonpath::parse(&c.json_path).ok())
                        .collect(),
                ),
            },
            TableKind::Builtin { group, resource } => {
                let builtin = Builtin::lookup(group, resource);
                Printer {
                    columns: builtin.columns(),
                    how: How::Builtin(builtin),
                }
            }
        }
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        match &self.how {
            How::Custom(paths) => {
                let mut cells = Vec::with_capacity(paths.len() + 1);
                cells.push(Value::from(object_name(object)));
                for (column, path) in self.columns[1..].iter().zip(paths) {
                    cells.push(custom_cell(column, path.as_ref(), object, now));
                }
                cells
            }
            How::Builtin(builtin) => builtin.cells(object, now),
        }
    }

    fn conditions(&self, object: &Value) -> Option<Value> {
        match self.how {
            How::Builtin(Builtin::Pod) => printers::pod_row_conditions(object),
            _ => None,
        }
    }
}

/// One CRD column cell: the first JSONPath result, typed like the apiextensions convertor.
fn custom_cell(column: &Column, path: Option<&Path>, object: &Value, now: Timestamp) -> Value {
    let Some(Ok(results)) = path.map(|p| jsonpath::evaluate(p, object)) else {
        return Value::Null;
    };
    let Some(value) = results.first() else {
        return Value::Null;
    };
    let value: &Value = value;
    match column.type_.as_str() {
        "string" => Value::String(jsonpath::print_result(value)),
        "integer" => match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => n.as_f64().map_or(Value::Null, gofmt::float_value),
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match value {
            Value::String(s) => Value::String(crd_date_cell(s, now)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// `date` cells: `metav1.Time` query-parameter parsing, then the short human duration.
fn crd_date_cell(text: &str, now: Timestamp) -> String {
    if text.is_empty() || text == "null" {
        return "<unknown>".to_owned();
    }
    match text.parse::<Timestamp>() {
        Ok(ts) if gofmt::is_zero_time(ts) => "<unknown>".to_owned(),
        Ok(ts) => gofmt::short_human_duration(now.duration_since(ts)),
        Err(_) => "<invalid>".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------
// Value helpers, shared with the printers
// ---------------------------------------------------------------------------------------

fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(*key))
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    at(value, path).and_then(Value::as_str).unwrap_or("")
}

fn opt_str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

fn int_at(value: &Value, path: &[&str]) -> i64 {
    at(value, path)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
        .unwrap_or(0)
}

fn array_at<'a>(value: &'a Value, path: &[&str]) -> &'a [Value] {
    at(value, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn map_len(value: &Value, path: &[&str]) -> usize {
    at(value, path)
        .and_then(Value::as_object)
        .map_or(0, Map::len)
}

fn bool_at(value: &Value, path: &[&str]) -> bool {
    at(value, path).and_then(Value::as_bool).unwrap_or(false)
}

fn object_name(object: &Value) -> &str {
    str_at(object, &["metadata", "name"])
}

fn is_deleting(object: &Value) -> bool {
    at(object, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null())
}

fn or_placeholder(text: &str, placeholder: &str) -> String {
    if text.is_empty() {
        placeholder.to_owned()
    } else {
        text.to_owned()
    }
}
