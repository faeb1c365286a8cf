//! User-facing messages. The texts the seeds quote are contracts: the tests
//! below pin them byte for byte.

use crate::constants::annotations::CONFIRM_DELETE;
use crate::services::DeletionPolicy;

/// The message a delete of a locked object is denied with (seed), naming
/// every protecting Lock in the order given.
pub fn lock_denied(lock_names: &[&str]) -> String {
    format!(
        "resource is protected by Lock(s) [{}]; delete the Lock(s) before deleting this resource",
        lock_names.join(", ")
    )
}

/// The message a delete of a ManagedService with `deletionProtection: true`
/// is denied with (seed).
pub const DELETION_PROTECTION_ENABLED: &str =
    "deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first";

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
}
