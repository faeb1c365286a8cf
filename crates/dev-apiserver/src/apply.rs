//! Server-side apply and field ownership (`metadata.managedFields`).
//!
//! Every write records which field manager set which fields. An apply sets
//! the fields of its configuration, removes those the same manager applied
//! before and no longer sends (unless someone else owns them too), and fails
//! with a conflict when it would change a field another manager owns,
//! unless forced, which moves the ownership. Leader election through Leases
//! depends on that conflict.
//!
//! Simplified: lists of objects with a well-known key (the strategic-merge
//! keys: `name`, `type` for conditions, ports...) are merged as list maps;
//! every other list is atomic (the real server reads the schema's
//! `x-kubernetes-list-type`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value, json};

use crate::patch::{ListStrategy, list_strategy};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Elem {
    Field(String),
    /// A list-map item, by its key fields as canonical JSON.
    Key(String),
}

type Path = Vec<Elem>;
type FieldSet = BTreeSet<Path>;

fn path_string(path: &Path) -> String {
    let mut out = String::new();
    for elem in path {
        match elem {
            Elem::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Elem::Key(key) => {
                let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
        }
    }
    out
}

/// One conflicting field.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The owner as kube-apiserver prints it: `"alice"`, or `"kubectl" using v1`.
    pub manager: String,
    pub field: String,
}

#[derive(Debug)]
pub enum ApplyError {
    Conflicts(Vec<Conflict>),
    Invalid(String),
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(message) => f.write_str(message),
            Self::Conflicts(conflicts) if conflicts.len() == 1 => write!(
                f,
                "Apply failed with 1 conflict: conflict with {}: {}",
                conflicts[0].manager, conflicts[0].field
            ),
            Self::Conflicts(conflicts) => {
                let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for c in conflicts {
                    by_manager.entry(&c.manager).or_default().push(&c.field);
                }
                let mut lines = Vec::new();
                for (manager, fields) in by_manager {
                    lines.push(format!("conflicts with {manager}:"));
                    lines.extend(fields.iter().map(|field| format!("- {field}")));
                }
                write!(
                    f,
                    "Apply failed with {} conflicts: {}",
                    conflicts.len(),
                    lines.join("\n")
                )
            }
        }
    }
}

impl std::error::Error for ApplyError {}

impl ApplyError {
    /// The Status causes: one `FieldManagerConflict` per field.
    pub fn causes_json(&self) -> Vec<Value> {
        match self {
            Self::Conflicts(conflicts) => conflicts
                .iter()
                .map(|c| {
                    json!({
                        "type": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager),
                        "field": c.field,
                    })
                })
                .collect(),
            Self::Invalid(_) => Vec::new(),
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    fn printed(&self) -> String {
        let mut name = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            name = format!("{name} with subresource {sub:?}");
        }
        if self.operation == "Update" {
            name = format!("{name} using {}", self.api_version);
        }
        name
    }

    fn to_json(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(&self.fields),
        });
        if let Some(sub) = &self.subresource {
            entry["subresource"] = json!(sub);
        }
        entry
    }
}

fn entries(object: Option<&Value>) -> Vec<Entry> {
    let Some(list) = object.and_then(|o| o["metadata"]["managedFields"].as_array()) else {
        return Vec::new();
    };
    list.iter()
        .map(|e| Entry {
            manager: e["manager"].as_str().unwrap_or_default().to_owned(),
            operation: e["operation"].as_str().unwrap_or_default().to_owned(),
            api_version: e["apiVersion"].as_str().unwrap_or_default().to_owned(),
            time: e["time"].as_str().unwrap_or_default().to_owned(),
            subresource: e["subresource"].as_str().map(str::to_owned),
            fields: decode(&e["fieldsV1"]),
        })
        .collect()
}

fn store_entries(object: &mut Value, entries: Vec<Entry>) {
    let entries: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if let Some(meta) = object["metadata"].as_object_mut() {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

// === field sets ===

/// Fields nobody owns: identity and what the server maintains.
fn ignored(path: &[Elem], name: &str) -> bool {
    match path {
        [] => matches!(name, "apiVersion" | "kind"),
        [Elem::Field(meta)] if meta == "metadata" => matches!(
            name,
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "managedFields"
                | "selfLink"
        ),
        _ => false,
    }
}

/// The key of a list-map item, when `field`'s items merge by key.
fn item_key(field: &str, items: &[Value], item: &Value) -> Option<String> {
    match list_strategy(field, items) {
        ListStrategy::MergeByKey(key) => {
            let value = item.get(key)?;
            Some(json!({ key: value }).to_string())
        }
        _ => None,
    }
}

fn field_set(object: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    collect(object, &mut Vec::new(), &mut set);
    set
}

fn collect(value: &Value, path: &mut Path, set: &mut FieldSet) {
    let Some(map) = value.as_object() else {
        return;
    };
    for (name, child) in map {
        if ignored(path, name) {
            continue;
        }
        path.push(Elem::Field(name.clone()));
        match child {
            Value::Object(m) if !m.is_empty() => collect(child, path, set),
            // Root metadata is never owned as a whole.
            Value::Object(_) if path.len() == 1 && name == "metadata" => {}
            Value::Array(items)
                if !items.is_empty()
                    && items.iter().all(|i| item_key(name, items, i).is_some()) =>
            {
                for item in items {
                    if let Some(key) = item_key(name, items, item) {
                        path.push(Elem::Key(key));
                        set.insert(path.clone());
                        collect(item, path, set);
                        path.pop();
                    }
                }
            }
            _ => {
                set.insert(path.clone());
            }
        }
        path.pop();
    }
}

fn key_matches(item: &Value, key: &str) -> bool {
    let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

fn value_at<'a>(root: &'a Value, path: &Path) -> Option<&'a Value> {
    path.iter().try_fold(root, |value, elem| match elem {
        Elem::Field(name) => value.get(name),
        Elem::Key(key) => value.as_array()?.iter().find(|item| key_matches(item, key)),
    })
}

/// The container a path's last element lives in, created as needed.
fn parent_mut<'a>(root: &'a mut Value, path: &[Elem]) -> &'a mut Value {
    let mut value = root;
    for (i, elem) in path.iter().enumerate() {
        value = match elem {
            Elem::Field(name) => {
                if !value.is_object() {
                    *value = Value::Object(Map::new());
                }
                let next_is_key = matches!(path.get(i + 1), Some(Elem::Key(_)));
                let default = if next_is_key { json!([]) } else { json!({}) };
                match value {
                    Value::Object(map) => map.entry(name.clone()).or_insert(default),
                    _ => unreachable!("made an object above"),
                }
            }
            Elem::Key(key) => {
                if !value.is_array() {
                    *value = json!([]);
                }
                let Value::Array(items) = value else {
                    unreachable!("made an array above")
                };
                let index = match items.iter().position(|item| key_matches(item, key)) {
                    Some(index) => index,
                    None => {
                        items.push(serde_json::from_str(key).unwrap_or_else(|_| json!({})));
                        items.len() - 1
                    }
                };
                &mut items[index]
            }
        };
    }
    value
}

fn set_at(root: &mut Value, path: &Path, value: Value) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let container = parent_mut(root, parent);
    match last {
        Elem::Field(name) => {
            if !container.is_object() {
                *container = Value::Object(Map::new());
            }
            if let Some(map) = container.as_object_mut() {
                map.insert(name.clone(), value);
            }
        }
        // An item marker: make sure the item exists (its fields follow).
        Elem::Key(_) => {
            parent_mut(root, path);
        }
    }
}

fn remove_at(root: &mut Value, path: &Path) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    if value_at(root, &parent.to_vec()).is_none() {
        return;
    }
    let container = parent_mut(root, parent);
    match last {
        Elem::Field(name) => {
            if let Some(map) = container.as_object_mut() {
                map.remove(name);
            }
        }
        Elem::Key(key) => {
            if let Some(items) = container.as_array_mut() {
                items.retain(|item| !key_matches(item, key));
            }
        }
    }
}

// === FieldsV1 ===

fn encode(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for elem in path {
            let key = match elem {
                Elem::Field(name) => format!("f:{name}"),
                Elem::Key(key) => format!("k:{key}"),
            };
            node = node
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("field set nodes are objects");
        }
        if matches!(path.last(), Some(Elem::Key(_))) {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

fn decode(fields: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    decode_into(fields, &mut Vec::new(), &mut set);
    set
}

fn decode_into(node: &Value, path: &mut Path, set: &mut FieldSet) {
    let Some(map) = node.as_object() else {
        return;
    };
    for (key, child) in map {
        let elem = if let Some(name) = key.strip_prefix("f:") {
            Elem::Field(name.to_owned())
        } else if let Some(k) = key.strip_prefix("k:") {
            Elem::Key(k.to_owned())
        } else {
            if key == "." && !path.is_empty() {
                set.insert(path.clone());
            }
            continue;
        };
        path.push(elem);
        if child.as_object().is_none_or(Map::is_empty) {
            set.insert(path.clone());
        } else {
            decode_into(child, path, set);
        }
        path.pop();
    }
}

// === apply and update ===

/// Applies `applied` for `manager` onto `live` (None: the apply creates).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    now: &str,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::Invalid(
            "the applied configuration must be an object".into(),
        ));
    }
    let mut entries = entries(live);
    let applied_fields = field_set(applied);
    let empty = json!({});
    let live_value = live.unwrap_or(&empty);

    let mut conflicts = Vec::new();
    for entry in &entries {
        if entry.manager == manager {
            continue;
        }
        for path in applied_fields.intersection(&entry.fields) {
            // Item markers and empty maps set no value to disagree on.
            let applied_value = value_at(applied, path);
            if matches!(path.last(), Some(Elem::Key(_)))
                || applied_value.is_some_and(|v| v.as_object().is_some_and(Map::is_empty))
            {
                continue;
            }
            if value_at(live_value, path) != applied_value {
                conflicts.push((entry.printed(), path.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(ApplyError::Conflicts(
                conflicts
                    .into_iter()
                    .map(|(manager, path)| Conflict {
                        manager,
                        field: path_string(&path),
                    })
                    .collect(),
            ));
        }
        for entry in &mut entries {
            if entry.manager != manager {
                entry
                    .fields
                    .retain(|p| !conflicts.iter().any(|(_, c)| c == p));
            }
        }
    }

    let mut result = live.cloned().unwrap_or_else(|| json!({}));
    for field in ["apiVersion", "kind"] {
        if let Some(value) = applied.get(field) {
            result[field] = value.clone();
        }
    }
    for field in ["name", "namespace", "generateName"] {
        if let Some(value) = applied["metadata"].get(field) {
            result["metadata"][field] = value.clone();
        }
    }
    for path in &applied_fields {
        match value_at(applied, path) {
            // An empty map asks for the map, not for emptying it.
            Some(Value::Object(map))
                if map.is_empty() && value_at(&result, path).is_some_and(Value::is_object) => {}
            Some(value) if !matches!(path.last(), Some(Elem::Key(_))) => {
                set_at(&mut result, path, value.clone())
            }
            _ => set_at(&mut result, path, Value::Null),
        }
    }
    let previous = entries
        .iter()
        .find(|e| e.is(manager, "Apply", subresource))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others: FieldSet = entries
        .iter()
        .filter(|e| !e.is(manager, "Apply", subresource))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    // Deepest first, so items go after their fields.
    let dropped: Vec<&Path> = previous.difference(&applied_fields).collect();
    for path in dropped.into_iter().rev() {
        let owned_elsewhere = others.iter().any(|o| o.starts_with(path));
        if !owned_elsewhere {
            remove_at(&mut result, path);
        }
    }

    entries.retain(|e| !e.is(manager, "Apply", subresource));
    entries.push(Entry {
        manager: manager.to_owned(),
        operation: "Apply".to_owned(),
        api_version: applied["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        time: now.to_owned(),
        subresource: subresource.map(str::to_owned),
        fields: applied_fields,
    });
    store_entries(&mut result, entries);
    Ok(result)
}

/// Records ownership for a create, update or patch by `manager`: it owns
/// the fields whose values it set or changed; other managers lose them, and
/// removed fields lose their owners.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let mut entries = entries(Some(new));
    let empty = json!({});
    let old_value = old.unwrap_or(&empty);
    let new_fields = field_set(new);
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| value_at(old_value, p) != value_at(new, p))
        .cloned()
        .collect();
    let removed: FieldSet = field_set(old_value)
        .difference(&new_fields)
        .cloned()
        .collect();
    for entry in &mut entries {
        entry.fields.retain(|p| !removed.contains(p));
        if !entry.is(manager, "Update", subresource) {
            entry.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", subresource))
        {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = now.to_owned();
            }
            None => entries.push(Entry {
                manager: manager.to_owned(),
                operation: "Update".to_owned(),
                api_version: new["apiVersion"].as_str().unwrap_or_default().to_owned(),
                time: now.to_owned(),
                subresource: subresource.map(str::to_owned),
                fields: changed,
            }),
        }
    }
    store_entries(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-30T10:00:00Z";

    fn configmap(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data})
    }

    #[test]
    fn apply_creates_from_nothing_and_records_its_fields() {
        let object = apply(
            None,
            &configmap(json!({"a": "1"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        assert_eq!(object["data"], json!({"a": "1"}));
        assert_eq!(
            object["metadata"]["managedFields"],
            json!([{"manager": "alice", "operation": "Apply", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}])
        );
    }

    #[test]
    fn reapplying_without_a_field_removes_it() {
        let first = apply(
            None,
            &configmap(json!({"a": "1", "b": "2"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        let second = apply(
            Some(&first),
            &configmap(json!({"a": "1"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        assert_eq!(second["data"], json!({"a": "1"}));
    }

    #[test]
    fn a_field_shared_with_the_same_value_is_no_conflict_and_survives_one_owner_leaving() {
        let first = apply(
            None,
            &configmap(json!({"a": "1"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        let second = apply(
            Some(&first),
            &configmap(json!({"a": "1"})),
            "bob",
            false,
            None,
            NOW,
        )
        .unwrap();
        let third = apply(
            Some(&second),
            &configmap(json!({})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        assert_eq!(third["data"], json!({"a": "1"}));
    }

    #[test]
    fn changing_another_managers_field_is_a_conflict_unless_forced() {
        let first = apply(
            None,
            &configmap(json!({"mode": "fast"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        let error = apply(
            Some(&first),
            &configmap(json!({"mode": "slow"})),
            "bob",
            false,
            None,
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\": .data.mode"
        );
        assert_eq!(
            error.causes_json(),
            vec![
                json!({"type": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.mode"})
            ]
        );
        let forced = apply(
            Some(&first),
            &configmap(json!({"mode": "slow"})),
            "bob",
            true,
            None,
            NOW,
        )
        .unwrap();
        assert_eq!(forced["data"]["mode"], "slow");
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["bob"], "alice lost her only field");
    }

    #[test]
    fn an_update_managers_field_conflicts_naming_its_api_version() {
        let mut object = configmap(json!({"mode": "fast"}));
        record_update(None, &mut object, "kubectl-create", None, NOW);
        let error = apply(
            Some(&object),
            &configmap(json!({"mode": "slow", "other": "x"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.mode"
        );
    }

    #[test]
    fn several_conflicts_are_listed_by_manager() {
        let first = apply(
            None,
            &configmap(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        let error = apply(
            Some(&first),
            &configmap(json!({"a": "2", "b": "2"})),
            "bob",
            false,
            None,
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b"
        );
    }

    #[test]
    fn lease_leader_election_conflicts_until_the_holder_releases() {
        let lease = |holder: &str| {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "n"},
                   "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
        };
        let held = apply(None, &lease("a"), "controller-a", false, None, NOW).unwrap();
        let error = apply(Some(&held), &lease("b"), "controller-b", false, None, NOW).unwrap_err();
        assert!(matches!(error, ApplyError::Conflicts(_)));
        // The holder releases with a strategic patch that nulls its fields.
        let mut released = held.clone();
        crate::patch::strategic_merge_patch(
            &mut released,
            &json!({"spec": {"holderIdentity": null, "leaseDurationSeconds": null}}),
            "coordination.k8s.io/v1",
            "Lease",
        )
        .unwrap();
        record_update(Some(&held), &mut released, "controller-a", None, NOW);
        let taken = apply(
            Some(&released),
            &lease("b"),
            "controller-b",
            false,
            None,
            NOW,
        )
        .unwrap();
        assert_eq!(taken["spec"]["holderIdentity"], "b");
    }

    #[test]
    fn conditions_merge_by_type() {
        let status = |conditions: Value| json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}, "status": {"conditions": conditions}});
        let first = apply(
            None,
            &status(json!([{"type": "Ready", "status": "True"}])),
            "a",
            false,
            Some("status"),
            NOW,
        )
        .unwrap();
        let second = apply(
            Some(&first),
            &status(json!([{"type": "Synced", "status": "False"}])),
            "b",
            false,
            Some("status"),
            NOW,
        )
        .unwrap();
        assert_eq!(
            second["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}])
        );
        assert_eq!(
            second["metadata"]["managedFields"][1]["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Synced\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
        );
    }

    #[test]
    fn an_update_takes_the_fields_it_changed() {
        let first = apply(
            None,
            &configmap(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            NOW,
        )
        .unwrap();
        let mut edited = first.clone();
        edited["data"]["a"] = json!("2");
        record_update(Some(&first), &mut edited, "kubectl-edit", None, NOW);
        let fields: Vec<(String, Value)> = edited["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_owned(),
                    e["fieldsV1"].clone(),
                )
            })
            .collect();
        assert_eq!(
            fields,
            vec![
                ("alice".to_owned(), json!({"f:data": {"f:b": {}}})),
                ("kubectl-edit".to_owned(), json!({"f:data": {"f:a": {}}})),
            ]
        );
    }
}
