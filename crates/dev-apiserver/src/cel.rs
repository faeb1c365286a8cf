//! CEL evaluation shared by ValidatingAdmissionPolicies and webhook
//! `matchConditions`, on the `cel` crate with the Kubernetes extension
//! functions of `kube-cel` (`quantity`, `url`, `ip`, `semver`, the string,
//! list, set, regex, math and base64 libraries, `format`).
//!
//! Objects are the JSON kube-apiserver serializes, converted here (not through
//! `kube-cel`'s schema-aware conversion, which escapes map keys): a JSON
//! object becomes a CEL map with string keys, so both
//! `object.metadata.name` and
//! `oldObject.metadata.annotations['core.navique.com/locked']` (and `in`)
//! work. Integers become `int`, fractions `double`, `null` `null`.
//!
//! Departures from kube-apiserver's CEL environment:
//! - no type checking: expressions are only parsed, and errors surface when
//!   evaluated (kube-apiserver reports them when the policy is created);
//! - selecting a field of something that is not a map (`object.metadata` on
//!   DELETE, where `object` is `null`) fails with `no such overload` where
//!   cel-go says `no such key: metadata`;
//! - optional syntax is parsed (`a.?b`, `m[?k]`, `[?x]`, `{?k: v}`,
//!   `optional.of`, `orValue`, `hasValue`, ...), but `a.?b` on a value that
//!   is not a map (`null.?b`) fails instead of giving `optional.none()`;
//! - strings with a `date-time` format stay strings (no schema is known);
//! - `type()` is not available (`dyn()` is, and `string()` also takes
//!   booleans, as in cel-go); the `authorizer` variable is
//!   [`crate::authorizer`]'s, bound by ValidatingAdmissionPolicies only;
//! - there is no cost budget;
//! - a message construction (`Foo{a: 1}`) fails to compile as an undeclared
//!   reference, as cel-go's checker has it without the message declared
//!   (the `cel` crate would panic evaluating it).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, operators,
};
use kube_cel::cel::common::types::CelString;
use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::parser::Parser;
use kube_cel::cel::{Context, ExecutionError, Value as Cel};
use serde_json::{Number, Value};

use crate::gofmt;

/// A parsed CEL expression, compiled once and evaluated many times.
#[derive(Debug, Clone)]
pub struct Program {
    expr: Arc<IdedExpr>,
}

/// Expressions parsed so far. Policies are read from the store on every
/// request, and parsing was most of what admitting a write cost.
static PARSED: LazyLock<Mutex<HashMap<String, Result<Program, String>>>> =
    LazyLock::new(Mutex::default);
/// Distinct expressions kept; past it the cache starts over, so that
/// expressions written in a loop cannot grow it without bound.
const PARSED_LIMIT: usize = 4096;

impl Program {
    /// Parses `source`. The error is the parser's report, e.g.
    /// `ERROR: <input>:1:5: Syntax error: ...`.
    pub fn compile(source: &str) -> Result<Self, String> {
        let parsed = || PARSED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(program) = parsed().get(source) {
            return program.clone();
        }
        let program = Self::parse(source);
        let mut cache = parsed();
        if cache.len() >= PARSED_LIMIT {
            cache.clear();
        }
        cache.insert(source.to_owned(), program.clone());
        program
    }

    fn parse(source: &str) -> Result<Self, String> {
        let mut expr = Parser::new()
            .enable_optional_syntax(true)
            .parse(source)
            .map_err(|e| e.to_string().trim_end().to_string())?;
        // The `cel` crate panics on evaluating a message construction; no
        // message type is declared here, so cel-go's checker would refuse
        // it (kube-apiserver, when the policy is created).
        let mut message = None;
        visit(&expr, &mut |e| {
            if let Expr::Struct(s) = &e.expr {
                message.get_or_insert_with(|| s.type_name.clone());
            }
        });
        if let Some(name) = message {
            return Err(format!(
                "ERROR: <input>: undeclared reference to '{name}' (in container '')"
            ));
        }
        rewrite(&mut expr);
        Ok(Self {
            expr: Arc::new(expr),
        })
    }

    /// Whether the expression names the variable `name` (`variables`,
    /// `object`, ...) anywhere.
    pub fn mentions(&self, name: &str) -> bool {
        let mut found = false;
        visit(&self.expr, &mut |e| {
            found |= matches!(&e.expr, Expr::Ident(v) if v == name);
        });
        found
    }

    /// Adds what the expression reads of `object`, `oldObject`,
    /// `namespaceObject` and `request` to `reads`.
    pub fn reads(&self, reads: &mut ObjectReads) {
        collect_reads(&self.expr, reads);
    }

    /// Evaluates against `activation`; the error is worded as cel-go's
    /// (`no such key: x`, `division by zero`, ...).
    pub fn evaluate(&self, activation: &Activation) -> Result<Value, String> {
        let value = self.evaluate_cel(activation)?;
        to_json(&value)
    }

    fn evaluate_cel(&self, activation: &Activation) -> Result<Cel, String> {
        Cel::resolve(&self.expr, &activation.context).map_err(|e| {
            if let ExecutionError::NoSuchKey(key) = &e
                && let Some(message) = activation.variable_errors.get(key.as_str())
                && references_variable(&self.expr, key)
            {
                return message.clone();
            }
            error_message(&e)
        })
    }
}

/// Every function, registered once: registering them for each evaluation
/// was a quarter of what admitting a write cost.
static FUNCTIONS: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut context = Context::default().with_all();
    context.add_function("dyn", identity);
    context.add_function("string", string);
    crate::authorizer::register(&mut context);
    context
});

/// The named values an expression sees: `object`, `oldObject`, `request`,
/// `params`, `namespaceObject`, `variables`, ...
pub struct Activation<'a> {
    context: Context<'a>,
    variable_errors: HashMap<String, String>,
}

impl Default for Activation<'static> {
    fn default() -> Self {
        Self::new()
    }
}

impl Activation<'static> {
    /// An activation with every function and no variables.
    pub fn new() -> Self {
        Self {
            context: FUNCTIONS.new_inner_scope(),
            variable_errors: HashMap::new(),
        }
    }
}

impl Activation<'_> {
    /// An activation that sees this one's values, which what it binds
    /// shadows: a request's objects are converted once for all the
    /// policies that judge it.
    pub fn scope(&self) -> Activation<'_> {
        Activation {
            context: self.context.new_inner_scope(),
            variable_errors: self.variable_errors.clone(),
        }
    }

    /// Binds `name` to `value`, or to CEL `null` when absent.
    pub fn set(&mut self, name: &str, value: Option<&Value>) {
        let value = value.map(from_json).unwrap_or(Cel::Null);
        self.context.add_variable_from_value(name, value);
    }

    /// [`Activation::set`] with only what `reads` names of `value`
    /// converted: expressions that read no more see the same values.
    pub fn set_read(&mut self, name: &str, value: Option<&Value>, reads: &Reads) {
        let value = value.map_or(Cel::Null, |v| reads.convert(v));
        self.context.add_variable_from_value(name, value);
    }

    /// Binds `authorizer` to checks answered by `authorize`.
    pub fn set_authorizer(&mut self, authorize: crate::authorizer::Authorize) {
        self.context
            .add_variable_from_value("authorizer", crate::authorizer::value(authorize));
    }

    /// Builder form of [`Activation::set`].
    pub fn with(mut self, name: &str, value: Option<&Value>) -> Self {
        self.set(name, value);
        self
    }

    /// Evaluates a policy's `spec.variables` in order (each sees the ones
    /// before it) and binds the map `variables`. A variable that fails to
    /// parse or evaluate is left out of the map; an expression that then
    /// reads it fails with kube-apiserver's `composited variable "<name>"
    /// fails to evaluate: <cause>` (or `fails to compile`), so that, as with
    /// kube's lazy variables, only expressions using a failing variable fail.
    pub fn set_variables(&mut self, variables: &[(String, Result<Program, String>)]) {
        let mut values: HashMap<Key, Cel> = HashMap::new();
        self.variable_errors.clear();
        self.context.add_variable_from_value(
            "variables",
            Cel::Map(Map {
                map: Arc::new(values.clone()),
            }),
        );
        for (name, program) in variables {
            let result = match program {
                Ok(program) => program
                    .evaluate_cel(self)
                    .map_err(|e| format!("composited variable {name:?} fails to evaluate: {e}")),
                Err(e) => Err(format!(
                    "composited variable {name:?} fails to compile: {e}"
                )),
            };
            match result {
                Ok(value) => {
                    values.insert(Key::String(Arc::new(name.clone())), value);
                    self.context.add_variable_from_value(
                        "variables",
                        Cel::Map(Map {
                            map: Arc::new(values.clone()),
                        }),
                    );
                }
                Err(message) => {
                    self.variable_errors.insert(name.clone(), message);
                }
            }
        }
    }
}

/// `dyn(x)`: x, unchanged (there are no static types to relax here).
fn identity(This(value): This<Cel>) -> kube_cel::cel::ResolveResult {
    Ok(value)
}

/// `string(x)` as cel-go has it, booleans included.
fn string(This(value): This<Cel>) -> kube_cel::cel::ResolveResult {
    let text = match &value {
        Cel::String(s) => return Ok(Cel::String(s.clone())),
        Cel::Bool(b) => b.to_string(),
        Cel::Int(i) => i.to_string(),
        Cel::UInt(u) => u.to_string(),
        Cel::Float(f) => f.to_string(),
        Cel::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Cel::Timestamp(_) | Cel::Duration(_) => match to_json(&value) {
            Ok(Value::String(s)) => s,
            _ => return Err(ExecutionError::NoSuchOverload),
        },
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    Ok(Cel::String(Arc::new(text)))
}

/// Converts JSON to a CEL value without escaping map keys.
pub fn from_json(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Cel::Int(i)
            } else {
                Cel::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(from_json).collect())),
        Value::Object(fields) => Cel::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), from_json(v)))
                    .collect(),
            ),
        }),
    }
}

/// Converts a CEL result to JSON: timestamps become RFC 3339 strings,
/// durations Go-style strings (`1h0m0s` is written `3600s`), bytes base64.
pub fn to_json(value: &Cel) -> Result<Value, String> {
    Ok(match value {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Cel::String(s) => Value::String(s.to_string()),
        Cel::Bytes(b) => {
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Cel::List(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Cel::Map(map) => {
            let mut out = serde_json::Map::new();
            let sorted: BTreeMap<String, &Cel> =
                map.map.iter().map(|(k, v)| (key_string(k), v)).collect();
            for (k, v) in sorted {
                out.insert(k, to_json(v)?);
            }
            Value::Object(out)
        }
        Cel::Timestamp(t) => {
            let text = t.to_rfc3339();
            Value::String(match text.strip_suffix("+00:00") {
                Some(utc) => format!("{utc}Z"),
                None => text,
            })
        }
        Cel::Duration(d) => Value::String(gofmt::cel_duration(d.num_seconds(), d.subsec_nanos())),
        other => return Err(format!("unsupported result type {}", other.type_of())),
    })
}

fn key_string(key: &Key) -> String {
    match key {
        Key::String(s) => s.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
    }
}

/// cel-go's wording for the errors kube-apiserver reports.
fn error_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}'")
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..) => "no such overload".to_string(),
        other => other.to_string(),
    }
}

/// Field selection through the index operator (so that selecting from a
/// non-map fails as in cel-go instead of yielding `false`), and optional
/// selection through optional indexing (the `cel` crate's `.?` mishandles
/// missing keys).
fn rewrite(expr: &mut IdedExpr) {
    match &mut expr.expr {
        Expr::Select(select) => {
            rewrite(&mut select.operand);
            if !select.test {
                let operand = std::mem::take(&mut *select.operand);
                let field = std::mem::take(&mut select.field);
                let id = expr.id;
                expr.expr = Expr::Call(kube_cel::cel::common::ast::CallExpr {
                    func_name: operators::INDEX.to_string(),
                    target: None,
                    args: vec![
                        operand,
                        IdedExpr {
                            id,
                            expr: Expr::Literal(LiteralValue::String(CelString::from(
                                field.as_str(),
                            ))),
                        },
                    ],
                });
            }
        }
        Expr::Call(call) => {
            if call.func_name == operators::OPT_SELECT {
                call.func_name = operators::OPT_INDEX.to_string();
            }
            if let Some(target) = &mut call.target {
                rewrite(target);
            }
            call.args.iter_mut().for_each(rewrite);
        }
        Expr::Comprehension(c) => {
            rewrite(&mut c.iter_range);
            rewrite(&mut c.accu_init);
            rewrite(&mut c.loop_cond);
            rewrite(&mut c.loop_step);
            rewrite(&mut c.result);
        }
        Expr::List(list) => list.elements.iter_mut().for_each(rewrite),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        rewrite(&mut e.key);
                        rewrite(&mut e.value);
                    }
                    EntryExpr::StructField(f) => rewrite(&mut f.value),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        rewrite(&mut e.key);
                        rewrite(&mut e.value);
                    }
                    EntryExpr::StructField(f) => rewrite(&mut f.value),
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Whether `expr` reads `variables.<name>` (after [`rewrite`], an index of
/// the identifier `variables` by the literal name).
fn references_variable(expr: &IdedExpr, name: &str) -> bool {
    let mut found = false;
    visit(expr, &mut |e| {
        if let Expr::Call(call) = &e.expr
            && (call.func_name == operators::INDEX || call.func_name == operators::OPT_INDEX)
            && call.args.len() == 2
            && matches!(&call.args[0].expr, Expr::Ident(v) if v == "variables")
            && matches!(&call.args[1].expr, Expr::Literal(LiteralValue::String(s)) if s.inner() == name)
        {
            found = true;
        }
    });
    found
}

/// What expressions read of a JSON value: all of it, or only some of its
/// fields (each read in turn so). Converting a request's whole objects to
/// CEL for the policies (their managedFields, spec and status, for
/// conditions that read a few annotations) was 7% of the dev API server's
/// CPU in a burst of Locks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reads {
    All,
    Fields(BTreeMap<String, Reads>),
}

impl Default for Reads {
    fn default() -> Self {
        Self::Fields(BTreeMap::new())
    }
}

impl Reads {
    /// Whether nothing of the value is read (but perhaps whether it is
    /// null).
    pub fn is_nothing(&self) -> bool {
        matches!(self, Self::Fields(fields) if fields.is_empty())
    }

    /// Adds the value at `path` (and everything under it).
    fn add(&mut self, path: &[String]) {
        let Self::Fields(fields) = self else {
            return;
        };
        match path.split_first() {
            None => *self = Self::All,
            Some((first, rest)) => fields.entry(first.clone()).or_default().add(rest),
        }
    }

    /// `value` in CEL, with an object's fields left out where nothing
    /// reads them. Whatever is read whole (compared, iterated, passed to
    /// a function, or the result) is read as [`Reads::All`], so no
    /// expression can tell.
    fn convert(&self, value: &Value) -> Cel {
        match (self, value) {
            (Self::Fields(fields), Value::Object(object)) => Cel::Map(Map {
                map: Arc::new(
                    fields
                        .iter()
                        .filter_map(|(field, reads)| {
                            let value = object.get(field)?;
                            Some((Key::String(Arc::new(field.clone())), reads.convert(value)))
                        })
                        .collect(),
                ),
            }),
            _ => from_json(value),
        }
    }
}

/// What expressions read of the request's `object`, `oldObject`,
/// `namespaceObject` and `request`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectReads {
    pub object: Reads,
    pub old_object: Reads,
    pub namespace_object: Reads,
    pub request: Reads,
}

impl ObjectReads {
    fn of(&mut self, root: &str) -> Option<&mut Reads> {
        match root {
            "object" => Some(&mut self.object),
            "oldObject" => Some(&mut self.old_object),
            "namespaceObject" => Some(&mut self.namespace_object),
            "request" => Some(&mut self.request),
            _ => None,
        }
    }
}

/// The identifier and field names of `a.b.c`, `a['b']`, `a.?b` or
/// `has(a.b)` (after [`rewrite`]), or None for any other expression.
fn path_of(expr: &IdedExpr) -> Option<(&str, Vec<String>)> {
    match &expr.expr {
        Expr::Ident(name) => Some((name.as_str(), Vec::new())),
        Expr::Select(select) if select.test => {
            let (root, mut path) = path_of(&select.operand)?;
            path.push(select.field.clone());
            Some((root, path))
        }
        Expr::Call(call)
            if (call.func_name == operators::INDEX || call.func_name == operators::OPT_INDEX)
                && call.target.is_none()
                && call.args.len() == 2 =>
        {
            let Expr::Literal(LiteralValue::String(field)) = &call.args[1].expr else {
                return None;
            };
            let (root, mut path) = path_of(&call.args[0])?;
            path.push(field.inner().to_string());
            Some((root, path))
        }
        _ => None,
    }
}

fn collect_reads(expr: &IdedExpr, reads: &mut ObjectReads) {
    if let Some((root, path)) = path_of(expr) {
        if let Some(root) = reads.of(root) {
            root.add(&path);
        }
        return;
    }
    match &expr.expr {
        // `oldObject == null` reads nothing of it: a pruned object is not
        // null, an absent one still is.
        Expr::Call(call)
            if (call.func_name == operators::EQUALS || call.func_name == operators::NOT_EQUALS)
                && call.args.len() == 2
                && call
                    .args
                    .iter()
                    .any(|a| matches!(&a.expr, Expr::Ident(name) if reads.of(name).is_some()))
                && call
                    .args
                    .iter()
                    .any(|a| matches!(&a.expr, Expr::Literal(LiteralValue::Null))) =>
        {
            return;
        }
        // A macro's own variable named `object` hides the request's: read
        // the request's whole rather than tell them apart.
        Expr::Comprehension(c) => {
            let names = [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)];
            for name in names.into_iter().flatten() {
                if let Some(root) = reads.of(name) {
                    *root = Reads::All;
                }
            }
        }
        _ => {}
    }
    for child in children(expr) {
        collect_reads(child, reads);
    }
}

fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    fn entries(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
        entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect()
    }
    match &expr.expr {
        Expr::Select(select) => vec![&*select.operand],
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn visit(expr: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(expr);
    for child in children(expr) {
        visit(child, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(expression: &str, activation: &Activation) -> Result<Value, String> {
        Program::compile(expression)?.evaluate(activation)
    }

    fn locked() -> Activation<'static> {
        Activation::new()
            .with(
                "oldObject",
                Some(&json!({
                    "metadata": {
                        "name": "db",
                        "annotations": {"core.navique.com/locked": "by alice"},
                    },
                    "spec": {"replicas": 3, "ratio": 0.5},
                })),
            )
            .with("object", None)
    }

    #[test]
    fn map_keys_with_dots_and_slashes_are_read_as_written() {
        let a = locked();
        assert_eq!(
            eval(
                "'core.navique.com/locked' in oldObject.metadata.annotations",
                &a
            ),
            Ok(json!(true))
        );
        assert_eq!(
            eval(
                "oldObject.metadata.annotations['core.navique.com/locked']",
                &a
            ),
            Ok(json!("by alice"))
        );
        assert_eq!(eval("oldObject.metadata.name", &a), Ok(json!("db")));
    }

    #[test]
    fn an_absent_object_is_null_and_selecting_from_it_fails() {
        let a = locked();
        assert_eq!(eval("object == null", &a), Ok(json!(true)));
        assert_eq!(eval("has(oldObject.metadata.labels)", &a), Ok(json!(false)));
        assert_eq!(
            eval("object.metadata.name == 'db'", &a),
            Err("no such overload".to_string())
        );
        assert_eq!(
            eval("oldObject.metadata.labels", &a),
            Err("no such key: labels".to_string())
        );
    }

    #[test]
    fn integers_stay_ints_and_fractions_doubles() {
        let a = locked();
        assert_eq!(eval("oldObject.spec.replicas == 3", &a), Ok(json!(true)));
        assert_eq!(eval("oldObject.spec.ratio > 0.25", &a), Ok(json!(true)));
        assert_eq!(
            eval("oldObject.spec.replicas / 0", &a),
            Err("division by zero".into())
        );
    }

    #[test]
    fn optional_syntax_reads_missing_fields() {
        let a = locked();
        assert_eq!(
            eval("oldObject.metadata.?labels.orValue({})", &a),
            Ok(json!({}))
        );
        assert_eq!(
            eval("oldObject.metadata.?name.orValue('none')", &a),
            Ok(json!("db"))
        );
        assert_eq!(
            eval(
                "oldObject.metadata.annotations[?'core.navique.com/owner'].hasValue()",
                &a
            ),
            Ok(json!(false))
        );
    }

    #[test]
    fn variables_see_earlier_ones_and_fail_only_where_used() {
        let mut a = locked();
        let compile = |name: &str, e: &str| (name.to_string(), Program::compile(e));
        a.set_variables(&[
            compile(
                "owner",
                "oldObject.metadata.annotations['core.navique.com/locked']",
            ),
            compile("shout", "variables.owner.upperAscii()"),
            compile("broken", "oldObject.metadata.labels.team"),
            compile("dependent", "variables.broken + 'x'"),
        ]);
        assert_eq!(eval("variables.shout", &a), Ok(json!("BY ALICE")));
        assert_eq!(eval("variables.owner != ''", &a), Ok(json!(true)));
        assert_eq!(
            eval("variables.broken == 'x'", &a),
            Err("composited variable \"broken\" fails to evaluate: no such key: labels".into())
        );
        assert_eq!(
            eval("variables.dependent", &a),
            Err("composited variable \"dependent\" fails to evaluate: composited variable \"broken\" fails to evaluate: no such key: labels".into())
        );
        assert_eq!(
            eval("false && variables.broken == 'x'", &a),
            Ok(json!(false))
        );
    }

    #[test]
    fn kubernetes_extension_functions_are_available() {
        let a = Activation::new();
        assert_eq!(
            eval("quantity('1Gi').isGreaterThan(quantity('500Mi'))", &a),
            Ok(json!(true))
        );
        assert_eq!(eval("'a-b'.split('-')", &a), Ok(json!(["a", "b"])));
        assert_eq!(eval("dyn(1) + 1", &a), Ok(json!(2)));
        assert_eq!(eval("string(true) + string(1)", &a), Ok(json!("true1")));
    }

    #[test]
    fn results_convert_to_json() {
        let a = Activation::new();
        assert_eq!(
            eval("timestamp('2026-01-02T03:04:05Z')", &a),
            Ok(json!("2026-01-02T03:04:05Z"))
        );
        assert_eq!(eval("duration('1h')", &a), Ok(json!("3600s")));
        assert_eq!(
            eval("{'b': [1, 2.5, null], 'a': true}", &a),
            Ok(json!({"a": true, "b": [1, 2.5, null]}))
        );
    }

    #[test]
    fn parse_errors_are_reported() {
        let err = Program::compile("object.metadata.name ==").unwrap_err();
        assert!(err.starts_with("ERROR: <input>:1:"), "{err}");
    }

    #[test]
    fn a_message_construction_is_an_undeclared_reference_not_a_crash() {
        for expression in ["Foo{a: 1}", "[1].all(x, x == pkg.Bar{})"] {
            let err = Program::compile(expression).unwrap_err();
            assert!(err.contains("undeclared reference to '"), "{err}");
        }
        let err = Program::compile("Foo{a: 1} == null").unwrap_err();
        assert_eq!(
            err,
            "ERROR: <input>: undeclared reference to 'Foo' (in container '')"
        );
    }

    fn reads_of(expressions: &[&str]) -> ObjectReads {
        let mut reads = ObjectReads::default();
        for expression in expressions {
            Program::compile(expression).unwrap().reads(&mut reads);
        }
        reads
    }

    fn fields(entries: &[(&str, Reads)]) -> Reads {
        Reads::Fields(
            entries
                .iter()
                .map(|(field, reads)| ((*field).to_owned(), reads.clone()))
                .collect(),
        )
    }

    #[test]
    fn what_an_expression_reads_of_the_objects_is_found_from_its_paths() {
        let reads = reads_of(&[
            "has(object.metadata.annotations) && 'a' in object.metadata.annotations",
            "oldObject != null && oldObject.metadata.labels['x'] == 'y'",
            "null == oldObject || has(oldObject.spec.replicas)",
            "request.userInfo.username != '' && params.x == variables.y",
        ]);
        assert_eq!(
            reads.object,
            fields(&[("metadata", fields(&[("annotations", Reads::All)]))])
        );
        assert_eq!(
            reads.old_object,
            fields(&[
                (
                    "metadata",
                    fields(&[("labels", fields(&[("x", Reads::All)]))])
                ),
                ("spec", fields(&[("replicas", Reads::All)])),
            ])
        );

        assert_eq!(
            reads.request,
            fields(&[("userInfo", fields(&[("username", Reads::All)]))])
        );
        assert_eq!(reads.namespace_object, Reads::default());

        // Read whole: compared, passed to a function, iterated, indexed by
        // something that is not a literal, or hidden by a macro's variable.
        let at = |path: &[&str]| {
            let mut reads = Reads::default();
            reads.add(&path.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>());
            reads
        };
        for (expression, object, old_object) in [
            ("object == oldObject", Reads::All, Reads::All),
            (
                "size(object.metadata) > 0",
                at(&["metadata"]),
                Reads::default(),
            ),
            (
                "object.spec.items.all(i, i > 0)",
                at(&["spec", "items"]),
                Reads::default(),
            ),
            (
                "object.metadata.labels[request.name] == ''",
                at(&["metadata", "labels"]),
                Reads::default(),
            ),
            (
                "object.?spec.orValue({}) == {}",
                at(&["spec"]),
                Reads::default(),
            ),
            (
                "[1].exists(object, object > 0)",
                Reads::All,
                Reads::default(),
            ),
        ] {
            let reads = reads_of(&[expression]);
            assert_eq!(reads.object, object, "{expression}");
            assert_eq!(reads.old_object, old_object, "{expression}");
        }
    }

    #[test]
    fn expressions_see_the_same_values_in_objects_pruned_to_what_they_read() {
        let object = json!({
            "apiVersion": "core.navique.com/v1alpha1", "kind": "Stack",
            "metadata": {
                "name": "forge", "namespace": "team",
                "annotations": {"core.navique.com/locked": "a,b", "note": "x"},
                "labels": {"tier": "prod"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"replicas": 3, "items": [1, 2, 3], "ratio": 0.5},
            "status": {"phase": "Ready"},
        });
        let old = json!({"metadata": {"name": "forge", "labels": {"tier": "dev"}}, "spec": {"replicas": 2}});
        let expressions = [
            "object.metadata.annotations['core.navique.com/locked']",
            "has(object.metadata.annotations) && 'note' in object.metadata.annotations",
            "object.metadata.labels",
            "object.spec.items.map(i, i * 2)",
            "size(object.spec)",
            "object.spec.replicas - oldObject.spec.replicas",
            "oldObject != null && oldObject.metadata.labels.tier != object.metadata.labels.tier",
            "has(object.status.phase) ? object.status.phase : 'none'",
            "object.metadata.missing",
            "object.spec.replicas.nothing",
            "has(oldObject.metadata.annotations)",
            "object.?metadata.?labels.?tier.orValue('')",
        ];
        let reads = reads_of(&expressions);
        assert_ne!(reads.object, Reads::All, "{reads:?}");
        let full = Activation::new()
            .with("object", Some(&object))
            .with("oldObject", Some(&old));
        let mut pruned = Activation::new();
        pruned.set_read("object", Some(&object), &reads.object);
        pruned.set_read("oldObject", Some(&old), &reads.old_object);
        for expression in expressions {
            assert_eq!(
                eval(expression, &pruned),
                eval(expression, &full),
                "{expression}"
            );
        }
        // What no expression reads is left out.
        let managed = Program::compile("object.metadata.managedFields").unwrap();
        assert_eq!(
            managed.evaluate(&pruned),
            Err("no such key: managedFields".to_owned())
        );
        // An absent object is null either way.
        let mut absent = Activation::new();
        absent.set_read("oldObject", None, &reads.old_object);
        assert_eq!(eval("oldObject == null", &absent), Ok(json!(true)));
    }
}
