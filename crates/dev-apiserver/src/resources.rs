//! The resource types this server serves: the built-ins the operator and its
//! clients touch, and every type a CustomResourceDefinition registers.

use std::sync::Arc;

use navique_crd_validation::Schema;
use serde_json::{Value, json};

use crate::events;
use crate::table::TableKind;

/// One served resource: a group/version/plural with its kind and behaviour.
#[derive(Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Writes to `status` go through the `/status` subresource only.
    pub status_subresource: bool,
    /// `metadata.generation` counts changes outside metadata and status.
    pub tracks_generation: bool,
    /// How a custom resource prints (its CRD's columns); built-ins use
    /// their own printers.
    pub table: Option<TableKind>,
    /// The structural schema of a custom resource.
    pub schema: Option<Arc<Schema>>,
    /// The raw openAPIV3Schema of a custom resource, for /openapi/v3.
    pub openapi_schema: Option<Value>,
    /// The CRD that registered this type.
    pub crd: Option<String>,
    /// Where objects are stored, when another type shares the storage
    /// (events.k8s.io events are core events).
    pub storage: Option<(&'static str, &'static str)>,
    /// A review (access or token): created and answered, never stored.
    pub review: bool,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `locks.core.navique.com`, as errors name a resource.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The key objects are stored under.
    pub fn storage_key(&self) -> (String, String) {
        match self.storage {
            Some((group, plural)) => (group.to_owned(), plural.to_owned()),
            None => (self.group.clone(), self.plural.clone()),
        }
    }

    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.review {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// What a reader sees of a stored object: the served apiVersion, or the
/// events.k8s.io form of an event.
pub fn served(rt: &ResourceType, mut object: Value) -> Value {
    if rt.group == "events.k8s.io" {
        return events::to_events_v1(&object);
    }
    object["apiVersion"] = json!(rt.api_version());
    object["kind"] = json!(rt.kind);
    object
}

/// `Lock.core.navique.com` or `ConfigMap`, as 422 messages name a kind.
pub fn kind_group(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
}

const fn builtin(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        short_names,
        namespaced,
        status: false,
        generation: false,
    }
}

const fn with_status(mut b: Builtin, generation: bool) -> Builtin {
    b.status = true;
    b.generation = generation;
    b
}

const BUILTINS: &[Builtin] = &[
    with_status(
        builtin("", "v1", "Namespace", "namespaces", &["ns"], false),
        false,
    ),
    builtin("", "v1", "ConfigMap", "configmaps", &["cm"], true),
    builtin("", "v1", "Secret", "secrets", &[], true),
    with_status(
        builtin("", "v1", "Service", "services", &["svc"], true),
        false,
    ),
    builtin("", "v1", "ServiceAccount", "serviceaccounts", &["sa"], true),
    with_status(
        builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            &["pvc"],
            true,
        ),
        false,
    ),
    builtin("", "v1", "Event", "events", &["ev"], true),
    builtin("events.k8s.io", "v1", "Event", "events", &["ev"], true),
    with_status(
        builtin("apps", "v1", "Deployment", "deployments", &["deploy"], true),
        true,
    ),
    with_status(
        builtin("apps", "v1", "StatefulSet", "statefulsets", &["sts"], true),
        true,
    ),
    with_status(
        builtin(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            &["pdb"],
            true,
        ),
        true,
    ),
    builtin("coordination.k8s.io", "v1", "Lease", "leases", &[], true),
    with_status(
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            &["crd", "crds"],
            false,
        ),
        true,
    ),
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        &[],
        false,
    ),
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        &[],
        false,
    ),
    with_status(
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            &[],
            false,
        ),
        true,
    ),
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        &[],
        false,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        &[],
        true,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        &[],
        true,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        &[],
        false,
    ),
    builtin(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        &[],
        false,
    ),
    builtin(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        &[],
        false,
    ),
    builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        &[],
        false,
    ),
];

/// The built-in resource types.
pub fn builtins() -> Vec<Arc<ResourceType>> {
    BUILTINS
        .iter()
        .map(|b| {
            Arc::new(ResourceType {
                group: b.group.to_owned(),
                version: b.version.to_owned(),
                kind: b.kind.to_owned(),
                plural: b.plural.to_owned(),
                singular: b.kind.to_lowercase(),
                short_names: b.short_names.iter().map(|s| (*s).to_owned()).collect(),
                categories: Vec::new(),
                namespaced: b.namespaced,
                status_subresource: b.status,
                tracks_generation: b.generation,
                table: None,
                schema: None,
                openapi_schema: None,
                crd: None,
                storage: (b.group == "events.k8s.io").then_some(("", "events")),
                review: matches!(b.group, "authorization.k8s.io" | "authentication.k8s.io"),
            })
        })
        .collect()
}

/// The resource types a CRD object defines, one per served version, or why
/// it cannot be served.
pub fn from_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().ok_or("spec.group: Required value")?;
    let names = &spec["names"];
    let plural = names["plural"]
        .as_str()
        .ok_or("spec.names.plural: Required value")?;
    let kind = names["kind"]
        .as_str()
        .ok_or("spec.names.kind: Required value")?;
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = match spec["scope"].as_str() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                other.map_or("\"\"".to_owned(), |s| format!("\"{s}\""))
            ));
        }
    };
    let versions = spec["versions"]
        .as_array()
        .ok_or("spec.versions: Required value")?;
    let mut types = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        if version["served"].as_bool() != Some(true) {
            continue;
        }
        let version_name = version["name"]
            .as_str()
            .ok_or_else(|| format!("spec.versions[{i}].name: Required value"))?;
        let openapi = version["schema"]["openAPIV3Schema"].clone();
        let schema = if openapi.is_object() {
            Some(Arc::new(Schema::from_value(&openapi).map_err(|e| {
                format!("spec.versions[{i}].schema.openAPIV3Schema: Invalid value: {e}")
            })?))
        } else {
            None
        };
        types.push(ResourceType {
            group: group.to_owned(),
            version: version_name.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            singular: names["singular"]
                .as_str()
                .map_or_else(|| kind.to_lowercase(), str::to_owned),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced,
            status_subresource: version["subresources"]["status"].is_object(),
            tracks_generation: true,
            table: Some(TableKind::for_crd(crd, version_name)),
            schema,
            openapi_schema: openapi.is_object().then_some(openapi),
            crd: Some(name.to_owned()),
            storage: None,
            review: false,
        });
    }
    Ok(types)
}
