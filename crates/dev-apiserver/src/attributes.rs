//! Who makes a request and what it does, as kube-apiserver hands them to
//! authorization, admission policies and webhooks.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

/// An authenticated (or impersonated) user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `authentication.k8s.io/v1` UserInfo JSON, empty fields left out.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("username".into(), json!(self.username));
        if !self.uid.is_empty() {
            out.insert("uid".into(), json!(self.uid));
        }
        if !self.groups.is_empty() {
            out.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            out.insert("extra".into(), json!(self.extra));
        }
        Value::Object(out)
    }
}

/// An admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// A group, version and kind or resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupVersion {
    pub group: String,
    pub version: String,
    /// The kind (for `kind`) or the plural resource (for `resource`).
    pub name: String,
}

/// The admission attributes of one write.
#[derive(Clone, Debug)]
pub struct Attributes {
    pub operation: Operation,
    pub kind: GroupVersion,
    pub resource: GroupVersion,
    /// `status` for a status write, empty otherwise.
    pub sub_resource: String,
    pub name: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    /// The new object; None on DELETE. Shared with the write, which
    /// stores it once admission is done.
    pub object: Option<Arc<Value>>,
    /// The stored object; None on CREATE. Shared with the store.
    pub old_object: Option<Arc<Value>>,
    pub user: UserInfo,
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions or DeleteOptions (apiVersion
    /// `meta.k8s.io/v1`).
    pub options: Option<Value>,
}

/// Builders for tests of the modules that consume attributes.
#[cfg(test)]
pub mod testing {
    use serde_json::{Value, json};

    use super::{Attributes, GroupVersion, Operation, UserInfo};

    /// alice deleting ConfigMap team-a/db, whose stored form is `old`.
    pub fn configmap_delete(old: Value, dry_run: bool) -> Attributes {
        Attributes {
            operation: Operation::Delete,
            kind: GroupVersion {
                group: String::new(),
                version: "v1".into(),
                name: "ConfigMap".into(),
            },
            resource: GroupVersion {
                group: String::new(),
                version: "v1".into(),
                name: "configmaps".into(),
            },
            sub_resource: String::new(),
            name: "db".into(),
            namespace: "team-a".into(),
            object: None,
            old_object: Some(old.into()),
            user: UserInfo {
                username: "alice".into(),
                groups: vec!["system:authenticated".into()],
                ..UserInfo::default()
            },
            dry_run,
            options: Some(json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"})),
        }
    }
}
