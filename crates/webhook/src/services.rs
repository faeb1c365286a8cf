//! The managed-service guard (`POST /validate/services`):
//!
//! - a delete of a ManagedService whose stored object has
//!   `spec.deletionProtection: true` is denied, unless its Project (the
//!   namespace) is being deleted: the protection covers deleting the service,
//!   not its Project;
//! - a ManagedService created, or updated with a new `spec.deletionPolicy`
//!   or `spec.planRef.name`, must name an existing ServicePlan that allows its
//!   policy (`Retain` when absent). Other updates are not checked, so that
//!   one a plan no longer allows can still turn protection off (the
//!   controller downgrades the policy at deletion);
//! - objects labelled `services.kube-dc.com/retained: "true"` cannot be
//!   changed or deleted by Project identities, and no Project identity may
//!   set that label (create an object with it, add or change it): only the
//!   platform marks objects retained;
//! - ServiceBackup records cannot be deleted or changed by Project
//!   identities, who may create `Manual` ones only, without
//!   `metadata.ownerReferences`;
//! - the garbage collector cannot delete a ServiceBackup record or a
//!   retained object unless its Project (the namespace) is being deleted.
//!   Neither has an owner, so the collector acting on one means a planted
//!   ownerReference: a side door through a trusted group, since the
//!   collector is a kube-system service account and so the provider.
//!
//! A Project identity is anyone in none of the provider groups; Kubernetes'
//! namespace controller and garbage collector are kube-system service
//! accounts, so a Project's deletion still removes its records and retained
//! objects.
//!
//! What the rules need to know of the cluster comes through [`Cluster`]; a
//! lookup that cannot be answered refuses the request
//! ([`Decision::Error`]) rather than allowing it.

use std::fmt;
use std::sync::Arc;

use kube::core::DynamicObject;
use kube::core::admission::Operation;
use navique_api::constants::{SERVICES_GROUP, annotations, labels};
use navique_api::messages;
use navique_api::services::{
    DeletionPolicy, Placement, PlacementMode, PolicyRefusal, PostgresParameters, ServicePlan,
};
use navique_provider_postgres::names;
use serde_json::Value;

use crate::review::{self, Decision, Request, Validator};

/// The path the managed-service guard is served on.
pub const PATH: &str = "/validate/services";
/// The path the managed-service defaults are served on (a mutating
/// webhook).
pub const DEFAULTS_PATH: &str = "/mutate/services";

/// The provider groups unless configured otherwise: cluster admins, the
/// operator's service accounts, and kube-system's (the namespace controller
/// and the garbage collector).
pub const DEFAULT_PROVIDER_GROUPS: [&str; 3] = [
    "system:masters",
    "system:serviceaccounts:navique-system",
    "system:serviceaccounts:kube-system",
];

/// The user kube-controller-manager's garbage collector acts as (with
/// `--use-service-account-credentials`, as kubeadm sets it).
const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

/// Why a lookup cannot be answered now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the guard reads of the cluster, from memory: implementations answer
/// from a cache, never with a request to the API server.
pub trait Cluster: Send + Sync + 'static {
    /// Whether the namespace is being deleted (has a deletionTimestamp). A
    /// namespace not known is not being deleted.
    fn namespace_terminating(&self, namespace: &str) -> Result<bool, Unavailable>;
    /// The ServicePlan of that name, if it exists.
    fn plan(&self, name: &str) -> Result<Option<Arc<ServicePlan>>, Unavailable>;
}

/// The cluster when the webhook has no connection to the API server: every
/// lookup fails, so requests that need one are refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCluster;

impl Cluster for NoCluster {
    fn namespace_terminating(&self, _: &str) -> Result<bool, Unavailable> {
        Err(not_connected())
    }

    fn plan(&self, _: &str) -> Result<Option<Arc<ServicePlan>>, Unavailable> {
        Err(not_connected())
    }
}

fn not_connected() -> Unavailable {
    Unavailable("the webhook is not connected to the API server".to_owned())
}

/// The managed-service guard.
#[derive(Clone)]
pub struct ServiceGuard {
    /// Members of any of these groups are the provider; everyone else is a
    /// Project identity.
    pub provider_groups: Vec<String>,
    pub cluster: Arc<dyn Cluster>,
}

impl fmt::Debug for ServiceGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceGuard")
            .field("provider_groups", &self.provider_groups)
            .finish_non_exhaustive()
    }
}

impl Validator for ServiceGuard {
    fn validate(&self, request: &Request) -> Decision {
        if matches!(request.operation, Operation::Connect) {
            return Decision::Allow;
        }
        if let Some(denial) = self
            .garbage_collection(request)
            .or_else(|| self.retained(request))
            .or_else(|| self.retained_label_set(request))
        {
            return denial;
        }
        let kind = &request.kind;
        if kind.group != SERVICES_GROUP {
            return Decision::Allow;
        }
        match kind.kind.as_str() {
            "ManagedService" => self.managed_service(request),
            "ServiceBackup" => self.backup(request),
            _ => Decision::Allow,
        }
    }
}

impl ServiceGuard {
    /// Whether the request comes from the provider.
    fn by_provider(&self, request: &Request) -> bool {
        request
            .user_info
            .groups
            .iter()
            .flatten()
            .any(|group| self.provider_groups.contains(group))
    }

    /// A Project identity changing or deleting a retained object: judged on
    /// the stored object, so that removing the label is a change too.
    fn retained(&self, request: &Request) -> Option<Decision> {
        if !matches!(request.operation, Operation::Delete | Operation::Update) {
            return None;
        }
        let old = request.old_object.as_ref()?;
        (is_retained(old) && !self.by_provider(request))
            .then(|| Decision::Deny(messages::RETAINED_OBJECT_PROTECTED.to_owned()))
    }

    /// A Project identity setting the retained label, on a new object or by
    /// adding or changing it (ownership by label): the marker would make
    /// the platform treat the object as a deleted service's data.
    fn retained_label_set(&self, request: &Request) -> Option<Decision> {
        let value = retained_label(request.object.as_ref()?)?;
        let set = match request.operation {
            Operation::Create => true,
            Operation::Update => {
                request.old_object.as_ref().and_then(retained_label) != Some(value)
            }
            Operation::Delete | Operation::Connect => false,
        };
        (set && !self.by_provider(request))
            .then(|| Decision::Deny(messages::RETAINED_LABEL_RESERVED.to_owned()))
    }

    /// The garbage collector deleting a ServiceBackup record or a retained
    /// object while its Project stays (side door, trusted group): these
    /// have no owner, so it can only be acting on a planted ownerReference.
    /// The namespace controller removes them with their Project.
    fn garbage_collection(&self, request: &Request) -> Option<Decision> {
        if !matches!(request.operation, Operation::Delete)
            || request.user_info.username.as_deref() != Some(GARBAGE_COLLECTOR)
        {
            return None;
        }
        let guarded = is_backup(request) || request.old_object.as_ref().is_some_and(is_retained);
        if !guarded {
            return None;
        }
        match self.project_terminating(request) {
            Ok(true) => None,
            Ok(false) => Some(Decision::Deny(
                messages::GARBAGE_COLLECTION_REFUSED.to_owned(),
            )),
            Err(refused) => Some(refused),
        }
    }

    /// Whether the request's namespace, its Project, is being deleted; the
    /// refusal when that cannot be looked up.
    fn project_terminating(&self, request: &Request) -> Result<bool, Decision> {
        let namespace = request
            .namespace
            .as_deref()
            .or_else(|| request.old_object.as_ref()?.metadata.namespace.as_deref())
            .unwrap_or_default();
        self.cluster
            .namespace_terminating(namespace)
            .map_err(|e| unavailable(&format!("namespace {namespace:?}"), &e))
    }

    fn managed_service(&self, request: &Request) -> Decision {
        if let Some(denial) = protection_denial(request)
            .or_else(|| restore_denial(request))
            .or_else(|| duration_denial(request, "spec.finalBackup.retention"))
        {
            return denial;
        }
        let (object, old) = match request.operation {
            Operation::Delete => return self.service_delete(request),
            Operation::Connect => return Decision::Allow,
            Operation::Create | Operation::Update => (&request.object, &request.old_object),
        };
        // `review::malformed` refuses a create or update without its object.
        let Some(object) = object else {
            return Decision::Allow;
        };
        let parameters = match parameters(object) {
            Ok(parameters) => parameters,
            Err(denial) => return denial,
        };
        // Parameters are checked when given or changed, so that an update
        // turning protection off is not refused for what it does not touch.
        let unchanged = old.as_ref().is_some_and(|old| {
            spec(old).and_then(|s| s.get("parameters"))
                == spec(object).and_then(|s| s.get("parameters"))
        });
        if !unchanged && let Some(denial) = parameters_denial(request, object, &parameters) {
            return denial;
        }
        let decision = match old {
            Some(old)
                if policy_value(object) == policy_value(old)
                    && plan_name(object) == plan_name(old) =>
            {
                Decision::Allow
            }
            _ => self.plan_allows(object),
        };
        // Said when it becomes true, not again on every later update (a
        // label, an annotation) of a service that already had it.
        let known = old
            .as_ref()
            .and_then(|old| Some(parameter_warnings(old, &self::parameters(old).ok()?)))
            .unwrap_or_default();
        let warnings: Vec<String> = parameter_warnings(object, &parameters)
            .into_iter()
            .filter(|w| !known.contains(w))
            .collect();
        match decision {
            Decision::Allow if !warnings.is_empty() => Decision::Warn(warnings),
            decision => decision,
        }
    }

    /// deletionProtection, read from the stored object (oldObject). Without
    /// one there is nothing to go by, so nothing can be allowed.
    fn service_delete(&self, request: &Request) -> Decision {
        let Some(old) = &request.old_object else {
            return review::delete_without_old_object();
        };
        // The schema requires a spec: an oldObject without one is not the
        // stored service, and cannot say that it is unprotected.
        let Some(spec) = spec(old) else {
            return Decision::Deny(messages::malformed_review(
                "the oldObject of a ManagedService DELETE has no spec",
            ));
        };
        let protected = spec
            .get("deletionProtection")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !protected {
            // What the delete will do, and what it waits for, in kubectl's
            // output, not only in the status afterwards.
            let policy = spec
                .get("deletionPolicy")
                .and_then(|p| serde_json::from_value::<DeletionPolicy>(p.clone()).ok())
                .unwrap_or_default();
            let name = old.metadata.name.as_deref().unwrap_or_default();
            let confirmed = old
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::CONFIRM_DELETE))
                .is_some_and(|value| value == name);
            return Decision::Warn(vec![messages::deletion_warning(policy, name, confirmed)]);
        }
        match self.project_terminating(request) {
            // The Project is going: the protection does not cover that.
            Ok(true) => Decision::Allow,
            Ok(false) => Decision::Deny(messages::DELETION_PROTECTION_ENABLED.to_owned()),
            Err(refused) => refused,
        }
    }

    /// The plan exists and allows the object's deletion policy.
    fn plan_allows(&self, object: &DynamicObject) -> Decision {
        let policy = match policy_value(object) {
            None | Some(Value::Null) => DeletionPolicy::default(),
            Some(value) => match serde_json::from_value::<DeletionPolicy>(value.clone()) {
                Ok(policy) => policy,
                Err(_) => {
                    return Decision::Deny(messages::deletion_policy_unknown(&value.to_string()));
                }
            },
        };
        // The CRD schema requires the name; without one there is no plan.
        let name = plan_name(object).unwrap_or_default();
        match self.cluster.plan(name) {
            Ok(Some(plan)) => match plan.spec.policy_refusal(policy) {
                None => Decision::Allow,
                Some(PolicyRefusal::NotAllowed) => {
                    Decision::Deny(messages::deletion_policy_not_allowed(
                        policy,
                        name,
                        &plan.spec.allowed_deletion_policies,
                    ))
                }
                // The CRD's rule keeps such a plan out; refused if one is read.
                Some(PolicyRefusal::BackupsDisabled) => {
                    Decision::Deny(messages::plan_backups_disabled(name))
                }
            },
            Ok(None) => Decision::Deny(messages::service_plan_not_found(name)),
            Err(e) => unavailable(&format!("ServicePlan {name:?}"), &e),
        }
    }

    fn backup(&self, request: &Request) -> Decision {
        if let Some(denial) = duration_denial(request, "spec.retention") {
            return denial;
        }
        if self.by_provider(request) {
            return Decision::Allow;
        }
        match request.operation {
            Operation::Delete => Decision::Deny(messages::BACKUP_RECORD_PROTECTED.to_owned()),
            Operation::Update => Decision::Deny(messages::BACKUP_RECORD_READ_ONLY.to_owned()),
            Operation::Create => {
                let owned = request
                    .object
                    .as_ref()
                    .and_then(|o| o.metadata.owner_references.as_ref())
                    .is_some_and(|owners| !owners.is_empty());
                if owned {
                    // An owner's deletion would have the garbage collector
                    // delete the record (side door).
                    return Decision::Deny(messages::BACKUP_RECORD_OWNER_REFERENCES.to_owned());
                }
                let origin = request
                    .object
                    .as_ref()
                    .and_then(spec)
                    .and_then(|s| s.get("origin"));
                match origin {
                    None | Some(Value::Null) => Decision::Allow,
                    Some(Value::String(origin)) if origin == "Manual" => Decision::Allow,
                    Some(_) => Decision::Deny(messages::BACKUP_ORIGIN_RESERVED.to_owned()),
                }
            }
            Operation::Connect => Decision::Allow,
        }
    }
}

/// A `spec.deletionProtection` that is not a boolean, on the object written
/// or the stored one (fail open: read as false, it let protected services
/// go). The CRD schema refuses one; a stored object from before it did, or
/// a review that was tampered with, is refused here.
fn protection_denial(request: &Request) -> Option<Decision> {
    [&request.object, &request.old_object]
        .into_iter()
        .flatten()
        .find_map(|object| {
            let value = spec(object)?.get("deletionProtection")?;
            (!value.is_boolean() && !value.is_null()).then(|| {
                Decision::Deny(messages::not_a_boolean(
                    "spec.deletionProtection",
                    &value.to_string(),
                ))
            })
        })
}

/// The object's `spec.parameters`, read as the PostgreSQL class's; the
/// refusal when they do not read (the CRD schema refuses such parameters
/// first).
fn parameters(object: &DynamicObject) -> Result<PostgresParameters, Decision> {
    match spec(object).and_then(|s| s.get("parameters")) {
        None | Some(Value::Null) => Ok(PostgresParameters::default()),
        Some(given) => serde_json::from_value(given.clone())
            .map_err(|e| Decision::Deny(messages::parameters_unreadable(&e.to_string()))),
    }
}

/// What the schema cannot check of the parameters: the database and owner
/// names PostgreSQL and the shared server take (the checks the controller
/// makes), the storage size and the setting names.
fn parameters_denial(
    request: &Request,
    object: &DynamicObject,
    parameters: &PostgresParameters,
) -> Option<Decision> {
    let service = if request.name.is_empty() {
        object.metadata.name.as_deref().unwrap_or_default()
    } else {
        request.name.as_str()
    };
    let problem = match names::requested(service, Some(parameters)) {
        Err(e) => e.to_string(),
        Ok(_) => match parameters.storage_bytes() {
            Err(e) => e.to_string(),
            Ok(_) => parameters.server_settings().err()?.to_string(),
        },
    };
    Some(Decision::Deny(problem))
}

/// The parameters a service's placement does not apply, and the fields
/// this version does not apply at all, as admission warnings: never taken
/// silently.
fn parameter_warnings(object: &DynamicObject, parameters: &PostgresParameters) -> Vec<String> {
    let inert: Vec<&str> = [
        (
            spec(object).is_some_and(|s| !s.get("connectivity").is_none_or(Value::is_null)),
            "spec.connectivity",
        ),
        (
            parameters.readonly_role.is_some(),
            "spec.parameters.readonlyRole",
        ),
        (parameters.backup.is_some(), "spec.parameters.backup"),
    ]
    .into_iter()
    .filter_map(|(given, field)| given.then_some(field))
    .collect();
    let mut warnings = placement_warnings(object, parameters);
    if !inert.is_empty() {
        warnings.push(messages::not_applied_yet(&inert));
    }
    warnings
}

fn placement_warnings(object: &DynamicObject, parameters: &PostgresParameters) -> Vec<String> {
    let mode = spec(object)
        .and_then(|s| s.get("placement"))
        .and_then(|p| serde_json::from_value::<Placement>(p.clone()).ok())
        .unwrap_or_default()
        .mode;
    match mode {
        PlacementMode::ProviderShared => {
            let settings = parameters
                .postgresql
                .as_ref()
                .is_some_and(|p| !p.parameters.is_empty());
            let fields: Vec<&str> = [
                (parameters.storage.is_some(), "spec.parameters.storage"),
                (parameters.instances.is_some(), "spec.parameters.instances"),
                (settings, "spec.parameters.postgresql.parameters"),
            ]
            .into_iter()
            .filter_map(|(given, field)| given.then_some(field))
            .collect();
            if fields.is_empty() {
                Vec::new()
            } else {
                vec![messages::parameters_not_applied_shared(&fields)]
            }
        }
        PlacementMode::InProject if parameters.instances.is_some_and(|n| n > 1) => {
            vec![messages::INSTANCES_NOT_APPLIED.to_owned()]
        }
        PlacementMode::InProject => Vec::new(),
    }
}

/// A duration at `field` (a dotted path from the object's root) that the
/// schema's pattern admits but the API does not take, such as `0s`.
fn duration_denial(request: &Request, field: &'static str) -> Option<Decision> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return None;
    }
    let pointer = format!("/{}", field.replace('.', "/"));
    let text = request.object.as_ref()?.data.pointer(&pointer)?.as_str()?;
    navique_api::duration::parse(field, text)
        .err()
        .map(|e| Decision::Deny(e.to_string()))
}

/// A restore the guide refuses: from another Project, or in place (an
/// existing service whose `spec.restoreFrom` is set or changed) while the
/// service is protected, since it replaces the service's data.
fn restore_denial(request: &Request) -> Option<Decision> {
    let object = request.object.as_ref()?;
    let restore = spec(object)?.get("restoreFrom").filter(|r| !r.is_null())?;
    let namespace = request
        .namespace
        .as_deref()
        .or(object.metadata.namespace.as_deref())
        .unwrap_or_default();
    if let Some(other) = restore
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| *n != namespace)
    {
        return Some(Decision::Deny(messages::restore_from_another_project(
            other,
        )));
    }
    let old = request.old_object.as_ref()?;
    let previous = spec(old).and_then(|s| s.get("restoreFrom"));
    let protected = spec(object)
        .and_then(|s| s.get("deletionProtection"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (previous != Some(restore) && protected)
        .then(|| Decision::Deny(messages::IN_PLACE_RESTORE_PROTECTED.to_owned()))
}

/// The managed-service defaults (`POST /mutate/services`): a ManagedService
/// created or updated without `spec.deletionProtection` gets its plan's
/// `defaultDeletionProtection`, so that the stored object, which the delete
/// check reads, always says whether it is protected. A plan that does not
/// exist gives `false` (the guard refuses such a service anyway).
#[derive(Clone)]
pub struct ServiceDefaults {
    pub cluster: Arc<dyn Cluster>,
}

impl Validator for ServiceDefaults {
    fn validate(&self, request: &Request) -> Decision {
        let kind = &request.kind;
        if kind.group != SERVICES_GROUP
            || kind.kind != "ManagedService"
            || !matches!(request.operation, Operation::Create | Operation::Update)
        {
            return Decision::Allow;
        }
        let Some(object) = &request.object else {
            return Decision::Allow;
        };
        let given = spec(object)
            .and_then(|s| s.get("deletionProtection"))
            .is_some_and(|v| !v.is_null());
        if given {
            return Decision::Allow;
        }
        let name = plan_name(object).unwrap_or_default();
        let protected = match self.cluster.plan(name) {
            Ok(plan) => plan.is_some_and(|p| p.spec.default_deletion_protection),
            Err(e) => return unavailable(&format!("ServicePlan {name:?}"), &e),
        };
        Decision::Patch(vec![serde_json::json!({
            "op": "add",
            "path": "/spec/deletionProtection",
            "value": protected,
        })])
    }
}

fn unavailable(what: &str, reason: &Unavailable) -> Decision {
    Decision::Error(format!(
        "cannot look up {what}: {reason}; the request is refused until it can be checked"
    ))
}

fn is_backup(request: &Request) -> bool {
    request.kind.group == SERVICES_GROUP && request.kind.kind == "ServiceBackup"
}

fn retained_label(object: &DynamicObject) -> Option<&str> {
    object
        .metadata
        .labels
        .as_ref()?
        .get(labels::RETAINED)
        .map(String::as_str)
}

/// Whether the object is marked retained (only `"true"` marks it, as the
/// webhook configuration's objectSelector and the controller read it).
fn is_retained(object: &DynamicObject) -> bool {
    retained_label(object) == Some("true")
}

fn spec(object: &DynamicObject) -> Option<&serde_json::Map<String, Value>> {
    object.data.get("spec")?.as_object()
}

fn policy_value(object: &DynamicObject) -> Option<&Value> {
    spec(object)?.get("deletionPolicy")
}

fn plan_name(object: &DynamicObject) -> Option<&str> {
    spec(object)?.get("planRef")?.get("name")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review;
    use navique_api::services::{NameRef, PlanBackup, ServicePlanSpec};
    use serde_json::json;
    use std::collections::{BTreeMap, BTreeSet};

    /// A cluster from fixtures.
    #[derive(Default)]
    struct Fake {
        terminating: BTreeSet<String>,
        plans: BTreeMap<String, Arc<ServicePlan>>,
    }

    impl Cluster for Fake {
        fn namespace_terminating(&self, namespace: &str) -> Result<bool, Unavailable> {
            Ok(self.terminating.contains(namespace))
        }

        fn plan(&self, name: &str) -> Result<Option<Arc<ServicePlan>>, Unavailable> {
            Ok(self.plans.get(name).cloned())
        }
    }

    fn plan(name: &str, allowed: &[DeletionPolicy]) -> (String, Arc<ServicePlan>) {
        let spec = ServicePlanSpec {
            class_ref: NameRef {
                name: "postgresql".to_owned(),
            },
            description: None,
            allowed_deletion_policies: allowed.to_vec(),
            backup: PlanBackup {
                enabled: true,
                schedule: None,
                retention: None,
                final_backup_verify: None,
                jobs: None,
            },
            defaults: None,
            // The HA plan protects by default.
            default_deletion_protection: name == "postgresql-platform-ha",
        };
        (name.to_owned(), Arc::new(ServicePlan::new(name, spec)))
    }

    /// `postgresql-platform-ha` allows Retain and SnapshotAndDelete;
    /// `postgresql-dev` allows all three.
    fn cluster() -> Fake {
        use DeletionPolicy::*;
        Fake {
            terminating: BTreeSet::new(),
            plans: BTreeMap::from([
                plan("postgresql-platform-ha", &[Retain, SnapshotAndDelete]),
                plan("postgresql-dev", &[Retain, SnapshotAndDelete, Delete]),
            ]),
        }
    }

    fn guard_with(cluster: impl Cluster) -> ServiceGuard {
        ServiceGuard {
            provider_groups: DEFAULT_PROVIDER_GROUPS.map(str::to_owned).to_vec(),
            cluster: Arc::new(cluster),
        }
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn decide_with(guard: &ServiceGuard, name: &str, edit: impl FnOnce(&mut Value)) -> Decision {
        let mut review = fixture(name);
        edit(&mut review);
        let request = review::parse(review.to_string().as_bytes()).unwrap();
        guard.validate(&request)
    }

    fn decide(name: &str, edit: impl FnOnce(&mut Value)) -> Decision {
        decide_with(&guard_with(cluster()), name, edit)
    }

    fn denied(message: &str) -> Decision {
        Decision::Deny(message.to_owned())
    }

    fn as_user(user: &str, groups: &[&str]) -> impl FnOnce(&mut Value) {
        let (user, groups) = (json!(user), json!(groups));
        move |r| {
            r["request"]["userInfo"]["username"] = user;
            r["request"]["userInfo"]["groups"] = groups;
        }
    }

    /// An ownerReference to a ConfigMap of the Project.
    fn configmap_owner() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "anchor",
            "uid": "5c0ffee0-0000-4000-8000-000000000001"
        })
    }

    const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";
    const KUBE_SYSTEM_SAS: [&str; 3] = [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ];

    // --- deletionProtection ---

    #[test]
    fn deleting_a_protected_service_is_denied_with_the_seed_message() {
        assert_eq!(
            decide("delete-protected-service", |_| {}),
            denied(messages::DELETION_PROTECTION_ENABLED)
        );
        assert_eq!(
            decide("delete-protected-service", |_| {}),
            denied(
                "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
            )
        );
    }

    #[test]
    fn the_provider_cannot_delete_a_protected_service_either() {
        let decision = decide(
            "delete-protected-service",
            as_user(
                "kubernetes-admin",
                &["system:masters", "system:authenticated"],
            ),
        );
        assert_eq!(decision, denied(messages::DELETION_PROTECTION_ENABLED));
    }

    #[test]
    fn deleting_an_unprotected_service_is_allowed_without_a_lookup() {
        let guard = guard_with(NoCluster);
        for protection in [json!(false), Value::Null] {
            let decision = decide_with(&guard, "delete-protected-service", |r| {
                let spec = r["request"]["oldObject"]["spec"].as_object_mut().unwrap();
                match protection {
                    Value::Null => spec.remove("deletionProtection"),
                    value => spec.insert("deletionProtection".to_owned(), value),
                };
            });
            assert!(decision.is_allowed(), "{decision:?}");
        }
    }

    #[test]
    fn a_delete_warns_what_it_will_do_and_what_it_waits_for() {
        let guard = guard_with(NoCluster);
        let warning = |policy: &str, confirmation: Option<&str>| {
            decide_with(&guard, "delete-protected-service", |r| {
                let old = &mut r["request"]["oldObject"];
                old["spec"]["deletionProtection"] = json!(false);
                old["spec"]["deletionPolicy"] = json!(policy);
                old["metadata"]["annotations"] = match confirmation {
                    Some(value) => json!({"services.kube-dc.com/confirm-delete": value}),
                    None => json!({}),
                };
            })
        };
        let name = "orders-db";
        assert_eq!(
            warning("Delete", None),
            Decision::Warn(vec![format!(
                "deletionPolicy Delete: nothing is removed until you annotate services.kube-dc.com/confirm-delete={name}"
            )])
        );
        assert_eq!(
            warning("Delete", Some("orders")),
            warning("Delete", None),
            "another value confirms nothing"
        );
        assert_eq!(
            warning("Delete", Some(name)),
            Decision::Warn(vec!["deletionPolicy Delete: the engine and its data volumes are removed, and the data is lost, except in earlier backups".to_owned()])
        );
        assert_eq!(
            warning("Retain", None),
            Decision::Warn(vec!["deletionPolicy Retain: the engine, its data volumes and credential Secrets stay in the Project until your provider removes them".to_owned()])
        );
    }

    /// A plan stored with backups disabled (which its CRD rule prevents)
    /// lets no service ask for SnapshotAndDelete.
    #[test]
    fn a_snapshot_on_a_plan_without_backups_is_refused() {
        let mut cluster = cluster();
        let (name, mut plan) = plan("no-backups", &[DeletionPolicy::SnapshotAndDelete]);
        Arc::make_mut(&mut plan).spec.backup.enabled = false;
        cluster.plans.insert(name, plan);
        let decision = decide_with(&guard_with(cluster), "create-service", |r| {
            r["request"]["object"]["spec"]["planRef"]["name"] = json!("no-backups");
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("SnapshotAndDelete");
        });
        assert_eq!(
            decision,
            denied(
                "spec.deletionPolicy: SnapshotAndDelete needs backups, which plan no-backups has disabled"
            )
        );
    }

    #[test]
    fn a_protected_service_goes_with_its_terminating_project() {
        let mut cluster = cluster();
        cluster.terminating.insert("shop".to_owned());
        let guard = guard_with(cluster);
        assert_eq!(
            decide_with(
                &guard,
                "delete-protected-service",
                as_user(NAMESPACE_CONTROLLER, &KUBE_SYSTEM_SAS)
            ),
            Decision::Allow
        );
        // Whoever deletes it: the Project is going.
        assert_eq!(
            decide_with(&guard, "delete-protected-service", |_| {}),
            Decision::Allow
        );
        // Another namespace being deleted does not help.
        let decision = decide_with(&guard, "delete-protected-service", |r| {
            r["request"]["namespace"] = json!("orders");
        });
        assert_eq!(decision, denied(messages::DELETION_PROTECTION_ENABLED));
    }

    #[test]
    fn a_protected_delete_without_a_cluster_fails_closed() {
        let decision = decide_with(&guard_with(NoCluster), "delete-protected-service", |_| {});
        assert_eq!(
            decision,
            Decision::Error(
                "cannot look up namespace \"shop\": the webhook is not connected to the API server; the request is refused until it can be checked"
                    .to_owned()
            )
        );
        assert!(!decision.is_allowed());
    }

    // --- malformed reviews (fail open: each of these was allowed) ---

    /// Decides a fixture the way the server does: malformed reviews are
    /// refused before the guard.
    fn served(name: &str, edit: impl FnOnce(&mut Value)) -> Decision {
        let mut review = fixture(name);
        edit(&mut review);
        let request = review::parse(review.to_string().as_bytes()).unwrap();
        review::decide(&guard_with(cluster()), &request)
    }

    #[test]
    fn a_delete_without_the_old_object_is_denied() {
        let without_old = |r: &mut Value| r["request"]["oldObject"] = Value::Null;
        let refusal = denied(
            "malformed admission request: a DELETE without oldObject; the request is refused",
        );
        assert_eq!(served("delete-protected-service", without_old), refusal);
        // The guard alone refuses it too.
        assert_eq!(decide("delete-protected-service", without_old), refusal);
    }

    #[test]
    fn a_spec_that_is_not_an_object_is_denied() {
        assert_eq!(
            served("delete-protected-service", |r| {
                r["request"]["oldObject"]["spec"] = json!("zzz");
            }),
            denied(
                "malformed admission request: oldObject.spec is \"zzz\", not an object; the request is refused"
            )
        );
        assert_eq!(
            served("create-service", |r| r["request"]["object"]["spec"] =
                json!([1])),
            denied(
                "malformed admission request: object.spec is [1], not an object; the request is refused"
            )
        );
        assert_eq!(
            served("create-service", |r| r["request"]["object"] = Value::Null),
            denied("malformed admission request: a CREATE without object; the request is refused")
        );
        assert_eq!(
            served(
                "update-service-protection-off",
                |r| r["request"]["oldObject"] = Value::Null
            ),
            denied(
                "malformed admission request: an UPDATE without oldObject; the request is refused"
            )
        );
    }

    #[test]
    fn a_service_delete_without_a_spec_is_denied() {
        // Found by fuzzing: `oldObject: {}` read as unprotected.
        assert_eq!(
            served("delete-protected-service", |r| r["request"]["oldObject"] =
                json!({})),
            denied(
                "malformed admission request: the oldObject of a ManagedService DELETE has no spec; the request is refused"
            )
        );
    }

    #[test]
    fn a_protection_that_is_not_a_boolean_is_denied() {
        for value in [json!("true"), json!("false"), json!(1), json!({})] {
            let message = format!("spec.deletionProtection: must be true or false, not {value}");
            let on_delete = decide("delete-protected-service", |r| {
                r["request"]["oldObject"]["spec"]["deletionProtection"] = value.clone();
            });
            assert_eq!(on_delete, denied(&message), "{value}");
            let on_create = decide("create-service", |r| {
                r["request"]["object"]["spec"]["deletionProtection"] = value.clone();
                r["request"]["object"]["spec"]["deletionPolicy"] = json!("Retain");
            });
            assert_eq!(on_create, denied(&message), "{value}");
        }
    }

    // --- parameters ---

    fn create_with(placement: &str, parameters: Value) -> Decision {
        decide("create-service", |r| {
            let spec = &mut r["request"]["object"]["spec"];
            spec["deletionPolicy"] = json!("Retain");
            spec["placement"]["mode"] = json!(placement);
            spec["parameters"] = parameters;
        })
    }

    #[test]
    fn parameters_the_schema_admits_but_the_engine_does_not_take_are_refused() {
        // Fail open: these sizes went into the data volume's claim.
        for size in ["-10Gi", "0", "1e400Gi", "big"] {
            assert_eq!(
                create_with("InProject", json!({"storage": {"size": size}})),
                denied(&format!(
                    "spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not {size:?}"
                )),
                "{size}"
            );
        }
        assert_eq!(
            create_with("InProject", json!({"storage": {"size": "100Ti"}})),
            denied("spec.parameters.storage.size: must be at most 64Ti, not \"100Ti\"")
        );
        assert_eq!(
            create_with("ProviderShared", json!({"database": "Orders"})),
            denied(
                "spec.parameters.database: invalid database name \"Orders\": may hold only lowercase letters, digits and \"_\", not 'O'"
            )
        );
        assert_eq!(
            create_with("InProject", json!({"owner": "a__b"})),
            denied(
                "spec.parameters.owner: invalid role name \"a__b\": must neither start with \"_\" nor hold \"__\" (the server's names are <project>__<name>)"
            )
        );
        assert_eq!(
            create_with(
                "InProject",
                json!({"postgresql": {"parameters": {"a=b -c x": "1"}}})
            ),
            denied(
                "spec.parameters.postgresql.parameters: \"a=b -c x\" is not a PostgreSQL setting name"
            )
        );
        // Types are the schema's; a review that slipped past it is refused.
        let Decision::Deny(message) = create_with("InProject", json!({"instances": "two"})) else {
            panic!("allowed")
        };
        assert!(
            message.starts_with("spec.parameters: invalid type"),
            "{message}"
        );
        // A service named so that its default database name is invalid.
        let decision = decide("create-service", |r| {
            r["request"]["name"] = json!("1st-db");
            r["request"]["object"]["metadata"]["name"] = json!("1st-db");
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("Retain");
        });
        assert_eq!(
            decision,
            denied(
                "spec.parameters.database: invalid database name \"1st_db\": must not start with a digit"
            )
        );
    }

    #[test]
    fn good_parameters_are_allowed() {
        let seed = json!({
            "database": "orders", "owner": "orders", "instances": 1,
            "storage": {"size": "10Gi"}, "readonlyRole": true, "backup": {"enabled": true},
            "postgresql": {"parameters": {"work_mem": "8MB", "max_connections": 50}},
        });
        assert_eq!(
            create_with("InProject", seed),
            Decision::Warn(vec![
                "spec.parameters.readonlyRole, spec.parameters.backup are not applied by this version: they are accepted, and do nothing (backups follow the plan's backup.enabled)".to_owned()
            ])
        );
        let effective = json!({
            "database": "orders", "owner": "orders", "instances": 1, "storage": {"size": "10Gi"},
            "postgresql": {"parameters": {"work_mem": "8MB", "max_connections": 50}},
        });
        assert_eq!(create_with("InProject", effective), Decision::Allow);
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["connectivity"] =
                json!({"classRef": {"name": "tenant-native"}});
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("Retain");
        });
        assert_eq!(
            decision,
            Decision::Warn(vec![
                "spec.connectivity is not applied by this version: it is accepted, and does nothing (backups follow the plan's backup.enabled)".to_owned()
            ])
        );
    }

    #[test]
    fn parameters_a_shared_service_does_not_apply_are_warned_about() {
        // The seed's orders-db: ProviderShared, with storage and instances.
        let seed = json!({
            "database": "orders", "owner": "orders", "instances": 2,
            "storage": {"size": "10Gi"}, "readonlyRole": true, "backup": {"enabled": true},
            "postgresql": {"parameters": {"work_mem": "8MB"}},
        });
        assert_eq!(
            create_with("ProviderShared", seed),
            Decision::Warn(vec![
                "spec.parameters.storage, spec.parameters.instances, spec.parameters.postgresql.parameters are not applied to ProviderShared services: the service is a database on the provider's server, which the provider sizes and configures".to_owned(),
                "spec.parameters.readonlyRole, spec.parameters.backup are not applied by this version: they are accepted, and do nothing (backups follow the plan's backup.enabled)".to_owned()
            ])
        );
        assert_eq!(
            create_with("ProviderShared", json!({"database": "orders", "storage": {"size": "1Gi"}})),
            Decision::Warn(vec![
                "spec.parameters.storage is not applied to ProviderShared services: the service is a database on the provider's server, which the provider sizes and configures".to_owned()
            ])
        );
        assert_eq!(
            create_with("InProject", json!({"instances": 3})),
            Decision::Warn(vec![messages::INSTANCES_NOT_APPLIED.to_owned()])
        );
        assert_eq!(
            create_with("ProviderShared", json!({"database": "orders"})),
            Decision::Allow
        );
        // A denial is not turned into a warning.
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["parameters"] = json!({"instances": 3});
        });
        assert!(matches!(decision, Decision::Deny(_)), "{decision:?}");
    }

    /// A warning is given once, when it becomes true: not on each later
    /// update of a service that already had it.
    #[test]
    fn a_parameter_warning_is_not_repeated_on_every_update() {
        let shared = |r: &mut Value, side: &str, parameters: Value| {
            r["request"][side]["spec"]["placement"]["mode"] = json!("ProviderShared");
            r["request"][side]["spec"]["parameters"] = parameters;
        };
        let decision = decide("update-service-protection-off", |r| {
            shared(r, "object", json!({"storage": {"size": "1Gi"}}));
            shared(r, "oldObject", json!({"storage": {"size": "1Gi"}}));
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("update-service-protection-off", |r| {
            shared(
                r,
                "object",
                json!({"storage": {"size": "1Gi"}, "instances": 2}),
            );
            shared(r, "oldObject", json!({"storage": {"size": "1Gi"}}));
        });
        assert_eq!(
            decision,
            Decision::Warn(vec![messages::parameters_not_applied_shared(&[
                "spec.parameters.storage",
                "spec.parameters.instances"
            ])])
        );
        // Moved to ProviderShared: said then.
        let decision = decide("update-service-protection-off", |r| {
            shared(r, "object", json!({"storage": {"size": "1Gi"}}));
            r["request"]["oldObject"]["spec"]["parameters"] = json!({"storage": {"size": "1Gi"}});
        });
        assert!(matches!(decision, Decision::Warn(_)), "{decision:?}");
    }

    #[test]
    fn unchanged_parameters_do_not_block_turning_protection_off() {
        let decision = decide("update-service-protection-off", |r| {
            r["request"]["object"]["spec"]["parameters"] = json!({"storage": {"size": "0"}});
            r["request"]["oldObject"]["spec"]["parameters"] = json!({"storage": {"size": "0"}});
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("update-service-protection-off", |r| {
            r["request"]["object"]["spec"]["parameters"] = json!({"storage": {"size": "0"}});
        });
        assert_eq!(
            decision,
            denied(
                "spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not \"0\""
            )
        );
    }

    // --- fuzzing ---

    /// Arbitrary JSON, a few levels deep.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-zA-Z0-9 ./_-]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Fuzzing (fail open): a DELETE of a protected ManagedService with
        /// any part of its review replaced by arbitrary JSON is never
        /// allowed: it is denied, refused, or not a review at all.
        #[test]
        fn a_protected_delete_is_never_allowed_whatever_the_junk(
            pointer in proptest::sample::select(vec![
                "/request/oldObject", "/request/oldObject/spec",
                "/request/oldObject/metadata", "/request/oldObject/metadata/annotations",
                "/request/oldObject/metadata/labels", "/request/object",
                "/request/userInfo", "/request/namespace", "/request/operation",
                "/request/kind", "/request/name", "/request/options",
            ]),
            junk in any_json(),
        ) {
            let mut review = fixture("delete-protected-service");
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            review.pointer_mut(parent).unwrap()[key] = junk;
            let Ok(request) = review::parse(review.to_string().as_bytes()) else {
                return Ok(());
            };
            let decision = review::decide(&guard_with(cluster()), &request);
            let a_service_delete = request.operation == Operation::Delete
                && request.kind.group == SERVICES_GROUP
                && request.kind.kind == "ManagedService";
            // Allowed only for a stored object that reads as unprotected:
            // a spec without deletionProtection, or with it false.
            let unprotected = request.old_object.as_ref().and_then(spec).is_some_and(|s| {
                matches!(s.get("deletionProtection"), None | Some(Value::Null | Value::Bool(false)))
            });
            if a_service_delete && !unprotected {
                proptest::prop_assert!(!decision.is_allowed(), "{pointer}: {decision:?}");
            }
        }

        /// Fuzzing: any spec on a create is decided without a panic.
        #[test]
        fn any_service_spec_is_decided(junk in any_json()) {
            let mut review = fixture("create-service");
            review["request"]["object"]["spec"] = junk;
            if let Ok(request) = review::parse(review.to_string().as_bytes()) {
                let _ = review::decide(&guard_with(cluster()), &request);
                let _ = review::decide(&ServiceDefaults { cluster: Arc::new(cluster()) }, &request);
            }
        }
    }

    // --- plan-allowed deletion policies ---

    #[test]
    fn creating_with_a_policy_the_plan_does_not_allow_is_denied() {
        assert_eq!(
            decide("create-service", |_| {}),
            denied(
                "spec.deletionPolicy: Delete is not allowed by plan postgresql-platform-ha; allowed: Retain, SnapshotAndDelete"
            )
        );
    }

    #[test]
    fn creating_with_an_allowed_policy_is_allowed() {
        for policy in ["Retain", "SnapshotAndDelete"] {
            let decision = decide("create-service", |r| {
                r["request"]["object"]["spec"]["deletionPolicy"] = json!(policy);
            });
            assert_eq!(decision, Decision::Allow, "{policy}");
        }
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["planRef"]["name"] = json!("postgresql-dev");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn an_absent_policy_is_retain() {
        let (name, retain_less) = plan("snapshots-only", &[DeletionPolicy::SnapshotAndDelete]);
        let mut cluster = cluster();
        cluster.plans.insert(name, retain_less);
        let guard = guard_with(cluster);
        let without_policy = |plan: &'static str| {
            move |r: &mut Value| {
                let spec = r["request"]["object"]["spec"].as_object_mut().unwrap();
                spec.remove("deletionPolicy");
                spec.insert("planRef".to_owned(), json!({"name": plan}));
            }
        };
        assert_eq!(
            decide_with(
                &guard,
                "create-service",
                without_policy("postgresql-platform-ha")
            ),
            Decision::Allow
        );
        assert_eq!(
            decide_with(&guard, "create-service", without_policy("snapshots-only")),
            denied(
                "spec.deletionPolicy: Retain is not allowed by plan snapshots-only; allowed: SnapshotAndDelete"
            )
        );
    }

    #[test]
    fn creating_on_a_plan_that_does_not_exist_is_denied() {
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["planRef"]["name"] = json!("postgresql-gone");
        });
        assert_eq!(
            decision,
            denied("spec.planRef.name: ServicePlan \"postgresql-gone\" not found")
        );
    }

    #[test]
    fn the_provider_is_held_to_the_plan_too() {
        let decision = decide(
            "create-service",
            as_user("kubernetes-admin", &["system:masters"]),
        );
        assert!(matches!(decision, Decision::Deny(_)), "{decision:?}");
    }

    #[test]
    fn an_unknown_policy_is_denied() {
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("Shred");
        });
        assert_eq!(
            decision,
            denied(
                "spec.deletionPolicy: unknown policy \"Shred\"; allowed: Retain, SnapshotAndDelete, Delete"
            )
        );
    }

    #[test]
    fn a_create_without_a_cluster_fails_closed() {
        assert_eq!(
            decide_with(&guard_with(NoCluster), "create-service", |_| {}),
            Decision::Error(
                "cannot look up ServicePlan \"postgresql-platform-ha\": the webhook is not connected to the API server; the request is refused until it can be checked"
                    .to_owned()
            )
        );
    }

    #[test]
    fn an_unrelated_update_passes_even_when_the_plan_no_longer_allows_the_policy() {
        // The fixture's service has deletionPolicy Delete on
        // postgresql-platform-ha, which does not allow it (any more).
        assert_eq!(
            decide("update-service-protection-off", |_| {}),
            Decision::Allow
        );
        // Even with the cluster out of reach: nothing to look up.
        assert_eq!(
            decide_with(
                &guard_with(NoCluster),
                "update-service-protection-off",
                |_| {}
            ),
            Decision::Allow
        );
    }

    #[test]
    fn changing_the_policy_to_one_the_plan_does_not_allow_is_denied() {
        let decision = decide("update-service-protection-off", |r| {
            r["request"]["oldObject"]["spec"]["deletionPolicy"] = json!("Retain");
        });
        assert_eq!(
            decision,
            denied(
                "spec.deletionPolicy: Delete is not allowed by plan postgresql-platform-ha; allowed: Retain, SnapshotAndDelete"
            )
        );
        // Spelling out the default is no change.
        let decision = decide("update-service-protection-off", |r| {
            for object in ["object", "oldObject"] {
                r["request"][object]["spec"]["deletionPolicy"] = json!("Retain");
            }
            r["request"]["oldObject"]["spec"]
                .as_object_mut()
                .unwrap()
                .remove("deletionPolicy");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn changing_the_policy_to_an_allowed_one_is_allowed() {
        let decision = decide("update-service-protection-off", |r| {
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("SnapshotAndDelete");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn changing_the_plan_checks_the_new_plan() {
        let to_plan = |plan: &'static str| {
            move |r: &mut Value| {
                r["request"]["object"]["spec"]["planRef"]["name"] = json!(plan);
            }
        };
        assert_eq!(
            decide("update-service-protection-off", to_plan("postgresql-dev")),
            Decision::Allow
        );
        assert_eq!(
            decide("update-service-protection-off", to_plan("postgresql-gone")),
            denied("spec.planRef.name: ServicePlan \"postgresql-gone\" not found")
        );
        let decision = decide("update-service-protection-off", |r| {
            r["request"]["oldObject"]["spec"]["planRef"]["name"] = json!("postgresql-dev");
        });
        assert_eq!(
            decision,
            denied(
                "spec.deletionPolicy: Delete is not allowed by plan postgresql-platform-ha; allowed: Retain, SnapshotAndDelete"
            )
        );
    }

    // --- retained objects ---

    #[test]
    fn a_project_identity_cannot_delete_or_change_a_retained_object() {
        for name in ["delete-retained-statefulset", "update-retained-statefulset"] {
            assert_eq!(
                decide(name, |_| {}),
                denied(messages::RETAINED_OBJECT_PROTECTED),
                "{name}"
            );
        }
        assert_eq!(
            messages::RETAINED_OBJECT_PROTECTED,
            "this object was retained when its ManagedService was deleted; only the provider can change or remove it"
        );
        // Removing the label is a change of a retained object.
        let decision = decide("update-retained-statefulset", |r| {
            r["request"]["object"]["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove("services.kube-dc.com/retained");
        });
        assert_eq!(decision, denied(messages::RETAINED_OBJECT_PROTECTED));
    }

    #[test]
    fn the_provider_and_kube_system_may_delete_or_change_a_retained_object() {
        for name in ["delete-retained-statefulset", "update-retained-statefulset"] {
            for (user, groups) in [
                ("kubernetes-admin", &["system:masters"][..]),
                (NAMESPACE_CONTROLLER, &KUBE_SYSTEM_SAS[..]),
                (
                    "system:serviceaccount:navique-system:navique-service-lifecycle-controller",
                    &[
                        "system:serviceaccounts",
                        "system:serviceaccounts:navique-system",
                    ][..],
                ),
            ] {
                assert_eq!(
                    decide(name, as_user(user, groups)),
                    Decision::Allow,
                    "{name} by {user}"
                );
            }
        }
    }

    #[test]
    fn a_project_identity_cannot_give_a_retained_object_an_owner() {
        // Side door: an owner the tenant deletes would have the garbage
        // collector delete the retained object.
        let decision = decide("update-retained-statefulset", |r| {
            r["request"]["object"]["metadata"]["ownerReferences"] = json!([configmap_owner()]);
        });
        assert_eq!(decision, denied(messages::RETAINED_OBJECT_PROTECTED));
    }

    #[test]
    fn a_project_identity_cannot_create_an_object_labelled_retained() {
        // Ownership by label: only the platform marks objects retained.
        assert_eq!(
            decide("create-retained-statefulset", |_| {}),
            denied(
                "metadata.labels: services.kube-dc.com/retained is set by the platform only, when a ManagedService is deleted under Retain"
            )
        );
        // Whatever the value: the label is the platform's.
        let decision = decide("create-retained-statefulset", |r| {
            r["request"]["object"]["metadata"]["labels"][labels::RETAINED] = json!("True");
        });
        assert_eq!(decision, denied(messages::RETAINED_LABEL_RESERVED));
        let decision = decide("create-retained-statefulset", |r| {
            r["request"]["object"]["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove(labels::RETAINED);
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn a_project_identity_cannot_mark_an_existing_object_retained() {
        let decision = decide("update-retained-statefulset", |r| {
            r["request"]["oldObject"]["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove(labels::RETAINED);
        });
        assert_eq!(decision, denied(messages::RETAINED_LABEL_RESERVED));
        let decision = decide("update-retained-statefulset", |r| {
            r["request"]["oldObject"]["metadata"]["labels"][labels::RETAINED] = json!("false");
        });
        assert_eq!(decision, denied(messages::RETAINED_LABEL_RESERVED));
    }

    #[test]
    fn the_platform_marks_objects_retained() {
        let controller = || {
            as_user(
                "system:serviceaccount:navique-system:navique-service-lifecycle-controller",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:navique-system",
                ],
            )
        };
        assert_eq!(
            decide("create-retained-statefulset", controller()),
            Decision::Allow
        );
        let decision = decide("update-retained-statefulset", |r| {
            controller()(r);
            r["request"]["oldObject"]["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove(labels::RETAINED);
        });
        assert_eq!(decision, Decision::Allow);
    }

    // --- the garbage collector: a trusted group's side door ---

    /// The garbage collector, a kube-system service account: in the
    /// provider groups.
    fn as_garbage_collector() -> impl FnOnce(&mut Value) {
        as_user(GARBAGE_COLLECTOR, &KUBE_SYSTEM_SAS)
    }

    #[test]
    fn the_garbage_collector_cannot_delete_a_backup_record_or_a_retained_object() {
        // Neither has an owner: the collector deleting one acts on an
        // ownerReference a tenant planted (side door, trusted group).
        for name in ["delete-service-backup", "delete-retained-statefulset"] {
            assert_eq!(
                decide(name, as_garbage_collector()),
                denied(
                    "metadata.ownerReferences: ServiceBackup records and retained objects are not garbage-collected; they are removed by the provider or with their Project"
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn the_garbage_collector_removes_them_with_their_terminating_project() {
        let mut cluster = cluster();
        cluster.terminating.insert("shop".to_owned());
        let guard = guard_with(cluster);
        for name in ["delete-service-backup", "delete-retained-statefulset"] {
            assert_eq!(
                decide_with(&guard, name, as_garbage_collector()),
                Decision::Allow,
                "{name}"
            );
        }
        // Another namespace being deleted does not help.
        let decision = decide_with(&guard, "delete-service-backup", |r| {
            as_garbage_collector()(r);
            r["request"]["namespace"] = json!("orders");
        });
        assert_eq!(decision, denied(messages::GARBAGE_COLLECTION_REFUSED));
    }

    #[test]
    fn a_garbage_collection_that_cannot_be_checked_fails_closed() {
        let decision = decide_with(
            &guard_with(NoCluster),
            "delete-retained-statefulset",
            as_garbage_collector(),
        );
        assert_eq!(
            decision,
            Decision::Error(
                "cannot look up namespace \"shop\": the webhook is not connected to the API server; the request is refused until it can be checked"
                    .to_owned()
            )
        );
    }

    #[test]
    fn the_garbage_collector_still_collects_other_objects_and_orphans_records() {
        // Not retained: nothing to look up.
        let decision = decide_with(&guard_with(NoCluster), "delete-retained-statefulset", |r| {
            as_garbage_collector()(r);
            r["request"]["oldObject"]["metadata"]["labels"][labels::RETAINED] = json!("false");
        });
        assert_eq!(decision, Decision::Allow);
        // Orphaning removes an ownerReference: an update, which it may make.
        for name in ["update-service-backup", "update-retained-statefulset"] {
            assert_eq!(
                decide(name, as_garbage_collector()),
                Decision::Allow,
                "{name}"
            );
        }
    }

    #[test]
    fn the_namespace_controller_and_the_provider_still_delete_records_and_retained_objects() {
        for name in ["delete-service-backup", "delete-retained-statefulset"] {
            for (user, groups) in [
                (NAMESPACE_CONTROLLER, &KUBE_SYSTEM_SAS[..]),
                ("kubernetes-admin", &["system:masters"][..]),
            ] {
                assert_eq!(
                    decide(name, as_user(user, groups)),
                    Decision::Allow,
                    "{name} by {user}"
                );
            }
        }
    }

    #[test]
    fn objects_not_retained_are_not_guarded() {
        for value in [Some("false"), None] {
            let decision = decide("delete-retained-statefulset", |r| {
                let labels = r["request"]["oldObject"]["metadata"]["labels"]
                    .as_object_mut()
                    .unwrap();
                match value {
                    Some(value) => labels.insert(labels::RETAINED.to_owned(), json!(value)),
                    None => labels.remove(labels::RETAINED),
                };
            });
            assert_eq!(decision, Decision::Allow, "{value:?}");
        }
    }

    #[test]
    fn a_service_account_of_a_project_is_a_project_identity() {
        let decision = decide(
            "delete-retained-statefulset",
            as_user(
                "system:serviceaccount:shop:deployer",
                &["system:serviceaccounts", "system:serviceaccounts:shop"],
            ),
        );
        assert_eq!(decision, denied(messages::RETAINED_OBJECT_PROTECTED));
    }

    #[test]
    fn configured_provider_groups_replace_the_defaults() {
        let guard = ServiceGuard {
            provider_groups: vec!["platform-ops".to_owned()],
            cluster: Arc::new(cluster()),
        };
        assert_eq!(
            decide_with(
                &guard,
                "delete-retained-statefulset",
                as_user("ops", &["platform-ops"])
            ),
            Decision::Allow
        );
        assert_eq!(
            decide_with(
                &guard,
                "delete-retained-statefulset",
                as_user("root", &["system:masters"])
            ),
            denied(messages::RETAINED_OBJECT_PROTECTED)
        );
    }

    // --- ServiceBackup records ---

    #[test]
    fn retentions_the_schema_admits_but_the_api_does_not_take_are_refused() {
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["spec"]["origin"] = json!("Manual");
            r["request"]["object"]["spec"]["retention"] = json!("0s");
        });
        assert_eq!(
            decision,
            denied("spec.retention: \"0s\" must be longer than zero")
        );
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["spec"]["origin"] = json!("Manual");
            r["request"]["object"]["spec"]["retention"] = json!("720h");
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("create-service", |r| {
            r["request"]["object"]["spec"]["finalBackup"] = json!({"retention": "99999h"});
        });
        assert_eq!(
            decision,
            denied("spec.finalBackup.retention: \"99999h\" is longer than ten years")
        );
    }

    #[test]
    fn a_project_identity_cannot_delete_a_backup_record() {
        assert_eq!(
            decide("delete-service-backup", |_| {}),
            denied(
                "ServiceBackup records are kept by the platform and removed with their Project; they cannot be deleted"
            )
        );
    }

    #[test]
    fn a_project_identity_cannot_change_a_backup_record() {
        assert_eq!(
            decide("update-service-backup", |_| {}),
            denied("ServiceBackup records can only be changed by the platform")
        );
    }

    #[test]
    fn a_project_identity_cannot_create_a_backup_record_with_an_owner() {
        // Side door: deleting the owner would have the garbage collector
        // delete the record.
        let with_owners = |owners: Value| {
            move |r: &mut Value| {
                r["request"]["object"]["spec"]["origin"] = json!("Manual");
                r["request"]["object"]["metadata"]["ownerReferences"] = owners;
            }
        };
        assert_eq!(
            decide(
                "create-service-backup",
                with_owners(json!([configmap_owner()]))
            ),
            denied(
                "metadata.ownerReferences: ServiceBackup records have no owner; they are kept by the platform and removed with their Project"
            )
        );
        // Whatever the origin.
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["metadata"]["ownerReferences"] = json!([configmap_owner()]);
        });
        assert_eq!(decision, denied(messages::BACKUP_RECORD_OWNER_REFERENCES));
        // An empty list names no owner.
        assert_eq!(
            decide("create-service-backup", with_owners(json!([]))),
            Decision::Allow
        );
        // The provider is trusted with what it records.
        let decision = decide("create-service-backup", |r| {
            with_owners(json!([configmap_owner()]))(r);
            as_user("kubernetes-admin", &["system:masters"])(r);
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn a_project_identity_cannot_give_a_backup_record_an_owner() {
        let decision = decide("update-service-backup", |r| {
            r["request"]["object"]["metadata"]["ownerReferences"] = json!([configmap_owner()]);
        });
        assert_eq!(decision, denied(messages::BACKUP_RECORD_READ_ONLY));
    }

    #[test]
    fn a_project_identity_may_record_manual_backups_only() {
        assert_eq!(
            decide("create-service-backup", |_| {}),
            denied("only the platform records Scheduled and Final backups")
        );
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["spec"]["origin"] = json!("Scheduled");
        });
        assert_eq!(
            decision,
            denied("only the platform records Scheduled and Final backups")
        );
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["spec"]["origin"] = json!("Manual");
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("create-service-backup", |r| {
            r["request"]["object"]["spec"]
                .as_object_mut()
                .unwrap()
                .remove("origin");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn the_platform_and_kube_system_may_write_and_delete_backup_records() {
        let runner = as_user(
            "system:serviceaccount:navique-system:navique-backup-runner",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:navique-system",
            ],
        );
        assert_eq!(decide("create-service-backup", runner), Decision::Allow);
        for name in [
            "delete-service-backup",
            "update-service-backup",
            "create-service-backup",
        ] {
            assert_eq!(
                decide(name, as_user(NAMESPACE_CONTROLLER, &KUBE_SYSTEM_SAS)),
                Decision::Allow,
                "{name}"
            );
        }
    }

    #[test]
    fn a_user_without_groups_is_a_project_identity() {
        let decision = decide("delete-service-backup", |r| {
            r["request"]["userInfo"]
                .as_object_mut()
                .unwrap()
                .remove("groups");
        });
        assert_eq!(decision, denied(messages::BACKUP_RECORD_PROTECTED));
    }

    #[test]
    fn other_kinds_and_connect_are_allowed() {
        let decision = decide("delete-service-backup", |r| {
            r["request"]["kind"]["kind"] = json!("ServiceBinding");
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("delete-protected-service", |r| {
            r["request"]["kind"]["group"] = json!("example.com");
        });
        assert_eq!(decision, Decision::Allow);
        let decision = decide("delete-retained-statefulset", |r| {
            r["request"]["operation"] = json!("CONNECT");
        });
        assert_eq!(decision, Decision::Allow);
    }

    // --- deletionProtection defaults ---

    fn default_with(cluster: impl Cluster, edit: impl FnOnce(&mut Value)) -> Decision {
        let mut review = fixture("create-service");
        review["request"]["object"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("deletionProtection");
        edit(&mut review);
        let request = review::parse(review.to_string().as_bytes()).unwrap();
        ServiceDefaults {
            cluster: Arc::new(cluster),
        }
        .validate(&request)
    }

    fn protection_patch(value: bool) -> Decision {
        Decision::Patch(vec![
            json!({"op": "add", "path": "/spec/deletionProtection", "value": value}),
        ])
    }

    #[test]
    fn a_service_without_protection_gets_its_plans_default() {
        let on_plan = |plan: &'static str| {
            move |r: &mut Value| r["request"]["object"]["spec"]["planRef"]["name"] = json!(plan)
        };
        assert_eq!(
            default_with(cluster(), on_plan("postgresql-platform-ha")),
            protection_patch(true)
        );
        assert_eq!(
            default_with(cluster(), on_plan("postgresql-dev")),
            protection_patch(false)
        );
        assert_eq!(
            default_with(cluster(), on_plan("no-such-plan")),
            protection_patch(false)
        );
    }

    #[test]
    fn a_service_that_says_its_protection_keeps_it() {
        for value in [true, false] {
            let decision = default_with(NoCluster, |r| {
                r["request"]["object"]["spec"]["deletionProtection"] = json!(value)
            });
            assert_eq!(decision, Decision::Allow);
        }
    }

    #[test]
    fn the_default_is_refused_until_the_plans_can_be_read() {
        let Decision::Error(message) = default_with(NoCluster, |_| {}) else {
            panic!("not refused")
        };
        assert!(
            message.starts_with("cannot look up ServicePlan"),
            "{message}"
        );
    }

    // --- restores ---

    fn with_restore(restore: Value) -> impl FnOnce(&mut Value) {
        move |r| r["request"]["object"]["spec"]["restoreFrom"] = restore
    }

    #[test]
    fn a_restore_from_another_project_is_refused() {
        let decision = decide(
            "create-service",
            with_restore(json!({"backupName": "orders-db-final-1", "namespace": "other-shop"})),
        );
        assert_eq!(
            decision,
            denied(
                "spec.restoreFrom.namespace: other-shop is another Project; a backup can only be restored into a service of the same Project"
            )
        );
    }

    #[test]
    fn a_new_service_restores_from_its_projects_backup() {
        let decision = decide("create-service", |r| {
            with_restore(json!({"backupName": "orders-db-final-1"}))(r);
            r["request"]["object"]["spec"]["deletionPolicy"] = json!("Retain");
        });
        assert_eq!(decision, Decision::Allow);
    }

    #[test]
    fn an_in_place_restore_needs_protection_off() {
        let in_place = |protected: bool| {
            decide("update-service-protection-off", move |r| {
                let spec = &mut r["request"]["object"]["spec"];
                spec["restoreFrom"] = json!({"backupName": "orders-db-manual-1"});
                spec["deletionProtection"] = json!(protected);
            })
        };
        assert_eq!(in_place(true), denied(messages::IN_PLACE_RESTORE_PROTECTED));
        assert_eq!(in_place(false), Decision::Allow);
    }
}
