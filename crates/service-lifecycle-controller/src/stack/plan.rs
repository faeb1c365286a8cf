//! A Stack's decisions, free of I/O: what its manifests ask for, what a
//! resource's sync options allow, and in which order things happen.

use std::collections::BTreeMap;

use navique_api::constants::annotations;
use navique_api::core::ResourceStatus;
use serde_json::Value;

use crate::Error;

/// One resource of a Stack, by the names the API finds it under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ResourceKey {
    pub fn of_status(status: &ResourceStatus, default_namespace: &str) -> Self {
        Self {
            group: status.group.clone(),
            version: status.version.clone(),
            kind: status.kind.clone(),
            namespace: status
                .namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_owned()),
            name: status.name.clone(),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Kind/name`, as messages name a resource.
    pub fn display(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// What a sync option allows for one kind of removal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gate {
    /// Removed without asking.
    #[default]
    Allow,
    /// Removed once `cd.hanzo.ai/deletion-approved: "true"` is set.
    Confirm,
    /// Never removed by the operator.
    Never,
}

/// A resource's `cd.hanzo.ai/sync-options`, as far as removal goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// Removal when the resource leaves `spec.resources`.
    pub prune: Gate,
    /// Removal when the Stack is deleted.
    pub delete: Gate,
}

impl SyncOptions {
    /// Parses `Prune=confirm,Delete=confirm` and the like; options about
    /// other things, and unknown values, leave the default (GitOps tools
    /// write many options into the same annotation).
    pub fn parse(annotation: Option<&str>) -> Self {
        let mut options = Self::default();
        for option in annotation.unwrap_or_default().split(',') {
            let Some((key, value)) = option.trim().split_once('=') else {
                continue;
            };
            let gate = match value.trim() {
                "confirm" => Gate::Confirm,
                "false" => Gate::Never,
                "true" => Gate::Allow,
                _ => continue,
            };
            match key.trim() {
                "Prune" => options.prune = gate,
                "Delete" => options.delete = gate,
                _ => {}
            }
        }
        options
    }

    /// The options an object carries.
    pub fn of(metadata_annotations: Option<&BTreeMap<String, String>>) -> Self {
        Self::parse(
            metadata_annotations
                .and_then(|a| a.get(annotations::SYNC_OPTIONS))
                .map(String::as_str),
        )
    }
}

/// Whether an object carries `cd.hanzo.ai/deletion-approved: "true"`.
pub fn approved(metadata_annotations: Option<&BTreeMap<String, String>>) -> bool {
    metadata_annotations
        .and_then(|a| a.get(annotations::DELETION_APPROVED))
        .is_some_and(|v| v == "true")
}

/// What happens to a resource the Stack removes (prune or teardown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    Delete,
    AwaitApproval,
    Keep,
}

pub fn removal(gate: Gate, approved: bool) -> Removal {
    match gate {
        Gate::Allow => Removal::Delete,
        Gate::Confirm if approved => Removal::Delete,
        Gate::Confirm => Removal::AwaitApproval,
        Gate::Never => Removal::Keep,
    }
}

/// An approval to take away: it approves nothing pending now, and the
/// Stack's own manifest does not declare it, so left in place it would
/// silently approve a later prune or delete.
pub fn stale_approval(approved: bool, pending: bool, declared: bool) -> bool {
    approved && !pending && !declared
}

/// One manifest of `spec.resources`, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub key: ResourceKey,
    pub wave: i32,
    pub options: SyncOptions,
    /// Whether the manifest itself sets `cd.hanzo.ai/deletion-approved`.
    pub declares_approval: bool,
    pub manifest: Value,
}

/// The checked manifests of a Stack in `namespace`, in their order. A
/// manifest in another namespace is refused: a Stack works within its
/// Project.
pub fn desired(namespace: &str, resources: &[Value]) -> Result<Vec<Desired>, Error> {
    let mut seen: BTreeMap<ResourceKey, usize> = BTreeMap::new();
    let mut all = Vec::with_capacity(resources.len());
    for (index, manifest) in resources.iter().enumerate() {
        let invalid = |problem: String| Error::InvalidManifest { index, problem };
        let text = |pointer: &str| manifest.pointer(pointer).and_then(Value::as_str);
        let api_version = text("/apiVersion")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid("apiVersion is required".to_owned()))?;
        let kind = text("/kind")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid("kind is required".to_owned()))?;
        let name = text("/metadata/name")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid("metadata.name is required".to_owned()))?;
        if let Some(other) = text("/metadata/namespace").filter(|n| *n != namespace) {
            return Err(invalid(format!(
                "metadata.namespace {other} is not the Stack's namespace {namespace}; a Stack manages resources of its own namespace"
            )));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let annotations: Option<BTreeMap<String, String>> = manifest
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok());
        let wave = match annotations
            .as_ref()
            .and_then(|a| a.get(annotations::SYNC_WAVE))
        {
            None => 0,
            Some(wave) => wave.trim().parse().map_err(|_| {
                invalid(format!(
                    "metadata.annotations[{:?}] must be an integer, got {wave:?}",
                    annotations::SYNC_WAVE
                ))
            })?,
        };
        let key = ResourceKey {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        if let Some(first) = seen.insert(key.clone(), index) {
            return Err(invalid(format!(
                "{} is already spec.resources[{first}]",
                key.display()
            )));
        }
        let mut manifest = manifest.clone();
        manifest["metadata"]["namespace"] = Value::String(namespace.to_owned());
        all.push(Desired {
            key,
            wave,
            options: SyncOptions::of(annotations.as_ref()),
            declares_approval: approved(annotations.as_ref()),
            manifest,
        });
    }
    Ok(all)
}

/// The waves of `items`, lowest first.
pub fn waves(items: impl IntoIterator<Item = i32>) -> Vec<i32> {
    let mut waves: Vec<i32> = items.into_iter().collect();
    waves.sort_unstable();
    waves.dedup();
    waves
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(name: &str, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "annotations": annotations}})
    }

    #[test]
    fn sync_options_read_prune_and_delete_and_ignore_the_rest() {
        let options = SyncOptions::parse(Some("Prune=confirm, Delete=confirm"));
        assert_eq!(options.prune, Gate::Confirm);
        assert_eq!(options.delete, Gate::Confirm);
        let options = SyncOptions::parse(Some("ServerSideApply=true,Prune=false"));
        assert_eq!(options.prune, Gate::Never);
        assert_eq!(options.delete, Gate::Allow);
        assert_eq!(SyncOptions::parse(None), SyncOptions::default());
        assert_eq!(
            SyncOptions::parse(Some("Prune=maybe,,=")),
            SyncOptions::default()
        );
    }

    #[test]
    fn removals_follow_the_gate_and_the_approval() {
        assert_eq!(removal(Gate::Allow, false), Removal::Delete);
        assert_eq!(removal(Gate::Confirm, false), Removal::AwaitApproval);
        assert_eq!(removal(Gate::Confirm, true), Removal::Delete);
        assert_eq!(removal(Gate::Never, true), Removal::Keep);
    }

    #[test]
    fn only_an_undeclared_approval_of_nothing_pending_is_stale() {
        assert!(stale_approval(true, false, false));
        assert!(
            !stale_approval(true, true, false),
            "it approves a pending removal"
        );
        assert!(
            !stale_approval(true, false, true),
            "the manifest declares it"
        );
        assert!(!stale_approval(false, false, false));
    }

    #[test]
    fn manifests_get_their_keys_waves_and_options() {
        let resources = vec![
            config_map(
                "a",
                json!({"cd.hanzo.ai/sync-wave": "1", "cd.hanzo.ai/sync-options": "Prune=confirm"}),
            ),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team"}}),
            config_map("b", json!({"cd.hanzo.ai/deletion-approved": "true"})),
        ];
        let all = desired("team", &resources).unwrap();
        assert_eq!(all[0].key.display(), "ConfigMap/a");
        assert_eq!(all[0].key.api_version(), "v1");
        assert_eq!(all[0].wave, 1);
        assert_eq!(all[0].options.prune, Gate::Confirm);
        assert_eq!(all[0].manifest["metadata"]["namespace"], "team");
        assert_eq!(
            (all[1].key.group.as_str(), all[1].key.version.as_str()),
            ("apps", "v1")
        );
        assert_eq!(all[1].wave, 0);
        assert!(all[2].declares_approval);
        assert_eq!(waves(all.iter().map(|d| d.wave)), [0, 1]);
    }

    #[test]
    fn bad_manifests_name_their_index_and_field() {
        let problem = |resources: Vec<Value>| desired("team", &resources).unwrap_err().to_string();
        assert_eq!(
            problem(vec![json!({"apiVersion": "v1", "metadata": {"name": "a"}})]),
            "spec.resources[0]: kind is required"
        );
        assert_eq!(
            problem(vec![config_map("a", json!({})), config_map("a", json!({}))]),
            "spec.resources[1]: ConfigMap/a is already spec.resources[0]"
        );
        assert_eq!(
            problem(vec![config_map(
                "a",
                json!({"cd.hanzo.ai/sync-wave": "first"})
            )]),
            "spec.resources[0]: metadata.annotations[\"cd.hanzo.ai/sync-wave\"] must be an integer, got \"first\""
        );
        assert_eq!(
            problem(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "other"}})
            ]),
            "spec.resources[0]: metadata.namespace other is not the Stack's namespace team; a Stack manages resources of its own namespace"
        );
    }
}
