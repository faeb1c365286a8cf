//! User-facing messages. The texts the seeds quote are contracts: the tests
//! below pin them byte for byte.

use serde_json::Value;

use crate::constants::annotations::{ADOPT, CONFIRM_DELETE, DELETION_APPROVED, SYNC_OPTIONS};
use crate::constants::sync_options::{BOOLEAN_VALUES, DELETE, IGNORED, PRUNE, REMOVAL_VALUES};
use crate::core::Approver;
use crate::services::DeletionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The message a delete of a locked object is denied with (seed), naming
/// every protecting Lock in the order given.
pub fn lock_denied(lock_names: &[&str]) -> String {
    format!(
        "resource is protected by Lock(s) [{}]; delete the Lock(s) before deleting this resource",
        lock_names.join(", ")
    )
}

/// [`lock_denied`] from the target's markers: the `core.navique.com/locked`
/// annotation (names joined by `,`) and, when set, the
/// `core.navique.com/lock-reasons` annotation, surfaced after it.
pub fn lock_denied_by_markers(locked: &str, reasons: Option<&str>) -> String {
    let names: Vec<&str> = locked.split(',').collect();
    let mut message = lock_denied(&names);
    if let Some(reasons) = reasons.filter(|r| !r.is_empty()) {
        message.push_str(&format!(" (reasons: {reasons})"));
    }
    message
}

/// The `core.navique.com/lock-reasons` annotation: `<lock>: <reason>` for
/// each protecting Lock with a reason, joined by `; `, in the given order.
pub fn lock_reasons<'a>(reasons: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let parts: Vec<String> = reasons
        .into_iter()
        .filter(|(_, reason)| !reason.is_empty())
        .map(|(name, reason)| format!("{name}: {reason}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A Lock's `Ready` message while it protects its target.
pub fn lock_protecting(kind: &str, name: &str) -> String {
    format!("protecting {kind} {name}")
}

/// A Lock's `MissingReference` message.
pub fn lock_target_missing(kind: &str, name: &str, namespace: &str) -> String {
    format!("{kind} {name} not found in namespace {namespace}")
}

/// `InvalidTarget`: a Lock on a Lock.
pub const LOCK_ON_LOCK: &str = "a Lock cannot protect another Lock";

/// `InvalidTarget`: a target outside the enforceable groups, with how a
/// platform team makes its group enforceable.
pub fn lock_target_not_enforceable(api_version: &str, groups: &[String]) -> String {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    // The core group ("") as flags and values name it.
    let named = |group: &str| {
        if group.is_empty() {
            crate::constants::CORE_GROUP_ALIAS.to_owned()
        } else {
            group.to_owned()
        }
    };
    let how = if group.is_empty() {
        "to lock objects of the core group (v1), add core to the lock-controller's --enforceable-groups and the guard's groups (Helm values lockGuard.groups and lockGuard.resources.core)".to_owned()
    } else {
        format!(
            "to lock objects of {group}, add it to the lock-controller's --enforceable-groups and the guard's groups (Helm value lockGuard.groups)"
        )
    };
    let groups: Vec<String> = groups.iter().map(|g| named(g)).collect();
    format!(
        "targetRef.apiVersion {api_version} is not enforceable: only objects of {} can be locked; {how}",
        groups.join(", ")
    )
}

/// The note of the Normal Event on a Lock whose name was stamped on its
/// target.
pub fn lock_target_stamped(kind: &str, name: &str) -> String {
    format!("stamped {kind} {name} with core.navique.com/locked: deleting it is denied")
}

/// The note of the Normal Event on a Lock whose name was taken off its
/// target; `remaining` are the Locks that still protect it.
pub fn lock_target_cleared(kind: &str, name: &str, remaining: &[&str]) -> String {
    if remaining.is_empty() {
        format!("cleared core.navique.com/locked from {kind} {name}: no Lock protects it now")
    } else {
        format!(
            "took this Lock off core.navique.com/locked of {kind} {name}: Lock(s) [{}] still protect it",
            remaining.join(", ")
        )
    }
}

/// `InvalidTarget`: a kind API discovery does not list.
pub fn lock_kind_not_served(kind: &str, api_version: &str) -> String {
    format!("kind {kind} is not served by {api_version}")
}

/// `InvalidTarget`: a kind its group serves but the lock-controller was not
/// given (`--enforceable-resources` lists `resources` for the group).
pub fn lock_kind_not_enforceable(kind: &str, api_version: &str, resources: &[String]) -> String {
    format!(
        "kind {kind} of {api_version} is not enforceable: only {} can be locked in its group; add its resource to the lock-controller's --enforceable-resources (Helm value lockGuard.resources)",
        resources.join(", ")
    )
}

/// `InvalidTarget`: a cluster-scoped kind; a Lock protects objects of its
/// own namespace only.
pub fn lock_kind_cluster_scoped(kind: &str, api_version: &str) -> String {
    format!(
        "kind {kind} of {api_version} is cluster-scoped: a Lock protects objects in its own namespace"
    )
}

/// `InvalidTarget`: a target name that is not an object name (it would go
/// into a request URL as typed).
pub fn lock_target_name_invalid(name: &str) -> String {
    format!(
        "spec.targetRef.name: {name:?} is not an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
    )
}

/// `InvalidTarget`: a target kind that is not a kind name.
pub fn lock_target_kind_invalid(kind: &str) -> String {
    format!(
        "spec.targetRef.kind: {kind:?} is not a kind: a letter, then letters and digits, such as Stack"
    )
}

/// What a storage quantity must be (after the field, before `, not "<value>"`).
pub const QUANTITY_MALFORMED: &str = "must be a quantity above zero such as 10Gi";

/// A storage quantity above the largest volume taken (`quantity::MAX_STORAGE`).
pub const QUANTITY_TOO_LARGE: &str = "must be at most 64Ti";

/// The refusal of an admission request the webhook cannot read whole: it
/// fails closed rather than allow what it could not check.
pub fn malformed_review(problem: &str) -> String {
    format!("malformed admission request: {problem}; the request is refused")
}

/// A field of a ManagedService that must be a boolean and is not, such as
/// `deletionProtection: "true"`.
pub fn not_a_boolean(field: &str, value: &str) -> String {
    format!("{field}: must be true or false, not {value}")
}

/// `spec.parameters` that do not read as the PostgreSQL class's parameters
/// (the CRD schema refuses them first; this is the webhook's fallback).
pub fn parameters_unreadable(reason: &str) -> String {
    format!("spec.parameters: {reason}")
}

/// The admission warning for parameters a `ProviderShared` service does
/// not apply: it is a database on the provider's server.
pub fn parameters_not_applied_shared(fields: &[&str]) -> String {
    let verb = if fields.len() == 1 { "is" } else { "are" };
    format!(
        "{} {verb} not applied to ProviderShared services: the service is a database on the provider's server, which the provider sizes and configures",
        fields.join(", ")
    )
}

/// The admission warning for fields this version accepts (the seed's
/// manifests carry them) and does not apply, on any placement.
pub fn not_applied_yet(fields: &[&str]) -> String {
    let (verb, rest) = if fields.len() == 1 {
        ("is", "it is accepted, and does nothing")
    } else {
        ("are", "they are accepted, and do nothing")
    };
    format!(
        "{} {verb} not applied by this version: {rest} (backups follow the plan's backup.enabled)",
        fields.join(", ")
    )
}

/// The admission warning for `instances` above 1 on an `InProject` service.
pub const INSTANCES_NOT_APPLIED: &str = "spec.parameters.instances is not applied yet: an InProject engine runs one replica (PostgreSQL replicas need replication, which this version does not set up)";

/// The denial of deleting a namespace that holds active Locks.
pub fn namespace_locked(namespace: &str, locked: &str) -> String {
    format!(
        "namespace {namespace} holds Lock(s) [{}]; delete the Lock(s) before deleting this namespace",
        locked.replace(',', ", ")
    )
}

/// The denial of deleting the CRD of a kind with locked objects; `locked`
/// lists `<namespace>/<lock>` joined by `,`.
pub fn crd_locked(crd: &str, locked: &str) -> String {
    format!(
        "{crd} has locked objects (Lock(s) [{}]); delete the Lock(s) before deleting this CustomResourceDefinition",
        locked.replace(',', ", ")
    )
}

/// The denial of a change to the lock markers by anyone but the
/// lock-controller.
pub const LOCK_MARKER_PROTECTED: &str = "the core.navique.com/locked annotation and label and the core.navique.com/lock-reasons annotation are managed by the lock-controller; create or delete Locks instead";

/// The denial of a change to the namespace-wide lock markers by anyone but
/// the lock-controller.
pub const NAMESPACE_LOCK_MARKER_PROTECTED: &str = "the core.navique.com/namespace-locked and core.navique.com/namespace-lock-reasons annotations are managed by the lock-controller; create or delete namespace-wide Locks instead";

/// The webhook's refusal of a delete whose namespace it cannot read.
pub fn namespace_lock_lookup_failed(namespace: &str, why: &str) -> String {
    format!(
        "cannot tell whether namespace {namespace} holds namespace-wide Locks: {why}; the delete is refused until it can be checked"
    )
}

/// A namespace-wide Lock's `Ready` message while it protects.
pub fn lock_protecting_namespace(namespace: &str) -> String {
    format!("protecting every enforceable object in namespace {namespace}")
}

/// `InvalidTarget`: a Lock on its own Namespace while namespace-wide Locks
/// are not enabled, with how a platform team enables them.
pub fn namespace_locks_disabled(namespace: &str) -> String {
    format!(
        "namespace-wide Locks are not enabled: a Lock on Namespace {namespace} would protect every enforceable object in it; to allow it, start the lock-controller with --namespace-locks and install the guard's namespace rules (Helm value lockGuard.namespaceLocks=true)"
    )
}

/// `InvalidTarget`: a Lock on a Namespace other than its own.
pub fn namespace_lock_other_namespace(target: &str, namespace: &str) -> String {
    format!(
        "a Lock on a Namespace protects its own namespace only: targetRef.name is {target}, the Lock is in namespace {namespace}"
    )
}

/// The note of the Normal Event on a namespace-wide Lock whose name was
/// written into its Namespace's `core.navique.com/namespace-locked`.
pub fn namespace_lock_stamped(namespace: &str) -> String {
    format!(
        "stamped Namespace {namespace} with core.navique.com/namespace-locked: deleting its enforceable objects is denied"
    )
}

/// The note of the Normal Event on a namespace-wide Lock whose name was
/// taken off its Namespace; `remaining` still protect the namespace.
pub fn namespace_lock_cleared(namespace: &str, remaining: &[&str]) -> String {
    if remaining.is_empty() {
        format!(
            "cleared core.navique.com/namespace-locked from Namespace {namespace}: no namespace-wide Lock protects its objects now"
        )
    } else {
        format!(
            "took this Lock off core.navique.com/namespace-locked of Namespace {namespace}: Lock(s) [{}] still protect its objects",
            remaining.join(", ")
        )
    }
}

/// The lock-suspension admission rule's refusal of a user without the
/// `suspend` verb on Locks.
pub fn suspend_forbidden(user: &str, namespace: &str, lock: &str) -> String {
    format!(
        "{user} may not suspend or resume Lock {namespace}/{lock}: that needs the suspend verb on locks.core.navique.com, which update and delete do not give"
    )
}

/// What `core.navique.com/suspended-until` must hold, before `, not "<value>"`.
pub const SUSPENDED_UNTIL_FORMAT: &str =
    "core.navique.com/suspended-until must be a time in UTC such as 2026-12-01T19:30:00Z";

/// The refusal of a suspension whose until is missing or not a UTC time.
pub fn suspended_until_malformed(value: &str) -> String {
    format!("{SUSPENDED_UNTIL_FORMAT}, not \"{value}\"")
}

/// The refusal of a suspension without a reason.
pub const SUSPEND_REASON_REQUIRED: &str =
    "core.navique.com/suspend-reason is required: say why the Lock is suspended";

/// The refusal of a suspension naming someone other than its requester.
pub fn suspended_by_not_requester(user: &str, value: &str) -> String {
    format!(
        "core.navique.com/suspended-by must be the user who suspends the Lock, {user}, not \"{value}\""
    )
}

/// The lock-controller's refusal of a suspension without a suspender.
pub const SUSPENDED_BY_REQUIRED: &str =
    "core.navique.com/suspended-by is required: the user who suspends the Lock";

/// Appended to a suspension the lock-controller refuses.
const STAYS_ACTIVE: &str = "the Lock stays active";

/// The lock-controller's refusal of a suspension it cannot read.
pub fn suspension_unreadable(problem: &str) -> String {
    format!("{problem}: {STAYS_ACTIVE}")
}

/// The lock-controller's refusal of a suspension longer than the limit.
pub fn suspension_beyond_limit(until: &str, limit: &str, since: &str) -> String {
    format!(
        "core.navique.com/suspended-until {until} is more than {limit} (lockGuard.maxSuspension) after the suspension was seen at {since}: {STAYS_ACTIVE}"
    )
}

/// The lock-controller's refusal of a suspension already over when seen.
pub fn suspension_not_in_future(until: &str, since: &str) -> String {
    format!(
        "core.navique.com/suspended-until {until} is not after {since}, when the suspension was seen: {STAYS_ACTIVE}"
    )
}

/// A suspended Lock's Ready message and `LockSuspended` note.
pub fn lock_suspended(kind: &str, name: &str, until: &str, by: &str, reason: &str) -> String {
    format!(
        "suspended by {by} until {until} ({reason}): this Lock does not protect {kind} {name} until then"
    )
}

/// The `LockResumed` note when the deadline passed.
pub fn lock_resumed_at_deadline(kind: &str, name: &str, until: &str, by: &str) -> String {
    format!("the suspension by {by} ended at {until}: protecting {kind} {name} again")
}

/// The `LockResumed` note when the suspension annotations were removed or
/// replaced before the deadline.
pub fn lock_resumed_early(kind: &str, name: &str, by: &str) -> String {
    format!("the suspension by {by} was lifted before its deadline: protecting {kind} {name} again")
}

/// Refusal of a restore from a ServiceBackup of another namespace.
pub fn restore_from_another_project(namespace: &str) -> String {
    format!(
        "spec.restoreFrom.namespace: {namespace} is another Project; a backup can only be restored into a service of the same Project"
    )
}

/// Refusal of an in-place restore while the service is protected.
pub const IN_PLACE_RESTORE_PROTECTED: &str = "spec.restoreFrom: an in-place restore replaces this service's data; set spec.deletionProtection=false first";

/// The message a delete of a ManagedService with `deletionProtection: true`
/// is denied with (seed).
pub const DELETION_PROTECTION_ENABLED: &str =
    "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first";

/// The admission warning of a ManagedService delete: what it will do and
/// what it waits for.
pub fn deletion_warning(policy: DeletionPolicy, name: &str, confirmed: bool) -> String {
    match policy {
        DeletionPolicy::Retain => "deletionPolicy Retain: the engine, its data volumes and credential Secrets stay in the Project until your provider removes them".to_owned(),
        DeletionPolicy::SnapshotAndDelete => "deletionPolicy SnapshotAndDelete: a final backup is taken first; the engine and its data volumes are removed only once it is stored and verified".to_owned(),
        DeletionPolicy::Delete if confirmed => "deletionPolicy Delete: the engine and its data volumes are removed, and the data is lost, except in earlier backups".to_owned(),
        DeletionPolicy::Delete => format!("deletionPolicy Delete: nothing is removed until you annotate {}={name}", CONFIRM_DELETE),
    }
}

/// `FinalBackupStarted`: the final backup was asked for.
pub fn final_backup_started(record: &str, attempt: u32) -> String {
    if attempt <= 1 {
        format!("taking the final backup, recorded as ServiceBackup {record}")
    } else {
        format!(
            "taking the final backup again (attempt {attempt}), recorded as ServiceBackup {record}"
        )
    }
}

/// `FinalBackupCompleted`: stored and verified.
pub fn final_backup_completed(record: &str, location: &str) -> String {
    format!("the final backup ServiceBackup {record} is stored and verified at {location}")
}

/// `DatabaseDropped`: what a `Delete` dropped on the provider's server.
pub fn engine_dropped(dropped: &[String], endpoint: &str) -> String {
    if dropped.is_empty() {
        format!(
            "nothing on PostgreSQL at {endpoint} was recorded as this service's own: nothing dropped"
        )
    } else {
        format!("dropped {} on PostgreSQL at {endpoint}", dropped.join(", "))
    }
}

/// `EngineRemoved`: an InProject engine deleted.
pub fn in_project_engine_removed(service: &str) -> String {
    format!("deleted StatefulSet {service} and its data volumes")
}

/// `EngineRetained`: what `Retain` keeps.
pub const ENGINE_RETAINED: &str = "retained the engine, its data volumes, credential Secrets and Services: they stay, owned by nothing, until the provider removes them";

/// `DataRetained` for a service whose class does not exist.
pub fn nothing_removed_without_class(class: &str) -> String {
    format!(
        "ServiceClass {class} does not exist, so no server can be reached: nothing was removed; a database this service held stays on its server until the provider removes it"
    )
}

/// `Restored`: a backup restored into the service.
pub fn restored(backup: &str, location: &str, sha256: &str) -> String {
    format!("restored ServiceBackup {backup} from {location} (sha256 {sha256})")
}

/// The `Ready` message while a `Delete` waits for its confirmation (seed).
pub fn deletion_confirmation_needed(service_name: &str) -> String {
    format!(
        "deletionPolicy Delete destroys data; annotate {CONFIRM_DELETE}={service_name} to confirm, or the instance stays retained"
    )
}

/// The `Ready` message of a ServiceBinding whose service is gone (seed).
pub fn service_not_found(service_name: &str) -> String {
    format!("service not found: {service_name}")
}

/// `CredentialPending` while the service is not Ready.
pub fn service_not_ready(service_name: &str) -> String {
    format!("waiting for service {service_name} to be Ready")
}

/// `CredentialPending` while a Ready service has no credential Secret.
pub fn credentials_pending(service_name: &str, secret_name: &str) -> String {
    format!("waiting for Secret {secret_name} of service {service_name}")
}

/// A ServiceBinding's `CredentialPending` while its service is being deleted.
pub fn service_deleting(service_name: &str) -> String {
    format!("service {service_name} is being deleted")
}

/// A ServiceCredentialPolicy's `ServiceDeleting`: it submits no rotations.
pub fn service_deleting_no_rotation(service_name: &str) -> String {
    format!("service {service_name} is being deleted; no rotations are submitted")
}

/// A ServiceBinding's `Ready` message once delivered.
pub fn credentials_delivered(service_name: &str, secret_name: &str) -> String {
    format!("credentials of service {service_name} are in Secret {secret_name}")
}

/// `SecretConflict`: the binding's Secret name is taken.
pub fn secret_not_owned(secret_name: &str) -> String {
    format!(
        "Secret {secret_name} exists and does not belong to this ServiceBinding; set spec.secretName to another name or remove that Secret"
    )
}

/// A ServiceCredentialPolicy's `Ready` message: when it rotates next.
pub fn rotation_scheduled(next: &str) -> String {
    format!("next rotation at {next}")
}

/// `RotationUnsupported`: credentials of `InProject` engines are not
/// rotated in this version.
pub const ROTATION_IN_PROJECT_UNSUPPORTED: &str = "credential rotation is available for ProviderShared services only; the credentials of this InProject service are left as they are";

/// The `CredentialsRotated` event's note.
pub fn credentials_rotated(service_name: &str, role: &str) -> String {
    format!("rotated the password of role {role} of service {service_name}")
}

/// The `DeletionPolicyDowngraded` event message: names the cause and the
/// policy used, and under `Retain` says what keeps consuming capacity (seed).
pub fn deletion_policy_downgraded(
    requested: DeletionPolicy,
    used: DeletionPolicy,
    cause: &str,
) -> String {
    let mut message = format!(
        "deletionPolicy {requested} cannot be applied ({cause}); deleting under {used}, the less destructive policy in force"
    );
    if used == DeletionPolicy::Retain {
        message.push_str("; the engine and its volumes are retained and keep consuming capacity");
    }
    message
}

/// A create or update names a deletion policy its plan does not allow.
pub fn deletion_policy_not_allowed(
    requested: DeletionPolicy,
    plan: &str,
    allowed: &[DeletionPolicy],
) -> String {
    let allowed = allowed
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    format!("spec.deletionPolicy: {requested} is not allowed by plan {plan}; allowed: {allowed}")
}

/// A `SnapshotAndDelete` on a plan whose backups are disabled (which the
/// plan's CRD rule keeps from being stored).
pub fn plan_backups_disabled(plan: &str) -> String {
    format!("spec.deletionPolicy: SnapshotAndDelete needs backups, which plan {plan} has disabled")
}

/// A create or update names a ServicePlan that does not exist.
pub fn service_plan_not_found(plan: &str) -> String {
    format!("spec.planRef.name: ServicePlan {plan:?} not found")
}

/// A create or update names a deletion policy this version does not know
/// (the CRD schema rejects it first; this is the webhook's fallback).
pub fn deletion_policy_unknown(value: &str) -> String {
    format!(
        "spec.deletionPolicy: unknown policy {value}; allowed: Retain, SnapshotAndDelete, Delete"
    )
}

/// The denial of a Project identity changing or deleting an object a
/// `Retain` deletion left behind.
pub const RETAINED_OBJECT_PROTECTED: &str = "this object was retained when its ManagedService was deleted; only the provider can change or remove it";

/// The denial of a Project identity deleting a ServiceBackup record.
pub const BACKUP_RECORD_PROTECTED: &str = "ServiceBackup records are kept by the platform and removed with their Project; they cannot be deleted";

/// The denial of a Project identity changing a ServiceBackup record.
pub const BACKUP_RECORD_READ_ONLY: &str =
    "ServiceBackup records can only be changed by the platform";

/// The denial of a Project identity creating a `Scheduled` or `Final`
/// ServiceBackup.
pub const BACKUP_ORIGIN_RESERVED: &str = "only the platform records Scheduled and Final backups";

/// The denial of a Project identity creating a ServiceBackup with
/// ownerReferences: an owner's deletion would have the garbage collector
/// delete the record (a side door).
pub const BACKUP_RECORD_OWNER_REFERENCES: &str = "metadata.ownerReferences: ServiceBackup records have no owner; they are kept by the platform and removed with their Project";

/// The denial of a Project identity setting the retained label: only the
/// platform marks objects retained, when their ManagedService is deleted.
pub const RETAINED_LABEL_RESERVED: &str = "metadata.labels: services.kube-dc.com/retained is set by the platform only, when a ManagedService is deleted under Retain";

/// The denial of the garbage collector deleting a ServiceBackup record or a
/// retained object outside a Project's deletion: it acts on an
/// ownerReference, which on these objects can only have been planted.
pub const GARBAGE_COLLECTION_REFUSED: &str = "metadata.ownerReferences: ServiceBackup records and retained objects are not garbage-collected; they are removed by the provider or with their Project";

/// How many characters of a value a user wrote a message quotes, escaped:
/// messages go into statuses and Events, and an annotation may be long.
const QUOTED: usize = 60;

/// `value`, quoted and escaped, cut after [`QUOTED`] characters.
fn quoted(value: &str) -> String {
    let escaped = format!("{value:?}");
    if escaped.chars().count() <= QUOTED {
        escaped
    } else {
        let cut: String = escaped.chars().take(QUOTED).collect();
        format!("{cut}…")
    }
}

/// `a, b or c`.
fn or_list(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A hint for a misspelt `word`: the accepted one it differs from only in
/// case, or the separator it seems to use.
fn spelling_hint(word: &str, accepted: &[&str]) -> String {
    if let Some(meant) = accepted
        .iter()
        .find(|a| a.eq_ignore_ascii_case(word) && **a != word)
    {
        format!(" (did you mean {meant}? sync options are case-sensitive)")
    } else if word.trim() != word {
        " (no spaces around =)".to_owned()
    } else if word.contains([';', '|', '&', '=']) || word.contains(char::is_whitespace) {
        " (separate options with commas)".to_owned()
    } else {
        String::new()
    }
}

/// What `cd.hanzo.ai/sync-options` accepts.
pub fn sync_options_accepted() -> String {
    let removal = REMOVAL_VALUES.join("|");
    format!(
        "{PRUNE}={removal}, {DELETE}={removal}, or, ignored, {}={}; comma-separated, case-sensitive",
        IGNORED.join("|"),
        BOOLEAN_VALUES.join("|")
    )
}

/// A `cd.hanzo.ai/sync-options` problem: the value is empty.
pub const SYNC_OPTIONS_EMPTY: &str = "it is empty";

/// A `cd.hanzo.ai/sync-options` problem: item `position` (from 1) is empty.
pub fn sync_options_empty_item(position: usize) -> String {
    format!("item {position} is empty (one comma too many)")
}

/// A `cd.hanzo.ai/sync-options` problem: an item without `=`.
pub fn sync_options_not_key_value(item: &str) -> String {
    let hint = if [PRUNE, DELETE].contains(&item) {
        format!(
            " (give it a value: {item}={})",
            REMOVAL_VALUES.join(&format!(", {item}="))
        )
    } else {
        spelling_hint(item, &[])
    };
    format!("{} is not Key=Value{hint}", quoted(item))
}

/// A `cd.hanzo.ai/sync-options` problem: an option this version does not know.
pub fn sync_options_unknown_option(key: &str) -> String {
    let known: Vec<&str> = [PRUNE, DELETE].into_iter().chain(IGNORED).collect();
    format!(
        "{} is not an option{}",
        quoted(key),
        spelling_hint(key, &known)
    )
}

/// A `cd.hanzo.ai/sync-options` problem: a known option with a value it
/// does not take.
pub fn sync_options_unknown_value(key: &str, value: &str, accepted: &[&str]) -> String {
    format!(
        "{key} takes {}, not {}{}",
        or_list(accepted),
        quoted(value),
        spelling_hint(value, accepted)
    )
}

/// `cd.hanzo.ai/sync-options` that are not understood, with the problem
/// and what is accepted.
pub fn sync_options_invalid(value: &str, problem: &str) -> String {
    format!(
        "{SYNC_OPTIONS} {} is not understood: {problem}; accepted: {}",
        quoted(value),
        sync_options_accepted()
    )
}

/// `cd.hanzo.ai/sync-options` that give one option several values: the
/// most protective, `holds`, is used.
pub fn sync_options_conflict(value: &str, key: &str, values: &[&str], holds: &str) -> String {
    format!(
        "{SYNC_OPTIONS} {} gives {key} more than one value ({}); the most protective, {key}={holds}, holds: give {key} once",
        quoted(value),
        values.join(", ")
    )
}

/// The row message of a Stack resource that is neither pruned nor deleted
/// because of `why`.
pub fn held(why: &str) -> String {
    format!("held, neither pruned nor deleted: {why}")
}

/// A Stack manifest that sets `core.navique.com/approved-by` (refused):
/// approvers are named by the API server at admission, never by a manifest.
pub const MANIFEST_NAMES_APPROVERS: &str = "metadata.annotations[\"core.navique.com/approved-by\"] is written by approvers (kubectl navique approve), never by a manifest: take it out";

/// The row (and operation) message while an approval set before a removal
/// waited is being taken away; the wait is announced once it is gone.
pub const STALE_APPROVAL_WITHDRAWN: &str = "taking away a cd.hanzo.ai/deletion-approved or core.navique.com/approved-by set before the removal waited; approve once it waits";

/// The operation message and `InvalidSyncOptions` Event of a held Stack
/// resource (`Kind/name`).
pub fn stack_resource_held(resource: &str, why: &str) -> String {
    format!("{resource} is {}", held(why))
}

/// A Stack meets an object it must never touch (`resource`: `Kind ns/name`)
/// because `owner` has it.
fn not_the_stacks(resource: &str, owner: &str) -> String {
    format!("{resource} {owner}; a Stack never adopts, changes or deletes it")
}

/// A Stack meets an object labelled `services.kube-dc.com/retained: "true"`.
pub fn stack_resource_retained(resource: &str) -> String {
    not_the_stacks(resource, "is retained from a deleted ManagedService")
}

/// A Stack meets an object of ManagedService `service`.
pub fn stack_resource_of_service(resource: &str, service: &str) -> String {
    not_the_stacks(resource, &format!("belongs to ManagedService {service}"))
}

/// A Stack meets an object labelled as another Stack's, `other`.
pub fn stack_resource_of_other_stack(resource: &str, other: &str) -> String {
    not_the_stacks(resource, &format!("belongs to Stack {other}"))
}

/// A Stack meets an object of its manifest's name that it did not create.
pub fn stack_resource_not_adopted(resource: &str, stack: &str) -> String {
    format!(
        "{resource} exists and was not created by Stack {stack}: it is not adopted; annotate its manifest {ADOPT}=\"true\" to adopt it, or take it out of the Stack"
    )
}

/// A Stack resource whose kind the API server does not serve.
pub fn stack_kind_not_served(resource: &str, problem: &str) -> String {
    format!("{resource} is not served by the API server: {problem}")
}

/// The Warning Event of a prune or delete of a resource whose kind is not
/// served: nothing can be deleted, the Stack lets it be.
pub fn stack_kind_not_served_left_alone(resource: &str, problem: &str, verb: &str) -> String {
    format!(
        "{}; it is left alone, not {verb}, and no longer in the Stack's inventory",
        stack_kind_not_served(resource, problem)
    )
}

/// `spec.resources[index]` names the object `spec.resources[first]` does
/// (`resource`: `Kind/name`), under `api_version` (`first_api_version`).
pub fn manifest_listed_twice(
    resource: &str,
    first: usize,
    first_api_version: &str,
    api_version: &str,
) -> String {
    if first_api_version == api_version {
        format!("{resource} is already spec.resources[{first}]")
    } else {
        format!(
            "{resource} is already spec.resources[{first}] under {first_api_version}, not another object under {api_version}: list an object once, under one version"
        )
    }
}

/// The row message, on a parent Stack, of a nested Stack in which prunes
/// or deletes wait.
pub fn nested_approvals_pending(stack: &str, count: u32, namespace: &str) -> String {
    format!(
        "{count} deletion approval(s) pending in Stack {stack}: kubectl navique approvals -n {namespace}"
    )
}

/// A `Delete` policy meets an engine object marked `Delete=confirm` and
/// not approved yet.
pub fn engine_object_awaiting_approval(kind: &str, name: &str) -> String {
    format!(
        "waiting for deletion approval of {kind} {name} ({SYNC_OPTIONS}: Delete=confirm): annotate it {DELETION_APPROVED}=true"
    )
}

/// A `Delete` policy meets an engine object it must not delete: `why`.
pub fn engine_object_held(kind: &str, name: &str, why: &str) -> String {
    format!("{kind} {name} is not deleted: {why}")
}

/// A `Delete` policy meets an engine object marked `Delete=false`.
pub fn engine_object_never_deleted(kind: &str, name: &str) -> String {
    engine_object_held(
        kind,
        name,
        &format!(
            "it is marked {SYNC_OPTIONS}: Delete=false; remove Delete=false to let the deletion policy delete it"
        ),
    )
}

/// A manifest field that must be there is missing or empty.
pub fn manifest_field_required(field: &str) -> String {
    format!("{field} is required")
}

/// A manifest's `metadata.annotations` is not a map.
pub const MANIFEST_ANNOTATIONS_NOT_A_MAP: &str =
    "metadata.annotations must be a map of strings to strings";

/// A manifest field that must be a string holds another JSON value; `key`
/// is the field's name as the YAML writes it.
pub fn manifest_field_not_a_string(field: &str, key: &str, value: &Value) -> String {
    match value {
        Value::Bool(b) => {
            let (example, words) = if *b {
                ("y", "y, yes, on or true")
            } else {
                ("n", "n, no, off or false")
            };
            format!(
                "{field} must be a string, not the boolean {b}: quote it ({key}: \"{example}\", not {key}: {example}); YAML reads an unquoted {words} as the boolean {b}"
            )
        }
        Value::Number(n) => {
            format!("{field} must be a string, not the number {n}: quote it ({key}: \"{n}\")")
        }
        Value::Array(_) => format!("{field} must be a string, not a list"),
        Value::Object(_) => format!("{field} must be a string, not a map"),
        Value::Null | Value::String(_) => format!("{field} must be a string"),
    }
}

/// `alice at 2026-12-01T15:00:00Z, bob at ...`: who approved and when.
pub fn who_and_when(approvers: &[Approver]) -> String {
    approvers
        .iter()
        .map(|a| format!("{} at {}", a.user, a.time.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Who approved a removal that no person approved.
const APPROVED_BY_MANIFEST: &str = "the Stack's manifest (cd.hanzo.ai/deletion-approved declared)";

/// The note of an `ApprovedRemoval` Event: `pruned ConfigMap/settings,
/// approved by alice at 2026-12-01T15:00:00Z` (`deleted ...` for a delete;
/// [`APPROVED_BY_MANIFEST`] when no approver is named).
pub fn approved_removal(pruned: bool, resource: &str, approvers: &[Approver]) -> String {
    let done = if pruned { "pruned" } else { "deleted" };
    let by = if approvers.is_empty() {
        APPROVED_BY_MANIFEST.to_owned()
    } else {
        who_and_when(approvers)
    };
    format!("{done} {resource}, approved by {by}")
}

/// What an [`approved_removal`] note says: whether it was a prune, and who
/// approved it and when (none for the manifest); `None` for another text.
pub fn parse_approved_removal(note: &str) -> Option<(bool, Vec<Approver>)> {
    let (pruned, rest) = match note.split_once(' ')? {
        ("pruned", rest) => (true, rest),
        ("deleted", rest) => (false, rest),
        _ => return None,
    };
    let (_, by) = rest.split_once(", approved by ")?;
    if by == APPROVED_BY_MANIFEST {
        return Some((pruned, Vec::new()));
    }
    let approvers = by
        .split(", ")
        .map(|one| {
            let (user, time) = one.rsplit_once(" at ")?;
            Some(Approver {
                user: user.to_owned(),
                time: Time(time.parse().ok()?),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((pruned, approvers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_denial_matches_the_seed_for_one_lock() {
        assert_eq!(
            lock_denied(&["protect-forge-stack"]),
            "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource"
        );
    }

    #[test]
    fn lock_denial_lists_every_lock() {
        assert_eq!(
            lock_denied(&["a", "b"]),
            "resource is protected by Lock(s) [a, b]; delete the Lock(s) before deleting this resource"
        );
    }

    #[test]
    fn lock_denial_from_markers_surfaces_the_reasons() {
        assert_eq!(
            lock_denied_by_markers("a,b", Some("a: production; b: audit")),
            "resource is protected by Lock(s) [a, b]; delete the Lock(s) before deleting this resource (reasons: a: production; b: audit)"
        );
        assert_eq!(
            lock_denied_by_markers("protect-forge-stack", None),
            "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource"
        );
    }

    #[test]
    fn lock_reasons_skip_locks_without_one() {
        assert_eq!(
            lock_reasons([("a", "production"), ("b", ""), ("c", "audit")]).as_deref(),
            Some("a: production; c: audit")
        );
        assert_eq!(lock_reasons([("a", "")]), None);
    }

    #[test]
    fn namespace_and_crd_denials_list_the_locks() {
        assert_eq!(
            namespace_locked("forge", "protect-forge-stack,second"),
            "namespace forge holds Lock(s) [protect-forge-stack, second]; delete the Lock(s) before deleting this namespace"
        );
        assert_eq!(
            crd_locked("stacks.core.navique.com", "forge/protect-forge-stack"),
            "stacks.core.navique.com has locked objects (Lock(s) [forge/protect-forge-stack]); delete the Lock(s) before deleting this CustomResourceDefinition"
        );
    }

    #[test]
    fn deletion_protection_message_matches_the_seed() {
        assert_eq!(
            DELETION_PROTECTION_ENABLED,
            "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first"
        );
    }

    #[test]
    fn confirmation_message_matches_the_seed() {
        assert_eq!(
            deletion_confirmation_needed("orders-db"),
            "deletionPolicy Delete destroys data; annotate services.kube-dc.com/confirm-delete=orders-db to confirm, or the instance stays retained"
        );
    }

    #[test]
    fn binding_message_matches_the_seed() {
        assert_eq!(
            service_not_found("orders-db"),
            "service not found: orders-db"
        );
    }

    #[test]
    fn downgrade_to_retain_warns_about_capacity() {
        assert_eq!(
            deletion_policy_downgraded(
                DeletionPolicy::Delete,
                DeletionPolicy::Retain,
                "plan postgresql-dev no longer allows Delete"
            ),
            "deletionPolicy Delete cannot be applied (plan postgresql-dev no longer allows Delete); deleting under Retain, the less destructive policy in force; the engine and its volumes are retained and keep consuming capacity"
        );
    }

    #[test]
    fn downgrade_to_snapshot_does_not_mention_capacity() {
        let message = deletion_policy_downgraded(
            DeletionPolicy::Delete,
            DeletionPolicy::SnapshotAndDelete,
            "cause",
        );
        assert!(
            message.ends_with(
                "deleting under SnapshotAndDelete, the less destructive policy in force"
            )
        );
    }

    #[test]
    fn disallowed_policy_names_field_and_allowed_policies() {
        assert_eq!(
            deletion_policy_not_allowed(
                DeletionPolicy::Delete,
                "postgresql-platform-ha",
                &[DeletionPolicy::Retain, DeletionPolicy::SnapshotAndDelete]
            ),
            "spec.deletionPolicy: Delete is not allowed by plan postgresql-platform-ha; allowed: Retain, SnapshotAndDelete"
        );
    }

    #[test]
    fn plan_not_found_names_the_field_and_the_plan() {
        assert_eq!(
            service_plan_not_found("postgresql-gone"),
            "spec.planRef.name: ServicePlan \"postgresql-gone\" not found"
        );
    }

    #[test]
    fn unknown_policy_lists_the_known_ones() {
        assert_eq!(
            deletion_policy_unknown("\"Shred\""),
            "spec.deletionPolicy: unknown policy \"Shred\"; allowed: Retain, SnapshotAndDelete, Delete"
        );
    }

    #[test]
    fn retained_and_backup_record_messages() {
        assert_eq!(
            RETAINED_OBJECT_PROTECTED,
            "this object was retained when its ManagedService was deleted; only the provider can change or remove it"
        );
        assert_eq!(
            BACKUP_RECORD_PROTECTED,
            "ServiceBackup records are kept by the platform and removed with their Project; they cannot be deleted"
        );
        assert_eq!(
            BACKUP_RECORD_READ_ONLY,
            "ServiceBackup records can only be changed by the platform"
        );
        assert_eq!(
            BACKUP_ORIGIN_RESERVED,
            "only the platform records Scheduled and Final backups"
        );
        assert_eq!(
            BACKUP_RECORD_OWNER_REFERENCES,
            "metadata.ownerReferences: ServiceBackup records have no owner; they are kept by the platform and removed with their Project"
        );
        assert_eq!(
            RETAINED_LABEL_RESERVED,
            "metadata.labels: services.kube-dc.com/retained is set by the platform only, when a ManagedService is deleted under Retain"
        );
        assert_eq!(
            GARBAGE_COLLECTION_REFUSED,
            "metadata.ownerReferences: ServiceBackup records and retained objects are not garbage-collected; they are removed by the provider or with their Project"
        );
    }

    #[test]
    fn invalid_sync_options_quote_the_value_and_list_what_is_accepted() {
        assert_eq!(
            sync_options_invalid(
                "Prune=Confirm",
                &sync_options_unknown_value("Prune", "Confirm", &REMOVAL_VALUES)
            ),
            "cd.hanzo.ai/sync-options \"Prune=Confirm\" is not understood: Prune takes confirm, false or true, not \"Confirm\" (did you mean confirm? sync options are case-sensitive); accepted: Prune=confirm|false|true, Delete=confirm|false|true, or, ignored, ApplyOutOfSyncOnly|ClientSideApplyMigration|CreateNamespace|FailOnSharedResource|Force|PruneLast|Replace|RespectIgnoreDifferences|ServerSideApply|SkipDryRunOnMissingResource|Validate=true|false; comma-separated, case-sensitive"
        );
    }

    #[test]
    fn sync_option_problems_hint_at_case_spaces_and_separators() {
        assert_eq!(
            sync_options_unknown_value("Prune", "confirm;Delete=confirm", &REMOVAL_VALUES),
            "Prune takes confirm, false or true, not \"confirm;Delete=confirm\" (separate options with commas)"
        );
        assert_eq!(
            sync_options_unknown_value("Validate", "no", &BOOLEAN_VALUES),
            "Validate takes true or false, not \"no\""
        );
        assert_eq!(
            sync_options_unknown_option("prune"),
            "\"prune\" is not an option (did you mean Prune? sync options are case-sensitive)"
        );
        assert_eq!(
            sync_options_unknown_option("Prune "),
            "\"Prune \" is not an option (no spaces around =)"
        );
        assert_eq!(
            sync_options_not_key_value("Prune:confirm"),
            "\"Prune:confirm\" is not Key=Value"
        );
        assert_eq!(
            sync_options_not_key_value("Prune confirm"),
            "\"Prune confirm\" is not Key=Value (separate options with commas)"
        );
        assert_eq!(
            sync_options_not_key_value("Prune"),
            "\"Prune\" is not Key=Value (give it a value: Prune=confirm, Prune=false, Prune=true)"
        );
        assert_eq!(
            sync_options_empty_item(2),
            "item 2 is empty (one comma too many)"
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "x".repeat(10_000);
        let message = sync_options_invalid(&long, &sync_options_unknown_option(&long));
        assert!(message.len() < 600, "{}", message.len());
        assert!(message.contains(&format!(" \"{}… ", "x".repeat(QUOTED - 1))));
    }

    #[test]
    fn a_conflict_names_the_option_its_values_and_what_holds() {
        assert_eq!(
            sync_options_conflict(
                "Delete=confirm,Prune=confirm,Prune=true",
                "Prune",
                &["confirm", "true"],
                "confirm"
            ),
            "cd.hanzo.ai/sync-options \"Delete=confirm,Prune=confirm,Prune=true\" gives Prune more than one value (confirm, true); the most protective, Prune=confirm, holds: give Prune once"
        );
    }

    #[test]
    fn a_manifest_field_of_another_type_says_what_it_is_and_how_to_quote_it() {
        assert_eq!(
            manifest_field_not_a_string("metadata.name", "name", &Value::Bool(true)),
            "metadata.name must be a string, not the boolean true: quote it (name: \"y\", not name: y); YAML reads an unquoted y, yes, on or true as the boolean true"
        );
        assert_eq!(
            manifest_field_not_a_string("metadata.name", "name", &serde_json::json!(123)),
            "metadata.name must be a string, not the number 123: quote it (name: \"123\")"
        );
        assert_eq!(
            manifest_field_not_a_string(
                "metadata.annotations[\"cd.hanzo.ai/sync-wave\"]",
                "cd.hanzo.ai/sync-wave",
                &serde_json::json!(1)
            ),
            "metadata.annotations[\"cd.hanzo.ai/sync-wave\"] must be a string, not the number 1: quote it (cd.hanzo.ai/sync-wave: \"1\")"
        );
    }

    #[test]
    fn deletion_events_say_what_happened() {
        assert_eq!(
            final_backup_started("db-final-1", 1),
            "taking the final backup, recorded as ServiceBackup db-final-1"
        );
        assert_eq!(
            final_backup_started("db-final-1", 3),
            "taking the final backup again (attempt 3), recorded as ServiceBackup db-final-1"
        );
        assert_eq!(
            engine_dropped(
                &["a__db".to_owned(), "a__db_readonly".to_owned()],
                "pg:5432"
            ),
            "dropped a__db, a__db_readonly on PostgreSQL at pg:5432"
        );
        assert_eq!(
            engine_dropped(&[], "pg:5432"),
            "nothing on PostgreSQL at pg:5432 was recorded as this service's own: nothing dropped"
        );
    }

    #[test]
    fn fail_closed_messages_name_the_field() {
        assert_eq!(
            lock_target_name_invalid("Forge Ü"),
            "spec.targetRef.name: \"Forge Ü\" is not an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
        );
        assert_eq!(
            lock_target_kind_invalid("Stack x"),
            "spec.targetRef.kind: \"Stack x\" is not a kind: a letter, then letters and digits, such as Stack"
        );
        assert_eq!(
            not_a_boolean("spec.deletionProtection", "\"true\""),
            "spec.deletionProtection: must be true or false, not \"true\""
        );
        assert_eq!(
            parameters_not_applied_shared(&[
                "spec.parameters.storage",
                "spec.parameters.instances"
            ]),
            "spec.parameters.storage, spec.parameters.instances are not applied to ProviderShared services: the service is a database on the provider's server, which the provider sizes and configures"
        );
        assert_eq!(
            QUANTITY_TOO_LARGE,
            format!("must be at most {}", crate::quantity::MAX_STORAGE)
        );
    }

    #[test]
    fn an_approved_removal_note_says_who_and_reads_back() {
        let approvers = vec![
            Approver {
                user: "alice".into(),
                time: Time("2026-12-01T10:00:00Z".parse().unwrap()),
            },
            Approver {
                user: "system:serviceaccount:ops:bot".into(),
                time: Time("2026-12-01T11:00:00Z".parse().unwrap()),
            },
        ];
        let note = approved_removal(true, "ConfigMap/settings", &approvers);
        assert_eq!(
            note,
            "pruned ConfigMap/settings, approved by alice at 2026-12-01T10:00:00Z, system:serviceaccount:ops:bot at 2026-12-01T11:00:00Z"
        );
        assert_eq!(parse_approved_removal(&note), Some((true, approvers)));
        let declared = approved_removal(false, "Deployment.apps/web", &[]);
        assert_eq!(
            declared,
            "deleted Deployment.apps/web, approved by the Stack's manifest (cd.hanzo.ai/deletion-approved declared)"
        );
        assert_eq!(parse_approved_removal(&declared), Some((false, Vec::new())));
        assert_eq!(parse_approved_removal("deleted something"), None);
        assert_eq!(
            parse_approved_removal("kept x, approved by alice at noon"),
            None
        );
    }
}
