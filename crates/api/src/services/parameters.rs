use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Error, quantity};

/// The field of the data volume's size.
pub const STORAGE_SIZE_FIELD: &str = "spec.parameters.storage.size";

/// `spec.parameters` of a service of the PostgreSQL class. Its schema keeps
/// no unknown field: kubectl (strict field validation) refuses one, other
/// clients get a warning and the field dropped, never passed on unread.
/// What the schema cannot check (names PostgreSQL accepts, a storage size
/// above zero and at most 64Ti) the webhook refuses and the controller
/// re-checks, each error naming the field.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PostgresParameters {
    /// The database; defaults to the service's name with `_` for `-`. A
    /// lowercase PostgreSQL name that starts with a letter and holds no
    /// `__`; on the provider's shared server it is prefixed by the Project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The database's owner role; defaults like `database`, same rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Replicas of the engine, at least 1. Not applied yet: an `InProject`
    /// engine runs one replica, and a `ProviderShared` service is a
    /// database on the provider's server (the webhook warns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub instances: Option<i32>,
    /// The data volume of an `InProject` engine (not applied to
    /// `ProviderShared` services; the webhook warns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageParameters>,
    /// Whether a readonly role `<owner>_readonly` is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly_role: Option<bool>,
    /// Backups of the service; whether they run is the plan's
    /// `backup.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupParameters>,
    /// Settings of the PostgreSQL server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgresql: Option<PostgresqlParameters>,
}

/// `spec.parameters.storage`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StorageParameters {
    /// The data volume's size, a quantity above zero and at most 64Ti such
    /// as `10Gi`; default `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity")]
    pub size: Option<Quantity>,
}

/// `spec.parameters.backup`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupParameters {
    /// Whether the service wants backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// `spec.parameters.postgresql`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PostgresqlParameters {
    /// Server settings by name, such as `work_mem: 8MB` or
    /// `max_connections: 50`: strings or integers (quote fractions and
    /// booleans: `"1.1"`, `"on"`). Passed to an `InProject` engine as
    /// `-c name=value`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, IntOrString>,
}

impl PostgresParameters {
    /// `storage.size` in bytes, if given, checked by
    /// [`quantity::storage_bytes`].
    pub fn storage_bytes(&self) -> Result<Option<u64>, Error> {
        self.storage_size()
            .map(|size| quantity::storage_bytes(STORAGE_SIZE_FIELD, size))
            .transpose()
    }

    /// `storage.size` as given.
    pub fn storage_size(&self) -> Option<&Quantity> {
        self.storage.as_ref()?.size.as_ref()
    }

    /// `postgresql.parameters` as `name` to value text; a name that is not
    /// a PostgreSQL setting name (letters, digits, `_` and `.`) is an error,
    /// since it would reach the server's command line.
    pub fn server_settings(&self) -> Result<BTreeMap<String, String>, Error> {
        let Some(settings) = &self.postgresql else {
            return Ok(BTreeMap::new());
        };
        settings
            .parameters
            .iter()
            .map(|(name, value)| {
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
                if !valid {
                    return Err(Error::SettingName { name: name.clone() });
                }
                let value = match value {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::String(s) => s.clone(),
                };
                Ok((name.clone(), value))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters(json: serde_json::Value) -> PostgresParameters {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn settings_are_text_and_their_names_are_checked() {
        let given = parameters(serde_json::json!({
            "postgresql": {"parameters": {"work_mem": "8MB", "max_connections": 50}},
        }));
        assert_eq!(
            given.server_settings().unwrap(),
            BTreeMap::from([
                ("max_connections".to_owned(), "50".to_owned()),
                ("work_mem".to_owned(), "8MB".to_owned()),
            ])
        );
        let injected = parameters(serde_json::json!({
            "postgresql": {"parameters": {"a=b -c x": "1"}},
        }));
        assert_eq!(
            injected.server_settings().unwrap_err().to_string(),
            "spec.parameters.postgresql.parameters: \"a=b -c x\" is not a PostgreSQL setting name"
        );
    }

    #[test]
    fn the_storage_size_is_checked_when_given() {
        assert_eq!(PostgresParameters::default().storage_bytes().unwrap(), None);
        let size = |size: &str| parameters(serde_json::json!({"storage": {"size": size}}));
        assert_eq!(size("10Gi").storage_bytes().unwrap(), Some(10 << 30));
        assert_eq!(
            size("-10Gi").storage_bytes().unwrap_err().to_string(),
            "spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not \"-10Gi\""
        );
    }
}
