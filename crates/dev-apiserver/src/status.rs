//! `metav1.Status` error bodies, shaped and worded as kube-apiserver's.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// An API error: the HTTP code and the Status body.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub body: Value,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: impl Into<String>, details: Option<Value>) -> Self {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            body["details"] = details;
        }
        Self { code, body }
    }

    pub fn message_text(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// `configmaps "x" not found`, `locks.core.navique.com "x" not found`.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.group_resource()),
            Some(details(rt, name)),
        )
    }

    /// A namespace that does not exist, for a write into it.
    pub fn namespace_not_found(namespace: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("namespaces \"{namespace}\" not found"),
            Some(json!({"name": namespace, "kind": "namespaces"})),
        )
    }

    /// A write into a namespace being deleted: kube-apiserver's
    /// NamespaceLifecycle admission words it as a Forbidden.
    pub fn namespace_terminating(rt: &ResourceType, name: &str, namespace: &str) -> Self {
        let message = format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            rt.group_resource()
        );
        Self::new(
            403,
            "Forbidden",
            message,
            Some(
                json!({"causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}]}),
            ),
        )
    }

    /// 403 for a request RBAC does not allow, worded by kube-apiserver.
    pub fn rbac_forbidden(request: &crate::rbac::Request<'_>) -> Self {
        Self::new(
            403,
            "Forbidden",
            crate::rbac::forbidden_message(request),
            Some(crate::rbac::forbidden_details(request)),
        )
    }

    /// A path that names no resource this server serves.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(json!({})),
        )
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.group_resource()),
            Some(details(rt, name)),
        )
    }

    /// A conflicting write: `Operation cannot be fulfilled on <gr> "<name>": <why>`.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                rt.group_resource()
            ),
            Some(details(rt, name)),
        )
    }

    /// A write based on a stale resourceVersion.
    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Server-side apply conflicts, with FieldManagerConflict causes.
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        Self::new(409, "Conflict", message, Some(json!({"causes": causes})))
    }

    /// 422 with field causes: `<Kind>.<group> "<name>" is invalid: ...`.
    pub fn invalid(rt: &ResourceType, name: &str, message: String, causes: Vec<Value>) -> Self {
        Self::new(
            422,
            "Invalid",
            message,
            Some(json!({"name": name, "group": rt.group, "kind": rt.kind, "causes": causes})),
        )
    }

    /// A patch that cannot be applied to the object.
    pub fn unprocessable_patch(message: String) -> Self {
        Self::new(422, "Invalid", message, None)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message, None)
    }

    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
            None,
        )
    }

    /// 410: a watch or list from a resourceVersion the server no longer has.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message, None)
    }

    pub fn new_request_too_large(message: String) -> Self {
        Self::new(413, "RequestEntityTooLarge", message, None)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized", None)
    }
}

fn details(rt: &ResourceType, name: &str) -> Value {
    let mut details = json!({"name": name, "kind": rt.plural});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    details
}

/// The Status a successful immediate delete answers.
pub fn deleted(rt: &ResourceType, name: &str, uid: &str) -> Value {
    let mut details = details(rt, name);
    details["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
