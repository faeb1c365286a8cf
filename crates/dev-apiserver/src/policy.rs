//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`) enforced
//! as kube-apiserver's ValidatingAdmissionPolicy plugin does, with its
//! messages.
//!
//! A policy applies through each binding naming it (`spec.policyName`): the
//! policy's `matchConstraints` and then the binding's `matchResources` must
//! match the request (resource rules, `excludeResourceRules`,
//! `namespaceSelector`, `objectSelector`), the binding's `paramRef` selects
//! the params (`paramKind`), and for each param the policy's
//! `matchConditions`, `variables`, `validations` and `auditAnnotations` are
//! evaluated with CEL ([`crate::cel`]). A failed validation becomes, per the
//! binding's `validationActions`, the request's denial (`Deny`), a warning
//! (`Warn`) or an audit annotation (`Audit`). Errors (CEL evaluation errors,
//! missing params, a bad selector) deny the request when the policy's
//! `failurePolicy` is `Fail` (the default) and are ignored with `Ignore`.
//!
//! Simplifications: `matchPolicy` is treated as `Exact` (the dev server has
//! one version per resource, so `Equivalent` would find nothing more); the
//! policy's `status.typeChecking` is not consulted and expressions are not
//! type-checked; the `authorizer` variable ([`crate::authorizer`]) lacks
//! `serviceAccount` and `requestResource`; there is no CEL cost budget. The caller's `params` lookup decides the scope of the param
//! kind: it gets the binding's `paramRef.namespace`, else the request's
//! namespace, else `None` (kube-apiserver instead refuses a namespaced param
//! kind for a cluster-scoped request when `paramRef.namespace` is unset). A
//! namespaced request without its Namespace object is matched as if the
//! namespace had no labels (kube-apiserver answers 404). Expressions are
//! parsed on each call (some tens of microseconds each).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::attributes::{Attributes, Operation};
use crate::cel::{Activation, ObjectReads, Program};

/// What [`evaluate`] needs besides the request.
pub struct PolicyContext<'a> {
    /// Every stored ValidatingAdmissionPolicy.
    pub policies: &'a [Value],
    /// Every stored ValidatingAdmissionPolicyBinding.
    pub bindings: &'a [Value],
    /// The request namespace's Namespace object (None for cluster-scoped).
    pub namespace_object: Option<&'a Value>,
    /// What the policies read of the request's objects ([`object_reads`]
    /// of `policies`): only that is converted to CEL.
    pub reads: &'a ObjectReads,
    /// Params for a binding's paramRef: (apiVersion, kind, namespace, name,
    /// label selector) -> matching objects.
    #[allow(clippy::type_complexity)]
    pub params: &'a dyn Fn(&str, &str, Option<&str>, Option<&str>, Option<&Value>) -> Vec<Value>,
    /// Answers the `authorizer` variable's checks for the request's user;
    /// without it, expressions reading `authorizer` fail.
    pub authorizer: Option<crate::authorizer::Authorize>,
}

/// The request's rejection by a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// 403 for `Forbidden`, 401 `Unauthorized`, 413 `RequestEntityTooLarge`,
    /// 422 otherwise (`Invalid`, the default reason).
    pub code: u16,
    /// The validation's `reason`, `Invalid` when unset.
    pub reason: String,
    /// `ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
    /// request: <message>`.
    pub message: String,
}

impl Denial {
    /// The `metav1.Status` kube-apiserver answers: the message prefixed as
    /// `admission.NewForbidden` does (`<resource>.<group> "<name>" is
    /// forbidden: ...`), the policy's reason and code, and the policy message
    /// again as the one cause.
    pub fn status(&self, attributes: &Attributes) -> Value {
        let resource = group_resource(attributes);
        let name = request_name(attributes);
        let message = format!("{resource} \"{name}\" is forbidden: {}", self.message);
        let mut details = json!({"name": name, "kind": attributes.resource.name});
        if !attributes.resource.group.is_empty() {
            details["group"] = json!(attributes.resource.group);
        }
        details["causes"] = json!([{"message": self.message}]);
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": self.reason,
            "details": details,
            "code": self.code,
        })
    }
}

/// The outcome of every policy for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The first `Deny` decision, if any.
    pub denial: Option<Denial>,
    /// `Warning` header texts, from bindings with the `Warn` action.
    pub warnings: Vec<String>,
    /// Audit annotations: `validation.policy.admission.k8s.io/validation_failure`
    /// for `Audit` actions, `<policy>/<key>` for `spec.auditAnnotations`.
    pub audit_annotations: BTreeMap<String, String>,
}

const VALIDATION_FAILURE_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";
/// kube-apiserver's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// kube-apiserver's `maxAuditAnnotationValueLength`.
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

/// Evaluates every policy and binding that applies to the request.
pub fn evaluate(ctx: &PolicyContext, attributes: &Attributes) -> Verdict {
    let mut verdict = Verdict::default();
    if is_policy_resource(attributes) {
        // kube-apiserver never applies API-defined policies to policies and
        // their bindings.
        return verdict;
    }
    let mut denied: Vec<Denied> = Vec::new();
    let request = RequestScope::default();
    for policy in ctx.policies {
        evaluate_policy(ctx, attributes, &request, policy, &mut verdict, &mut denied);
    }
    if let Some(first) = denied.into_iter().next() {
        let message = match &first.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
                first.policy, first.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                first.policy, first.message
            ),
        };
        let reason = if first.reason.is_empty() {
            "Invalid".to_string()
        } else {
            first.reason
        };
        verdict.denial = Some(Denial {
            code: reason_code(&reason),
            reason,
            message,
        });
    }
    verdict
}

/// What any expression of `policies` reads of a request's `object`,
/// `oldObject`, `namespaceObject` and `request`.
pub fn object_reads(policies: &[Value]) -> ObjectReads {
    let mut reads = ObjectReads::default();
    for policy in policies {
        CompiledPolicy::new(&policy["spec"]).reads(&mut reads);
    }
    reads
}

/// A Deny decision with the policy and binding that made it.
struct Denied {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: String,
}

/// The request's values as CEL sees them, converted on the first policy
/// that reads them and shared by the rest: converting the objects again for
/// each policy was most of what judging a write cost.
#[derive(Default)]
struct RequestScope(std::cell::OnceCell<Activation<'static>>);

impl RequestScope {
    fn get(&self, ctx: &PolicyContext, attributes: &Attributes) -> &Activation<'static> {
        self.0.get_or_init(|| {
            let reads = ctx.reads;
            let mut activation = Activation::new();
            activation.set_read("object", attributes.object.as_deref(), &reads.object);
            activation.set_read(
                "oldObject",
                attributes.old_object.as_deref(),
                &reads.old_object,
            );
            // What no expression reads of them is not built: only whether
            // they are null can be told.
            let unread = || Value::Object(Map::new());
            let request = if reads.request.is_nothing() {
                unread()
            } else {
                admission_request(attributes, None)
            };
            activation.set_read("request", Some(&request), &reads.request);
            let namespace = if reads.namespace_object.is_nothing() {
                ctx.namespace_object
                    .filter(|_| has_namespace_object(attributes))
                    .map(|_| unread())
            } else {
                cel_namespace(attributes, ctx.namespace_object)
            };
            activation.set_read(
                "namespaceObject",
                namespace.as_ref(),
                &reads.namespace_object,
            );
            if let Some(authorize) = ctx.authorizer.as_ref() {
                activation.set_authorizer(authorize.clone());
            }
            activation
        })
    }
}

fn evaluate_policy(
    ctx: &PolicyContext,
    attributes: &Attributes,
    request: &RequestScope,
    policy: &Value,
    verdict: &mut Verdict,
    denied: &mut Vec<Denied>,
) {
    let name = str_at(policy, &["metadata", "name"]);
    let spec = &policy["spec"];
    let failure_policy = spec["failurePolicy"].as_str().unwrap_or("Fail");
    let config_error = |denied: &mut Vec<Denied>, err: String, binding: Option<&str>| {
        let message = match failure_policy {
            "Ignore" => return,
            "Fail" => match binding {
                Some(_) => format!("failed to configure binding: {err}"),
                None => format!("failed to configure policy: {err}"),
            },
            other => format!("unrecognized failure policy: '{other}'"),
        };
        denied.push(Denied {
            policy: name.to_string(),
            binding: binding.map(str::to_string),
            message,
            reason: String::new(),
        });
    };

    match matches_resources(&spec["matchConstraints"], attributes, ctx.namespace_object) {
        Ok(true) => {}
        Ok(false) => return,
        Err(err) => return config_error(denied, err, None),
    }
    let bindings: Vec<&Value> = ctx
        .bindings
        .iter()
        .filter(|b| b["spec"]["policyName"].as_str() == Some(name))
        .collect();
    if bindings.is_empty() {
        return;
    }
    let compiled = CompiledPolicy::new(spec);
    let mut collected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for binding in bindings {
        let binding_name = str_at(binding, &["metadata", "name"]);
        let binding_spec = &binding["spec"];
        let matches = match binding_spec.get("matchResources") {
            None | Some(Value::Null) => Ok(true),
            Some(resources) => matches_resources(resources, attributes, ctx.namespace_object),
        };
        match matches {
            Ok(true) => {}
            Ok(false) => continue,
            Err(err) => {
                config_error(denied, err, Some(binding_name));
                continue;
            }
        }
        let params = match collect_params(ctx, spec, binding_spec, &attributes.namespace) {
            Ok(params) => params,
            Err(err) => {
                config_error(denied, err, Some(binding_name));
                continue;
            }
        };
        let actions: Vec<&str> = binding_spec["validationActions"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for param in &params {
            let result =
                compiled.validate(failure_policy, request.get(ctx, attributes), param.as_ref());
            for (index, decision) in result.decisions.iter().enumerate() {
                let Decision::Deny { message, reason } = decision else {
                    continue;
                };
                for action in &actions {
                    match *action {
                        "Deny" => denied.push(Denied {
                            policy: name.to_string(),
                            binding: Some(binding_name.to_string()),
                            message: message.clone(),
                            reason: reason.clone(),
                        }),
                        "Warn" => verdict.warnings.push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{binding_name}': {message}"
                        )),
                        "Audit" => {
                            // As kube-apiserver: an annotation is never overwritten.
                            verdict
                                .audit_annotations
                                .entry(VALIDATION_FAILURE_KEY.to_string())
                                .or_insert_with(|| {
                                    validation_failure_value(
                                        message,
                                        name,
                                        binding_name,
                                        index,
                                        &actions,
                                    )
                                });
                        }
                        _ => {}
                    }
                }
            }
            for annotation in result.audit_annotations {
                match annotation {
                    AuditAnnotation::Publish { key, mut value } => {
                        if value.len() > MAX_AUDIT_VALUE_BYTES {
                            let mut end = MAX_AUDIT_VALUE_BYTES;
                            while !value.is_char_boundary(end) {
                                end -= 1;
                            }
                            value.truncate(end);
                        }
                        let values = collected.entry(key).or_default();
                        if !values.contains(&value) {
                            values.push(value);
                        }
                    }
                    AuditAnnotation::Error(message) => denied.push(Denied {
                        policy: name.to_string(),
                        binding: Some(binding_name.to_string()),
                        message,
                        reason: String::new(),
                    }),
                }
            }
        }
    }
    for (key, values) in collected {
        verdict
            .audit_annotations
            .entry(format!("{name}/{key}"))
            .or_insert_with(|| values.join(", "));
    }
}

/// The JSON of a `validation_failure` audit annotation, fields in
/// kube-apiserver's order.
fn validation_failure_value(
    message: &str,
    policy: &str,
    binding: &str,
    index: usize,
    actions: &[&str],
) -> String {
    format!(
        "[{{\"message\":{},\"policy\":{},\"binding\":{},\"expressionIndex\":{index},\"validationActions\":{}}}]",
        json!(message),
        json!(policy),
        json!(binding),
        json!(actions)
    )
}

/// kube-apiserver's `reasonToCode`.
fn reason_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// One validation's outcome.
enum Decision {
    Admit,
    Deny { message: String, reason: String },
}

enum AuditAnnotation {
    Publish { key: String, value: String },
    Error(String),
}

#[derive(Default)]
struct ValidateResult {
    decisions: Vec<Decision>,
    audit_annotations: Vec<AuditAnnotation>,
}

/// An expression, parsed, or the parse error kube-apiserver would report.
struct Compiled {
    source: String,
    program: Result<Program, String>,
}

impl Compiled {
    fn new(source: &str) -> Self {
        Self {
            source: source.to_string(),
            program: Program::compile(source),
        }
    }

    /// The value, or kube-apiserver's evaluation error message.
    fn eval(&self, activation: &Activation) -> Result<Value, String> {
        match &self.program {
            Ok(program) => program
                .evaluate(activation)
                .map_err(|e| format!("expression '{}' resulted in error: {e}", self.source)),
            Err(e) => Err(format!("compilation error: {e}")),
        }
    }
}

struct CompiledValidation {
    expression: Compiled,
    message: String,
    message_expression: Option<Compiled>,
    reason: String,
}

struct CompiledPolicy {
    match_conditions: Vec<Compiled>,
    variables: Vec<(String, Result<Program, String>)>,
    validations: Vec<CompiledValidation>,
    audit_annotations: Vec<(String, Compiled)>,
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

impl CompiledPolicy {
    fn new(spec: &Value) -> Self {
        Self {
            match_conditions: items(&spec["matchConditions"])
                .map(|c| Compiled::new(c["expression"].as_str().unwrap_or_default()))
                .collect(),
            variables: items(&spec["variables"])
                .map(|v| {
                    (
                        v["name"].as_str().unwrap_or_default().to_string(),
                        Program::compile(v["expression"].as_str().unwrap_or_default()),
                    )
                })
                .collect(),
            validations: items(&spec["validations"])
                .map(|v| CompiledValidation {
                    expression: Compiled::new(v["expression"].as_str().unwrap_or_default()),
                    message: v["message"].as_str().unwrap_or_default().to_string(),
                    message_expression: v["messageExpression"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .map(Compiled::new),
                    reason: v["reason"].as_str().unwrap_or_default().to_string(),
                })
                .collect(),
            audit_annotations: items(&spec["auditAnnotations"])
                .map(|a| {
                    (
                        a["key"].as_str().unwrap_or_default().to_string(),
                        Compiled::new(a["valueExpression"].as_str().unwrap_or_default()),
                    )
                })
                .collect(),
        }
    }

    /// Adds what the policy's expressions read of the request's values.
    fn reads(&self, reads: &mut ObjectReads) {
        let validations = self
            .validations
            .iter()
            .flat_map(|v| std::iter::once(&v.expression).chain(v.message_expression.as_ref()));
        let programs = self
            .match_conditions
            .iter()
            .chain(validations)
            .chain(self.audit_annotations.iter().map(|(_, a)| a))
            .map(|c| &c.program)
            .chain(self.variables.iter().map(|(_, p)| p));
        for program in programs.flatten() {
            program.reads(reads);
        }
    }

    /// kube-apiserver's validator for one param.
    fn validate(
        &self,
        failure_policy: &str,
        request: &Activation<'_>,
        param: Option<&Value>,
    ) -> ValidateResult {
        let ignore = failure_policy == "Ignore";
        let error_decision = |message: String| {
            if ignore {
                Decision::Admit
            } else {
                Decision::Deny {
                    message,
                    reason: String::new(),
                }
            }
        };
        let mut activation = request.scope().with("params", param);
        // Conditions that read no variable are judged before the variables
        // are evaluated, which a request they skip then never pays for (a
        // policy matching every write, say); they see the same values.
        let conditions_first = !self
            .match_conditions
            .iter()
            .any(|c| c.program.as_ref().is_ok_and(|p| p.mentions("variables")));
        if !conditions_first {
            activation.set_variables(&self.variables);
        }

        // matchConditions: any false skips the policy; otherwise errors go
        // by the failure policy.
        let mut errors = Vec::new();
        for condition in &self.match_conditions {
            match condition.eval(&activation) {
                Ok(Value::Bool(false)) => return ValidateResult::default(),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        if conditions_first {
            activation.set_variables(&self.variables);
        }
        if !errors.is_empty() {
            if ignore {
                return ValidateResult::default();
            }
            return ValidateResult {
                decisions: vec![error_decision(aggregate(&errors))],
                audit_annotations: Vec::new(),
            };
        }

        let decisions = self
            .validations
            .iter()
            .map(|v| match v.expression.eval(&activation) {
                Err(e) => error_decision(e),
                Ok(Value::Bool(true)) => Decision::Admit,
                Ok(_) => Decision::Deny {
                    message: v.message(&activation),
                    reason: if v.reason.is_empty() {
                        "Invalid".to_string()
                    } else {
                        v.reason.clone()
                    },
                },
            })
            .collect();

        let audit_annotations = self
            .audit_annotations
            .iter()
            .filter_map(|(key, expression)| match expression.eval(&activation) {
                Err(e) => (!ignore).then_some(AuditAnnotation::Error(e)),
                Ok(Value::Null) => None,
                Ok(Value::String(s)) => {
                    let value = s.trim();
                    (!value.is_empty()).then(|| AuditAnnotation::Publish {
                        key: key.clone(),
                        value: value.to_string(),
                    })
                }
                Ok(other) => Some(AuditAnnotation::Error(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    expression.source,
                    cel_type_name(&other)
                ))),
            })
            .collect();
        ValidateResult {
            decisions,
            audit_annotations,
        }
    }
}

impl CompiledValidation {
    /// The failure message: the messageExpression's string if it gives a
    /// usable one, else `message`, else `failed expression: <expression>`.
    fn message(&self, activation: &Activation) -> String {
        if let Some(expression) = &self.message_expression {
            match expression.eval(activation) {
                Ok(Value::String(s)) => {
                    let s = s.trim();
                    if !s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n') {
                        return s.to_string();
                    }
                }
                Ok(_) => {}
                // As kube-apiserver, which logs it: the message falls back.
                Err(e) => tracing::debug!(error = %e, "error while evaluating messageExpression"),
            }
        }
        let message = self.message.trim();
        if !message.is_empty() {
            return message.to_string();
        }
        format!("failed expression: {}", self.expression.source.trim())
    }
}

/// `utilerrors.NewAggregate(errs).Error()`.
fn aggregate(errors: &[String]) -> String {
    if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    }
}

fn cel_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null_type",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "double",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// kube-apiserver's `CollectParams`: `[None]` without params, else the
/// params found (an error when none is and `parameterNotFoundAction` is
/// `Deny`, its default).
fn collect_params(
    ctx: &PolicyContext,
    spec: &Value,
    binding_spec: &Value,
    namespace: &str,
) -> Result<Vec<Option<Value>>, String> {
    let param_kind = &spec["paramKind"];
    let param_ref = &binding_spec["paramRef"];
    if !param_kind.is_object() || !param_ref.is_object() {
        return Ok(vec![None]);
    }
    let api_version = param_kind["apiVersion"].as_str().unwrap_or_default();
    let kind = param_kind["kind"].as_str().unwrap_or_default();
    let ref_namespace = param_ref["namespace"].as_str().filter(|s| !s.is_empty());
    let lookup_namespace = ref_namespace.or(Some(namespace).filter(|s| !s.is_empty()));
    let name = param_ref["name"].as_str().filter(|s| !s.is_empty());
    let selector = param_ref.get("selector").filter(|s| !s.is_null());
    let found = match (name, selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".to_string());
        }
        (Some(name), None) => (ctx.params)(api_version, kind, lookup_namespace, Some(name), None),
        (None, Some(selector)) => {
            LabelSelector::parse(Some(selector))?;
            (ctx.params)(api_version, kind, lookup_namespace, None, Some(selector))
        }
        (None, None) => return Err("one of name or selector must be provided".to_string()),
    };
    let action = param_ref["parameterNotFoundAction"]
        .as_str()
        .unwrap_or("Deny");
    if found.is_empty() && action == "Deny" {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_string(),
        );
    }
    Ok(found.into_iter().map(Some).collect())
}

/// The `namespaceObject` variable: the request's Namespace with only the
/// metadata fields kube-apiserver keeps, and null for cluster-scoped
/// requests and for Namespaces themselves.
fn cel_namespace(attributes: &Attributes, namespace: Option<&Value>) -> Option<Value> {
    let namespace = namespace.filter(|_| has_namespace_object(attributes))?;
    let mut metadata = Map::new();
    for field in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ] {
        if let Some(v) = namespace["metadata"].get(field) {
            metadata.insert(field.to_string(), v.clone());
        }
    }
    let mut out = Map::new();
    out.insert("metadata".into(), Value::Object(metadata));
    for field in ["spec", "status"] {
        if let Some(v) = namespace.get(field) {
            out.insert(field.into(), v.clone());
        }
    }
    Some(Value::Object(out))
}

/// Whether `namespaceObject` is the request's Namespace (if it exists) rather
/// than null.
fn has_namespace_object(attributes: &Attributes) -> bool {
    let namespace_itself = attributes.kind.group.is_empty()
        && attributes.kind.version == "v1"
        && attributes.kind.name == "Namespace";
    !namespace_itself && !attributes.namespace.is_empty()
}

// ---------------------------------------------------------------------------
// Matching, shared with webhooks.
// ---------------------------------------------------------------------------

/// `<resource>` or `<resource>.<group>`.
pub(crate) fn group_resource(attributes: &Attributes) -> String {
    if attributes.resource.group.is_empty() {
        attributes.resource.name.clone()
    } else {
        format!("{}.{}", attributes.resource.name, attributes.resource.group)
    }
}

/// The request's name as `admission.NewForbidden` finds it: the name, else
/// the object's name or generateName, else `Unknown`.
pub(crate) fn request_name(attributes: &Attributes) -> String {
    if !attributes.name.is_empty() {
        return attributes.name.clone();
    }
    if let Some(object) = &attributes.object {
        for field in ["name", "generateName"] {
            if let Some(name) = object["metadata"][field].as_str().filter(|s| !s.is_empty()) {
                return name.to_string();
            }
        }
    }
    "Unknown".to_string()
}

/// Policies and their bindings, which API-defined policies never see.
fn is_policy_resource(attributes: &Attributes) -> bool {
    attributes.resource.group == "admissionregistration.k8s.io"
        && matches!(
            attributes.resource.name.as_str(),
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

/// The `AdmissionRequest` of `admission.k8s.io/v1` (as JSON, kube-apiserver's
/// omissions) but its object and oldObject, which a webhook's review adds
/// and the CEL `request` variable lacks; `uid` empty when None.
pub(crate) fn admission_request(attributes: &Attributes, uid: Option<&str>) -> Value {
    let mut request = Map::new();
    request.insert("uid".into(), json!(uid.unwrap_or_default()));
    request.insert("kind".into(), gvk(attributes));
    request.insert("resource".into(), gvr(attributes));
    if !attributes.sub_resource.is_empty() {
        request.insert("subResource".into(), json!(attributes.sub_resource));
    }
    request.insert("requestKind".into(), gvk(attributes));
    request.insert("requestResource".into(), gvr(attributes));
    if !attributes.sub_resource.is_empty() {
        request.insert("requestSubResource".into(), json!(attributes.sub_resource));
    }
    if !attributes.name.is_empty() {
        request.insert("name".into(), json!(attributes.name));
    }
    if !attributes.namespace.is_empty() {
        request.insert("namespace".into(), json!(attributes.namespace));
    }
    request.insert("operation".into(), json!(attributes.operation.as_str()));
    request.insert("userInfo".into(), attributes.user.to_json());
    request.insert("dryRun".into(), json!(attributes.dry_run));
    request.insert(
        "options".into(),
        attributes.options.clone().unwrap_or(Value::Null),
    );
    Value::Object(request)
}

fn gvk(attributes: &Attributes) -> Value {
    json!({
        "group": attributes.kind.group,
        "version": attributes.kind.version,
        "kind": attributes.kind.name,
    })
}

fn gvr(attributes: &Attributes) -> Value {
    json!({
        "group": attributes.resource.group,
        "version": attributes.resource.version,
        "resource": attributes.resource.name,
    })
}

/// kube-apiserver's policy `Matcher.Matches` for a `MatchResources`
/// (a policy's `matchConstraints` or a binding's `matchResources`).
fn matches_resources(
    resources: &Value,
    attributes: &Attributes,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    let ns = namespace_selector_matches(resources.get("namespaceSelector"), attributes, namespace);
    if let Ok(false) = ns {
        return Ok(false);
    }
    let obj = object_selector_matches(resources.get("objectSelector"), attributes);
    if let Ok(false) = obj {
        return Ok(false);
    }
    if items(&resources["excludeResourceRules"]).any(|r| named_rule_matches(r, attributes)) {
        return Ok(false);
    }
    let rules = &resources["resourceRules"];
    let matched = match rules.as_array() {
        Some(rules) if !rules.is_empty() => rules.iter().any(|r| named_rule_matches(r, attributes)),
        _ => true,
    };
    if !matched {
        return Ok(false);
    }
    ns?;
    obj?;
    Ok(true)
}

/// A `NamedRuleWithOperations`: the rule, then `resourceNames` if any.
fn named_rule_matches(rule: &Value, attributes: &Attributes) -> bool {
    if !rule_matches(rule, attributes) {
        return false;
    }
    match rule["resourceNames"].as_array() {
        Some(names) if !names.is_empty() => names
            .iter()
            .any(|n| n.as_str() == Some(attributes.name.as_str())),
        _ => true,
    }
}

/// A `RuleWithOperations`: scope, operations, apiGroups, apiVersions and
/// resources (`*`, `pods/status`, `*/status`, `pods/*`).
pub(crate) fn rule_matches(rule: &Value, attributes: &Attributes) -> bool {
    let is_namespace_resource = attributes.resource.group.is_empty()
        && attributes.resource.version == "v1"
        && attributes.resource.name == "namespaces";
    let scope = match rule["scope"].as_str().unwrap_or("*") {
        "*" => true,
        "Namespaced" => !is_namespace_resource && !attributes.namespace.is_empty(),
        "Cluster" => is_namespace_resource || attributes.namespace.is_empty(),
        _ => false,
    };
    let list = |field: &str, wanted: &str| {
        items(&rule[field])
            .filter_map(Value::as_str)
            .any(|item| item == "*" || item == wanted)
    };
    let resource = items(&rule["resources"])
        .filter_map(Value::as_str)
        .any(|item| {
            let (res, sub) = item.split_once('/').unwrap_or((item, ""));
            (res == "*" || res == attributes.resource.name)
                && (sub == "*" || sub == attributes.sub_resource)
        });
    scope
        && list("operations", attributes.operation.as_str())
        && list("apiGroups", &attributes.resource.group)
        && list("apiVersions", &attributes.resource.version)
        && resource
}

/// The namespace selector, matched against the namespace's labels (the
/// object's own for a Namespace being created or updated). Cluster-scoped
/// requests always match.
pub(crate) fn namespace_selector_matches(
    selector: Option<&Value>,
    attributes: &Attributes,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    let is_namespace = attributes.resource.name == "namespaces";
    if attributes.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    let selector = LabelSelector::parse(selector)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let labels_of = |object: Option<&Value>| object.map(|o| o["metadata"]["labels"].clone());
    let labels = if is_namespace
        && attributes.sub_resource.is_empty()
        && matches!(attributes.operation, Operation::Create | Operation::Update)
    {
        labels_of(attributes.object.as_deref())
    } else if is_namespace && namespace.is_none() {
        labels_of(
            attributes
                .old_object
                .as_deref()
                .or(attributes.object.as_deref()),
        )
    } else {
        labels_of(namespace)
    };
    Ok(selector.matches(labels.as_ref().unwrap_or(&Value::Null)))
}

/// The object selector, matched against the object's labels or the old
/// object's (so a DELETE is matched by the stored object's labels).
pub(crate) fn object_selector_matches(
    selector: Option<&Value>,
    attributes: &Attributes,
) -> Result<bool, String> {
    let selector = LabelSelector::parse(selector)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let matches = |object: &Option<Arc<Value>>| {
        object
            .as_ref()
            .is_some_and(|o| selector.matches(&o["metadata"]["labels"]))
    };
    Ok(matches(&attributes.object) || matches(&attributes.old_object))
}

/// A `metav1.LabelSelector`, checked as `LabelSelectorAsSelector` does.
pub(crate) struct LabelSelector {
    requirements: Vec<(String, SelectorOp, Vec<String>)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// An absent or null selector is the empty one, which matches everything.
    pub(crate) fn parse(selector: Option<&Value>) -> Result<Self, String> {
        let mut requirements = Vec::new();
        let Some(selector) = selector.filter(|s| !s.is_null()) else {
            return Ok(Self { requirements });
        };
        if let Some(labels) = selector["matchLabels"].as_object() {
            for (key, value) in labels {
                requirements.push((
                    key.clone(),
                    SelectorOp::In,
                    vec![value.as_str().unwrap_or_default().to_string()],
                ));
            }
        }
        for expression in items(&selector["matchExpressions"]) {
            let key = expression["key"].as_str().unwrap_or_default().to_string();
            let values: Vec<String> = items(&expression["values"])
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            let operator = expression["operator"].as_str().unwrap_or_default();
            let op = match operator {
                "In" => SelectorOp::In,
                "NotIn" => SelectorOp::NotIn,
                "Exists" => SelectorOp::Exists,
                "DoesNotExist" => SelectorOp::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            match op {
                SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
                    return Err(
                        "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
                            .to_string(),
                    );
                }
                SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
                    return Err(format!(
                        "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
                    ));
                }
                _ => {}
            }
            requirements.push((key, op, values));
        }
        Ok(Self { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether labels (a JSON object, or null for none) satisfy every
    /// requirement.
    pub(crate) fn matches(&self, labels: &Value) -> bool {
        self.requirements.iter().all(|(key, op, values)| {
            let value = labels.get(key).and_then(Value::as_str);
            match op {
                SelectorOp::In => value.is_some_and(|v| values.iter().any(|w| w == v)),
                SelectorOp::NotIn => value.is_none_or(|v| values.iter().all(|w| w != v)),
                SelectorOp::Exists => value.is_some(),
                SelectorOp::DoesNotExist => value.is_none(),
            }
        })
    }
}

fn str_at<'v>(value: &'v Value, path: &[&str]) -> &'v str {
    path.iter()
        .fold(value, |v, key| &v[*key])
        .as_str()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
