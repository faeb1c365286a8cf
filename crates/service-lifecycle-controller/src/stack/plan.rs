//! A Stack's decisions, free of I/O: what its manifests ask for, what a
//! resource's sync options allow, and in which order things happen.

use std::collections::BTreeMap;

use navique_api::constants::annotations;
use navique_api::core::ResourceStatus;
use navique_api::grpc::approvals::v1::Operation;
use navique_api::messages;
use serde_json::Value;

use super::sync_options::{self, Gate, SyncOptions};
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

/// Whether an object carries `cd.hanzo.ai/deletion-approved: "true"`.
pub fn approved(metadata_annotations: Option<&BTreeMap<String, String>>) -> bool {
    metadata_annotations
        .and_then(|a| a.get(annotations::DELETION_APPROVED))
        .is_some_and(|v| v == "true")
}

/// Whether `row`, of the Stack's stored status, records that the removal
/// `operation` of its resource waits for approval: from then on an
/// approval counts.
pub fn waits_for_approval(row: &ResourceStatus, operation: Operation) -> bool {
    row.requires_deletion_approval && row.requires_pruning == (operation == Operation::Prune)
}

/// Where the approval of a removal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// None that counts yet.
    Missing,
    /// Given while the removal waits (present after the wait was
    /// recorded), or declared by the Stack's own manifest of the resource.
    Given,
    /// Set before the removal waited, e.g. by hand while the resource was
    /// still in the Stack: taken away, never used ("stale authorisation").
    Stale,
}

/// The approval of a removal: `annotated` when the object carries one,
/// `declared` when the Stack's manifest of it does, `waiting` when the
/// stored status records the wait ([`waits_for_approval`]).
pub fn approval(annotated: bool, declared: bool, waiting: bool) -> Approval {
    match (annotated, declared, waiting) {
        (_, true, _) => Approval::Given,
        (false, false, _) => Approval::Missing,
        (true, false, true) => Approval::Given,
        (true, false, false) => Approval::Stale,
    }
}

/// What happens to a resource the Stack removes (prune or teardown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    Delete,
    AwaitApproval,
    /// Take the stale approval away, then wait.
    Withdraw,
    /// `Prune=false` or `Delete=false`.
    Keep,
    /// The sync options are not understood: neither removed nor let go.
    Hold,
}

/// The removal a gate (`None`: options not understood) and an approval
/// allow.
pub fn removal(gate: Option<Gate>, approval: Approval) -> Removal {
    match (gate, approval) {
        (None, _) => Removal::Hold,
        (Some(Gate::Allow), _) => Removal::Delete,
        (Some(Gate::Never), _) => Removal::Keep,
        (Some(Gate::Confirm), Approval::Given) => Removal::Delete,
        (Some(Gate::Confirm), Approval::Missing) => Removal::AwaitApproval,
        (Some(Gate::Confirm), Approval::Stale) => Removal::Withdraw,
    }
}

/// One manifest of `spec.resources`, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub key: ResourceKey,
    pub wave: i32,
    /// Whether the manifest itself sets `cd.hanzo.ai/deletion-approved`.
    pub declares_approval: bool,
    pub manifest: Value,
}

/// A string field of a manifest (`field` as messages name it, `key` as
/// its YAML writes it); `None` when absent.
fn text<'a>(
    manifest: &'a Value,
    pointer: &str,
    field: &str,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match manifest.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(messages::manifest_field_not_a_string(field, key, other)),
    }
}

/// A string field that must be there and not empty.
fn required<'a>(
    manifest: &'a Value,
    pointer: &str,
    field: &str,
    key: &str,
) -> Result<&'a str, String> {
    text(manifest, pointer, field, key)?
        .filter(|v| !v.is_empty())
        .ok_or_else(|| messages::manifest_field_required(field))
}

/// A manifest's annotations, each a string.
fn manifest_annotations(manifest: &Value) -> Result<Option<BTreeMap<String, String>>, String> {
    match manifest.pointer("/metadata/annotations") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(all)) => all
            .iter()
            .map(|(key, value)| match value {
                Value::String(value) => Ok((key.clone(), value.clone())),
                other => Err(messages::manifest_field_not_a_string(
                    &format!("metadata.annotations[{key:?}]"),
                    key,
                    other,
                )),
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(messages::MANIFEST_ANNOTATIONS_NOT_A_MAP.to_owned()),
    }
}

/// The checked manifests of a Stack in `namespace`, in their order. A
/// manifest in another namespace is refused: a Stack works within its
/// Project. So are sync options that are not understood, or that conflict:
/// a typo in them is reported before the resource is ever applied.
pub fn desired(namespace: &str, resources: &[Value]) -> Result<Vec<Desired>, Error> {
    let mut seen: BTreeMap<ResourceKey, usize> = BTreeMap::new();
    let mut all = Vec::with_capacity(resources.len());
    for (index, manifest) in resources.iter().enumerate() {
        let invalid = |problem: String| Error::InvalidManifest { index, problem };
        let api_version =
            required(manifest, "/apiVersion", "apiVersion", "apiVersion").map_err(invalid)?;
        let kind = required(manifest, "/kind", "kind", "kind").map_err(invalid)?;
        let name =
            required(manifest, "/metadata/name", "metadata.name", "name").map_err(invalid)?;
        let own_namespace = text(
            manifest,
            "/metadata/namespace",
            "metadata.namespace",
            "namespace",
        )
        .map_err(invalid)?;
        if let Some(other) = own_namespace.filter(|n| *n != namespace) {
            return Err(invalid(format!(
                "metadata.namespace {other} is not the Stack's namespace {namespace}; a Stack manages resources of its own namespace"
            )));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let annotations = manifest_annotations(manifest).map_err(invalid)?;
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
        if let Some(value) = sync_options::value(annotations.as_ref())
            && let Some(problem) = SyncOptions::parse(Some(value)).problem(value)
        {
            return Err(invalid(problem));
        }
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
    fn removals_follow_the_gate_and_the_approval() {
        use Approval::*;
        assert_eq!(removal(Some(Gate::Allow), Missing), Removal::Delete);
        assert_eq!(
            removal(Some(Gate::Confirm), Missing),
            Removal::AwaitApproval
        );
        assert_eq!(removal(Some(Gate::Confirm), Given), Removal::Delete);
        assert_eq!(removal(Some(Gate::Never), Given), Removal::Keep);
    }

    /// Fail open: options not understood hold the resource, approved or not.
    #[test]
    fn options_not_understood_hold_the_resource_whatever_the_approval() {
        for approval in [Approval::Missing, Approval::Given, Approval::Stale] {
            assert_eq!(removal(None, approval), Removal::Hold);
        }
    }

    /// Stale authorisation: an approval set before the removal waited is
    /// taken away, and never used.
    #[test]
    fn an_approval_counts_only_once_the_wait_is_recorded_or_when_the_manifest_declares_it() {
        assert_eq!(approval(true, false, false), Approval::Stale);
        assert_eq!(approval(true, false, true), Approval::Given);
        assert_eq!(approval(false, true, false), Approval::Given);
        assert_eq!(approval(true, true, false), Approval::Given);
        assert_eq!(approval(false, false, true), Approval::Missing);
        assert_eq!(approval(false, false, false), Approval::Missing);
        assert_eq!(
            removal(Some(Gate::Confirm), approval(true, false, false)),
            Removal::Withdraw
        );
    }

    #[test]
    fn a_wait_is_recorded_by_its_row_for_its_own_operation() {
        let mut row = ResourceStatus {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: None,
            name: "a".into(),
            status: navique_api::core::SyncStatus::OutOfSync,
            health: None,
            requires_pruning: true,
            requires_deletion_approval: true,
            sync_wave: None,
            message: None,
        };
        assert!(waits_for_approval(&row, Operation::Prune));
        assert!(
            !waits_for_approval(&row, Operation::Delete),
            "a prune's wait is not a delete's"
        );
        row.requires_pruning = false;
        assert!(waits_for_approval(&row, Operation::Delete));
        row.requires_deletion_approval = false;
        assert!(!waits_for_approval(&row, Operation::Delete));
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

    /// `name: y` is the boolean true to YAML: the error says so.
    #[test]
    fn fields_of_another_type_say_what_they_are_not_that_they_are_missing() {
        let problem = |resources: Vec<Value>| desired("team", &resources).unwrap_err().to_string();
        assert_eq!(
            problem(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": true}})
            ]),
            "spec.resources[0]: metadata.name must be a string, not the boolean true: quote it (name: \"y\", not name: y); YAML reads an unquoted y, yes, on or true as the boolean true"
        );
        assert_eq!(
            problem(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": 7}})
            ]),
            "spec.resources[0]: metadata.namespace must be a string, not the number 7: quote it (namespace: \"7\")"
        );
        assert_eq!(
            problem(vec![config_map("a", json!({"cd.hanzo.ai/sync-wave": 1}))]),
            "spec.resources[0]: metadata.annotations[\"cd.hanzo.ai/sync-wave\"] must be a string, not the number 1: quote it (cd.hanzo.ai/sync-wave: \"1\")"
        );
        assert_eq!(
            problem(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": ["x"]}})
            ]),
            "spec.resources[0]: metadata.annotations must be a map of strings to strings"
        );
        assert_eq!(
            problem(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ""}})
            ]),
            "spec.resources[0]: metadata.name is required"
        );
    }

    /// Fail open: a manifest's misspelt sync options are refused before
    /// the resource is applied.
    #[test]
    fn manifests_with_sync_options_not_understood_or_conflicting_are_refused() {
        let problem = |options: &str| {
            desired(
                "team",
                &[config_map(
                    "a",
                    json!({"cd.hanzo.ai/sync-options": options}),
                )],
            )
            .unwrap_err()
            .to_string()
        };
        assert!(
            problem("Prune=Confirm").starts_with(
                "spec.resources[0]: cd.hanzo.ai/sync-options \"Prune=Confirm\" is not understood: Prune takes confirm, false or true, not \"Confirm\""
            ),
            "{}",
            problem("Prune=Confirm")
        );
        assert!(
            problem("Delete=confirm,Prune=confirm,Prune=true")
                .contains("gives Prune more than one value (confirm, true)")
        );
        assert!(
            desired(
                "team",
                &[config_map(
                    "a",
                    json!({"cd.hanzo.ai/sync-options": "ServerSideApply=true, Prune=confirm"})
                )]
            )
            .is_ok()
        );
    }
}
