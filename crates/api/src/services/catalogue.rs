use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BackupVerification, DeletionPolicy, NameRef};

/// Desired state of a ServiceClass.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ServiceClass",
    doc = "A kind of service the provider offers: its engine and, for the `ProviderShared` placement, the provider's server.",
    shortname = "sclass",
    category = "navique",
    printcolumn(name = "Engine", type_ = "string", json_path = ".spec.engine"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceClassSpec {
    /// The database engine.
    pub engine: Engine,
    /// A human description shown to users choosing a class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The provider-run server used by the `ProviderShared` placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_shared: Option<ProviderShared>,
}

/// Database engines.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Postgresql,
}

/// The provider's PostgreSQL server for `ProviderShared` services.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderShared {
    /// A Secret holding the server's admin connection (`host`, `port`,
    /// `user`, `password`, optionally `sslmode`).
    pub admin_secret_ref: SecretRef,
}

/// A Secret in a named namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::names::OBJECT_NAME_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::names::NAMESPACE_NAME_PATTERN))]
    pub namespace: String,
}

/// Desired state of a ServicePlan.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "services.kube-dc.com",
    version = "v1alpha1",
    kind = "ServicePlan",
    doc = "A size and policy tier of a ServiceClass. Project users cannot read plans.",
    shortname = "splan",
    category = "navique",
    printcolumn(name = "Class", type_ = "string", json_path = ".spec.classRef.name"),
    status = "ServicePlanStatus",
    printcolumn(name = "Policies", type_ = "string", json_path = ".status.policies"),
    printcolumn(name = "Backup", type_ = "boolean", json_path = ".spec.backup.enabled"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("!('SnapshotAndDelete' in self.allowedDeletionPolicies) || self.backup.enabled").message("allowedDeletionPolicies includes SnapshotAndDelete, which needs backup.enabled: true").field_path(".backup.enabled"))]
#[serde(rename_all = "camelCase")]
pub struct ServicePlanSpec {
    /// The class this plan belongs to.
    pub class_ref: NameRef,
    /// A human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The deletion policies a ManagedService on this plan may use.
    #[serde(default = "default_allowed_policies")]
    #[schemars(length(min = 1))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub allowed_deletion_policies: Vec<DeletionPolicy>,
    /// Backups of services on this plan.
    #[serde(default)]
    pub backup: PlanBackup,
    /// The `deletionProtection` of a ManagedService whose manifest leaves
    /// it out.
    #[serde(default)]
    pub default_deletion_protection: bool,
    /// Parameters applied where a ManagedService leaves them out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::free_form_object")]
    pub defaults: Option<serde_json::Value>,
}

fn default_allowed_policies() -> Vec<DeletionPolicy> {
    vec![DeletionPolicy::Retain]
}

/// Why a plan does not let a service use a deletion policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// Not in `allowedDeletionPolicies`.
    NotAllowed,
    /// `SnapshotAndDelete` on a plan whose backups are disabled.
    BackupsDisabled,
}

/// The plan rule, once for the webhook and the controller: a policy is
/// usable when `allowed` lists it, and `SnapshotAndDelete` only with
/// backups enabled.
pub fn plan_refusal(
    allowed: &[DeletionPolicy],
    backup_enabled: bool,
    policy: DeletionPolicy,
) -> Option<PolicyRefusal> {
    if !allowed.contains(&policy) {
        Some(PolicyRefusal::NotAllowed)
    } else if policy == DeletionPolicy::SnapshotAndDelete && !backup_enabled {
        Some(PolicyRefusal::BackupsDisabled)
    } else {
        None
    }
}

impl ServicePlanSpec {
    /// Why this plan refuses `policy`, if it does ([`plan_refusal`]).
    pub fn policy_refusal(&self, policy: DeletionPolicy) -> Option<PolicyRefusal> {
        plan_refusal(&self.allowed_deletion_policies, self.backup.enabled, policy)
    }

    /// The allowed deletion policies as a person reads them (the POLICIES
    /// column): `Retain, Delete`, in the plan's order, each once.
    pub fn policies_summary(&self) -> String {
        let mut seen: Vec<DeletionPolicy> = Vec::new();
        for policy in &self.allowed_deletion_policies {
            if !seen.contains(policy) {
                seen.push(*policy);
            }
        }
        seen.iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the service-lifecycle-controller reports of a plan.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServicePlanStatus {
    /// The generation `policies` was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `allowedDeletionPolicies`, comma-separated, for the POLICIES column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<String>,
}

/// A plan's backup settings.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanBackup {
    /// Whether backups (and so `SnapshotAndDelete`) work on this plan.
    #[serde(default)]
    pub enabled: bool,
    /// A cron schedule (UTC) for `Scheduled` backups of every Ready service
    /// of the plan, e.g. `0 3 * * *`; six fields start with seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long each `Scheduled` backup is kept once it has ended, as a
    /// duration such as `30d` or `720h` (its ServiceBackup's `spec.retention`);
    /// unset, until the Project goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::duration::PATTERN))]
    pub retention: Option<String>,
    /// The least proof of every final backup of the plan's services before
    /// their data is dropped (`Archive`, the default, or `Restore`); a
    /// service's `spec.finalBackup.verify` may ask for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_backup_verify: Option<BackupVerification>,
    /// pg_dump and pg_restore jobs for the final backups of the plan's
    /// services and for restores into them, 1 to 16. More than 1 dumps
    /// pg_dump's directory format in parallel (stored as one object per
    /// file) and restores it in parallel into a service that holds no
    /// data; it needs local disk on backup-runner for the uncompressed
    /// dump. Unset, backup-runner's `--jobs` (default 1: one stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16))]
    pub jobs: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_must_be_listed_and_snapshots_need_backups() {
        use DeletionPolicy::*;
        assert_eq!(plan_refusal(&[Retain, Delete], true, Delete), None);
        assert_eq!(
            plan_refusal(&[Retain], true, Delete),
            Some(PolicyRefusal::NotAllowed)
        );
        assert_eq!(
            plan_refusal(&[Delete], true, Retain),
            Some(PolicyRefusal::NotAllowed)
        );
        assert_eq!(
            plan_refusal(&[SnapshotAndDelete], false, SnapshotAndDelete),
            Some(PolicyRefusal::BackupsDisabled)
        );
        assert_eq!(
            plan_refusal(&[SnapshotAndDelete], true, SnapshotAndDelete),
            None
        );
    }

    #[test]
    fn policies_read_as_words_in_the_plans_order_each_once() {
        let plan: ServicePlanSpec = serde_json::from_value(serde_json::json!({
            "classRef": {"name": "postgresql"},
            "allowedDeletionPolicies": ["Retain", "SnapshotAndDelete", "Delete", "Retain"],
        }))
        .unwrap();
        assert_eq!(plan.policies_summary(), "Retain, SnapshotAndDelete, Delete");
        let default: ServicePlanSpec =
            serde_json::from_value(serde_json::json!({"classRef": {"name": "postgresql"}}))
                .unwrap();
        assert_eq!(default.policies_summary(), "Retain");
    }
}
