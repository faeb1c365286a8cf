//! Validating and mutating webhook configurations
//! (`admissionregistration.k8s.io/v1`) called as kube-apiserver's
//! ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins do, with
//! their messages.
//!
//! A webhook is called when its `namespaceSelector`, `objectSelector`, one
//! of its `rules` and all its `matchConditions` (CEL, [`crate::cel`]) match
//! the request. It gets an `admission.k8s.io/v1` (or `v1beta1`, when that
//! is the first version it lists) `AdmissionReview` POSTed over HTTPS to
//! `clientConfig.url` or to `https://<service>.<namespace>.svc:<port><path>`
//! (resolved by the caller to a local address), verified against
//! `clientConfig.caBundle`, within `timeoutSeconds` (default 10). A
//! webhook's refusal becomes the request's rejection (`admission webhook
//! "<name>" denied the request: ...`); a call that fails (refused
//! connection, TLS error, timeout, bad response) rejects the request with
//! 500 `Internal error occurred: failed calling webhook "<name>": ...` when
//! the webhook's `failurePolicy` is `Fail` (the default) and is ignored with
//! `Ignore`. Dry-run requests are refused with 400 by webhooks whose
//! `sideEffects` is not `None` or `NoneOnDryRun`.
//!
//! Validating webhooks are called all at once. Mutating webhooks are called
//! one after another (configurations in name order, then each one's
//! webhooks in order), each matched against and given the object as the
//! ones before it left it; a `JSONPatch` answer is applied to the object. A
//! webhook with `reinvocationPolicy: IfNeeded` is called once more when a
//! webhook after it changed the object.
//!
//! An HTTP/2 connection to a webhook is kept for the next call to the same
//! target, host, port and `caBundle` ([`Connections`]), as kube-apiserver's
//! client keeps its connections alive.
//!
//! Simplifications: `matchPolicy` is treated as `Exact` (one version per
//! resource here); without a `caBundle` no certificate is trusted
//! (kube-apiserver would use the system roots); a `url`'s host is resolved
//! with the system resolver; responses' `auditAnnotations` are dropped; the
//! `authorizer` CEL variable is not offered; a service that cannot be
//! resolved fails as kube-apiserver's `service "<name>" not found`; a patch
//! that does not apply is reported in the words of the `json-patch` crate.

mod connections;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

pub use connections::Connections;

use crate::attributes::Attributes;
use crate::cel::{Activation, Program};
use crate::gofmt;
use crate::policy::{
    admission_request, group_resource, namespace_selector_matches, object_selector_matches,
    rule_matches,
};

/// What [`validate`] and [`mutate`] need besides the request.
pub struct WebhookContext<'a> {
    /// Every stored ValidatingWebhookConfiguration (for [`validate`]) or
    /// MutatingWebhookConfiguration (for [`mutate`]).
    pub configurations: &'a [Value],
    /// The request namespace's Namespace object (None for cluster-scoped).
    pub namespace_object: Option<&'a Value>,
    /// Resolves a webhook's clientConfig.service (namespace, name, port) to a
    /// local address; None = unresolvable.
    pub resolve_service: &'a (dyn Fn(&str, &str, u16) -> Option<SocketAddr> + Sync),
    /// The connections kept open to webhooks.
    pub connections: &'a Connections,
}

/// The request's rejection: the HTTP code and the `metav1.Status` body to
/// answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    pub code: u16,
    pub status: Value,
}

/// What the mutating webhooks made of a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mutation {
    /// The object as the webhooks left it (served form), when they changed
    /// it.
    pub object: Option<Value>,
    /// The warnings they sent.
    pub warnings: Vec<String>,
}

/// kube-apiserver's default `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
/// The most of a webhook's answer that is read.
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Calls every matching validating webhook (concurrently, as
/// kube-apiserver does) and returns the warnings they sent, or the first
/// rejection.
pub async fn validate(
    ctx: &WebhookContext<'_>,
    attributes: &Attributes,
) -> Result<Vec<String>, Rejection> {
    if is_admission_configuration(attributes) {
        return Ok(Vec::new());
    }
    let mut invocations = Vec::new();
    for hook in hooks(ctx.configurations) {
        invocations.extend(should_call(ctx, attributes, hook)?);
    }
    let mut calls: FuturesUnordered<_> = invocations
        .iter()
        .map(|invocation| dispatch(ctx, attributes, invocation, false))
        .collect();
    let mut warnings = Vec::new();
    let mut rejection = None;
    // Every call runs to its end; the first rejection to arrive wins.
    while let Some(result) = calls.next().await {
        match result {
            Ok(answer) => warnings.extend(answer.warnings),
            Err(r) => {
                rejection.get_or_insert(r);
            }
        }
    }
    match rejection {
        Some(r) => Err(r),
        None => Ok(warnings),
    }
}

/// Calls the matching mutating webhooks one at a time, as kube-apiserver's
/// mutating dispatcher does, and returns the object they leave, or the
/// first rejection.
pub async fn mutate(
    ctx: &WebhookContext<'_>,
    attributes: &Attributes,
) -> Result<Mutation, Rejection> {
    if is_admission_configuration(attributes) {
        return Ok(Mutation::default());
    }
    let hooks = hooks(ctx.configurations);
    let mut current = attributes.clone();
    let mut warnings = Vec::new();
    // `IfNeeded` webhooks called since the object last changed, and those a
    // later change has marked to be called again.
    let mut since_change = BTreeSet::new();
    let mut again = BTreeSet::new();
    // A first round, then (kube-apiserver reinvokes once at most) a second
    // for the marked webhooks only.
    for round in 0..2 {
        if round == 1 && again.is_empty() {
            break;
        }
        for (index, hook) in hooks.iter().enumerate() {
            // Matching comes first: its errors end the request even for a
            // webhook that is not called again.
            let Some(invocation) = should_call(ctx, &current, hook)? else {
                continue;
            };
            if round == 1 && !again.contains(&index) {
                continue;
            }
            let answer = dispatch(ctx, &current, &invocation, true).await?;
            warnings.extend(answer.warnings);
            if let Some(object) = answer.object
                && current.object.as_deref() != Some(&object)
            {
                current.object = Some(Arc::new(object));
                again.append(&mut since_change);
            }
            if hook["reinvocationPolicy"].as_str() == Some("IfNeeded") {
                since_change.insert(index);
            }
        }
    }
    Ok(Mutation {
        object: current
            .object
            .filter(|o| Some(o) != attributes.object.as_ref())
            .map(Arc::unwrap_or_clone),
        warnings,
    })
}

/// Webhook configurations and policies, which webhooks never see.
fn is_admission_configuration(attributes: &Attributes) -> bool {
    attributes.kind.group == "admissionregistration.k8s.io"
        && matches!(
            attributes.kind.name.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// Where a webhook is called.
#[derive(Debug)]
enum Target {
    Url {
        host: String,
        port: u16,
        /// `host[:port]` as written.
        authority: String,
        path: String,
    },
    Service {
        namespace: String,
        name: String,
        port: u16,
        path: String,
    },
    Invalid(String),
}

/// One webhook to call for this request.
#[derive(Debug)]
struct Invocation {
    name: String,
    target: Target,
    ca_bundle: Option<String>,
    timeout_seconds: u64,
    ignore_failures: bool,
    side_effects: Option<String>,
    review_versions: Vec<String>,
}

/// Every webhook of `configurations`: configurations in name order, each
/// one's webhooks in their order.
fn hooks(configurations: &[Value]) -> Vec<&Value> {
    let mut configurations: Vec<&Value> = configurations.iter().collect();
    configurations.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    configurations
        .into_iter()
        .flat_map(|c| c["webhooks"].as_array().into_iter().flatten())
        .collect()
}

/// kube-apiserver's `ShouldCallHook`: the call to make, none, or the error
/// that ends the request.
fn should_call(
    ctx: &WebhookContext<'_>,
    attributes: &Attributes,
    hook: &Value,
) -> Result<Option<Invocation>, Rejection> {
    let name = hook["name"].as_str().unwrap_or_default().to_string();
    let ns = namespace_selector_matches(
        hook.get("namespaceSelector"),
        attributes,
        ctx.namespace_object,
    );
    if let Ok(false) = ns {
        return Ok(None);
    }
    let obj = object_selector_matches(hook.get("objectSelector"), attributes);
    if let Ok(false) = obj {
        return Ok(None);
    }
    let matched = hook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|rule| rule_matches(rule, attributes));
    if !matched {
        return Ok(None);
    }
    ns.map_err(internal_error)?;
    obj.map_err(internal_error)?;

    let ignore_failures = hook["failurePolicy"].as_str() == Some("Ignore");
    let conditions: Vec<&str> = hook["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["expression"].as_str().unwrap_or_default())
        .collect();
    if !conditions.is_empty() {
        let activation = Activation::new()
            .with("object", attributes.object.as_deref())
            .with("oldObject", attributes.old_object.as_deref())
            .with("request", Some(&admission_request(attributes, None)));
        let mut errors = Vec::new();
        for expression in conditions {
            let result = match Program::compile(expression) {
                Ok(program) => program
                    .evaluate(&activation)
                    .map_err(|e| format!("expression '{expression}' resulted in error: {e}")),
                Err(e) => Err(format!("compilation error: {e}")),
            };
            match result {
                Ok(Value::Bool(false)) => return Ok(None),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            if ignore_failures {
                return Ok(None);
            }
            let aggregate = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("[{}]", errors.join(", "))
            };
            tracing::warn!(webhook = %name, error = %aggregate, "failed evaluating match conditions, failing closed");
            return Err(forbidden(attributes, &aggregate));
        }
    }

    let client = &hook["clientConfig"];
    let target = if let Some(url) = client["url"].as_str() {
        parse_url(url)
    } else if client["service"].is_object() {
        let service = &client["service"];
        Target::Service {
            namespace: service["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            name: service["name"].as_str().unwrap_or_default().to_string(),
            port: service["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
            path: service["path"].as_str().unwrap_or_default().to_string(),
        }
    } else {
        Target::Invalid("webhook clientConfig has neither url nor service".to_string())
    };
    Ok(Some(Invocation {
        name,
        target,
        ca_bundle: client["caBundle"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        timeout_seconds: hook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        ignore_failures,
        side_effects: hook["sideEffects"].as_str().map(str::to_string),
        review_versions: hook["admissionReviewVersions"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_else(|| vec!["v1".to_string()]),
    }))
}

/// A webhook `url`: `https://host[:port]/path` (kube-apiserver refuses
/// query, fragment and user info when the configuration is stored).
fn parse_url(url: &str) -> Target {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return Target::Invalid(format!("parse {url:?}: invalid URL"));
    };
    let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
        return Target::Invalid(format!("parse {url:?}: missing host"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Target::Url {
        host: host.to_string(),
        port: uri.port_u16().unwrap_or(443),
        authority: authority.as_str().to_string(),
        path: uri.path().to_string(),
    }
}

/// What one webhook answered.
#[derive(Default)]
struct Answer {
    warnings: Vec<String>,
    /// The object a mutating webhook's patch produced.
    object: Option<Value>,
}

/// Calls one webhook and applies its failure policy (a call that failed
/// open answers nothing).
async fn dispatch(
    ctx: &WebhookContext<'_>,
    attributes: &Attributes,
    invocation: &Invocation,
    mutating: bool,
) -> Result<Answer, Rejection> {
    match call(ctx, attributes, invocation, mutating).await {
        Ok(answer) => Ok(answer),
        Err(HookError::Rejected(rejection)) => {
            tracing::warn!(webhook = %invocation.name, status = %rejection.status, "rejected by webhook");
            Err(rejection)
        }
        Err(HookError::Calling(reason)) => {
            let message = format!("failed calling webhook {:?}: {reason}", invocation.name);
            if invocation.ignore_failures {
                tracing::warn!(webhook = %invocation.name, error = %message, "failed calling webhook, failing open");
                Ok(Answer::default())
            } else {
                tracing::warn!(webhook = %invocation.name, error = %message, "failed calling webhook, failing closed");
                Err(internal_error(message))
            }
        }
    }
}

enum HookError {
    /// The call failed (`ErrCallingWebhook`): subject to the failure policy.
    Calling(String),
    /// The webhook refused, or the request cannot be sent: final.
    Rejected(Rejection),
}

/// kube-apiserver's `callHook` (validating) and `callAttrMutatingHook`.
async fn call(
    ctx: &WebhookContext<'_>,
    attributes: &Attributes,
    invocation: &Invocation,
    mutating: bool,
) -> Result<Answer, HookError> {
    let name = &invocation.name;
    if attributes.dry_run {
        match invocation.side_effects.as_deref() {
            None => return Err(HookError::Calling("Webhook SideEffects is nil".to_string())),
            Some("None" | "NoneOnDryRun") => {}
            Some(_) => {
                return Err(HookError::Rejected(bad_request(&format!(
                    "admission webhook {name:?} does not support dry run"
                ))));
            }
        }
    }
    let Some(version) = invocation
        .review_versions
        .iter()
        .find(|v| *v == "v1" || *v == "v1beta1")
    else {
        return Err(HookError::Calling(
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
                .to_string(),
        ));
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let review = Review {
        kind: "AdmissionReview",
        api_version: format!("admission.k8s.io/{version}"),
        request: ReviewRequest {
            fields: admission_request(attributes, Some(&uid)),
            object: attributes.object.as_deref(),
            old_object: attributes.old_object.as_deref(),
        },
    };
    let (server_name, authority, path) = match &invocation.target {
        Target::Url {
            host,
            authority,
            path,
            ..
        } => (host.clone(), authority.clone(), clean_path(path)),
        Target::Service {
            namespace,
            name,
            port,
            path,
        } => {
            let host = format!("{name}.{namespace}.svc");
            (host.clone(), format!("{host}:{port}"), clean_path(path))
        }
        Target::Invalid(e) => {
            return Err(HookError::Calling(format!(
                "could not get REST client: {e}"
            )));
        }
    };
    let timeout = format!("{}s", invocation.timeout_seconds);
    let path_and_query = format!("{path}?timeout={timeout}");
    let url = format!("https://{authority}{path_and_query}");
    let failed = |cause: String| {
        HookError::Calling(format!("failed to call webhook: Post {url:?}: {cause}"))
    };
    let deadline = Instant::now() + Duration::from_secs(invocation.timeout_seconds);
    let body = Bytes::from(serde_json::to_vec(&review).unwrap_or_default());
    let key = connections::Key {
        service: matches!(invocation.target, Target::Service { .. }),
        authority: authority.clone(),
        ca_bundle: invocation.ca_bundle.clone(),
    };

    let mut answered = None;
    if let Some(sender) = ctx.connections.get(&key) {
        let request = request(true, &authority, &path_and_query, body.clone());
        let sent = timeout_at(deadline, send_h2(sender, request)).await;
        if !matches!(sent, Ok(Sent::Answered(Ok(_)))) {
            // Broken or unresponsive: the next call dials afresh.
            ctx.connections.forget(&key);
        }
        match sent {
            Err(_) => return Err(failed("context deadline exceeded".to_string())),
            Ok(Sent::Answered(Err(cause))) => return Err(failed(cause)),
            Ok(Sent::Answered(Ok(answer))) => answered = Some(answer),
            // Closed before it took the request: dial afresh now.
            Ok(Sent::Unsent) => {}
        }
    }
    let (status, text, bytes) = match answered {
        Some(answer) => answer,
        None => {
            let fresh = Fresh {
                invocation,
                server_name,
                authority: &authority,
                path_and_query: &path_and_query,
                deadline,
            };
            fresh.post(ctx, key, body, failed).await?
        }
    };
    if !(200..300).contains(&status) {
        return Err(HookError::Calling(format!(
            "failed to call webhook: {}",
            response_error(status, text, &bytes)
        )));
    }
    let answer: Value = serde_json::from_slice(&bytes).map_err(|e| {
        HookError::Calling(format!(
            "failed to call webhook: couldn't get version/kind; json parse error: {e}"
        ))
    })?;
    let response = verify_response(&uid, version, mutating, answer)
        .map_err(|e| HookError::Calling(format!("received invalid webhook response: {e}")))?;
    let warnings = response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if response["allowed"].as_bool() != Some(true) {
        return Err(HookError::Rejected(to_status_error(
            name,
            response.get("status"),
        )));
    }
    let object = if mutating {
        patched(name, attributes, &response)?
    } else {
        None
    };
    Ok(Answer { warnings, object })
}

/// Applies a mutating webhook's patch to the request's object as
/// kube-apiserver does: the patched object, or None for no patch.
fn patched(
    name: &str,
    attributes: &Attributes,
    response: &Value,
) -> Result<Option<Value>, HookError> {
    let undecodable = |e: String| {
        HookError::Calling(format!(
            "received undecodable patch in webhook response: {e}"
        ))
    };
    let encoded = match response.get("patch") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(encoded)) => encoded,
        Some(_) => return Err(undecodable("the patch is not a base64 string".to_string())),
    };
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| undecodable(e.to_string()))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    let patch: Value = serde_json::from_slice(&bytes).map_err(|e| undecodable(e.to_string()))?;
    serde_json::from_value::<json_patch::Patch>(patch.clone())
        .map_err(|e| undecodable(e.to_string()))?;
    if patch.as_array().is_some_and(Vec::is_empty) {
        return Ok(None);
    }
    let Some(object) = &attributes.object else {
        return Err(HookError::Rejected(internal_error(format!(
            "admission webhook {name:?} attempted to modify the object, which is not supported for this operation"
        ))));
    };
    let patch_type = response["patchType"].as_str().unwrap_or_default();
    if patch_type != "JSONPatch" {
        return Err(HookError::Calling(format!(
            "unsupported patch type {patch_type:?}"
        )));
    }
    let mut object = (**object).clone();
    crate::patch::json_patch(&mut object, &patch)
        .map_err(|e| HookError::Rejected(internal_error(e.to_string())))?;
    Ok(Some(object))
}

/// The AdmissionReview a webhook is sent, with the request's objects
/// borrowed from the write rather than copied into a JSON value.
#[derive(serde::Serialize)]
struct Review<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    request: ReviewRequest<'a>,
}

#[derive(serde::Serialize)]
struct ReviewRequest<'a> {
    #[serde(flatten)]
    fields: Value,
    /// `null` where absent, as kube-apiserver sends it.
    object: Option<&'a Value>,
    #[serde(rename = "oldObject")]
    old_object: Option<&'a Value>,
}

/// `path.Join("/", path)`: rooted, without a trailing slash.
fn clean_path(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    }
}

/// A call on a connection of its own: dialed, verified, and kept when it
/// speaks HTTP/2.
struct Fresh<'a> {
    invocation: &'a Invocation,
    server_name: String,
    authority: &'a str,
    path_and_query: &'a str,
    deadline: Instant,
}

impl Fresh<'_> {
    async fn post(
        self,
        ctx: &WebhookContext<'_>,
        key: connections::Key,
        body: Bytes,
        failed: impl Fn(String) -> HookError,
    ) -> Result<(u16, bool, Bytes), HookError> {
        let Self {
            invocation,
            server_name,
            authority,
            path_and_query,
            deadline,
        } = self;
        let tls = tls_config(invocation.ca_bundle.as_deref())
            .map_err(|e| HookError::Calling(format!("could not get REST client: {e}")))?;
        let addrs: Vec<SocketAddr> = match &invocation.target {
            Target::Service {
                namespace,
                name,
                port,
                ..
            } => vec![
                (ctx.resolve_service)(namespace, name, *port)
                    .ok_or_else(|| failed(format!("service {name:?} not found")))?,
            ],
            Target::Url { host, port, .. } => {
                match timeout_at(deadline, tokio::net::lookup_host((host.as_str(), *port))).await {
                    Err(_) => return Err(failed("context deadline exceeded".to_string())),
                    Ok(Err(e)) => return Err(failed(format!("dial tcp: lookup {host}: {e}"))),
                    Ok(Ok(addrs)) => addrs.collect(),
                }
            }
            Target::Invalid(_) => unreachable!("handled by the caller"),
        };
        // As Go's dialer: each address in turn, the first error reported.
        let mut first_error = None;
        let mut connected = None;
        for addr in addrs {
            match timeout_at(deadline, TcpStream::connect(addr)).await {
                Err(_) => {
                    first_error.get_or_insert(format!("dial tcp {addr}: i/o timeout"));
                    break;
                }
                Ok(Err(e)) => {
                    first_error.get_or_insert(dial_error(addr, &e));
                }
                Ok(Ok(stream)) => {
                    connected = Some(stream);
                    break;
                }
            }
        }
        let Some(stream) = connected else {
            let host = match &invocation.target {
                Target::Url { host, .. } => host.as_str(),
                _ => "",
            };
            return Err(failed(first_error.unwrap_or_else(|| {
                format!("dial tcp: lookup {host}: no such host")
            })));
        };
        let exchange = async {
            let server_name = ServerName::try_from(server_name.clone())
                .map_err(|e| format!("tls: invalid server name {server_name:?}: {e}"))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(tls))
                .connect(server_name, stream)
                .await
                .map_err(|e| tls_error(&e))?;
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = TokioIo::new(tls);
            let request = request(h2, authority, path_and_query, body);
            if h2 {
                let (sender, connection) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .map_err(|e| transport_error(&e))?;
                tokio::spawn(connection);
                ctx.connections.keep(key, sender.clone());
                match send_h2(sender, request).await {
                    Sent::Answered(answer) => answer,
                    Sent::Unsent => Err("EOF".to_string()),
                }
            } else {
                let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| transport_error(&e))?;
                tokio::spawn(connection);
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| transport_error(&e))?;
                read(response).await
            }
        };
        match timeout_at(deadline, exchange).await {
            Err(_) => Err(failed("context deadline exceeded".to_string())),
            Ok(Err(cause)) => Err(failed(cause)),
            Ok(Ok(answer)) => Ok(answer),
        }
    }
}

/// The review's POST, for an HTTP/2 or an HTTP/1.1 connection.
fn request(
    h2: bool,
    authority: &str,
    path_and_query: &str,
    body: Bytes,
) -> http::Request<Full<Bytes>> {
    let builder = http::Request::post(if h2 {
        format!("https://{authority}{path_and_query}")
    } else {
        path_and_query.to_string()
    })
    .header(http::header::CONTENT_TYPE, "application/json")
    .header(http::header::ACCEPT, "application/json, */*")
    .header(http::header::USER_AGENT, "kube-apiserver-admission");
    let builder = if h2 {
        builder
    } else {
        builder.header(http::header::HOST, authority)
    };
    builder
        .body(Full::new(body))
        .expect("a POST of a valid path and header values")
}

/// What became of a request on an HTTP/2 connection.
enum Sent {
    /// The status, whether the answer is text (`text/*`), and the body; or
    /// why the exchange broke off.
    Answered(Result<(u16, bool, Bytes), String>),
    /// The connection closed before it took the request.
    Unsent,
}

async fn send_h2(mut sender: connections::Sender, request: http::Request<Full<Bytes>>) -> Sent {
    if sender.ready().await.is_err() {
        return Sent::Unsent;
    }
    match sender.try_send_request(request).await {
        Ok(response) => Sent::Answered(read(response).await),
        Err(e) if e.message().is_some() => Sent::Unsent,
        Err(e) => Sent::Answered(Err(transport_error(e.error()))),
    }
}

/// The status, whether the answer is text (`text/*`), and the body.
async fn read(
    response: http::Response<hyper::body::Incoming>,
) -> Result<(u16, bool, Bytes), String> {
    let status = response.status().as_u16();
    let text = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/"));
    let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, text, body))
}

/// Go's wording for an HTTP exchange that broke off.
fn transport_error(e: &hyper::Error) -> String {
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        "EOF".to_string()
    } else {
        e.to_string()
    }
}

/// Go's `dial tcp <addr>: connect: connection refused` and kin.
fn dial_error(addr: SocketAddr, e: &std::io::Error) -> String {
    let cause = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::ConnectionReset => "connect: connection reset by peer".to_string(),
        std::io::ErrorKind::HostUnreachable => "connect: no route to host".to_string(),
        std::io::ErrorKind::NetworkUnreachable => "connect: network is unreachable".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => format!("connect: {e}"),
    };
    format!("dial tcp {addr}: {cause}")
}

/// Go's wording for a failed TLS handshake:
/// `tls: failed to verify certificate: x509: certificate signed by unknown
/// authority`, `... x509: certificate is valid for a, not b`, ...
fn tls_error(e: &std::io::Error) -> String {
    use rustls::CertificateError as C;
    let Some(error) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "EOF".to_string(),
            std::io::ErrorKind::ConnectionReset => "read: connection reset by peer".to_string(),
            _ => e.to_string(),
        };
    };
    let x509 = match error {
        rustls::Error::InvalidCertificate(cert) => match cert {
            C::UnknownIssuer | C::BadSignature => {
                "certificate signed by unknown authority".to_string()
            }
            C::NotValidForNameContext {
                expected,
                presented,
            } => not_valid_for_name(&expected.to_str(), presented),
            C::NotValidForName => "certificate is not valid for the requested name".to_string(),
            C::ExpiredContext { time, not_after } => format!(
                "certificate has expired or is not yet valid: current time {} is after {}",
                gofmt::unix_time(time.as_secs()),
                gofmt::unix_time(not_after.as_secs())
            ),
            C::NotValidYetContext { time, not_before } => format!(
                "certificate has expired or is not yet valid: current time {} is before {}",
                gofmt::unix_time(time.as_secs()),
                gofmt::unix_time(not_before.as_secs())
            ),
            C::Expired | C::NotValidYet => {
                "certificate has expired or is not yet valid".to_string()
            }
            other => format!("{other:?}"),
        },
        rustls::Error::AlertReceived(alert) => {
            return format!("remote error: tls: {}", alert_text(&format!("{alert:?}")));
        }
        other => return format!("tls: {other}"),
    };
    format!("tls: failed to verify certificate: x509: {x509}")
}

/// Go's `x509.HostnameError` from the names rustls reports
/// (`DnsName("a")`, `IpAddress(1.2.3.4)`).
fn not_valid_for_name(host: &str, presented: &[String]) -> String {
    let names = |prefix: &str| -> Vec<String> {
        presented
            .iter()
            .filter_map(|p| p.strip_prefix(prefix)?.strip_suffix(')'))
            .map(|p| p.trim_matches('"').to_string())
            .collect()
    };
    if host.parse::<std::net::IpAddr>().is_ok() {
        let ips = names("IpAddress(");
        if ips.is_empty() {
            return format!(
                "cannot validate certificate for {host} because it doesn't contain any IP SANs"
            );
        }
        return format!("certificate is valid for {}, not {host}", ips.join(", "));
    }
    let dns = names("DnsName(");
    if dns.is_empty() {
        return format!("certificate is not valid for any names, but wanted to match {host}");
    }
    format!("certificate is valid for {}, not {host}", dns.join(", "))
}

/// `BadCertificate` -> `bad certificate`.
fn alert_text(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A TLS client configuration trusting the caBundle (base64 of PEM).
fn tls_config(ca_bundle: Option<&str>) -> Result<rustls::ClientConfig, String> {
    const UNPARSABLE: &str = "unable to load root certificates: unable to parse bytes as PEM block";
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = ca_bundle {
        use base64::Engine;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle.trim())
            .map_err(|_| UNPARSABLE.to_string())?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .filter_map(Result::ok)
            .collect();
        if certs.is_empty() {
            return Err(UNPARSABLE.to_string());
        }
        for cert in certs {
            // A certificate that is not a usable anchor is skipped, as Go's
            // AppendCertsFromPEM does.
            let _ = roots.add(cert);
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// client-go's error for a non-2xx answer: the Status it carries, else
/// `NewGenericServerResponse`'s wording.
fn response_error(status: u16, text: bool, body: &[u8]) -> String {
    if let Ok(answer) = serde_json::from_slice::<Value>(body)
        && answer["kind"] == "Status"
        && let Some(message) = answer["message"].as_str()
    {
        return message.to_string();
    }
    let server_message = if text {
        let end = body.len().min(2048);
        String::from_utf8_lossy(&body[..end]).trim().to_string()
    } else {
        "unknown".to_string()
    };
    match status {
        409 => "the server reported a conflict".to_string(),
        404 => "the server could not find the requested resource".to_string(),
        400 => "the server rejected our request for an unknown reason".to_string(),
        401 => "the server has asked for the client to provide credentials".to_string(),
        403 => server_message,
        405 => "the server does not allow this method on the requested resource".to_string(),
        422 => "the server rejected our request due to an error in our request".to_string(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".to_string(),
        429 => "the server has received too many requests and has asked us to try again later".to_string(),
        s if s >= 500 => format!(
            "an error on the server ({server_message:?}) has prevented the request from succeeding"
        ),
        s => format!("the server responded with the status code {s} but did not return more information"),
    }
}

/// kube-apiserver's `VerifyAdmissionResponse`: the `response` object, its
/// `patchType` set to `JSONPatch` where `v1beta1` implied it.
fn verify_response(
    uid: &str,
    version: &str,
    mutating: bool,
    mut answer: Value,
) -> Result<Value, String> {
    let mut response = match answer.get_mut("response") {
        Some(r @ Value::Object(_)) => r.take(),
        _ => return Err("webhook response was absent".to_string()),
    };
    let has_patch = response["patch"].as_str() != Some("") && !response["patch"].is_null();
    if version == "v1" {
        let got = response["uid"].as_str().unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
        let api_version = answer["apiVersion"].as_str().unwrap_or_default();
        let kind = answer["kind"].as_str().unwrap_or_default();
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}"
            ));
        }
        let patch_type = &response["patchType"];
        match (mutating, has_patch, patch_type) {
            (true, true, Value::Null) => {
                return Err(
                    "webhook returned response.patch but not response.patchType".to_string()
                );
            }
            (true, false, t) if !t.is_null() => {
                return Err(
                    "webhook returned response.patchType but not response.patch".to_string()
                );
            }
            (true, _, Value::String(t)) if t.is_empty() => {
                return Err(format!(
                    "webhook returned invalid response.patchType of {t:?}"
                ));
            }
            (false, true, _) => {
                return Err("validating webhook may not return response.patch".to_string());
            }
            (false, false, t) if !t.is_null() => {
                return Err("validating webhook may not return response.patchType".to_string());
            }
            _ => {}
        }
    } else if mutating && has_patch {
        response["patchType"] = json!("JSONPatch");
    }
    Ok(response)
}

/// kube-apiserver's `ToStatusErr`: the webhook's status with the message
/// prefixed, a code of at least 400 and status `Failure`.
fn to_status_error(name: &str, status: Option<&Value>) -> Rejection {
    let status = status.filter(|s| s.is_object());
    let mut code = status.and_then(|s| s["code"].as_i64()).unwrap_or_default();
    if code < 400 {
        code = 400;
    }
    let denied_by = format!("admission webhook {name:?} denied the request");
    let field = |key: &str| {
        status
            .and_then(|s| s[key].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (message, reason) = (field("message"), field("reason"));
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let state = match field("status").as_str() {
        "" | "Success" => "Failure".to_string(),
        other => other.to_string(),
    };
    let mut body = Map::new();
    body.insert("kind".into(), json!("Status"));
    body.insert("apiVersion".into(), json!("v1"));
    body.insert(
        "metadata".into(),
        status
            .and_then(|s| s.get("metadata"))
            .filter(|m| m.is_object())
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    body.insert("status".into(), json!(state));
    body.insert("message".into(), json!(message));
    if !reason.is_empty() {
        body.insert("reason".into(), json!(reason));
    }
    if let Some(details) = status
        .and_then(|s| s.get("details"))
        .filter(|d| d.is_object())
    {
        body.insert("details".into(), details.clone());
    }
    body.insert("code".into(), json!(code));
    Rejection {
        code: u16::try_from(code).unwrap_or(500),
        status: Value::Object(body),
    }
}

/// `apierrors.NewInternalError`.
fn internal_error(message: String) -> Rejection {
    Rejection {
        code: 500,
        status: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("Internal error occurred: {message}"),
            "reason": "InternalError",
            "details": {"causes": [{"message": message}]},
            "code": 500,
        }),
    }
}

/// `apierrors.NewBadRequest`.
fn bad_request(message: &str) -> Rejection {
    Rejection {
        code: 400,
        status: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "BadRequest",
            "code": 400,
        }),
    }
}

/// `apierrors.NewForbidden(resource, name, err)`, for matchConditions that
/// fail to evaluate.
fn forbidden(attributes: &Attributes, cause: &str) -> Rejection {
    let resource = group_resource(attributes);
    let message = if attributes.name.is_empty() {
        format!("{resource} is forbidden: {cause}")
    } else {
        format!("{resource} \"{}\" is forbidden: {cause}", attributes.name)
    };
    let mut details = json!({"kind": attributes.resource.name});
    if !attributes.resource.group.is_empty() {
        details["group"] = json!(attributes.resource.group);
    }
    if !attributes.name.is_empty() {
        details["name"] = json!(attributes.name);
    }
    Rejection {
        code: 403,
        status: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Forbidden",
            "details": details,
            "code": 403,
        }),
    }
}

#[cfg(test)]
mod tests;
