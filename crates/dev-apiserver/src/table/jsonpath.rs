//! JSONPath, the client-go `util/jsonpath` dialect, one expression: what CRD
//! printer columns select their cells with.

use std::borrow::Cow;

use serde_json::Value;

use crate::gofmt;

/// Evaluates a Kubernetes JSONPath expression (`.a.b`, `.a[0]`, `.a[-1]`, `.a[1:3]`,
/// `.a[*].b`, `.a['b']`, `.a[0,2]`, `..b`, `.*`, filters `[?(@.type=="Ready")]`,
/// `[?(@.x)]`, with or without the surrounding `{}`) against an object, with missing keys
/// allowed. An invalid expression, or an evaluation error (indexing a non-list, an index out
/// of range, comparing incompatible values), yields no results.
#[cfg(test)]
pub(super) fn jsonpath(object: &Value, path: &str) -> Vec<Value> {
    match parse(path).map(|p| evaluate(&p, object)) {
        Ok(Ok(results)) => results.into_iter().map(Cow::into_owned).collect(),
        _ => Vec::new(),
    }
}

pub(super) type Path = Vec<Step>;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Step {
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
pub(super) struct PathError;

pub(super) fn parse(path: &str) -> Result<Path, PathError> {
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
                left: parse(left)?,
                op: op.to_owned(),
                right: parse(right)?,
            }),
            None => Ok(Step::Exists(parse(&text)?)),
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
pub(super) struct EvalError;

pub(super) type Values<'a> = Vec<Cow<'a, Value>>;

pub(super) fn evaluate<'a>(path: &[Step], root: &'a Value) -> Result<Values<'a>, EvalError> {
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
pub(super) fn print_result(value: &Value) -> String {
    match value {
        Value::Null => "<no value>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => gofmt::print_float(f),
            _ => n.to_string(),
        },
        Value::Array(_) | Value::Object(_) => gofmt::json(value),
    }
}
