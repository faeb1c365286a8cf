//! Pure helpers of the ManagedService reconciler: the names a service's
//! database, role and credential Secret get, and what that Secret holds.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use navique_api::constants::labels;
use navique_api::services::{DeletionPolicy, ManagedService, ServicePlan};
use serde_json::Value;

use crate::Error;
use crate::postgres::{self, Credentials, Database};

/// The credential Secret's name suffix: `<service>-credentials`.
pub const CREDENTIALS_SUFFIX: &str = "-credentials";
/// The keys of the credential Secret.
pub const CREDENTIAL_KEYS: [&str; 6] = ["host", "port", "database", "user", "password", "uri"];

/// The name of a service's credential Secret.
pub fn credentials_secret_name(service: &str) -> String {
    format!("{service}{CREDENTIALS_SUFFIX}")
}

/// The database and owner role of a ManagedService (see
/// [`postgres::names`]): the credential Secret carries these names.
pub fn database_of_service(service: &ManagedService) -> Result<Database, Error> {
    Ok(postgres::names::of_service(service)?)
}

/// The credential Secret's data.
pub fn secret_data(credentials: &Credentials) -> BTreeMap<String, ByteString> {
    [
        ("host", credentials.host.clone()),
        ("port", credentials.port.to_string()),
        ("database", credentials.database.clone()),
        ("user", credentials.user.clone()),
        ("password", credentials.password.clone()),
        ("uri", credentials.uri()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
    .collect()
}

/// The credential Secret as a server-side apply body.
pub fn secret_body(secret_name: &str, service: &str, credentials: &Credentials) -> Value {
    let data: BTreeMap<String, ByteString> = secret_data(credentials);
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "labels": {
                labels::SERVICE: service,
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            },
        },
        "type": "Opaque",
        "data": data,
    })
}

/// The password kept in an existing credential Secret, if it holds a
/// usable one.
pub fn stored_password(data: Option<&BTreeMap<String, ByteString>>) -> Option<String> {
    let bytes = data?.get("password")?;
    let password = String::from_utf8(bytes.0.clone()).ok()?;
    (!password.is_empty() && !password.contains('\0')).then_some(password)
}

/// Whether `policy` can be applied under `plan` (None: the plan is gone):
/// `Retain` always; others when the plan lists them, and
/// `SnapshotAndDelete` only with backups enabled.
pub fn policy_allowed(policy: DeletionPolicy, plan: Option<&ServicePlan>) -> bool {
    if policy == DeletionPolicy::Retain {
        return true;
    }
    plan.is_some_and(|plan| plan.spec.policy_refusal(policy).is_none())
}

/// The `appliedDeletionPolicy` to report: the requested one when the plan
/// allows it, else the previous one.
pub fn applied_policy(
    requested: DeletionPolicy,
    previous: Option<DeletionPolicy>,
    plan: Option<&ServicePlan>,
) -> Option<DeletionPolicy> {
    if policy_allowed(requested, plan) {
        Some(requested)
    } else {
        previous
    }
}

/// The `ProjectDeleted` event's note: it regards the Project's Namespace,
/// so it names the service.
pub fn project_deleted_note(service: &str, message: &str) -> String {
    format!("ManagedService {service}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use navique_api::services::{NameRef, PlanBackup, ServicePlanSpec};
    use serde_json::json;

    fn plan(allowed: &[DeletionPolicy], backup: bool) -> ServicePlan {
        ServicePlan::new(
            "p",
            ServicePlanSpec {
                class_ref: NameRef {
                    name: "postgresql".to_owned(),
                },
                description: None,
                allowed_deletion_policies: allowed.to_vec(),
                backup: PlanBackup {
                    enabled: backup,
                    schedule: None,
                    retention: None,
                    final_backup_verify: None,
                    jobs: None,
                },
                default_deletion_protection: false,
                defaults: None,
            },
        )
    }

    fn service(namespace: &str, mode: &str, parameters: serde_json::Value) -> ManagedService {
        serde_json::from_value(json!({
            "apiVersion": "services.kube-dc.com/v1alpha1",
            "kind": "ManagedService",
            "metadata": {"name": "orders-db", "namespace": namespace, "uid": "u1"},
            "spec": {
                "classRef": {"name": "postgresql"},
                "planRef": {"name": "p"},
                "placement": {"mode": mode},
                "parameters": parameters,
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_shared_server_gets_the_projects_names_and_an_own_engine_the_requested_ones() {
        assert_eq!(
            credentials_secret_name("orders-db"),
            "orders-db-credentials"
        );
        let asked = json!({"database": "orders", "owner": "app"});
        assert_eq!(
            database_of_service(&service("team-a", "ProviderShared", asked.clone())).unwrap(),
            Database::new("team_a__orders", "team_a__app")
        );
        assert_eq!(
            database_of_service(&service("team-b", "ProviderShared", json!({}))).unwrap(),
            Database::new("team_b__orders_db", "team_b__orders_db")
        );
        assert_eq!(
            database_of_service(&service("team-a", "InProject", asked)).unwrap(),
            Database::new("orders", "app")
        );
        assert_eq!(
            database_of_service(&service(
                "team-a",
                "ProviderShared",
                json!({"database": "5"})
            ))
            .unwrap_err()
            .to_string(),
            "spec.parameters.database: invalid database name \"5\": must not start with a digit"
        );
    }

    #[test]
    fn secret_data_holds_every_key_and_a_working_uri() {
        let credentials = Credentials {
            host: "db.example".to_owned(),
            port: 5432,
            database: "orders".to_owned(),
            user: "orders".to_owned(),
            password: "pw-_x".to_owned(),
        };
        let data = secret_data(&credentials);
        assert_eq!(data.keys().map(String::as_str).collect::<Vec<_>>(), {
            let mut keys = CREDENTIAL_KEYS.to_vec();
            keys.sort_unstable();
            keys
        });
        assert_eq!(data["port"].0, b"5432");
        assert_eq!(
            data["uri"].0,
            b"postgresql://orders:pw-_x@db.example:5432/orders"
        );
        assert_eq!(stored_password(Some(&data)).as_deref(), Some("pw-_x"));
    }

    #[test]
    fn only_a_usable_stored_password_is_reused() {
        assert_eq!(stored_password(None), None);
        let mut data = BTreeMap::new();
        assert_eq!(stored_password(Some(&data)), None);
        data.insert("password".to_owned(), ByteString(Vec::new()));
        assert_eq!(stored_password(Some(&data)), None);
        data.insert("password".to_owned(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(stored_password(Some(&data)), None);
    }

    #[test]
    fn the_project_deleted_note_names_the_service() {
        assert_eq!(
            project_deleted_note("orders-db", "the Project is being deleted"),
            "ManagedService orders-db: the Project is being deleted"
        );
    }

    #[test]
    fn applied_policy_follows_the_plan() {
        use DeletionPolicy::*;
        let all = plan(&[Retain, SnapshotAndDelete, Delete], true);
        assert_eq!(applied_policy(Delete, None, Some(&all)), Some(Delete));
        let retain_only = plan(&[Retain], false);
        assert_eq!(
            applied_policy(Delete, Some(Retain), Some(&retain_only)),
            Some(Retain)
        );
        assert_eq!(applied_policy(Delete, None, Some(&retain_only)), None);
        assert_eq!(applied_policy(Retain, Some(Delete), None), Some(Retain));
        assert_eq!(applied_policy(Delete, Some(Delete), None), Some(Delete));
        let no_backups = plan(&[Retain, SnapshotAndDelete], false);
        assert_eq!(
            applied_policy(SnapshotAndDelete, Some(Retain), Some(&no_backups)),
            Some(Retain)
        );
    }
}
