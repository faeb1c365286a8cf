//! RBAC authorization, decided as kube-apiserver's authorizer chain decides
//! it for `--authorization-mode=Node,RBAC`: members of `system:masters` are
//! always allowed, everyone else needs a rule granted through a
//! (Cluster)RoleBinding. The 403 message, SubjectAccessReview status and
//! `SelfSubjectRulesReview` status are worded as kube-apiserver words them.
//!
//! Follows `plugin/pkg/auth/authorizer/rbac/rbac.go`,
//! `pkg/registry/rbac/validation/rule.go` (which bindings apply, how they
//! are described in a reason), `pkg/apis/rbac/v1/evaluation_helpers.go`
//! (rule matching), the clusterrole-aggregation controller, and
//! `responsewriters.Forbidden` / `apierrors.NewForbidden` for the message.
//!
//! The bootstrap policy kube-apiserver creates at start-up
//! (`bootstrappolicy`, the part a user without bindings relies on) is
//! implied: `cluster-admin`, `admin`, `edit`, `view`, the
//! `system:aggregate-to-*` roles, `system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, `system:monitoring`, and the
//! ClusterRoleBindings that grant them to `system:masters`,
//! `system:authenticated`, `system:unauthenticated` and `system:monitoring`.
//! A stored ClusterRole or ClusterRoleBinding of the same name takes the
//! place of the implied one. So every authenticated user can read discovery
//! (`/api`, `/apis/*`, `/openapi/*`, `/version`, `/healthz`, ...) and create
//! SelfSubjectAccessReviews (`kubectl auth can-i`), as on a real cluster, and
//! a RoleBinding to `view` or `edit` works without seeding anything.
//!
//! Simplifications: there is no Node authorizer (nodes get no special
//! rights); an implied bootstrap object cannot be deleted (only replaced by
//! storing one of its name); aggregated ClusterRoles are always evaluated
//! with the rules aggregation gives them now (what the controller converges
//! to), not with possibly stale stored rules.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::attributes::UserInfo;
use crate::gofmt;

/// kube-apiserver's privileged group: its members are always allowed.
pub const PRIVILEGED_GROUP: &str = "system:masters";

const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks to do, as kube-apiserver's authorizer sees it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub user: &'a UserInfo,
    /// `get list watch create update patch delete deletecollection`;
    /// `impersonate`, `bind`, `escalate`, ... for the special checks.
    pub verb: &'a str,
    /// False for non-resource URLs like `/healthz`, `/api`.
    pub resource_request: bool,
    pub api_group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// Empty for cluster-scoped requests.
    pub namespace: &'a str,
    /// Empty for list, watch, create and deletecollection.
    pub name: &'a str,
    /// The URL path, for non-resource requests.
    pub path: &'a str,
}

/// The stored RBAC objects (`rbac.authorization.k8s.io/v1` JSON).
#[derive(Clone, Copy, Debug)]
pub struct Rbac<'a> {
    pub roles: &'a [Value],
    pub role_bindings: &'a [Value],
    pub cluster_roles: &'a [Value],
    pub cluster_role_bindings: &'a [Value],
}

/// The authorizer's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// `reason` is kube's: `RBAC: allowed by ClusterRoleBinding "x" of
    /// ClusterRole "y" to User "alice"`, or empty for `system:masters`.
    Allow {
        reason: String,
    },
    Deny,
}

impl Rbac<'_> {
    /// The decision and, for a denial, kube's reason: empty, or `RBAC: ...`
    /// naming the roles that applying bindings reference but that do not
    /// exist (`RBAC: role.rbac.authorization.k8s.io "x" not found`). Pass it
    /// to [`forbidden_message_with_reason`].
    pub fn decide(&self, request: &Request) -> (Decision, String) {
        let (decision, reason, _) = self.decide_by_name(request);
        (decision, reason)
    }

    /// [`Rbac::decide`], and whether the answer is the same for every
    /// object name: no rule it visited names objects (`resourceNames`)
    /// while granting the rest of the request. Most are, so they can be
    /// remembered once for all names.
    pub fn decide_by_name(&self, request: &Request) -> (Decision, String, bool) {
        if request.user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return (
                Decision::Allow {
                    reason: String::new(),
                },
                String::new(),
                true,
            );
        }
        let namespace = if request.resource_request {
            request.namespace
        } else {
            ""
        };
        let mut allowed = None;
        let mut every_name = true;
        let mut errors = Vec::new();
        self.visit_rules(request.user, namespace, &mut |item| match item {
            Visited::Rule(source, rule) => match rule_grants(request, rule) {
                Grant::Yes { by_name } => {
                    every_name &= !by_name;
                    allowed = Some(format!("RBAC: allowed by {}", source.describe()));
                    false
                }
                Grant::No { by_name } => {
                    every_name &= !by_name;
                    true
                }
            },
            Visited::Error(error) => {
                errors.push(error);
                true
            }
        });
        match allowed {
            Some(reason) => (Decision::Allow { reason }, String::new(), every_name),
            None if errors.is_empty() => (Decision::Deny, String::new(), every_name),
            None => (
                Decision::Deny,
                format!("RBAC: {}", aggregate_errors(&errors)),
                every_name,
            ),
        }
    }

    /// The status of a SubjectAccessReview, SelfSubjectAccessReview or
    /// LocalSubjectAccessReview (`authorization.k8s.io/v1`) with `spec`,
    /// asked about `user`: the requesting user for a SelfSubjectAccessReview,
    /// [`access_review_user`] of the spec otherwise. `{"allowed": true,
    /// "reason": "RBAC: allowed by ..."}`, `{"allowed": true}` for
    /// `system:masters`, `{"allowed": false}` (with a `reason` only when a
    /// binding references a missing role). Validating the spec (exactly one
    /// of `resourceAttributes` / `nonResourceAttributes`, a user or group for
    /// a SubjectAccessReview) is the caller's.
    pub fn access_review_status(&self, spec: &Value, user: &UserInfo) -> Value {
        let text = |attributes: &Value, field: &str| -> String {
            attributes
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
        let attributes = resource
            .or_else(|| spec.get("nonResourceAttributes"))
            .unwrap_or(&Value::Null);
        let [verb, group, res, sub, namespace, name, path] = [
            "verb",
            "group",
            "resource",
            "subresource",
            "namespace",
            "name",
            "path",
        ]
        .map(|field| text(attributes, field));
        let request = if resource.is_some() {
            Request {
                user,
                verb: &verb,
                resource_request: true,
                api_group: &group,
                resource: &res,
                subresource: &sub,
                namespace: &namespace,
                name: &name,
                path: "",
            }
        } else {
            Request {
                user,
                verb: &verb,
                resource_request: false,
                api_group: "",
                resource: "",
                subresource: "",
                namespace: "",
                name: "",
                path: &path,
            }
        };
        let (decision, deny_reason) = self.decide(&request);
        let (allowed, reason) = match decision {
            Decision::Allow { reason } => (true, reason),
            Decision::Deny => (false, deny_reason),
        };
        let mut status = json!({ "allowed": allowed });
        if !reason.is_empty() {
            status["reason"] = json!(reason);
        }
        status
    }

    /// The status of a SelfSubjectRulesReview (what `kubectl auth can-i
    /// --list` shows) for `user` in `namespace`: every rule granted by the
    /// applying ClusterRoleBindings and, in the namespace, RoleBindings,
    /// split into `resourceRules` and `nonResourceRules` as kube does.
    #[allow(dead_code)] // for the SelfSubjectRulesReview handler, if wired
    pub fn rules_review_status(&self, user: &UserInfo, namespace: &str) -> Value {
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        let mut errors = Vec::new();
        self.visit_rules(user, namespace, &mut |item| {
            match item {
                Visited::Rule(_, rule) => {
                    let verbs = rule.get("verbs").cloned().unwrap_or(Value::Null);
                    if !list(rule, "resources").is_empty() {
                        let mut out = Map::new();
                        out.insert("verbs".into(), verbs.clone());
                        for field in ["apiGroups", "resources", "resourceNames"] {
                            if !list(rule, field).is_empty() {
                                out.insert(field.into(), rule[field].clone());
                            }
                        }
                        resource_rules.push(Value::Object(out));
                    }
                    if !list(rule, "nonResourceURLs").is_empty() {
                        non_resource_rules.push(json!({
                            "verbs": verbs,
                            "nonResourceURLs": rule["nonResourceURLs"],
                        }));
                    }
                }
                Visited::Error(error) => errors.push(error),
            }
            true
        });
        let mut status = json!({
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": false,
        });
        if !errors.is_empty() {
            status["evaluationError"] = json!(aggregate_errors(&errors));
        }
        status
    }

    /// Calls `visit` with every rule granted to `user` cluster-wide and, if
    /// `namespace` is set, in it (with the binding that grants it), and with
    /// every error resolving the role of an applying binding; stops when
    /// `visit` returns false. Order as kube: ClusterRoleBindings first.
    fn visit_rules(
        &self,
        user: &UserInfo,
        namespace: &str,
        visit: &mut dyn FnMut(Visited) -> bool,
    ) {
        let implied = bootstrap()
            .cluster_role_bindings
            .iter()
            .filter(|b| !self.cluster_role_bindings.iter().any(|s| same_name(s, b)));
        for binding in self.cluster_role_bindings.iter().chain(implied) {
            if !self.visit_binding(binding, "", user, visit) {
                return;
            }
        }
        if namespace.is_empty() {
            return;
        }
        for binding in self.role_bindings {
            if str_at(binding, "/metadata/namespace") == namespace
                && !self.visit_binding(binding, namespace, user, visit)
            {
                return;
            }
        }
    }

    /// One binding's part of [`Self::visit_rules`]; false to stop.
    fn visit_binding(
        &self,
        binding: &Value,
        namespace: &str,
        user: &UserInfo,
        visit: &mut dyn FnMut(Visited) -> bool,
    ) -> bool {
        let subjects = list(binding, "subjects");
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, namespace)) else {
            return true;
        };
        let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
        let rules = match self.role_rules(role_ref, namespace) {
            Ok(rules) => rules,
            Err(error) => return visit(Visited::Error(error)),
        };
        let source = Source {
            binding,
            subject,
            namespace,
        };
        rules.iter().all(|rule| visit(Visited::Rule(&source, rule)))
    }

    /// The rules a binding's `roleRef` grants (kube's
    /// `GetRoleReferenceRules`).
    fn role_rules(&self, role_ref: &Value, namespace: &str) -> Result<Vec<Value>, String> {
        let name = str_at(role_ref, "/name");
        match str_at(role_ref, "/kind") {
            "Role" => self
                .roles
                .iter()
                .find(|r| {
                    !namespace.is_empty()
                        && str_at(r, "/metadata/namespace") == namespace
                        && str_at(r, "/metadata/name") == name
                })
                .map(|r| list(r, "rules").to_vec())
                .ok_or_else(|| format!("role.{RBAC_GROUP} {} not found", gofmt::quote(name))),
            "ClusterRole" => {
                let universe = ClusterRoles::new(self.cluster_roles);
                universe
                    .get(name)
                    .map(|role| universe.effective_rules(role))
                    .ok_or_else(|| {
                        format!("clusterrole.{RBAC_GROUP} {} not found", gofmt::quote(name))
                    })
            }
            kind => Err(format!(
                "unsupported role reference kind: {}",
                gofmt::quote(kind)
            )),
        }
    }
}

/// The user a SubjectAccessReview or LocalSubjectAccessReview `spec` asks
/// about: `user`, `uid`, `groups`, `extra`.
#[allow(dead_code)] // for the SubjectAccessReview handler, if wired
pub fn access_review_user(spec: &Value) -> UserInfo {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|extra| {
            extra
                .iter()
                .map(|(key, values)| (key.clone(), strings(Some(values))))
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
    UserInfo {
        username: str_at(spec, "/user").to_owned(),
        uid: str_at(spec, "/uid").to_owned(),
        groups: strings(spec.get("groups")),
        extra,
    }
}

/// The message of kube-apiserver's 403 for a denied request, e.g.
/// `configmaps "x" is forbidden: User "alice" cannot get resource
/// "configmaps" in API group "" in the namespace "team-a"`, or for a
/// non-resource URL `forbidden: User "alice" cannot get path "/foo"`.
pub fn forbidden_message(request: &Request) -> String {
    forbidden_message_with_reason(request, "")
}

/// [`forbidden_message`] with the authorizer's reason (from
/// [`Rbac::decide`]) appended as kube appends it, `...: <reason>`.
pub fn forbidden_message_with_reason(request: &Request, reason: &str) -> String {
    let mut error = sanitize(&authorizer_message(request));
    if !reason.is_empty() {
        error = format!("{error}: {reason}");
    }
    let (group, resource, name) = qualified(request);
    if group.is_empty() && resource.is_empty() {
        return format!("forbidden: {error}");
    }
    let group_resource = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if name.is_empty() {
        format!("{group_resource} is forbidden: {error}")
    } else {
        format!(
            "{group_resource} {} is forbidden: {error}",
            gofmt::quote(name)
        )
    }
}

/// The `details` of the 403 Status: `{name, group, kind}` with `kind` the
/// resource (no subresource), empty fields left out (`{}` for a
/// non-resource URL).
#[allow(dead_code)] // for the 403 Status body, if wired
pub fn forbidden_details(request: &Request) -> Value {
    let (group, resource, name) = qualified(request);
    let mut details = Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
        if !value.is_empty() {
            details.insert(key.into(), json!(value));
        }
    }
    Value::Object(details)
}

/// The group, resource and name the 403 is about: empty for a non-resource
/// URL.
fn qualified<'a>(request: &Request<'a>) -> (&'a str, &'a str, &'a str) {
    if request.resource_request {
        (request.api_group, request.resource, request.name)
    } else {
        ("", "", "")
    }
}

/// `responsewriters.forbiddenMessage`.
fn authorizer_message(request: &Request) -> String {
    let user = gofmt::quote(&request.user.username);
    let verb = request.verb;
    if !request.resource_request {
        return format!(
            "User {user} cannot {verb} path {}",
            gofmt::quote(request.path)
        );
    }
    let resource = if request.subresource.is_empty() {
        request.resource.to_owned()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let scope = if request.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {}", gofmt::quote(request.namespace))
    };
    format!(
        "User {user} cannot {verb} resource {} in API group {} {scope}",
        gofmt::quote(&resource),
        gofmt::quote(request.api_group)
    )
}

/// kube's guard against messages that look like HTML.
fn sanitize(message: &str) -> String {
    message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Joins resolution errors as `utilerrors.NewAggregate(...).Error()` does:
/// one error alone, several deduplicated in `[a, b]`.
fn aggregate_errors(errors: &[String]) -> String {
    if errors.len() == 1 {
        return errors[0].clone();
    }
    let mut seen: Vec<&str> = Vec::new();
    for error in errors {
        if !seen.contains(&error.as_str()) {
            seen.push(error);
        }
    }
    if seen.len() == 1 {
        seen[0].to_owned()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// What [`Rbac::visit_rules`] hands its visitor.
enum Visited<'v> {
    /// A rule granted, and the binding granting it.
    Rule(&'v Source<'v>, &'v Value),
    /// A role an applying binding references could not be found.
    Error(String),
}

/// A binding and the subject of it that matched, for the reason text.
struct Source<'v> {
    binding: &'v Value,
    subject: &'v Value,
    /// The RoleBinding's namespace; empty for a ClusterRoleBinding.
    namespace: &'v str,
}

impl Source<'_> {
    /// `ClusterRoleBinding "x" of ClusterRole "y" to User "alice"`,
    /// `RoleBinding "x/ns" of Role "y" to ServiceAccount "sa/ns"`.
    fn describe(&self) -> String {
        let name = str_at(self.binding, "/metadata/name");
        let binding = if self.namespace.is_empty() {
            format!("ClusterRoleBinding {}", gofmt::quote(name))
        } else {
            format!(
                "RoleBinding {}",
                gofmt::quote(&format!("{name}/{}", self.namespace))
            )
        };
        let kind = str_at(self.subject, "/kind");
        let subject_name = str_at(self.subject, "/name");
        let subject = if kind == "ServiceAccount" {
            let namespace = match str_at(self.subject, "/namespace") {
                "" => self.namespace,
                own => own,
            };
            gofmt::quote(&format!("{subject_name}/{namespace}"))
        } else {
            gofmt::quote(subject_name)
        };
        format!(
            "{binding} of {} {} to {kind} {subject}",
            str_at(self.binding, "/roleRef/kind"),
            gofmt::quote(str_at(self.binding, "/roleRef/name")),
        )
    }
}

/// Whether a binding subject names `user` (kube's `appliesToUser`).
/// `namespace` is the RoleBinding's, the default for a ServiceAccount
/// subject without one; empty for a ClusterRoleBinding.
fn applies_to(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let name = str_at(subject, "/name");
    match str_at(subject, "/kind") {
        "User" => user.username == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let sa_namespace = match str_at(subject, "/namespace") {
                "" => namespace,
                own => own,
            };
            !sa_namespace.is_empty()
                && user
                    .username
                    .strip_prefix(SERVICE_ACCOUNT_PREFIX)
                    .and_then(|rest| rest.split_once(':'))
                    == Some((sa_namespace, name))
        }
        _ => false,
    }
}

/// What `rule` answers to `request` (kube's `RuleAllows`); `by_name` when
/// the answer turned on the object's name (the rest of the rule grants the
/// request, and it lists `resourceNames`).
enum Grant {
    Yes { by_name: bool },
    No { by_name: bool },
}

impl Grant {
    fn of(granted: bool, by_name: bool) -> Self {
        if granted {
            Self::Yes { by_name }
        } else {
            Self::No { by_name }
        }
    }
}

fn rule_grants(request: &Request, rule: &Value) -> Grant {
    let strings = |field: &str| list(rule, field).iter().filter_map(Value::as_str);
    if !strings("verbs").any(|v| v == "*" || v == request.verb) {
        return Grant::No { by_name: false };
    }
    if !request.resource_request {
        let granted = strings("nonResourceURLs").any(|url| {
            url == "*"
                || url == request.path
                || (url.ends_with('*') && request.path.starts_with(url.trim_end_matches('*')))
        });
        return Grant::of(granted, false);
    }
    let combined = if request.subresource.is_empty() {
        request.resource.to_owned()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let group = strings("apiGroups").any(|g| g == "*" || g == request.api_group);
    let resource = strings("resources").any(|r| {
        r == "*"
            || r == combined
            || (!request.subresource.is_empty()
                && r.strip_prefix("*/") == Some(request.subresource))
    });
    if !(group && resource) {
        return Grant::of(false, false);
    }
    if list(rule, "resourceNames").is_empty() {
        return Grant::of(true, false);
    }
    Grant::of(strings("resourceNames").any(|n| n == request.name), true)
}

/// The rules of every aggregated ClusterRole (one with
/// `aggregationRule.clusterRoleSelectors`), computed from the ClusterRoles
/// its selectors match, as kube-controller-manager's
/// clusterrole-aggregation controller writes them: (name, rules) for those
/// whose stored rules differ. Rules come from the matching roles sorted by
/// name, duplicates dropped; an aggregated role matched by another counts
/// with its own aggregated rules (the state the controller converges to);
/// the implied bootstrap ClusterRoles take part unless stored. A role with
/// an invalid selector is left alone, as the controller fails on it.
pub fn aggregate(cluster_roles: &[Value]) -> Vec<(String, Value)> {
    let universe = ClusterRoles::new(cluster_roles);
    cluster_roles
        .iter()
        .filter_map(|role| {
            let rules = universe.aggregated_rules(role, &mut Vec::new())?;
            let stored: Vec<Value> = list(role, "rules").iter().map(canonical_rule).collect();
            (stored != rules).then(|| {
                (
                    str_at(role, "/metadata/name").to_owned(),
                    Value::Array(rules),
                )
            })
        })
        .collect()
}

/// The stored ClusterRoles and the implied bootstrap ones not stored.
struct ClusterRoles<'v> {
    roles: Vec<&'v Value>,
}

impl<'v> ClusterRoles<'v> {
    fn new(stored: &'v [Value]) -> Self {
        let implied = bootstrap()
            .cluster_roles
            .iter()
            .filter(|b| !stored.iter().any(|s| same_name(s, b)));
        Self {
            roles: stored.iter().chain(implied).collect(),
        }
    }

    fn get(&self, name: &str) -> Option<&'v Value> {
        self.roles
            .iter()
            .copied()
            .find(|r| str_at(r, "/metadata/name") == name)
    }

    /// The rules a ClusterRole grants: its aggregated rules if it
    /// aggregates (and its selectors are valid), else its stored rules.
    fn effective_rules(&self, role: &Value) -> Vec<Value> {
        self.aggregated_rules(role, &mut Vec::new())
            .unwrap_or_else(|| list(role, "rules").to_vec())
    }

    /// The rules aggregation gives `role`; None if it does not aggregate,
    /// its selectors are invalid, or it is already being aggregated
    /// (`visiting`, a cycle).
    fn aggregated_rules(&self, role: &Value, visiting: &mut Vec<String>) -> Option<Vec<Value>> {
        let aggregation = role.get("aggregationRule").filter(|a| a.is_object())?;
        let name = str_at(role, "/metadata/name");
        if visiting.iter().any(|v| v == name) {
            return None;
        }
        let mut matched_per_selector = Vec::new();
        for selector in list(aggregation, "clusterRoleSelectors") {
            let mut matched = Vec::new();
            for candidate in &self.roles {
                if selector_matches(selector, candidate.pointer("/metadata/labels"))? {
                    matched.push(*candidate);
                }
            }
            matched.sort_by_key(|r| str_at(r, "/metadata/name"));
            matched_per_selector.push(matched);
        }
        visiting.push(name.to_owned());
        let mut rules: Vec<Value> = Vec::new();
        for matched in matched_per_selector {
            for source in matched {
                if str_at(source, "/metadata/name") == name {
                    continue;
                }
                let source_rules = self
                    .aggregated_rules(source, visiting)
                    .unwrap_or_else(|| list(source, "rules").iter().map(canonical_rule).collect());
                for rule in source_rules {
                    let rule = canonical_rule(&rule);
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
            }
        }
        visiting.pop();
        Some(rules)
    }
}

/// A PolicyRule as kube-apiserver serializes it: `verbs` always, the other
/// lists only when not empty, so equal rules compare equal (kube's
/// semantic equality treats missing, null and empty lists alike).
fn canonical_rule(rule: &Value) -> Value {
    let mut out = Map::new();
    out.insert("verbs".into(), Value::Array(list(rule, "verbs").to_vec()));
    for field in ["apiGroups", "resources", "resourceNames", "nonResourceURLs"] {
        let items = list(rule, field);
        if !items.is_empty() {
            out.insert(field.into(), Value::Array(items.to_vec()));
        }
    }
    Value::Object(out)
}

/// Whether a `metav1.LabelSelector` matches `labels`; None if the selector
/// is invalid (an unknown operator, `In`/`NotIn` without values,
/// `Exists`/`DoesNotExist` with values). An empty selector matches all.
fn selector_matches(selector: &Value, labels: Option<&Value>) -> Option<bool> {
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let mut matches = true;
    if let Some(match_labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in match_labels {
            matches &= label(key) == value.as_str();
        }
    }
    for expression in list(selector, "matchExpressions") {
        let key = str_at(expression, "/key");
        let values: Vec<&str> = list(expression, "values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let value = label(key);
        matches &= match str_at(expression, "/operator") {
            "In" if !values.is_empty() => value.is_some_and(|v| values.contains(&v)),
            "NotIn" if !values.is_empty() => value.is_none_or(|v| !values.contains(&v)),
            "Exists" if values.is_empty() => value.is_some(),
            "DoesNotExist" if values.is_empty() => value.is_none(),
            _ => return None,
        };
    }
    Some(matches)
}

/// A string field at a JSON pointer, empty if absent.
fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// An array field, empty if absent or null.
fn list<'v>(value: &'v Value, field: &str) -> &'v [Value] {
    value
        .get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn same_name(a: &Value, b: &Value) -> bool {
    str_at(a, "/metadata/name") == str_at(b, "/metadata/name")
}

/// kube-apiserver's bootstrap ClusterRoles (the ones this module implies),
/// as `kubectl get clusterrole -o json` shows them on a fresh cluster
/// (aggregated roles with their aggregated rules), for a server that wants
/// to store them.
#[allow(dead_code)] // for seeding the store, if wanted
pub fn bootstrap_cluster_roles() -> Vec<Value> {
    let roles = &bootstrap().cluster_roles;
    let universe = ClusterRoles {
        roles: roles.iter().collect(),
    };
    roles
        .iter()
        .map(|role| {
            let mut role = role.clone();
            if let Some(rules) = universe.aggregated_rules(&role, &mut Vec::new()) {
                role["rules"] = Value::Array(rules);
            }
            role
        })
        .collect()
}

/// kube-apiserver's bootstrap ClusterRoleBindings that this module implies.
#[allow(dead_code)] // for seeding the store, if wanted
pub fn bootstrap_cluster_role_bindings() -> Vec<Value> {
    bootstrap().cluster_role_bindings.clone()
}

struct Bootstrap {
    cluster_roles: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
}

fn bootstrap() -> &'static Bootstrap {
    static BOOTSTRAP: OnceLock<Bootstrap> = OnceLock::new();
    BOOTSTRAP.get_or_init(build_bootstrap)
}

/// The relevant part of kube's `bootstrappolicy.ClusterRoles()` and
/// `ClusterRoleBindings()` (1.33).
fn build_bootstrap() -> Bootstrap {
    const READ: &[&str] = &["get", "list", "watch"];
    const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
    const READ_WRITE: &[&str] = &[
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let health = ["/livez", "/readyz", "/healthz"];
    let aggregate_to = |role: &str| format!("rbac.authorization.k8s.io/aggregate-to-{role}");

    let cluster_roles = vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    health[0],
                    health[1],
                    health[2],
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    health[0],
                    health[1],
                    health[2],
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        // What an authenticating, authorizing server (here the
        // service-lifecycle-controller's ApprovalEvents) is bound to.
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &[health[0], health[1], health[2], "/version", "/version/"],
            )],
        ),
        aggregated_cluster_role("admin", None, &aggregate_to("admin")),
        aggregated_cluster_role("edit", Some(&aggregate_to("admin")), &aggregate_to("edit")),
        aggregated_cluster_role("view", Some(&aggregate_to("edit")), &aggregate_to("view")),
        cluster_role(
            "system:aggregate-to-admin",
            &[(&aggregate_to("admin"), "true")],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(READ_WRITE, &[RBAC_GROUP], &["roles", "rolebindings"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(&aggregate_to("edit"), "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods/attach",
                        "pods/proxy",
                        "pods/exec",
                        "pods/portforward",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/proxy",
                        "pods/exec",
                        "pods/portforward",
                    ],
                ),
                rule(&["create"], &[""], &["pods/eviction"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                        "persistentvolumeclaims",
                        "configmaps",
                        "secrets",
                        "events",
                    ],
                ),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    &["apps"],
                    &[
                        "statefulsets",
                        "statefulsets/scale",
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "replicasets",
                        "replicasets/scale",
                    ],
                ),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
                rule(
                    WRITE,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "ingresses",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    &["networking.k8s.io"],
                    &["networkpolicies", "ingresses"],
                ),
                rule(READ_WRITE, &["coordination.k8s.io"], &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(&aggregate_to("view"), "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "configmaps",
                    ],
                ),
                rule(
                    READ,
                    &[""],
                    &[
                        "limitranges",
                        "resourcequotas",
                        "bindings",
                        "events",
                        "pods/status",
                        "resourcequotas/status",
                        "namespaces/status",
                        "replicationcontrollers/status",
                        "pods/log",
                    ],
                ),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "statefulsets",
                        "statefulsets/status",
                        "statefulsets/scale",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/status",
                        "replicasets/scale",
                    ],
                ),
                rule(
                    READ,
                    &["autoscaling"],
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    &["batch"],
                    &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
                ),
                rule(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(
                    READ,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    &["networking.k8s.io"],
                    &["networkpolicies", "ingresses", "ingresses/status"],
                ),
            ],
        ),
    ];

    let cluster_role_bindings = vec![
        cluster_role_binding("cluster-admin", &[PRIVILEGED_GROUP]),
        cluster_role_binding("system:monitoring", &["system:monitoring"]),
        cluster_role_binding("system:discovery", &[AUTHENTICATED]),
        cluster_role_binding("system:basic-user", &[AUTHENTICATED]),
        cluster_role_binding(
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
    ];
    Bootstrap {
        cluster_roles,
        cluster_role_bindings,
    }
}

/// Bootstrap metadata: kube's `kubernetes.io/bootstrapping` label and
/// autoupdate annotation, plus `labels`.
fn bootstrap_metadata(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut all = Map::new();
    all.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for (key, value) in labels {
        all.insert((*key).to_owned(), json!(value));
    }
    json!({
        "name": name,
        "labels": all,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": bootstrap_metadata(name, labels),
        "rules": rules,
    })
}

fn aggregated_cluster_role(name: &str, label: Option<&str>, selects: &str) -> Value {
    let labels: Vec<(&str, &str)> = label.map(|l| (l, "true")).into_iter().collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": bootstrap_metadata(name, &labels),
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selects: "true"}}]},
        "rules": [],
    })
}

fn cluster_role_binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": bootstrap_metadata(name, &[]),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

/// A resource rule, its lists sorted as kube's rule builder sorts them.
fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({
        "verbs": sorted(verbs),
        "apiGroups": sorted(groups),
        "resources": sorted(resources),
    })
}

/// A non-resource rule, sorted likewise.
fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": sorted(verbs), "nonResourceURLs": sorted(urls)})
}

fn sorted(items: &[&str]) -> Vec<String> {
    let mut items: Vec<String> = items.iter().map(|s| (*s).to_owned()).collect();
    items.sort();
    items
}

#[cfg(test)]
mod tests;
