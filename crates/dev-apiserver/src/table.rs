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

use std::borrow::Cow;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

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
            if parse_jsonpath(&column.json_path).is_err() {
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
                        .map(|c| parse_jsonpath(&c.json_path).ok())
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
            How::Builtin(Builtin::Pod) => pod_row_conditions(object),
            _ => None,
        }
    }
}

/// One CRD column cell: the first JSONPath result, typed like the apiextensions convertor.
fn custom_cell(column: &Column, path: Option<&Path>, object: &Value, now: Timestamp) -> Value {
    let Some(Ok(results)) = path.map(|p| evaluate(p, object)) else {
        return Value::Null;
    };
    let Some(value) = results.first() else {
        return Value::Null;
    };
    let value: &Value = value;
    match column.type_.as_str() {
        "string" => Value::String(print_result(value)),
        "integer" => match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => n.as_f64().map_or(Value::Null, float_value),
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

/// A float cell serialized like Go's `encoding/json` (integral values without `.0`).
fn float_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// `date` cells: `metav1.Time` query-parameter parsing, then the short human duration.
fn crd_date_cell(text: &str, now: Timestamp) -> String {
    if text.is_empty() || text == "null" {
        return "<unknown>".to_owned();
    }
    match text.parse::<Timestamp>() {
        Ok(ts) if is_zero_time(ts) => "<unknown>".to_owned(),
        Ok(ts) => short_human_duration(now.duration_since(ts)),
        Err(_) => "<invalid>".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------

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

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`), which `metav1.Time.IsZero` reports.
fn is_zero_time(ts: Timestamp) -> bool {
    ts.as_second() == -62_135_596_800 && ts.subsec_nanosecond() == 0
}

/// A `metav1.Time`/`MicroTime` field: `None` when absent, empty, unparsable or zero.
fn time_at(value: &Value, path: &[&str]) -> Option<Timestamp> {
    let text = at(value, path)?.as_str()?;
    text.parse::<Timestamp>()
        .ok()
        .filter(|ts| !is_zero_time(*ts))
}

/// The printers' `translateTimestampSince`.
fn since(ts: Option<Timestamp>, now: Timestamp) -> String {
    match ts {
        Some(ts) => human_duration(now.duration_since(ts)),
        None => "<unknown>".to_owned(),
    }
}

fn age(object: &Value, now: Timestamp) -> Value {
    Value::String(since(
        time_at(object, &["metadata", "creationTimestamp"]),
        now,
    ))
}

// ---------------------------------------------------------------------------------------
// JSONPath (the client-go `util/jsonpath` dialect, one expression)
// ---------------------------------------------------------------------------------------

/// Evaluates a Kubernetes JSONPath expression (`.a.b`, `.a[0]`, `.a[-1]`, `.a[1:3]`,
/// `.a[*].b`, `.a['b']`, `.a[0,2]`, `..b`, `.*`, filters `[?(@.type=="Ready")]`,
/// `[?(@.x)]`, with or without the surrounding `{}`) against an object, with missing keys
/// allowed. An invalid expression, or an evaluation error (indexing a non-list, an index out
/// of range, comparing incompatible values), yields no results.
#[cfg(test)]
pub fn jsonpath(object: &Value, path: &str) -> Vec<Value> {
    match parse_jsonpath(path).map(|p| evaluate(&p, object)) {
        Ok(Ok(results)) => results.into_iter().map(Cow::into_owned).collect(),
        _ => Vec::new(),
    }
}

type Path = Vec<Step>;

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// `.name`; an empty name selects the current value.
    Field(String),
    Wildcard,
    Recursive,
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        single: bool,
    },
    Union(Vec<Path>),
    Filter {
        left: Path,
        op: String,
        right: Path,
    },
    Exists(Path),
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

#[derive(Debug)]
struct PathError;

fn parse_jsonpath(path: &str) -> Result<Path, PathError> {
    let trimmed = path.trim();
    let inner = match trimmed.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or(PathError)?,
        None => trimmed,
    };
    let chars: Vec<char> = inner.chars().collect();
    let mut parser = PathParser { chars, pos: 0 };
    parser.parse()
}

struct PathParser {
    chars: Vec<char>,
    pos: usize,
}

fn is_terminator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

impl PathParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn rest_starts_with(&self, prefix: &str) -> bool {
        prefix
            .chars()
            .enumerate()
            .all(|(i, c)| self.chars.get(self.pos + i) == Some(&c))
    }

    fn parse(&mut self) -> Result<Path, PathError> {
        let mut steps = Vec::new();
        while let Some(c) = self.peek() {
            if self.rest_starts_with("[?(") {
                self.pos += 3;
                steps.push(self.filter()?);
            } else if self.rest_starts_with("..") {
                if steps.last() == Some(&Step::Recursive) {
                    return Err(PathError);
                }
                self.pos += 2;
                steps.push(Step::Recursive);
                if self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
                    steps.push(self.field());
                }
            } else {
                match c {
                    ' ' | '\t' | '@' | '$' => self.pos += 1,
                    '[' => {
                        self.pos += 1;
                        steps.push(self.bracket()?);
                    }
                    '"' | '\'' => {
                        self.pos += 1;
                        steps.push(Step::Text(self.quoted(c)?));
                    }
                    '.' => {
                        self.pos += 1;
                        steps.push(self.field());
                    }
                    '+' | '-' | '0'..='9' => steps.push(self.number()?),
                    c if c == '_' || c.is_alphanumeric() => {
                        let word = self.take_until_terminator();
                        match word.as_str() {
                            "true" => steps.push(Step::Bool(true)),
                            "false" => steps.push(Step::Bool(false)),
                            // `range`/`end` templates are not supported.
                            _ => return Err(PathError),
                        }
                    }
                    _ => return Err(PathError),
                }
            }
        }
        Ok(steps)
    }

    fn take_until_terminator(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                self.pos += 1;
                if let Some(escaped) = self.peek() {
                    word.push(escaped);
                    self.pos += 1;
                }
                continue;
            }
            if is_terminator(c) {
                break;
            }
            word.push(c);
            self.pos += 1;
        }
        word
    }

    fn field(&mut self) -> Step {
        let name = self.take_until_terminator();
        if name == "*" {
            Step::Wildcard
        } else {
            Step::Field(name)
        }
    }

    fn number(&mut self) -> Result<Step, PathError> {
        let start = self.pos;
        if matches!(self.peek(), Some('+' | '-')) {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c == '.' || c.is_ascii_digit()) {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        let text = text.strip_prefix('+').unwrap_or(&text);
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Step::Int(i));
        }
        text.parse::<f64>().map(Step::Float).map_err(|_| PathError)
    }

    fn quoted(&mut self, quote: char) -> Result<String, PathError> {
        let mut text = String::new();
        loop {
            let c = self.peek().ok_or(PathError)?;
            self.pos += 1;
            match c {
                '\n' => return Err(PathError),
                '\\' => {
                    let escaped = self.peek().ok_or(PathError)?;
                    self.pos += 1;
                    text.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
                c if c == quote => return Ok(text),
                c => text.push(c),
            }
        }
    }

    /// `[...]` after the `[`: slice, index, `*`, quoted key or union.
    fn bracket(&mut self) -> Result<Step, PathError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c != ']' && c != '\n') {
            self.pos += 1;
        }
        if self.peek() != Some(']') {
            return Err(PathError);
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        self.pos += 1;
        bracket_step(&text)
    }

    /// `[?(` ... `)]`, the prefix already consumed.
    fn filter(&mut self) -> Result<Step, PathError> {
        let start = self.pos;
        let mut quote: Option<char> = None;
        loop {
            let c = self.peek().ok_or(PathError)?;
            self.pos += 1;
            match (c, quote) {
                ('\n', _) => return Err(PathError),
                ('"' | '\'', None) => quote = Some(c),
                (c, Some(q)) if c == q && self.chars[self.pos - 2] != '\\' => quote = None,
                (')', None) => break,
                _ => {}
            }
        }
        let text: String = self.chars[start..self.pos - 1].iter().collect();
        if self.peek() != Some(']') {
            return Err(PathError);
        }
        self.pos += 1;
        match split_comparison(&text) {
            Some((left, op, right)) => Ok(Step::Filter {
                left: parse_jsonpath(left)?,
                op: op.to_owned(),
                right: parse_jsonpath(right)?,
            }),
            None => Ok(Step::Exists(parse_jsonpath(&text)?)),
        }
    }
}

/// Splits `left op right` where `op` is the first run of `!<>=` characters.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let op_start = text.find(is_op)?;
    if op_start == 0 {
        return None;
    }
    let op_len = text[op_start..]
        .find(|c: char| !is_op(c))
        .unwrap_or(text.len() - op_start);
    let right = &text[op_start + op_len..];
    if right.is_empty() {
        return None;
    }
    Some((&text[..op_start], &text[op_start..op_start + op_len], right))
}

fn bracket_step(text: &str) -> Result<Step, PathError> {
    let text = if text == "*" { ":" } else { text };
    if text.contains(',') {
        let parts = text
            .split(',')
            .map(|part| {
                let step = bracket_step(part.trim())?;
                Ok(vec![step])
            })
            .collect::<Result<Vec<Path>, PathError>>()?;
        return Ok(Step::Union(parts));
    }
    for quote in ['\'', '"'] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return Ok(Step::Field(text[1..text.len() - 1].to_owned()));
        }
    }
    let mut parts = text.split(':');
    let parse = |part: Option<&str>| -> Result<Option<i64>, PathError> {
        match part.map(str::trim) {
            None | Some("") => Ok(None),
            Some(number) => number.parse::<i64>().map(Some).map_err(|_| PathError),
        }
    };
    let start = parse(parts.next())?;
    let has_colon = text.contains(':');
    let end = parse(parts.next())?;
    // A third part (Go's slice capacity) is validated and otherwise ignored.
    parse(parts.next())?;
    if parts.next().is_some() {
        return Err(PathError);
    }
    Ok(Step::Slice {
        start,
        end,
        single: !has_colon,
    })
}

#[derive(Debug)]
struct EvalError;

type Values<'a> = Vec<Cow<'a, Value>>;

fn evaluate<'a>(path: &[Step], root: &'a Value) -> Result<Values<'a>, EvalError> {
    eval_steps(path, vec![Cow::Borrowed(root)])
}

fn eval_steps<'a>(path: &[Step], mut current: Values<'a>) -> Result<Values<'a>, EvalError> {
    for step in path {
        current = eval_step(step, current)?;
    }
    Ok(current)
}

/// Children of a value for `*` and `..`: object values or list items.
fn children<'a>(value: &Cow<'a, Value>) -> Values<'a> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(map)) => map.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(items)) => items.iter().cloned().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

fn member<'a>(value: &Cow<'a, Value>, name: &str) -> Option<Cow<'a, Value>> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.get(name).map(Cow::Borrowed),
        Cow::Owned(Value::Object(map)) => map.get(name).cloned().map(Cow::Owned),
        _ => None,
    }
}

fn eval_step<'a>(step: &Step, input: Values<'a>) -> Result<Values<'a>, EvalError> {
    let mut out: Values<'a> = Vec::new();
    match step {
        Step::Field(name) if name.is_empty() => return Ok(input),
        Step::Field(name) => {
            for value in &input {
                if let Some(found) = member(value, name) {
                    out.push(found);
                }
            }
        }
        Step::Wildcard => {
            for value in &input {
                out.extend(children(value));
            }
        }
        Step::Recursive => {
            for value in input {
                recurse(value, &mut out);
            }
        }
        Step::Slice { start, end, single } => {
            for value in &input {
                if value.is_null() {
                    continue;
                }
                let len = value.as_array().ok_or(EvalError)?.len();
                let (from, to) = slice_bounds(*start, *end, *single, len)?;
                let items = children(value);
                out.extend(items.into_iter().skip(from).take(to - from));
            }
        }
        Step::Union(paths) => {
            for path in paths {
                out.extend(eval_steps(path, input.clone())?);
            }
        }
        Step::Exists(left) => {
            for value in &input {
                let items = filter_items(value)?;
                for item in items {
                    let found = eval_steps(left, vec![item.clone()]).unwrap_or_default();
                    if !found.is_empty() {
                        out.push(item);
                    }
                }
            }
        }
        Step::Filter { left, op, right } => {
            for value in &input {
                for item in filter_items(value)? {
                    let lefts = eval_steps(left, vec![item.clone()])?;
                    let rights = eval_steps(right, vec![item.clone()])?;
                    let ([l], [r]) = (lefts.as_slice(), rights.as_slice()) else {
                        return Err(EvalError);
                    };
                    if compare(l, op, r)? {
                        out.push(item);
                    }
                }
            }
        }
        Step::Text(text) => out.push(Cow::Owned(Value::String(text.clone()))),
        Step::Int(i) => out.extend(input.iter().map(|_| Cow::Owned(Value::from(*i)))),
        Step::Float(f) => out.extend(input.iter().map(|_| Cow::Owned(Value::from(*f)))),
        Step::Bool(b) => out.extend(input.iter().map(|_| Cow::Owned(Value::Bool(*b)))),
    }
    Ok(out)
}

fn recurse<'a>(value: Cow<'a, Value>, out: &mut Values<'a>) {
    let kids = children(&value);
    if kids.is_empty() {
        return;
    }
    out.push(value);
    for kid in kids {
        recurse(kid, out);
    }
}

fn filter_items<'a>(value: &Cow<'a, Value>) -> Result<Values<'a>, EvalError> {
    if !value.is_array() {
        return Err(EvalError);
    }
    Ok(children(value))
}

fn slice_bounds(
    start: Option<i64>,
    end: Option<i64>,
    single: bool,
    len: usize,
) -> Result<(usize, usize), EvalError> {
    let len = i64::try_from(len).map_err(|_| EvalError)?;
    let mut from = start.unwrap_or(0);
    if from < 0 {
        from += len;
    }
    let mut to = if single { from + 1 } else { end.unwrap_or(len) };
    if to < 0 {
        to += len;
    }
    if to != from && (from >= len || from < 0 || to > len) {
        return Err(EvalError);
    }
    if to < from {
        return Err(EvalError);
    }
    Ok((
        usize::try_from(from).map_err(|_| EvalError)?,
        usize::try_from(to).map_err(|_| EvalError)?,
    ))
}

/// Go template comparison of two scalars (`==`, `!=`, `<`, `>`, `<=`, `>=`).
fn compare(left: &Value, op: &str, right: &Value) -> Result<bool, EvalError> {
    use std::cmp::Ordering;
    enum Scalar<'s> {
        Bool(bool),
        Int(i128),
        Float(f64),
        Str(&'s str),
    }
    fn scalar(v: &Value) -> Result<Scalar<'_>, EvalError> {
        match v {
            Value::Bool(b) => Ok(Scalar::Bool(*b)),
            Value::String(s) => Ok(Scalar::Str(s)),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Ok(Scalar::Int(i128::from(i)))
                } else if let Some(u) = n.as_u64() {
                    Ok(Scalar::Int(i128::from(u)))
                } else {
                    n.as_f64().map(Scalar::Float).ok_or(EvalError)
                }
            }
            _ => Err(EvalError),
        }
    }
    let ordering = match (scalar(left)?, scalar(right)?) {
        (Scalar::Bool(l), Scalar::Bool(r)) => {
            return match op {
                "==" => Ok(l == r),
                "!=" => Ok(l != r),
                _ => Err(EvalError),
            };
        }
        (Scalar::Int(l), Scalar::Int(r)) => l.cmp(&r),
        (Scalar::Float(l), Scalar::Float(r)) => l.partial_cmp(&r).ok_or(EvalError)?,
        (Scalar::Str(l), Scalar::Str(r)) => l.cmp(r),
        _ => return Err(EvalError),
    };
    match op {
        "==" => Ok(ordering == Ordering::Equal),
        "!=" => Ok(ordering != Ordering::Equal),
        "<" => Ok(ordering == Ordering::Less),
        ">" => Ok(ordering == Ordering::Greater),
        "<=" => Ok(ordering != Ordering::Greater),
        ">=" => Ok(ordering != Ordering::Less),
        _ => Err(EvalError),
    }
}

/// client-go `JSONPath.PrintResults` for one value: lists and objects as compact JSON,
/// scalars as Go's `fmt.Print`, `null` as `<no value>`.
fn print_result(value: &Value) -> String {
    match value {
        Value::Null => "<no value>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => go_print_float(f),
            _ => n.to_string(),
        },
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            go_json(value, &mut out);
            out
        }
    }
}

/// Splits Rust's shortest `{:e}` rendering into mantissa and decimal exponent.
fn mantissa_exponent(f: f64) -> (String, i32) {
    let text = format!("{f:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text.as_str(), "0"));
    (mantissa.to_owned(), exponent.parse().unwrap_or(0))
}

/// Go's `%v` for a float64 (`strconv` `'g'`, shortest): exponent form below 1e-4 and from 1e6.
fn go_print_float(f: f64) -> String {
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
fn go_json_float(f: f64) -> String {
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

/// Go's `json.Marshal` of decoded JSON: sorted keys, HTML-safe escaping.
fn go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => out.push_str(&go_json_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
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
                go_json_string(key, out);
                out.push(':');
                go_json(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn go_json_string(s: &str, out: &mut String) {
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

// ---------------------------------------------------------------------------------------
// Value helpers
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

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> String {
    let Some(map) = labels.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_owned();
    };
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// `metav1.LabelSelectorAsSelector(...).String()`; `None` when the selector is invalid.
fn selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Some(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push((key.clone(), format!("{key}={}", value.as_str()?)));
        }
    }
    for expression in array_at(selector, &["matchExpressions"]) {
        let key = str_at(expression, &["key"]);
        let mut values: Vec<&str> = array_at(expression, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match str_at(expression, &["operator"]) {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" if values.is_empty() => key.to_owned(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, text)| text)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` when empty, `<error>` when invalid.
fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        None => "<error>".to_owned(),
        Some(text) if text.is_empty() => "<none>".to_owned(),
        Some(text) => text,
    }
}

/// Container names and images of a pod spec, comma-separated.
fn container_cells(pod_spec: Option<&Value>) -> (Value, Value) {
    let containers = pod_spec.map_or(&[][..], |spec| array_at(spec, &["containers"]));
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (Value::from(names.join(",")), Value::from(images.join(",")))
}

/// `IntOrString.String()`.
fn int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// `GetAccessModesAsString`: always in the order RWO, ROX, RWX, RWOP.
fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// Storage class of a PV or PVC: the beta annotation wins over `spec.storageClassName`.
fn storage_class(object: &Value) -> String {
    opt_str_at(
        object,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .unwrap_or_else(|| str_at(object, &["spec", "storageClassName"]))
    .to_owned()
}

fn has_condition(object: &Value, type_: &str) -> bool {
    array_at(object, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == "True")
}

/// IPs (or hostnames) of a load balancer status, unique and sorted.
fn load_balancer_ingress(object: &Value) -> String {
    let mut entries: Vec<&str> = array_at(object, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let hostname = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !hostname.is_empty() {
                Some(hostname)
            } else {
                None
            }
        })
        .collect();
    entries.sort_unstable();
    entries.dedup();
    entries.join(",")
}

/// The printers' "first three, then `+ N more...`" lists; `<unset>` when empty.
fn list_with_more(items: &[String], total: usize, empty: &str) -> String {
    const MAX: usize = 3;
    let shown = items
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if total > MAX {
        format!("{shown} + {} more...", total - MAX)
    } else if shown.is_empty() {
        empty.to_owned()
    } else {
        shown
    }
}

fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

// ---------------------------------------------------------------------------------------
// Built-in printers
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Builtin {
    /// The generic convertor: `Name`, `Created At`.
    Default,
    Pod,
    Service,
    ConfigMap,
    Secret,
    Namespace,
    ServiceAccount,
    PersistentVolumeClaim,
    PersistentVolume,
    Event,
    EventsV1,
    Node,
    Endpoints,
    ReplicationController,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ControllerRevision,
    Job,
    CronJob,
    Lease,
    EndpointSlice,
    ValidatingWebhook,
    MutatingWebhook,
    RoleBinding,
    PriorityClass,
    StorageClass,
    Ingress,
    IngressClass,
    NetworkPolicy,
    PodDisruptionBudget,
}

const CONTAINERS_DESCRIPTION: &str = "Names of each container in the template.";
const IMAGES_DESCRIPTION: &str = "Images referenced by each container in the template.";

/// A built-in column from `name|type|priority|description` (an empty description means
/// `creationTimestamp`'s), or one of the shortcuts `name`, `wide name`, `age`, `containers`,
/// `images`.
fn spec_column(spec: &str) -> Column {
    match spec {
        "name" => Column::name_column(),
        "wide name" => Column::computed("Name", "string", NAME_DESCRIPTION, 1).with_format("name"),
        "age" => Column::computed("Age", "string", CREATION_TIMESTAMP_DESCRIPTION, 0),
        "containers" => Column::computed("Containers", "string", CONTAINERS_DESCRIPTION, 1),
        "images" => Column::computed("Images", "string", IMAGES_DESCRIPTION, 1),
        _ => {
            let mut parts = spec.splitn(4, '|');
            let name = parts.next().unwrap_or_default();
            let type_ = parts.next().unwrap_or_default();
            let priority = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let description = match parts.next().unwrap_or_default() {
                "" => CREATION_TIMESTAMP_DESCRIPTION,
                description => description,
            };
            Column::computed(name, type_, description, priority)
        }
    }
}

impl Builtin {
    fn lookup(group: &str, resource: &str) -> Builtin {
        match (group, resource) {
            ("", "pods") => Builtin::Pod,
            ("", "services") => Builtin::Service,
            ("", "configmaps") => Builtin::ConfigMap,
            ("", "secrets") => Builtin::Secret,
            ("", "namespaces") => Builtin::Namespace,
            ("", "serviceaccounts") => Builtin::ServiceAccount,
            ("", "persistentvolumeclaims") => Builtin::PersistentVolumeClaim,
            ("", "persistentvolumes") => Builtin::PersistentVolume,
            ("", "events") => Builtin::Event,
            ("events.k8s.io", "events") => Builtin::EventsV1,
            ("", "nodes") => Builtin::Node,
            ("", "endpoints") => Builtin::Endpoints,
            ("", "replicationcontrollers") => Builtin::ReplicationController,
            ("apps", "deployments") => Builtin::Deployment,
            ("apps", "statefulsets") => Builtin::StatefulSet,
            ("apps", "daemonsets") => Builtin::DaemonSet,
            ("apps", "replicasets") => Builtin::ReplicaSet,
            ("apps", "controllerrevisions") => Builtin::ControllerRevision,
            ("batch", "jobs") => Builtin::Job,
            ("batch", "cronjobs") => Builtin::CronJob,
            ("coordination.k8s.io", "leases") => Builtin::Lease,
            ("discovery.k8s.io", "endpointslices") => Builtin::EndpointSlice,
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
                Builtin::ValidatingWebhook
            }
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
                Builtin::MutatingWebhook
            }
            ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
                Builtin::RoleBinding
            }
            ("scheduling.k8s.io", "priorityclasses") => Builtin::PriorityClass,
            ("storage.k8s.io", "storageclasses") => Builtin::StorageClass,
            ("networking.k8s.io", "ingresses") => Builtin::Ingress,
            ("networking.k8s.io", "ingressclasses") => Builtin::IngressClass,
            ("networking.k8s.io", "networkpolicies") => Builtin::NetworkPolicy,
            ("policy", "poddisruptionbudgets") => Builtin::PodDisruptionBudget,
            _ => Builtin::Default,
        }
    }

    fn columns(self) -> Vec<Column> {
        // `name|type|priority|description`, or a shortcut: name, age, containers, images.
        let specs: &[&str] = match self {
            Builtin::Default => &["name", "Created At|date|0|"],
            Builtin::Pod => &[
                "name",
                "Ready|string|0|The aggregate readiness state of this pod for accepting traffic.",
                "Status|string|0|The aggregate status of the containers in this pod.",
                "Restarts|string|0|The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                "age",
                "IP|string|1|IP address allocated to the pod.",
                "Node|string|1|Name of the node the pod is scheduled to.",
                "Nominated Node|string|1|Name of the node the pod is nominated to by preemption.",
                "Readiness Gates|string|1|Readiness gates of the pod.",
            ],
            Builtin::Service => &[
                "name",
                "Type|string|0|How the service is exposed.",
                "Cluster-IP|string|0|The IP address of the service.",
                "External-IP|string|0|External addresses of the service.",
                "Port(s)|string|0|The ports exposed by the service.",
                "age",
                "Selector|string|1|Route service traffic to pods with labels matching this selector.",
            ],
            Builtin::ConfigMap => &[
                "name",
                "Data|string|0|Data contains the configuration data.",
                "age",
            ],
            Builtin::Secret => &[
                "name",
                "Type|string|0|Used to facilitate programmatic handling of secret data.",
                "Data|string|0|Data contains the secret data.",
                "age",
            ],
            Builtin::Namespace => &["name", "Status|string|0|The status of the namespace", "age"],
            Builtin::ServiceAccount => &[
                "name",
                "Secrets|string|0|Secrets the service account references.",
                "age",
            ],
            Builtin::PersistentVolumeClaim => &[
                "name",
                "Status|string|0|The current phase of the claim.",
                "Volume|string|0|The binding reference to the PersistentVolume backing this claim.",
                "Capacity|string|0|The actual resources of the underlying volume.",
                "Access Modes|string|0|The actual access modes the volume backing the PVC has.",
                "StorageClass|string|0|StorageClass of the pvc",
                "VolumeAttributesClass|string|0|VolumeAttributesClass of the pvc",
                "age",
                "VolumeMode|string|1|What type of volume is required by the claim.",
            ],
            Builtin::PersistentVolume => &[
                "name",
                "Capacity|string|0|The persistent volume's resources and capacity.",
                "Access Modes|string|0|All ways the volume can be mounted.",
                "Reclaim Policy|string|0|What happens to the volume when released from its claim.",
                "Status|string|0|The current phase of the volume.",
                "Claim|string|0|The claim bound to the volume.",
                "StorageClass|string|0|StorageClass of the pv",
                "VolumeAttributesClass|string|0|VolumeAttributesClass of the pv",
                "Reason|string|0|A brief CamelCase string that describes any failure.",
                "age",
                "VolumeMode|string|1|Whether the volume is a formatted filesystem or a raw block device.",
            ],
            // Events are the one table whose `Name` is not first.
            Builtin::Event | Builtin::EventsV1 => &[
                "Last Seen|string|0|The time at which the most recent occurrence of this event was recorded.",
                "Type|string|0|Type of this event (Normal, Warning).",
                "Reason|string|0|A short, machine understandable string that gives the reason for the transition into the object's current status.",
                "Object|string|0|The object that this event is about.",
                "Subobject|string|1|The part of the object this event is about.",
                "Source|string|1|The component reporting this event.",
                "Message|string|0|A human-readable description of the status of this operation.",
                "First Seen|string|1|The time at which the event was first recorded.",
                "Count|string|1|The number of times this event has occurred.",
                "wide name",
            ],
            Builtin::Node => &[
                "name",
                "Status|string|0|The status of the node",
                "Roles|string|0|The roles of the node",
                "age",
                "Version|string|0|Kubelet Version reported by the node.",
                "Internal-IP|string|1|List of addresses reachable to the node.",
                "External-IP|string|1|List of addresses reachable to the node.",
                "OS-Image|string|1|OS Image reported by the node.",
                "Kernel-Version|string|1|Kernel Version reported by the node.",
                "Container-Runtime|string|1|ContainerRuntime Version reported by the node.",
            ],
            Builtin::Endpoints => &[
                "name",
                "Endpoints|string|0|The set of all endpoints.",
                "age",
            ],
            Builtin::ReplicationController | Builtin::ReplicaSet => &[
                "name",
                "Desired|integer|0|Number of desired replicas.",
                "Current|integer|0|The most recently observed number of replicas.",
                "Ready|integer|0|The number of ready replicas.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the replica count.",
            ],
            Builtin::Deployment => &[
                "name",
                "Ready|string|0|Number of the pod with ready state",
                "Up-to-date|string|0|Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                "Available|string|0|Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                "age",
                "containers",
                "images",
                "Selector|string|1|Label selector for pods.",
            ],
            Builtin::StatefulSet => &[
                "name",
                "Ready|string|0|Number of the pod with ready state",
                "age",
                "containers",
                "images",
            ],
            Builtin::DaemonSet => &[
                "name",
                "Desired|integer|0|The total number of nodes that should be running the daemon pod.",
                "Current|integer|0|The number of nodes running at least one daemon pod and are supposed to.",
                "Ready|integer|0|The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
                "Up-to-date|integer|0|The total number of nodes that are running updated daemon pod.",
                "Available|integer|0|The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
                "Node Selector|string|0|NodeSelector is a selector which must be true for the pod to fit on a node.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that are managed by the daemon set.",
            ],
            Builtin::ControllerRevision => &[
                "name",
                "Controller|string|0|Controller of the object",
                "Revision|string|0|Revision indicates the revision of the state represented by Data.",
                "age",
            ],
            Builtin::Job => &[
                "name",
                "Status|string|0|Status of the job.",
                "Completions|string|0|The number of pods which reached phase Succeeded.",
                "Duration|string|0|Time required to complete the job.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the pod count.",
            ],
            Builtin::CronJob => &[
                "name",
                "Schedule|string|0|The schedule in Cron format.",
                "Timezone|string|0|The time zone name for the given schedule.",
                "Suspend|boolean|0|This flag tells the controller to suspend subsequent executions.",
                "Active|integer|0|A list of pointers to currently running jobs.",
                "Last Schedule|string|0|Information when was the last time the job was successfully scheduled.",
                "age",
                "containers",
                "images",
                "Selector|string|1|A label query over pods that should match the pod count.",
            ],
            Builtin::Lease => &[
                "name",
                "Holder|string|0|holderIdentity contains the identity of the holder of a current lease.",
                "age",
            ],
            Builtin::EndpointSlice => &[
                "name",
                "AddressType|string|0|addressType specifies the type of address carried by this EndpointSlice.",
                "Ports|string|0|ports specifies the list of network ports exposed by each endpoint in this slice.",
                "Endpoints|string|0|endpoints is a list of unique endpoints in this slice.",
                "age",
            ],
            Builtin::ValidatingWebhook | Builtin::MutatingWebhook => &[
                "name",
                "Webhooks|integer|0|Webhooks indicates the number of webhooks registered in this configuration",
                "age",
            ],
            Builtin::RoleBinding => &[
                "name",
                "Role|string|0|RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
                "age",
                "Users|string|1|Users in the roleBinding",
                "Groups|string|1|Groups in the roleBinding",
                "ServiceAccounts|string|1|ServiceAccounts in the roleBinding",
            ],
            Builtin::PriorityClass => &[
                "name",
                "Value|integer|0|The value of this priority class.",
                "Global-Default|boolean|0|Whether this priority class is the default for pods without a priority class.",
                "age",
                "PreemptionPolicy|string|0|The policy for preempting pods with lower priority.",
            ],
            Builtin::StorageClass => &[
                "name",
                "Provisioner|string|0|Provisioner indicates the type of the provisioner.",
                "ReclaimPolicy|string|0|The reclaim policy of dynamically provisioned volumes.",
                "VolumeBindingMode|string|0|How PersistentVolumeClaims should be provisioned and bound.",
                "AllowVolumeExpansion|string|0|Whether the storage class allows volume expansion.",
                "age",
            ],
            Builtin::Ingress => &[
                "name",
                "Class|string|0|The name of the IngressClass resource that should be used for additional configuration",
                "Hosts|string|0|Hosts that incoming requests are matched against before the ingress rule",
                "Address|string|0|Address is a list containing ingress points for the load-balancer",
                "Ports|string|0|Ports of TLS configurations that open",
                "age",
            ],
            Builtin::IngressClass => &[
                "name",
                "Controller|string|0|Controller that is responsible for handling this class",
                "Parameters|string|0|A reference to a resource with additional parameters",
                "age",
            ],
            Builtin::NetworkPolicy => &[
                "name",
                "Pod-Selector|string|0|Selects the pods to which this NetworkPolicy object applies.",
                "age",
            ],
            Builtin::PodDisruptionBudget => &[
                "name",
                "Min Available|string|0|The minimum number of pods that must be available.",
                "Max Unavailable|string|0|The maximum number of pods that may be unavailable.",
                "Allowed Disruptions|integer|0|Calculated number of pods that may be disrupted at this time.",
                "age",
            ],
        };
        specs.iter().map(|spec| spec_column(spec)).collect()
    }

    /// The row cells, "wide" (one per column) as kube-apiserver generates them.
    fn cells(self, o: &Value, now: Timestamp) -> Vec<Value> {
        let name = || Value::from(object_name(o));
        let s = |text: &str| Value::from(text);
        match self {
            Builtin::Default => {
                let created = time_at(o, &["metadata", "creationTimestamp"])
                    .unwrap_or_else(|| {
                        Timestamp::from_second(-62_135_596_800).unwrap_or(Timestamp::UNIX_EPOCH)
                    })
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string();
                vec![name(), Value::from(created)]
            }
            Builtin::Pod => pod_cells(o, now),
            Builtin::Service => service_cells(o, now),
            Builtin::ConfigMap => vec![
                name(),
                Value::from(map_len(o, &["data"]) + map_len(o, &["binaryData"])),
                age(o, now),
            ],
            Builtin::Secret => vec![
                name(),
                s(opt_str_at(o, &["type"]).unwrap_or("Opaque")),
                Value::from(map_len(o, &["data"])),
                age(o, now),
            ],
            Builtin::Namespace => {
                let phase = match str_at(o, &["status", "phase"]) {
                    "" if is_deleting(o) => "Terminating",
                    "" => "Active",
                    phase => phase,
                };
                vec![name(), s(phase), age(o, now)]
            }
            Builtin::ServiceAccount => vec![
                name(),
                Value::from(array_at(o, &["secrets"]).len()),
                age(o, now),
            ],
            Builtin::PersistentVolumeClaim => {
                let phase = if is_deleting(o) {
                    "Terminating"
                } else {
                    str_at(o, &["status", "phase"])
                };
                let volume = str_at(o, &["spec", "volumeName"]);
                let (capacity, modes) = if volume.is_empty() {
                    (String::new(), String::new())
                } else {
                    (
                        str_at(o, &["status", "capacity", "storage"]).to_owned(),
                        access_modes(array_at(o, &["status", "accessModes"])),
                    )
                };
                vec![
                    name(),
                    s(phase),
                    s(volume),
                    Value::from(capacity),
                    Value::from(modes),
                    Value::from(storage_class(o)),
                    s(opt_str_at(o, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
                    age(o, now),
                    s(opt_str_at(o, &["spec", "volumeMode"]).unwrap_or("<unset>")),
                ]
            }
            Builtin::PersistentVolume => {
                let claim = at(o, &["spec", "claimRef"])
                    .filter(|c| c.is_object())
                    .map_or(String::new(), |c| {
                        format!("{}/{}", str_at(c, &["namespace"]), str_at(c, &["name"]))
                    });
                let phase = if is_deleting(o) {
                    "Terminating"
                } else {
                    str_at(o, &["status", "phase"])
                };
                vec![
                    name(),
                    s(str_at(o, &["spec", "capacity", "storage"])),
                    Value::from(access_modes(array_at(o, &["spec", "accessModes"]))),
                    s(str_at(o, &["spec", "persistentVolumeReclaimPolicy"])),
                    s(phase),
                    Value::from(claim),
                    Value::from(storage_class(o)),
                    s(opt_str_at(o, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
                    s(str_at(o, &["status", "reason"])),
                    age(o, now),
                    s(opt_str_at(o, &["spec", "volumeMode"]).unwrap_or("<unset>")),
                ]
            }
            Builtin::Event => event_cells(o, false, now),
            Builtin::EventsV1 => event_cells(o, true, now),
            Builtin::Node => node_cells(o, now),
            Builtin::Endpoints => vec![name(), Value::from(format_endpoints(o)), age(o, now)],
            Builtin::ReplicationController | Builtin::ReplicaSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                let selector = if self == Builtin::ReplicaSet {
                    format_label_selector(at(o, &["spec", "selector"]))
                } else {
                    format_labels(at(o, &["spec", "selector"]))
                };
                vec![
                    name(),
                    Value::from(replicas(o)),
                    Value::from(int_at(o, &["status", "replicas"])),
                    Value::from(int_at(o, &["status", "readyReplicas"])),
                    age(o, now),
                    names,
                    images,
                    Value::from(selector),
                ]
            }
            Builtin::Deployment => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                let selector = selector_string(at(o, &["spec", "selector"]))
                    .unwrap_or_else(|| "<invalid>".to_owned());
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        int_at(o, &["status", "readyReplicas"]),
                        replicas(o)
                    )),
                    Value::from(int_at(o, &["status", "updatedReplicas"])),
                    Value::from(int_at(o, &["status", "availableReplicas"])),
                    age(o, now),
                    names,
                    images,
                    Value::from(selector),
                ]
            }
            Builtin::StatefulSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        int_at(o, &["status", "readyReplicas"]),
                        replicas(o)
                    )),
                    age(o, now),
                    names,
                    images,
                ]
            }
            Builtin::DaemonSet => {
                let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
                vec![
                    name(),
                    Value::from(int_at(o, &["status", "desiredNumberScheduled"])),
                    Value::from(int_at(o, &["status", "currentNumberScheduled"])),
                    Value::from(int_at(o, &["status", "numberReady"])),
                    Value::from(int_at(o, &["status", "updatedNumberScheduled"])),
                    Value::from(int_at(o, &["status", "numberAvailable"])),
                    Value::from(format_labels(at(
                        o,
                        &["spec", "template", "spec", "nodeSelector"],
                    ))),
                    age(o, now),
                    names,
                    images,
                    Value::from(format_label_selector(at(o, &["spec", "selector"]))),
                ]
            }
            Builtin::ControllerRevision => {
                let controller = array_at(o, &["metadata", "ownerReferences"])
                    .iter()
                    .find(|r| bool_at(r, &["controller"]))
                    .map_or_else(
                        || "<none>".to_owned(),
                        |r| {
                            let api_version = str_at(r, &["apiVersion"]);
                            let group = api_version.split_once('/').map_or("", |(group, _)| group);
                            let kind = str_at(r, &["kind"]);
                            let group_kind = if group.is_empty() {
                                kind.to_owned()
                            } else {
                                format!("{kind}.{group}")
                            };
                            if group_kind.is_empty() {
                                str_at(r, &["name"]).to_owned()
                            } else {
                                format!("{}/{}", group_kind.to_lowercase(), str_at(r, &["name"]))
                            }
                        },
                    );
                vec![
                    name(),
                    Value::from(controller),
                    Value::from(int_at(o, &["revision"])),
                    age(o, now),
                ]
            }
            Builtin::Job => job_cells(o, now),
            Builtin::CronJob => {
                let template = at(o, &["spec", "jobTemplate", "spec", "template", "spec"]);
                let (names, images) = container_cells(template);
                let last_schedule = match time_at(o, &["status", "lastScheduleTime"]) {
                    Some(ts) => since(Some(ts), now),
                    None if at(o, &["status", "lastScheduleTime"])
                        .is_some_and(|v| !v.is_null()) =>
                    {
                        "<unknown>".to_owned()
                    }
                    None => "<none>".to_owned(),
                };
                let suspend = match at(o, &["spec", "suspend"]).and_then(Value::as_bool) {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                };
                vec![
                    name(),
                    s(str_at(o, &["spec", "schedule"])),
                    s(opt_str_at(o, &["spec", "timeZone"]).unwrap_or("<none>")),
                    s(suspend),
                    Value::from(array_at(o, &["status", "active"]).len()),
                    Value::from(last_schedule),
                    age(o, now),
                    names,
                    images,
                    Value::from(format_label_selector(at(
                        o,
                        &["spec", "jobTemplate", "spec", "selector"],
                    ))),
                ]
            }
            Builtin::Lease => vec![
                name(),
                s(str_at(o, &["spec", "holderIdentity"])),
                age(o, now),
            ],
            Builtin::EndpointSlice => {
                let ports = array_at(o, &["ports"]);
                let port_names: Vec<String> = ports
                    .iter()
                    .map(|p| {
                        match (
                            at(p, &["port"]).and_then(Value::as_i64),
                            opt_str_at(p, &["name"]),
                        ) {
                            (Some(port), _) => port.to_string(),
                            (None, Some(name)) => name.to_owned(),
                            (None, None) => "*".to_owned(),
                        }
                    })
                    .collect();
                let addresses: Vec<String> = array_at(o, &["endpoints"])
                    .iter()
                    .flat_map(|e| array_at(e, &["addresses"]))
                    .map(|a| a.as_str().unwrap_or("").to_owned())
                    .collect();
                vec![
                    name(),
                    s(str_at(o, &["addressType"])),
                    Value::from(list_with_more(&port_names, port_names.len(), "<unset>")),
                    Value::from(list_with_more(&addresses, addresses.len(), "<unset>")),
                    age(o, now),
                ]
            }
            Builtin::ValidatingWebhook | Builtin::MutatingWebhook => vec![
                name(),
                Value::from(array_at(o, &["webhooks"]).len()),
                age(o, now),
            ],
            Builtin::RoleBinding => {
                let subjects = array_at(o, &["subjects"]);
                let of_kind = |kind: &str| -> Value {
                    let names: Vec<String> = subjects
                        .iter()
                        .filter(|s| str_at(s, &["kind"]) == kind)
                        .map(|s| {
                            if kind == "ServiceAccount" {
                                format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"]))
                            } else {
                                str_at(s, &["name"]).to_owned()
                            }
                        })
                        .collect();
                    Value::from(names.join(", "))
                };
                vec![
                    name(),
                    Value::from(format!(
                        "{}/{}",
                        str_at(o, &["roleRef", "kind"]),
                        str_at(o, &["roleRef", "name"])
                    )),
                    age(o, now),
                    of_kind("User"),
                    of_kind("Group"),
                    of_kind("ServiceAccount"),
                ]
            }
            Builtin::PriorityClass => vec![
                name(),
                Value::from(int_at(o, &["value"])),
                Value::Bool(bool_at(o, &["globalDefault"])),
                age(o, now),
                s(str_at(o, &["preemptionPolicy"])),
            ],
            Builtin::StorageClass => {
                let annotation = |key: &str| str_at(o, &["metadata", "annotations", key]) == "true";
                let mut display = object_name(o).to_owned();
                if annotation("storageclass.kubernetes.io/is-default-class")
                    || annotation("storageclass.beta.kubernetes.io/is-default-class")
                {
                    display.push_str(" (default)");
                }
                vec![
                    Value::from(display),
                    s(str_at(o, &["provisioner"])),
                    s(opt_str_at(o, &["reclaimPolicy"]).unwrap_or("Delete")),
                    s(opt_str_at(o, &["volumeBindingMode"]).unwrap_or("Immediate")),
                    Value::Bool(bool_at(o, &["allowVolumeExpansion"])),
                    age(o, now),
                ]
            }
            Builtin::Ingress => {
                let rules = array_at(o, &["spec", "rules"]);
                let hosts: Vec<String> = rules
                    .iter()
                    .map(|r| str_at(r, &["host"]).to_owned())
                    .collect();
                vec![
                    name(),
                    s(opt_str_at(o, &["spec", "ingressClassName"]).unwrap_or("<none>")),
                    Value::from(format_ingress_hosts(&hosts)),
                    Value::from(load_balancer_ingress(o)),
                    s(if array_at(o, &["spec", "tls"]).is_empty() {
                        "80"
                    } else {
                        "80, 443"
                    }),
                    age(o, now),
                ]
            }
            Builtin::IngressClass => {
                let parameters = at(o, &["spec", "parameters"])
                    .filter(|p| p.is_object())
                    .map_or_else(
                        || "<none>".to_owned(),
                        |p| {
                            let mut text = str_at(p, &["kind"]).to_owned();
                            if let Some(group) = opt_str_at(p, &["apiGroup"]) {
                                text.push('.');
                                text.push_str(group);
                            }
                            format!("{text}/{}", str_at(p, &["name"]))
                        },
                    );
                vec![
                    name(),
                    s(str_at(o, &["spec", "controller"])),
                    Value::from(parameters),
                    age(o, now),
                ]
            }
            Builtin::NetworkPolicy => vec![
                name(),
                Value::from(format_label_selector(
                    at(o, &["spec", "podSelector"]).or(Some(&json!({}))),
                )),
                age(o, now),
            ],
            Builtin::PodDisruptionBudget => {
                let bound = |key: &str| {
                    at(o, &["spec", key])
                        .filter(|v| !v.is_null())
                        .map_or_else(|| "N/A".to_owned(), int_or_string)
                };
                vec![
                    name(),
                    Value::from(bound("minAvailable")),
                    Value::from(bound("maxUnavailable")),
                    Value::from(int_at(o, &["status", "disruptionsAllowed"])),
                    age(o, now),
                ]
            }
        }
    }
}

/// `spec.replicas`, defaulted to 1 as the API server does.
fn replicas(object: &Value) -> i64 {
    at(object, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn format_ingress_hosts(hosts: &[String]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for host in hosts {
        if list.len() == MAX {
            more = true;
        }
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", hosts.len() - MAX)
    } else {
        joined
    }
}

fn format_endpoints(object: &Value) -> String {
    const MAX: usize = 3;
    let subsets = array_at(object, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for subset in subsets {
        let addresses = array_at(subset, &["addresses"]);
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(address, &["ip"]).to_owned());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(
                    str_at(address, &["ip"]),
                    int_at(port, &["port"]),
                ));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn service_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = opt_str_at(o, &["spec", "type"]).unwrap_or("ClusterIP");
    let cluster_ip = array_at(o, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| opt_str_at(o, &["spec", "clusterIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let external_ips: Vec<&str> = array_at(o, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match type_ {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_owned(),
        "LoadBalancer" => {
            let ingress = load_balancer_ingress(o);
            let mut all: Vec<&str> = if ingress.is_empty() {
                Vec::new()
            } else {
                ingress.split(',').collect()
            };
            all.extend(external_ips.iter().copied());
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(o, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    };
    let ports: Vec<String> = array_at(o, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let protocol = opt_str_at(p, &["protocol"]).unwrap_or("TCP");
            let node_port = int_at(p, &["nodePort"]);
            if node_port > 0 {
                format!("{port}:{node_port}/{protocol}")
            } else {
                format!("{port}/{protocol}")
            }
        })
        .collect();
    vec![
        Value::from(object_name(o)),
        Value::from(type_),
        Value::from(cluster_ip),
        Value::from(external_ip),
        Value::from(or_placeholder(&ports.join(","), "<none>")),
        age(o, now),
        Value::from(format_labels(at(o, &["spec", "selector"]))),
    ]
}

fn job_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = int_at(o, &["status", "succeeded"]);
    let completions = match at(o, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(total) => format!("{succeeded}/{total}"),
        None => match int_at(o, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(o, &["status", "startTime"]),
        time_at(o, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.duration_since(start)),
        (Some(start), Some(end)) => human_duration(end.duration_since(start)),
    };
    let condition = |type_: &str| {
        array_at(o, &["status", "conditions"])
            .iter()
            .find(|c| str_at(c, &["type"]) == type_)
            .is_some_and(|c| str_at(c, &["status"]) == "True")
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else if is_deleting(o) {
        "Terminating"
    } else if condition("Suspended") {
        "Suspended"
    } else if condition("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(at(o, &["spec", "template", "spec"]));
    vec![
        Value::from(object_name(o)),
        Value::from(status),
        Value::from(completions),
        Value::from(duration),
        age(o, now),
        names,
        images,
        Value::from(format_label_selector(at(o, &["spec", "selector"]))),
    ]
}

fn node_cells(o: &Value, now: Timestamp) -> Vec<Value> {
    let mut status: Vec<&str> = Vec::new();
    if let Some(ready) = array_at(o, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == "Ready")
    {
        status.push(if str_at(ready, &["status"]) == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if bool_at(o, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = at(o, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!role.is_empty()).then_some(role)
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|v| !v.is_empty())
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let address = |type_: &str| {
        array_at(o, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == type_)
            .map_or("<none>", |a| str_at(a, &["address"]))
            .to_owned()
    };
    let info = |key: &str| or_placeholder(str_at(o, &["status", "nodeInfo", key]), "<unknown>");
    vec![
        Value::from(object_name(o)),
        Value::from(status.join(",")),
        Value::from(or_placeholder(&roles.join(","), "<none>")),
        age(o, now),
        Value::from(str_at(o, &["status", "nodeInfo", "kubeletVersion"])),
        Value::from(address("InternalIP")),
        Value::from(address("ExternalIP")),
        Value::from(info("osImage")),
        Value::from(info("kernelVersion")),
        Value::from(info("containerRuntimeVersion")),
    ]
}

/// Core `v1` events and `events.k8s.io/v1` events (whose fields the printer sees after
/// conversion: `regarding`, `note`, `deprecated*`).
fn event_cells(o: &Value, events_v1: bool, now: Timestamp) -> Vec<Value> {
    let field = |core: &'static str, v1: &'static str| if events_v1 { v1 } else { core };
    let first_ts = time_at(o, &[field("firstTimestamp", "deprecatedFirstTimestamp")]);
    let last_ts = time_at(o, &[field("lastTimestamp", "deprecatedLastTimestamp")]);
    let first = match first_ts {
        Some(ts) => since(Some(ts), now),
        None => since(time_at(o, &["eventTime"]), now),
    };
    let mut last = match last_ts {
        Some(ts) => since(Some(ts), now),
        None => first.clone(),
    };
    let mut count = int_at(o, &[field("count", "deprecatedCount")]);
    if at(o, &["series"]).is_some_and(Value::is_object) {
        last = since(time_at(o, &["series", "lastObservedTime"]), now);
        count = int_at(o, &["series", "count"]);
    } else if count == 0 {
        count = 1;
    }
    let regarding = field("involvedObject", "regarding");
    let kind = str_at(o, &[regarding, "kind"]).to_lowercase();
    let target_name = str_at(o, &[regarding, "name"]);
    let target = if target_name.is_empty() {
        kind
    } else {
        format!("{kind}/{target_name}")
    };
    let source = field("source", "deprecatedSource");
    let component = or_placeholder(
        str_at(o, &[source, "component"]),
        str_at(o, &[field("reportingComponent", "reportingController")]),
    );
    let host = or_placeholder(
        str_at(o, &[source, "host"]),
        str_at(o, &["reportingInstance"]),
    );
    let source_text = if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
    };
    vec![
        Value::from(last),
        Value::from(str_at(o, &["type"])),
        Value::from(str_at(o, &["reason"])),
        Value::from(target),
        Value::from(str_at(o, &[regarding, "fieldPath"])),
        Value::from(source_text),
        Value::from(str_at(o, &[field("message", "note")]).trim()),
        Value::from(first),
        Value::from(count),
        Value::from(object_name(o)),
    ]
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let init_containers = array_at(pod, &["spec", "initContainers"]);
    let restartable = |name: &str| {
        init_containers
            .iter()
            .find(|c| str_at(c, &["name"]) == name)
            .is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
    };
    let total = array_at(pod, &["spec", "containers"]).len()
        + init_containers
            .iter()
            .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
            .count();
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut restartable_restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;
    let later =
        |current: Option<Timestamp>, candidate: Option<Timestamp>| match (current, candidate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };

    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = or_placeholder(str_at(pod, &["status", "reason"]), phase);
    if array_at(pod, &["status", "conditions"]).iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".to_owned();
    }

    let mut initializing = false;
    for (i, status) in array_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(status, &["restartCount"]);
        let finished = time_at(status, &["lastState", "terminated", "finishedAt"]);
        restarts += count;
        last_restart = later(last_restart, finished);
        let name = str_at(status, &["name"]);
        if restartable(name) {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        if let Some(terminated) = terminated
            && int_at(terminated, &["exitCode"]) == 0
        {
            continue;
        }
        if restartable(name) && bool_at(status, &["started"]) {
            if bool_at(status, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(terminated) = terminated {
            match str_at(terminated, &["reason"]) {
                "" => match int_at(terminated, &["signal"]) {
                    0 => format!("Init:ExitCode:{}", int_at(terminated, &["exitCode"])),
                    signal => format!("Init:Signal:{signal}"),
                },
                why => format!("Init:{why}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_containers.len())
        };
        initializing = true;
        break;
    }

    if !initializing || has_condition(pod, "Initialized") {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for status in array_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(status, &["restartCount"]);
            last_restart = later(
                last_restart,
                time_at(status, &["lastState", "terminated", "finishedAt"]),
            );
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
            let running = at(status, &["state", "running"]).is_some_and(Value::is_object);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(terminated) = terminated {
                reason = match str_at(terminated, &["reason"]) {
                    "" => match int_at(terminated, &["signal"]) {
                        0 => format!("ExitCode:{}", int_at(terminated, &["exitCode"])),
                        signal => format!("Signal:{signal}"),
                    },
                    why => why.to_owned(),
                };
            } else if bool_at(status, &["ready"]) && running {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }

    if is_deleting(pod) && str_at(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if is_deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_owned();
    }

    let restarts_text = match last_restart {
        Some(ts) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(ts), now)),
        _ => restarts.to_string(),
    };

    let pod_ip = array_at(pod, &["status", "podIPs"])
        .first()
        .map(|ip| str_at(ip, &["ip"]))
        .or_else(|| opt_str_at(pod, &["status", "podIP"]))
        .unwrap_or("");
    let gates = array_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = array_at(pod, &["status", "conditions"]);
        let passing = gates
            .iter()
            .filter(|gate| {
                let type_ = str_at(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == type_)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{passing}/{}", gates.len())
    };
    vec![
        Value::from(object_name(pod)),
        Value::from(format!("{ready}/{total}")),
        Value::from(reason),
        Value::from(restarts_text),
        age(pod, now),
        Value::from(or_placeholder(pod_ip, "<none>")),
        Value::from(or_placeholder(str_at(pod, &["spec", "nodeName"]), "<none>")),
        Value::from(or_placeholder(
            str_at(pod, &["status", "nominatedNodeName"]),
            "<none>",
        )),
        Value::from(readiness_gates),
    ]
}

/// Row conditions kube-apiserver attaches to finished pods.
fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_at(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{
        "type": "Completed",
        "status": "True",
        "reason": reason,
        "message": message,
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    fn seconds(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    fn lock_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "locks.navique.io"},
            "spec": {
                "group": "navique.io",
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "additionalPrinterColumns": [
                        {"name": "Kind", "type": "string", "jsonPath": ".spec.target.kind"},
                        {"name": "Target", "type": "string", "jsonPath": ".spec.target.name",
                         "description": "The locked object"},
                        {"name": "Active", "type": "boolean", "jsonPath": ".status.active"},
                        {"name": "Reason", "type": "string", "priority": 1,
                         "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                    ]
                }, {
                    "name": "v2",
                    "served": true,
                    "storage": false
                }]
            }
        })
    }

    fn lock(name: &str, created: &str) -> Value {
        json!({
            "apiVersion": "navique.io/v1",
            "kind": "Lock",
            "metadata": {
                "name": name,
                "namespace": "default",
                "resourceVersion": "42",
                "creationTimestamp": created,
                "uid": "u-1"
            },
            "spec": {"target": {"kind": "Deployment", "name": "web"}},
            "status": {
                "active": true,
                "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "Applying"},
                    {"type": "Ready", "status": "False", "reason": "Waiting"}
                ]
            }
        })
    }

    #[test]
    fn jsonpath_filter_selects_the_condition_of_a_type() {
        let object = lock("a", "2025-06-01T11:59:00Z");
        let path = "{.status.conditions[?(@.type==\"Ready\")].reason}";
        assert_eq!(jsonpath(&object, path), vec![json!("Waiting")]);
        let single_quoted = ".status.conditions[?(@.type == 'Progressing')].status";
        assert_eq!(jsonpath(&object, single_quoted), vec![json!("True")]);
    }

    #[test]
    fn jsonpath_supports_indexes_wildcards_slices_and_recursion() {
        let object = json!({"a": {"items": [{"n": 1}, {"n": 2}, {"n": 3}], "k.x": "dot"}});
        assert_eq!(jsonpath(&object, ".a.items[0].n"), vec![json!(1)]);
        assert_eq!(jsonpath(&object, ".a.items[-1].n"), vec![json!(3)]);
        assert_eq!(
            jsonpath(&object, ".a.items[*].n"),
            vec![json!(1), json!(2), json!(3)]
        );
        assert_eq!(
            jsonpath(&object, ".a.items[1:].n"),
            vec![json!(2), json!(3)]
        );
        assert_eq!(
            jsonpath(&object, ".a.items[0,2].n"),
            vec![json!(1), json!(3)]
        );
        assert_eq!(jsonpath(&object, "..n"), vec![json!(1), json!(2), json!(3)]);
        assert_eq!(jsonpath(&object, ".a['k.x']"), vec![json!("dot")]);
        assert_eq!(jsonpath(&object, ".a.k\\.x"), vec![json!("dot")]);
        assert_eq!(
            jsonpath(&object, ".a.items[?(@.n>1)].n"),
            vec![json!(2), json!(3)]
        );
        assert_eq!(jsonpath(&object, ".a.items[?(@.n)].n").len(), 3);
    }

    #[test]
    fn jsonpath_returns_nothing_for_missing_keys_and_errors() {
        let object = json!({"a": {"items": [1, 2]}, "s": "text"});
        assert!(jsonpath(&object, ".a.missing.deeper").is_empty());
        assert!(jsonpath(&object, ".a.items[5]").is_empty());
        assert!(jsonpath(&object, ".s[0]").is_empty());
        assert!(jsonpath(&object, ".a.items[?(@.type==\"x\")]").is_empty());
        assert!(jsonpath(&object, "{.a").is_empty());
    }

    #[test]
    fn crd_columns_follow_the_name_column_with_defaults_applied() {
        let TableKind::Custom(columns) = TableKind::for_crd(&lock_crd(), "v1") else {
            panic!("expected custom columns");
        };
        assert_eq!(columns.len(), 5);
        assert_eq!(
            columns[0].description,
            "Custom resource definition column (in JSONPath format): .spec.target.kind"
        );
        assert_eq!(columns[1].description, "The locked object");
        assert_eq!(columns[3].priority, 1);
        let table = table(
            &TableKind::for_crd(&lock_crd(), "v1"),
            &[],
            "",
            json!({}),
            now(),
        );
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Kind", "Target", "Active", "Reason", "Age"]);
        assert_eq!(
            table["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name",
                   "description": NAME_DESCRIPTION, "priority": 0})
        );
        assert_eq!(table["rows"], json!([]));
    }

    #[test]
    fn a_crd_version_without_columns_gets_an_age_column() {
        let kind = TableKind::for_crd(&lock_crd(), "v2");
        assert_eq!(kind, TableKind::Custom(vec![Column::default_crd_age()]));
        let object = lock("a", "2025-06-01T11:00:00Z");
        let table = table(&kind, &[object], "None", json!({}), now());
        // Short duration for CRD dates (a built-in Age would read `60m`).
        assert_eq!(table["rows"][0]["cells"], json!(["a", "1h"]));
        assert_eq!(
            table["columnDefinitions"][1]["description"],
            CREATION_TIMESTAMP_DESCRIPTION
        );
    }

    #[test]
    fn a_lock_renders_exact_cells() {
        let kind = TableKind::for_crd(&lock_crd(), "v1");
        let objects = [
            lock("a", "2025-06-01T11:59:01Z"),
            lock("b", "2025-05-29T09:00:00Z"),
        ];
        let table = table(
            &kind,
            &objects,
            "Metadata",
            json!({"resourceVersion": "77", "continue": ""}),
            now(),
        );
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(table["metadata"], json!({"resourceVersion": "77"}));
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["a", "Deployment", "web", true, "Waiting", "59s"])
        );
        // The CRD convertor uses the short duration: 3d3h is shown as 3d.
        assert_eq!(
            table["rows"][1]["cells"],
            json!(["b", "Deployment", "web", true, "Waiting", "3d"])
        );
    }

    #[test]
    fn a_missing_value_is_a_null_cell() {
        let kind = TableKind::for_crd(&lock_crd(), "v1");
        let mut object = lock("a", "2025-06-01T11:59:01Z");
        object["status"] = json!({"active": "yes"});
        object["spec"]["target"]["name"] = Value::Null;
        let table = table(&kind, &[object], "None", Value::Null, now());
        // A non-boolean `active` is null too; a JSON null in a string column prints like Go.
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["a", "Deployment", "<no value>", null, null, "59s"])
        );
        assert_eq!(table["metadata"], json!({"resourceVersion": "42"}));
    }

    #[test]
    fn typed_crd_cells_follow_the_column_type() {
        let columns = vec![
            Column::from_crd(&json!({"name": "I", "type": "integer", "jsonPath": ".f"})).unwrap(),
            Column::from_crd(&json!({"name": "N", "type": "number", "jsonPath": ".i"})).unwrap(),
            Column::from_crd(&json!({"name": "S", "type": "string", "jsonPath": ".m"})).unwrap(),
            Column::from_crd(&json!({"name": "D", "type": "date", "jsonPath": ".bad"})).unwrap(),
            Column::from_crd(&json!({"name": "F", "type": "string", "jsonPath": ".x"})).unwrap(),
        ];
        let object = json!({
            "metadata": {"name": "o"},
            "f": 2.9, "i": 3, "m": {"b": "<", "a": [1, 2.5]}, "bad": "yesterday", "x": 0.000012
        });
        let table = table(
            &TableKind::Custom(columns),
            &[object],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "o",
                2,
                3,
                "{\"a\":[1,2.5],\"b\":\"\\u003c\"}",
                "<invalid>",
                "1.2e-05"
            ])
        );
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

    #[test]
    fn configmaps_count_data_and_binary_data_keys() {
        let object = json!({
            "metadata": {"name": "settings", "creationTimestamp": "2025-06-01T11:56:40Z"},
            "data": {"a": "1", "b": "2"},
            "binaryData": {"c": "AA=="}
        });
        let table = table(
            &TableKind::builtin("", "configmaps"),
            &[object],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(table["rows"][0]["cells"], json!(["settings", 3, "3m20s"]));
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Data", "Age"]);
    }

    #[test]
    fn secrets_show_type_and_data_count() {
        let objects = [
            json!({
                "metadata": {"name": "tls", "creationTimestamp": "2025-05-30T09:00:00Z"},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": "", "tls.key": ""}
            }),
            json!({"metadata": {"name": "empty"}}),
        ];
        let table = table(
            &TableKind::builtin("", "secrets"),
            &objects,
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["tls", "kubernetes.io/tls", 2, "2d3h"])
        );
        assert_eq!(
            table["rows"][1]["cells"],
            json!(["empty", "Opaque", 0, "<unknown>"])
        );
    }

    #[test]
    fn services_render_ports_and_addresses() {
        let objects = [
            json!({
                "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:59:00Z"},
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": "10.0.0.10",
                    "clusterIPs": ["10.0.0.10"],
                    "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                    "selector": {"tier": "web", "app": "shop"}
                }
            }),
            json!({
                "metadata": {"name": "edge", "creationTimestamp": "2025-06-01T11:59:00Z"},
                "spec": {
                    "type": "LoadBalancer",
                    "clusterIPs": ["10.0.0.11"],
                    "ports": [{"port": 443, "nodePort": 30443, "protocol": "TCP"}]
                },
                "status": {"loadBalancer": {}}
            }),
        ];
        let table = table(
            &TableKind::builtin("", "services"),
            &objects,
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web",
                "ClusterIP",
                "10.0.0.10",
                "<none>",
                "80/TCP,53/UDP",
                "60s",
                "app=shop,tier=web"
            ])
        );
        assert_eq!(
            table["rows"][1]["cells"],
            json!([
                "edge",
                "LoadBalancer",
                "10.0.0.11",
                "<pending>",
                "443:30443/TCP",
                "60s",
                "<none>"
            ])
        );
        assert_eq!(table["columnDefinitions"][4]["name"], "Port(s)");
        assert_eq!(table["columnDefinitions"][6]["priority"], 1);
    }

    #[test]
    fn namespaces_show_their_phase() {
        let objects = [
            json!({"metadata": {"name": "default", "creationTimestamp": "2025-06-01T11:00:00Z"},
                   "status": {"phase": "Active"}}),
            json!({"metadata": {"name": "old", "creationTimestamp": "2025-06-01T11:00:00Z",
                                "deletionTimestamp": "2025-06-01T11:59:00Z"},
                   "status": {"phase": "Terminating"}}),
        ];
        let table = table(
            &TableKind::builtin("", "namespaces"),
            &objects,
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["default", "Active", "60m"])
        );
        assert_eq!(
            table["rows"][1]["cells"],
            json!(["old", "Terminating", "60m"])
        );
    }

    #[test]
    fn deployments_and_statefulsets_show_readiness() {
        let deployment = json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"},
                             "matchExpressions": [{"key": "env", "operator": "In",
                                                   "values": ["prod", "dev"]}]},
                "template": {"spec": {"containers": [
                    {"name": "app", "image": "web:1"}, {"name": "proxy", "image": "envoy:2"}
                ]}}
            },
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        let table_d = table(
            &TableKind::builtin("apps", "deployments"),
            &[deployment],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table_d["rows"][0]["cells"],
            json!([
                "web",
                "2/3",
                3,
                2,
                "60m",
                "app,proxy",
                "web:1,envoy:2",
                "app=web,env in (dev,prod)"
            ])
        );
        let statefulset = json!({
            "metadata": {"name": "db", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"template": {"spec": {"containers": [{"name": "pg", "image": "pg:16"}]}}}
        });
        let table_s = table(
            &TableKind::builtin("apps", "statefulsets"),
            &[statefulset],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table_s["rows"][0]["cells"],
            json!(["db", "0/1", "60m", "pg", "pg:16"])
        );
    }

    #[test]
    fn leases_webhooks_and_bindings_render_their_columns() {
        let lease = json!({"metadata": {"name": "leader"},
                           "spec": {"holderIdentity": "navique-0"}});
        let lease_table = table(
            &TableKind::builtin("coordination.k8s.io", "leases"),
            &[lease],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            lease_table["rows"][0]["cells"],
            json!(["leader", "navique-0", "<unknown>"])
        );
        let webhook = json!({"metadata": {"name": "navique"}, "webhooks": [{}, {}]});
        let webhook_table = table(
            &TableKind::builtin(
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
            &[webhook],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            webhook_table["rows"][0]["cells"],
            json!(["navique", 2, "<unknown>"])
        );
        let binding = json!({
            "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "edit"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "ServiceAccount", "name": "op", "namespace": "navique"},
                {"kind": "User", "name": "bob"}
            ]
        });
        let binding_table = table(
            &TableKind::builtin("rbac.authorization.k8s.io", "rolebindings"),
            &[binding],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            binding_table["rows"][0]["cells"],
            json!([
                "b",
                "ClusterRole/edit",
                "<unknown>",
                "alice, bob",
                "",
                "navique/op"
            ])
        );
    }

    #[test]
    fn resources_without_a_printer_use_the_created_at_table() {
        let role = json!({"metadata": {"name": "reader",
                                       "creationTimestamp": "2025-05-01T08:09:10.5Z"}});
        let table = table(
            &TableKind::builtin("rbac.authorization.k8s.io", "roles"),
            &[role],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["columnDefinitions"][1],
            json!({"name": "Created At", "type": "date", "format": "",
                   "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0})
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["reader", "2025-05-01T08:09:10Z"])
        );
        let undated = super::table(
            &TableKind::builtin("", "limitranges"),
            &[json!({"metadata": {"name": "limits"}})],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            undated["rows"][0]["cells"],
            json!(["limits", "0001-01-01T00:00:00Z"])
        );
        let crd_columns = builtin_columns("apiextensions.k8s.io", "customresourcedefinitions");
        let names: Vec<&str> = crd_columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "Created At"]);
    }

    #[test]
    fn pods_summarise_readiness_status_and_restarts() {
        let pod = json!({
            "metadata": {"name": "web-0", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {
                "phase": "Running",
                "podIPs": [{"ip": "10.1.0.5"}],
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2,
                     "state": {"running": {}},
                     "lastState": {"terminated": {"finishedAt": "2025-06-01T11:55:00Z"}}},
                    {"name": "b", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]
            }
        });
        let table = table(
            &TableKind::builtin("", "pods"),
            &[pod],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "web-0",
                "1/2",
                "CrashLoopBackOff",
                "2 (5m ago)",
                "60m",
                "10.1.0.5",
                "node-1",
                "<none>",
                "<none>"
            ])
        );
        assert!(table["rows"][0].get("conditions").is_none());
    }

    #[test]
    fn events_print_object_and_message() {
        let event = json!({
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "Deployment", "name": "web"},
            "type": "Normal",
            "reason": "Scaled",
            "message": "Scaled up \n",
            "source": {"component": "navique"},
            "firstTimestamp": "2025-06-01T11:00:00Z",
            "lastTimestamp": "2025-06-01T11:59:00Z",
            "count": 3
        });
        let table = table(
            &TableKind::builtin("", "events"),
            &[event],
            "None",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "60s",
                "Normal",
                "Scaled",
                "deployment/web",
                "",
                "navique",
                "Scaled up",
                "60m",
                3,
                "web.1"
            ])
        );
        assert_eq!(table["columnDefinitions"][0]["name"], "Last Seen");
    }

    #[test]
    fn metadata_rows_carry_partial_object_metadata() {
        let kind = TableKind::for_crd(&lock_crd(), "v1");
        let object = lock("a", "2025-06-01T11:59:01Z");
        let table = table(
            &kind,
            std::slice::from_ref(&object),
            "Metadata",
            json!({}),
            now(),
        );
        assert_eq!(
            table["rows"][0]["object"],
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object["metadata"].clone()
            })
        );
        let default = super::table(&kind, std::slice::from_ref(&object), "", json!({}), now());
        assert_eq!(default["rows"][0]["object"], table["rows"][0]["object"]);
        let full = super::table(
            &kind,
            std::slice::from_ref(&object),
            "Object",
            json!({}),
            now(),
        );
        assert_eq!(full["rows"][0]["object"], object);
    }

    #[test]
    fn include_object_none_leaves_a_null_object() {
        let object = json!({"metadata": {"name": "settings"}});
        let table = table(
            &TableKind::builtin("", "configmaps"),
            &[object],
            "None",
            json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4}),
            now(),
        );
        let row = table["rows"][0].as_object().unwrap();
        assert_eq!(row.get("object"), Some(&Value::Null));
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4})
        );
        assert!(is_valid_include_object("None"));
        assert!(!is_valid_include_object("Everything"));
    }

    #[test]
    fn watch_events_omit_headers_after_the_first() {
        let kind = TableKind::builtin("", "configmaps");
        let object = json!({"metadata": {"name": "c", "resourceVersion": "15"}});
        let first = watch_event_table(&kind, &object, "", true, now());
        let later = watch_event_table(&kind, &object, "", false, now());
        assert_eq!(first["columnDefinitions"].as_array().map(Vec::len), Some(3));
        assert_eq!(later["columnDefinitions"], Value::Null);
        assert_eq!(later["metadata"], json!({"resourceVersion": "15"}));
        assert_eq!(later["rows"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn every_builtin_row_has_one_cell_per_column() {
        let resources = [
            ("", "pods"),
            ("", "services"),
            ("", "configmaps"),
            ("", "secrets"),
            ("", "namespaces"),
            ("", "serviceaccounts"),
            ("", "persistentvolumeclaims"),
            ("", "persistentvolumes"),
            ("", "events"),
            ("events.k8s.io", "events"),
            ("", "nodes"),
            ("", "endpoints"),
            ("", "replicationcontrollers"),
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("apps", "replicasets"),
            ("apps", "controllerrevisions"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("coordination.k8s.io", "leases"),
            ("discovery.k8s.io", "endpointslices"),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
            ),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("storage.k8s.io", "storageclasses"),
            ("networking.k8s.io", "ingresses"),
            ("networking.k8s.io", "ingressclasses"),
            ("networking.k8s.io", "networkpolicies"),
            ("policy", "poddisruptionbudgets"),
            ("example.com", "widgets"),
        ];
        let object = json!({"metadata": {"name": "x"}});
        for (group, resource) in resources {
            let table = table(
                &TableKind::builtin(group, resource),
                std::slice::from_ref(&object),
                "None",
                json!({}),
                now(),
            );
            let columns = table["columnDefinitions"].as_array().unwrap().len();
            let cells = table["rows"][0]["cells"].as_array().unwrap().len();
            assert_eq!(columns, cells, "{group}/{resource}");
        }
    }
}
