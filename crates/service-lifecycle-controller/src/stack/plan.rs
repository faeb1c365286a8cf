//! A Stack's decisions, free of I/O: what its manifests ask for, what a
//! resource's sync options allow, and in which order things happen.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use navique_api::constants::annotations;
use navique_api::core::{NotOwn, ResourceStatus, ownership};
use navique_api::grpc::approvals::v1::Operation;
use navique_api::messages;
use serde_json::Value;

use super::Error;
use super::approvers::Approval;
use super::sync_options::{self, Gate, SyncOptions};

/// One resource of a Stack, by the names the API finds it under. Its
/// identity is group, kind, namespace and name: `version` says which
/// served version to read and write it with, and is no part of it (the
/// same object under another served version is the same resource, never
/// pruned for it: "version and key drift").
#[derive(Clone, Debug)]
pub struct ResourceKey {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ResourceKey {
    fn identity(&self) -> (&str, &str, &str, &str) {
        (&self.group, &self.kind, &self.namespace, &self.name)
    }
}

impl PartialEq for ResourceKey {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for ResourceKey {}

impl PartialOrd for ResourceKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ResourceKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.identity().cmp(&other.identity())
    }
}

impl std::hash::Hash for ResourceKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
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

    /// `Kind namespace/name`, as ownership messages name a resource.
    pub fn qualified(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Whether Stack `stack` may change, prune or delete `object`, the live
/// object of `key`: `Err` says why not, naming who has it. `recorded` is
/// the Stack's stored row of the resource; `adopt`, whether its manifest
/// asks to adopt an object the Stack did not create. The rule is
/// `navique_api::core::ownership`, shared with the plugin's previews.
pub fn claim(
    stack: &str,
    key: &ResourceKey,
    object: &ObjectMeta,
    recorded: Option<&ResourceStatus>,
    adopt: bool,
) -> Result<(), String> {
    ownership(stack, object, recorded, adopt).map_err(|why| match why {
        NotOwn::Retained => messages::stack_resource_retained(&key.qualified()),
        NotOwn::OfService(service) => messages::stack_resource_of_service(
            &key.qualified(),
            &format!("{}/{service}", key.namespace),
        ),
        NotOwn::OfOtherStack(other) => {
            messages::stack_resource_of_other_stack(&key.qualified(), &other)
        }
        NotOwn::NotAdopted => messages::stack_resource_not_adopted(&key.qualified(), stack),
    })
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

/// When the removal `operation` of `row`'s resource, waiting for approval
/// now, started to wait: the stored row's time while it waited already
/// (kept across passes and restarts), else `now`. A row written before
/// rows carried the time (an older controller) starts its wait at `now`.
pub fn waiting_since(row: &ResourceStatus, operation: Operation, now: Timestamp) -> Timestamp {
    row.waiting_since
        .as_ref()
        .filter(|_| waits_for_approval(row, operation))
        .map_or(now, |t| t.0)
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
    /// Whether the manifest asks to adopt an object of its name that the
    /// Stack did not create (`core.navique.com/adopt: "true"`).
    pub adopt: bool,
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
        // Identity by name: who approved is what the API server
        // authenticated, never what a manifest says (the Stack's account
        // would write it).
        if annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(annotations::APPROVED_BY))
        {
            return Err(invalid(messages::MANIFEST_NAMES_APPROVERS.to_owned()));
        }
        let adopt = match annotations.as_ref().and_then(|a| a.get(annotations::ADOPT)) {
            None => false,
            Some(value) if value == "true" => true,
            Some(value) if value == "false" => false,
            Some(value) => {
                return Err(invalid(format!(
                    "metadata.annotations[{:?}] must be \"true\" or \"false\", got {value:?}",
                    annotations::ADOPT
                )));
            }
        };
        let key = ResourceKey {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        if let Some((first_key, first)) = seen.get_key_value(&key) {
            return Err(invalid(messages::manifest_listed_twice(
                &key.display(),
                *first,
                &first_key.api_version(),
                &key.api_version(),
            )));
        }
        seen.insert(key.clone(), index);
        let mut manifest = manifest.clone();
        manifest["metadata"]["namespace"] = Value::String(namespace.to_owned());
        all.push(Desired {
            key,
            wave,
            declares_approval: approved(annotations.as_ref()),
            adopt,
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
    fn an_approval_set_before_the_removal_waited_is_withdrawn() {
        let marks = super::super::approvers::Marks {
            approved: true,
            named: true,
            approvers: vec!["alice".into()],
        };
        let approval = super::super::approvers::approval(&marks, false, false, 1);
        assert_eq!(removal(Some(Gate::Confirm), approval), Removal::Withdraw);
    }

    /// Idempotent: a wait keeps the time its first pass recorded, however
    /// often the Stack is reconciled and whichever replica does it; a new
    /// wait (another operation, or none recorded) starts now.
    #[test]
    fn a_wait_keeps_the_time_it_started_and_a_new_one_starts_now() {
        let started: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let mut row: ResourceStatus = serde_json::from_value(serde_json::json!({
            "version": "v1", "kind": "ConfigMap", "name": "a", "status": "OutOfSync",
            "requiresPruning": true, "requiresDeletionApproval": true,
            "waitingSince": "2026-12-01T10:00:00Z"
        }))
        .unwrap();
        assert_eq!(waiting_since(&row, Operation::Prune, now), started);
        assert_eq!(
            waiting_since(&row, Operation::Delete, now),
            now,
            "a prune's wait is not a delete's"
        );
        row.waiting_since = None;
        assert_eq!(
            waiting_since(&row, Operation::Prune, now),
            now,
            "a row of an older controller"
        );
        row.waiting_since = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            started,
        ));
        row.requires_deletion_approval = false;
        assert_eq!(
            waiting_since(&row, Operation::Prune, now),
            now,
            "a row that waits no more"
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
            uid: None,
            creating: false,
            pending_approvals: None,
            approved_by: Vec::new(),
            approvals_required: None,
            waiting_since: None,
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

    fn gadget(version: &str, name: &str) -> Value {
        json!({"apiVersion": format!("adv.example.com/{version}"), "kind": "Gadget", "metadata": {"name": name}})
    }

    /// Version and key drift: a resource is the same under another served
    /// version, and one object listed under two versions is refused.
    #[test]
    fn keys_are_group_kind_namespace_and_name_not_version() {
        let v1 = desired("team", &[gadget("v1", "g")]).unwrap();
        let v2 = desired("team", &[gadget("v2", "g")]).unwrap();
        assert_eq!(v1[0].key, v2[0].key);
        assert_eq!(v2[0].key.api_version(), "adv.example.com/v2");
        assert_ne!(
            v1[0].key,
            desired(
                "team",
                &[json!({"apiVersion": "other.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}})]
            )
            .unwrap()[0]
                .key
        );
        assert_eq!(
            desired("team", &[gadget("v1", "g"), gadget("v2", "g")])
                .unwrap_err()
                .to_string(),
            "spec.resources[1]: Gadget/g is already spec.resources[0] under adv.example.com/v1, not another object under adv.example.com/v2: list an object once, under one version"
        );
    }

    #[test]
    fn adoption_is_asked_for_with_true_and_anything_but_true_or_false_is_refused() {
        let adopt = |value: &str| {
            desired(
                "team",
                &[config_map("a", json!({"core.navique.com/adopt": value}))],
            )
            .map(|d| d[0].adopt)
            .map_err(|e| e.to_string())
        };
        assert_eq!(adopt("true"), Ok(true));
        assert_eq!(adopt("false"), Ok(false));
        assert_eq!(
            adopt("yes").unwrap_err(),
            "spec.resources[0]: metadata.annotations[\"core.navique.com/adopt\"] must be \"true\" or \"false\", got \"yes\""
        );
        assert!(!desired("team", &[config_map("a", json!({}))]).unwrap()[0].adopt);
    }

    fn meta(labels: Value, owners: Value) -> ObjectMeta {
        serde_json::from_value(json!({"name": "data", "namespace": "team", "uid": "u-1", "labels": labels, "ownerReferences": owners})).unwrap()
    }

    fn recorded(uid: Option<&str>, creating: bool) -> ResourceStatus {
        ResourceStatus {
            group: String::new(),
            version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: None,
            name: "data".into(),
            status: navique_api::core::SyncStatus::Synced,
            health: None,
            requires_pruning: false,
            requires_deletion_approval: false,
            sync_wave: None,
            message: None,
            uid: uid.map(str::to_owned),
            creating,
            pending_approvals: None,
            approved_by: Vec::new(),
            approvals_required: None,
            waiting_since: None,
        }
    }

    /// Ownership by label: the label alone never makes an object the
    /// Stack's; its uid recorded in the Stack's status does, or an explicit
    /// adoption, never of a retained object, a ManagedService's or another
    /// Stack's.
    #[test]
    fn a_stack_owns_what_it_recorded_by_uid_and_adopts_only_when_asked() {
        let key = ResourceKey {
            group: String::new(),
            version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: "team".into(),
            name: "data".into(),
        };
        let ours = meta(json!({"core.navique.com/stack": "grab"}), json!([]));
        let claim = |object: &ObjectMeta, row: Option<&ResourceStatus>, adopt: bool| {
            claim("grab", &key, object, row, adopt)
        };
        let not_adopted = "PersistentVolumeClaim team/data exists and was not created by Stack grab: it is not adopted; annotate its manifest core.navique.com/adopt=\"true\" to adopt it, or take it out of the Stack";
        assert_eq!(claim(&ours, None, false).unwrap_err(), not_adopted);
        assert_eq!(
            claim(&ours, Some(&recorded(None, false)), false).unwrap_err(),
            not_adopted
        );
        assert_eq!(
            claim(&ours, Some(&recorded(Some("u-2"), false)), false).unwrap_err(),
            not_adopted
        );
        assert_eq!(
            claim(&ours, Some(&recorded(Some("u-1"), false)), false),
            Ok(())
        );
        // Created by the Stack, the controller stopped before its uid was recorded.
        assert_eq!(claim(&ours, Some(&recorded(None, true)), false), Ok(()));
        // The recorded uid without the label is not enough either.
        let unlabelled = meta(json!({}), json!([]));
        assert_eq!(
            claim(&unlabelled, Some(&recorded(Some("u-1"), false)), false).unwrap_err(),
            not_adopted
        );
        assert_eq!(
            claim(&unlabelled, Some(&recorded(None, true)), false).unwrap_err(),
            not_adopted
        );
        assert_eq!(claim(&unlabelled, None, true), Ok(()));

        let retained = meta(
            json!({"core.navique.com/stack": "grab", "services.kube-dc.com/retained": "true", "services.kube-dc.com/service": "rdb"}),
            json!([]),
        );
        for adopt in [false, true] {
            assert_eq!(
                claim(&retained, Some(&recorded(Some("u-1"), false)), adopt).unwrap_err(),
                "PersistentVolumeClaim team/data is retained from a deleted ManagedService; a Stack never adopts, changes or deletes it"
            );
        }
        let of_service = meta(
            json!({}),
            json!([{"apiVersion": "services.kube-dc.com/v1alpha1", "kind": "ManagedService", "name": "rdb", "uid": "s-1"}]),
        );
        assert_eq!(
            claim(&of_service, None, true).unwrap_err(),
            "PersistentVolumeClaim team/data belongs to ManagedService team/rdb; a Stack never adopts, changes or deletes it"
        );
        let labelled_for_service = meta(json!({"services.kube-dc.com/service": "rdb"}), json!([]));
        assert!(claim(&labelled_for_service, None, true).is_err());
        let other = meta(json!({"core.navique.com/stack": "web"}), json!([]));
        assert_eq!(
            claim(&other, Some(&recorded(Some("u-1"), false)), true).unwrap_err(),
            "PersistentVolumeClaim team/data belongs to Stack web; a Stack never adopts, changes or deletes it"
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
