//! `/version` and API discovery, both the legacy lists and aggregated
//! discovery (apidiscovery.k8s.io/v2), which kubectl prefers.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{Response, StatusCode, header};
use serde_json::{Value, json};

use crate::request::Req;
use crate::resources::ResourceType;
use crate::respond::{Body, json, json_as};
use crate::scale;
use crate::state::State;
use crate::status::ApiError;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// What `/version` reports: a v1.33 server, so version-dispatching kubectl
/// wrappers pick a matching client.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-navique-dev",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-30T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn wants_aggregated(req: &Req) -> bool {
    let accept = req.header(header::ACCEPT);
    accept.contains("as=APIGroupDiscoveryList")
        && accept.contains("v=v2")
        && !accept
            .split(',')
            .next()
            .unwrap_or_default()
            .contains("v2beta1")
}

/// Types by group, then version, in a stable order; core first.
fn by_group(state: &State) -> BTreeMap<String, BTreeMap<String, Vec<Arc<ResourceType>>>> {
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<Arc<ResourceType>>>> = BTreeMap::new();
    for t in state.types() {
        groups
            .entry(t.group.clone())
            .or_default()
            .entry(t.version.clone())
            .or_default()
            .push(t);
    }
    groups
}

/// `GET /api`.
pub fn core_versions(state: &State, req: &Req) -> Response<Body> {
    if wants_aggregated(req) {
        let groups = by_group(state);
        let items: Vec<Value> = groups
            .get("")
            .map(|versions| aggregated_group("", versions))
            .into_iter()
            .collect();
        return aggregated(items);
    }
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }),
    )
}

/// `GET /apis`.
pub fn groups(state: &State, req: &Req) -> Response<Body> {
    let groups = by_group(state);
    let named = groups.iter().filter(|(group, _)| !group.is_empty());
    if wants_aggregated(req) {
        return aggregated(
            named
                .map(|(group, versions)| aggregated_group(group, versions))
                .collect(),
        );
    }
    let groups: Vec<Value> = named
        .map(|(group, versions)| legacy_group(group, versions))
        .collect();
    json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `GET /apis/<group>`.
pub fn group(state: &State, group: &str) -> Result<Response<Body>, ApiError> {
    let groups = by_group(state);
    let versions = groups
        .get(group)
        .filter(|_| !group.is_empty())
        .ok_or_else(ApiError::path_not_found)?;
    let mut body = legacy_group(group, versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(json(StatusCode::OK, &body))
}

/// `GET /api/v1`, `GET /apis/<group>/<version>`.
pub fn resources(state: &State, group: &str, version: &str) -> Result<Response<Body>, ApiError> {
    let types: Vec<Arc<ResourceType>> = state
        .types()
        .into_iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if types.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let mut resources = Vec::new();
    for t in &types {
        let mut resource = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs(),
        });
        if !t.short_names.is_empty() {
            resource["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            resource["categories"] = json!(t.categories);
        }
        resources.push(resource);
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if scale::has_scale(t) {
            resources.push(json!({
                "name": format!("{}/scale", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = types[0].api_version();
    Ok(json(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}

fn legacy_group(group: &str, versions: &BTreeMap<String, Vec<Arc<ResourceType>>>) -> Value {
    let versions: Vec<Value> = ordered_versions(versions)
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
}

/// Versions, preferred first (the highest, by Kubernetes' ordering: GA over
/// beta over alpha).
fn ordered_versions(
    versions: &BTreeMap<String, Vec<Arc<ResourceType>>>,
) -> impl Iterator<Item = &String> {
    let mut names: Vec<&String> = versions.keys().collect();
    names.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    names.into_iter()
}

fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let rest = &rest[digits.len()..];
    let (stage, minor) = if rest.is_empty() {
        (3, 0)
    } else if let Some(n) = rest.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = rest.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stage, major, minor)
}

fn aggregated_group(group: &str, versions: &BTreeMap<String, Vec<Arc<ResourceType>>>) -> Value {
    let versions: Vec<Value> = ordered_versions(versions)
        .map(|version| {
            let resources: Vec<Value> = versions[version]
                .iter()
                .map(|t| {
                    let kind = json!({"group": t.group, "version": t.version, "kind": t.kind});
                    let mut resource = json!({
                        "resource": t.plural,
                        "responseKind": kind,
                        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": t.singular,
                        "verbs": t.verbs(),
                    });
                    if !t.short_names.is_empty() {
                        resource["shortNames"] = json!(t.short_names);
                    }
                    if !t.categories.is_empty() {
                        resource["categories"] = json!(t.categories);
                    }
                    let mut subresources = Vec::new();
                    if t.status_subresource {
                        subresources.push(json!({
                            "subresource": "status",
                            "responseKind": kind,
                            "verbs": ["get", "patch", "update"],
                        }));
                    }
                    if scale::has_scale(t) {
                        subresources.push(json!({
                            "subresource": "scale",
                            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                            "verbs": ["get", "patch", "update"],
                        }));
                    }
                    if !subresources.is_empty() {
                        resource["subresources"] = json!(subresources);
                    }
                    resource
                })
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

fn aggregated(items: Vec<Value>) -> Response<Body> {
    json_as(
        StatusCode::OK,
        &json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}),
        AGGREGATED,
    )
}

#[cfg(test)]
mod tests {
    use super::version_priority;

    #[test]
    fn ga_versions_are_preferred_over_beta_and_alpha() {
        let mut versions = vec!["v1alpha1", "v1", "v2beta1", "v1beta2"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(versions, ["v1", "v2beta1", "v1beta2", "v1alpha1"]);
    }
}
