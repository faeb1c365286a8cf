//! Naming resources as kubectl does: `<kind>/<name>` arguments, resolved
//! against the server's aggregated discovery (plural, singular, kind and
//! short names, optionally qualified by `.group` or `.version.group`).

use kube::core::discovery::v2::APIGroupDiscoveryList;
use kube::core::{ApiResource, GroupVersionKind};

use crate::Error;

/// One resource type the server serves, in one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// Discovery lists `list` among its verbs (or lists no verbs).
    pub listable: bool,
}

impl ResourceType {
    /// What kube's dynamic API needs to address it.
    pub fn api_resource(&self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        ApiResource::from_gvk_with_plural(&gvk, &self.plural)
    }

    /// The name kubectl prints for an object of this type, before the
    /// `/<name>`: `configmap`, `deployment.apps`.
    pub fn display_name(&self) -> String {
        if self.group.is_empty() {
            self.singular.clone()
        } else {
            format!("{}.{}", self.singular, self.group)
        }
    }

    fn is_called(&self, resource: &str) -> bool {
        let resource = resource.to_ascii_lowercase();
        self.plural == resource
            || self.singular == resource
            || self.kind.eq_ignore_ascii_case(&resource)
            || self.short_names.contains(&resource)
    }
}

/// `<kind>/<name>` as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The text before the `/`, e.g. `deployments.apps` or `cm`.
    pub resource: String,
    pub name: String,
}

impl Target {
    /// Splits `<kind>/<name>`; both parts are required and `name` has no `/`.
    pub fn parse(arg: &str) -> Result<Self, Error> {
        match arg.split_once('/') {
            Some((resource, name))
                if !resource.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(Self {
                    resource: resource.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(Error::ResourceName(arg.to_owned())),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.resource, self.name)
    }
}

/// Every resource type the server serves, the preferred version of each
/// group first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceIndex {
    types: Vec<ResourceType>,
}

impl ResourceIndex {
    /// From the aggregated discovery documents of `/api` and `/apis`.
    /// Subresources (`pods/status`) are not part of an aggregated document's
    /// resources, so every entry is a top-level type.
    pub fn from_discovery(documents: &[APIGroupDiscoveryList]) -> Self {
        let mut types = Vec::new();
        for group in documents.iter().flat_map(|d| &d.items) {
            let group_name = group
                .metadata
                .as_ref()
                .and_then(|m| m.name.clone())
                .unwrap_or_default();
            for version in &group.versions {
                let Some(version_name) = version.version.clone() else {
                    continue;
                };
                for resource in &version.resources {
                    let (Some(plural), Some(kind)) = (
                        resource.resource.clone(),
                        resource.response_kind.as_ref().and_then(|k| k.kind.clone()),
                    ) else {
                        continue;
                    };
                    let singular = resource
                        .singular_resource
                        .clone()
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| kind.to_ascii_lowercase());
                    types.push(ResourceType {
                        group: group_name.clone(),
                        version: version_name.clone(),
                        kind,
                        plural,
                        singular,
                        short_names: resource.short_names.clone(),
                        namespaced: resource.scope.as_deref() != Some("Cluster"),
                        listable: resource.verbs.is_empty()
                            || resource.verbs.iter().any(|v| v == "list"),
                    });
                }
            }
        }
        Self { types }
    }

    /// The types `resource` names, at most one per group (its preferred
    /// version): `configmaps`, `ConfigMap`, `cm`, `deployments.apps`,
    /// `deployment.v1.apps`. A name several groups serve (`events`) gives
    /// one type per group.
    pub fn resolve(&self, resource: &str) -> Result<Vec<&ResourceType>, Error> {
        let mut found: Vec<&ResourceType> = Vec::new();
        for t in &self.types {
            let named = t.is_called(resource)
                || resource.split_once('.').is_some_and(|(name, qualifier)| {
                    t.is_called(name)
                        && (qualifier == t.group
                            || qualifier
                                .split_once('.')
                                .is_some_and(|(v, g)| v == t.version && g == t.group)
                            || (t.group.is_empty() && qualifier == t.version))
                });
            if named && !found.iter().any(|f| f.group == t.group) {
                found.push(t);
            }
        }
        if found.is_empty() {
            return Err(Error::UnknownResourceType(resource.to_owned()));
        }
        Ok(found)
    }

    /// Every type once, in its group's preferred version.
    pub fn preferred(&self) -> Vec<&ResourceType> {
        let mut seen: Vec<&ResourceType> = Vec::new();
        for t in &self.types {
            if !seen.iter().any(|s| s.group == t.group && s.kind == t.kind) {
                seen.push(t);
            }
        }
        seen
    }

    /// The type of `kind` in `group`, in the group's preferred version.
    pub fn find(&self, group: &str, kind: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.kind == kind)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A discovery document as the dev API server and kube-apiserver
    /// answer `/api` and `/apis`, reduced to a few types.
    pub(crate) fn index() -> ResourceIndex {
        let core = serde_json::json!({
            "kind": "APIGroupDiscoveryList",
            "items": [{"metadata": {}, "versions": [{"version": "v1", "resources": [
                {"resource": "configmaps", "responseKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                 "scope": "Namespaced", "singularResource": "configmap", "shortNames": ["cm"], "verbs": ["get", "patch"]},
                {"resource": "events", "responseKind": {"group": "", "version": "v1", "kind": "Event"},
                 "scope": "Namespaced", "singularResource": "event", "shortNames": ["ev"], "verbs": ["get"]},
                {"resource": "namespaces", "responseKind": {"group": "", "version": "v1", "kind": "Namespace"},
                 "scope": "Cluster", "singularResource": "namespace", "shortNames": ["ns"], "verbs": ["get"]}
            ]}]}]
        });
        let groups = serde_json::json!({
            "kind": "APIGroupDiscoveryList",
            "items": [
                {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                    {"resource": "deployments", "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                     "scope": "Namespaced", "singularResource": "deployment", "shortNames": ["deploy"]}
                ]}]},
                {"metadata": {"name": "events.k8s.io"}, "versions": [{"version": "v1", "resources": [
                    {"resource": "events", "responseKind": {"group": "events.k8s.io", "version": "v1", "kind": "Event"},
                     "scope": "Namespaced", "singularResource": "event", "shortNames": ["ev"]}
                ]}]},
                {"metadata": {"name": "core.navique.com"}, "versions": [
                    {"version": "v1alpha1", "resources": [
                        {"resource": "stacks", "responseKind": {"group": "core.navique.com", "version": "v1alpha1", "kind": "Stack"},
                         "scope": "Namespaced", "singularResource": "stack", "shortNames": ["stk"]},
                        {"resource": "widgets", "responseKind": {"group": "core.navique.com", "version": "v1alpha1", "kind": "Widget"},
                         "scope": "Namespaced"}
                    ]},
                    {"version": "v1alpha0", "resources": [
                        {"resource": "stacks", "responseKind": {"group": "core.navique.com", "version": "v1alpha0", "kind": "Stack"},
                         "scope": "Namespaced", "singularResource": "stack"}
                    ]}
                ]}
            ]
        });
        ResourceIndex::from_discovery(&[
            serde_json::from_value(core).unwrap(),
            serde_json::from_value(groups).unwrap(),
        ])
    }

    fn resolved(resource: &str) -> Vec<String> {
        index()
            .resolve(resource)
            .unwrap()
            .iter()
            .map(|t| format!("{}/{}/{}", t.group, t.version, t.kind))
            .collect()
    }

    #[test]
    fn kind_name_arguments_are_split_at_the_slash() {
        assert_eq!(
            Target::parse("deployments.apps/web").unwrap(),
            Target {
                resource: "deployments.apps".into(),
                name: "web".into()
            }
        );
        for bad in ["web", "/web", "configmap/", "configmap/a/b", ""] {
            let err = Target::parse(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "arguments in resource/name form must have a single resource and name: {bad:?}"
                )
            );
        }
        assert_eq!(Target::parse("cm/x").unwrap().to_string(), "cm/x");
    }

    #[test]
    fn plural_singular_kind_and_short_names_resolve() {
        for name in ["configmaps", "configmap", "ConfigMap", "CONFIGMAPS", "cm"] {
            assert_eq!(resolved(name), ["/v1/ConfigMap"], "{name}");
        }
        for name in [
            "deployments.apps",
            "deploy",
            "Deployment",
            "deployment.v1.apps",
        ] {
            assert_eq!(resolved(name), ["apps/v1/Deployment"], "{name}");
        }
        assert_eq!(resolved("configmaps.v1"), ["/v1/ConfigMap"]);
    }

    #[test]
    fn a_name_several_groups_serve_resolves_to_each_group_once() {
        assert_eq!(resolved("events"), ["/v1/Event", "events.k8s.io/v1/Event"]);
        assert_eq!(resolved("events.events.k8s.io"), ["events.k8s.io/v1/Event"]);
        assert_eq!(resolved("stk"), ["core.navique.com/v1alpha1/Stack"]);
    }

    #[test]
    fn a_type_without_a_singular_name_is_called_by_its_lowercase_kind() {
        assert_eq!(resolved("widget"), ["core.navique.com/v1alpha1/Widget"]);
    }

    #[test]
    fn unknown_types_are_refused_in_kubectl_words() {
        for name in ["gadgets", "deployments.extensions", "configmaps.v2"] {
            assert_eq!(
                index().resolve(name).unwrap_err().to_string(),
                format!("the server doesn't have a resource type \"{name}\"")
            );
        }
    }

    #[test]
    fn find_takes_the_preferred_version_and_knows_the_scope() {
        let index = index();
        let stack = index.find("core.navique.com", "Stack").unwrap();
        assert_eq!(stack.version, "v1alpha1");
        assert_eq!(stack.display_name(), "stack.core.navique.com");
        assert!(stack.namespaced);
        let ns = index.find("", "Namespace").unwrap();
        assert!(!ns.namespaced);
        assert_eq!(ns.display_name(), "namespace");
        let deploy = index.find("apps", "Deployment").unwrap().api_resource();
        assert_eq!(
            (deploy.api_version.as_str(), deploy.plural.as_str()),
            ("apps/v1", "deployments")
        );
        assert_eq!(
            index
                .find("", "ConfigMap")
                .unwrap()
                .api_resource()
                .api_version,
            "v1"
        );
        assert!(index.find("apps", "StatefulSet").is_none());
        // What discovery says may be listed (no verbs: not known, tried).
        assert!(!index.find("", "ConfigMap").unwrap().listable);
        assert!(index.find("apps", "Deployment").unwrap().listable);
    }
}
