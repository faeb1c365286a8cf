//! The resource types this server serves: every built-in resource of
//! Kubernetes 1.33 (generated, see `schema`), and every type a
//! CustomResourceDefinition registers.

use std::borrow::Cow;
use std::sync::Arc;

use navique_crd_validation::Schema;
use serde_json::{Value, json};

use crate::table::TableKind;
use crate::{events, schema};

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
    /// A built-in resource's generated schema entry.
    pub builtin: Option<&'static schema::Resource>,
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
        // Computed by kube-apiserver on each read, never written.
        if self.group.is_empty() && self.plural == "componentstatuses" {
            return vec!["get", "list"];
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

/// [`served`] without a copy where the stored object already is what is
/// served (its apiVersion and kind the endpoint's): a watch sends each
/// change to every watcher of its resource.
pub fn served_ref<'a>(rt: &ResourceType, object: &'a Value) -> Cow<'a, Value> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let version_matches = match api_version.split_once('/') {
        Some((group, version)) => group == rt.group && version == rt.version,
        None => rt.group.is_empty() && api_version == rt.version,
    };
    if rt.group != "events.k8s.io" && version_matches && object["kind"] == rt.kind.as_str() {
        Cow::Borrowed(object)
    } else {
        Cow::Owned(served(rt, object.clone()))
    }
}

/// [`served_ref`] for an object shared with the store or a write.
pub fn served_shared(rt: &ResourceType, object: &Arc<Value>) -> Arc<Value> {
    match served_ref(rt, object) {
        Cow::Borrowed(_) => object.clone(),
        Cow::Owned(served) => Arc::new(served),
    }
}

/// `Lock.core.navique.com` or `ConfigMap`, as 422 messages name a kind.
pub fn kind_group(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    }
}

/// What kube-apiserver's storage declares and the generated schema cannot
/// carry: each built-in resource's short names and categories.
const SHORT_NAMES: &[(&str, &[&str], &[&str])] = &[
    ("pods", &["po"], &["all"]),
    ("services", &["svc"], &["all"]),
    ("replicationcontrollers", &["rc"], &["all"]),
    ("configmaps", &["cm"], &[]),
    ("namespaces", &["ns"], &[]),
    ("nodes", &["no"], &[]),
    ("persistentvolumeclaims", &["pvc"], &[]),
    ("persistentvolumes", &["pv"], &[]),
    ("resourcequotas", &["quota"], &[]),
    ("serviceaccounts", &["sa"], &[]),
    ("endpoints", &["ep"], &[]),
    ("events", &["ev"], &[]),
    ("limitranges", &["limits"], &[]),
    ("componentstatuses", &["cs"], &[]),
    ("deployments", &["deploy"], &["all"]),
    ("daemonsets", &["ds"], &["all"]),
    ("replicasets", &["rs"], &["all"]),
    ("statefulsets", &["sts"], &["all"]),
    ("jobs", &[], &["all"]),
    ("cronjobs", &["cj"], &["all"]),
    ("horizontalpodautoscalers", &["hpa"], &["all"]),
    ("certificatesigningrequests", &["csr"], &[]),
    ("ingresses", &["ing"], &[]),
    ("networkpolicies", &["netpol"], &[]),
    ("poddisruptionbudgets", &["pdb"], &[]),
    ("priorityclasses", &["pc"], &[]),
    ("storageclasses", &["sc"], &[]),
    (
        "customresourcedefinitions",
        &["crd", "crds"],
        &["api-extensions"],
    ),
    ("apiservices", &[], &["api-extensions"]),
    ("mutatingwebhookconfigurations", &[], &["api-extensions"]),
    ("validatingwebhookconfigurations", &[], &["api-extensions"]),
    ("validatingadmissionpolicies", &[], &["api-extensions"]),
    (
        "validatingadmissionpolicybindings",
        &[],
        &["api-extensions"],
    ),
];

/// Every built-in resource of the reported Kubernetes version, from the
/// generated schema.
pub fn builtins() -> Vec<Arc<ResourceType>> {
    schema::RESOURCES
        .iter()
        .map(|r| {
            let message = r.message();
            let has = |field| message.field(field).is_some();
            let review = r.list.is_none();
            let (short_names, categories) = SHORT_NAMES
                .iter()
                .find(|(plural, ..)| *plural == r.plural)
                .map_or((&[][..], &[][..]), |(_, short, categories)| {
                    (*short, *categories)
                });
            let strings = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect();
            Arc::new(ResourceType {
                group: r.group.to_owned(),
                version: r.version.to_owned(),
                kind: r.kind.to_owned(),
                plural: r.plural.to_owned(),
                singular: r.kind.to_lowercase(),
                short_names: strings(short_names),
                categories: strings(categories),
                namespaced: r.namespaced,
                status_subresource: has("status") && !review,
                // The strategies that count spec changes: workloads, policies and
                // the like outside the core group, and replication controllers.
                tracks_generation: has("spec")
                    && has("status")
                    && (!r.group.is_empty() || r.kind == "ReplicationController"),
                table: None,
                schema: None,
                openapi_schema: None,
                crd: None,
                storage: (r.group == "events.k8s.io").then_some(("", "events")),
                review,
                builtin: Some(r),
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
            builtin: None,
        });
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, plural: &str) -> Arc<ResourceType> {
        builtins()
            .into_iter()
            .find(|t| t.group == group && t.plural == plural)
            .unwrap()
    }

    #[test]
    fn a_stored_object_is_served_as_it_is_only_when_it_already_reads_as_served() {
        let config_maps = rt("", "configmaps");
        let stored = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert!(matches!(
            served_ref(&config_maps, &stored),
            Cow::Borrowed(_)
        ));

        let deployments = rt("apps", "deployments");
        for (api_version, kind) in [
            ("apps/v1beta1", "Deployment"),
            ("v1", "Deployment"),
            ("apps/v1", "ReplicaSet"),
        ] {
            let stored =
                json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "a"}});
            let served = served_ref(&deployments, &stored);
            assert!(matches!(served, Cow::Owned(_)), "{api_version} {kind}");
            assert_eq!(served["apiVersion"], "apps/v1");
            assert_eq!(served["kind"], "Deployment");
        }

        // An Event is always converted (it is stored in the core form),
        // even one whose apiVersion and kind read as served.
        let events = rt("events.k8s.io", "events");
        let stored = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "n"}, "message": "m",
        });
        let served = served_ref(&events, &stored);
        assert!(matches!(served, Cow::Owned(_)));
        assert_eq!(served.into_owned(), super::served(&events, stored));
    }
}
