//! Every annotation, label, finalizer, condition, reason and event name the
//! product uses, in one place. The values marked "seed" are contracts from the
//! user-facing documents and must not change.

/// The operator's own API group for Locks and Stacks.
pub const CORE_GROUP: &str = "core.navique.com";
/// The API group of managed services and their catalogue.
pub const SERVICES_GROUP: &str = "services.kube-dc.com";
/// The version both groups serve.
pub const VERSION: &str = "v1alpha1";
/// The groups whose objects a Lock may protect unless configured otherwise.
pub const DEFAULT_ENFORCEABLE_GROUPS: [&str; 2] = [CORE_GROUP, SERVICES_GROUP];
/// How flags and Helm values name Kubernetes' core group (`""`, the
/// `v1` apiVersion), which a comma-separated list cannot spell.
pub const CORE_GROUP_ALIAS: &str = "core";
/// `targetRef.apiVersion` when a Lock omits it (seed).
pub const DEFAULT_LOCK_TARGET_API_VERSION: &str = "core.navique.com/v1alpha1";

/// Annotations.
pub mod annotations {
    /// Names of the Locks protecting an object, comma-separated in a stable
    /// order; non-empty means deletes are denied (seed). Written only by the
    /// lock-controller.
    pub const LOCKED: &str = "core.navique.com/locked";
    /// The protecting Locks' `reason` texts, so the admission guard can print
    /// them in the denial without reading the Locks.
    pub const LOCK_REASONS: &str = "core.navique.com/lock-reasons";
    /// On a Namespace: names of the namespace-wide Locks (a Lock whose
    /// target is its own Namespace), comma-separated in a stable order;
    /// non-empty means deleting any enforceable object in the namespace is
    /// denied. Apart from [`LOCKED`], which on a Namespace lists every
    /// active Lock it holds. Written only by the lock-controller.
    pub const NAMESPACE_LOCKED: &str = "core.navique.com/namespace-locked";
    /// On a Namespace: the namespace-wide Locks' `reason` texts, for the
    /// denial.
    pub const NAMESPACE_LOCK_REASONS: &str = "core.navique.com/namespace-lock-reasons";
    /// Per-resource sync options: `Prune=confirm`, `Delete=confirm`,
    /// `Prune=false` (seed); what else it may hold is in [`super::sync_options`].
    pub const SYNC_OPTIONS: &str = "cd.hanzo.ai/sync-options";
    /// `"true"` approves a pending prune or delete of this object (seed).
    pub const DELETION_APPROVED: &str = "cd.hanzo.ai/deletion-approved";
    /// Who approved a pending prune or delete: user names, comma-separated,
    /// in the order they approved. The approval-identity
    /// ValidatingAdmissionPolicy lets a request only append its own
    /// `request.userInfo.username` (or, for the namespace's ServiceAccounts,
    /// that is, a Stack taking a stale approval away, clear it), so a name in
    /// it is the identity the API server authenticated.
    pub const APPROVED_BY: &str = "core.navique.com/approved-by";
    /// A Stack resource's sync wave: lower waves are applied first and deleted last.
    pub const SYNC_WAVE: &str = "cd.hanzo.ai/sync-wave";
    /// Must equal the ManagedService's name for `deletionPolicy: Delete` (seed).
    pub const CONFIRM_DELETE: &str = "services.kube-dc.com/confirm-delete";
    /// `"true"` on a Stack's manifest: the Stack adopts an object of that
    /// name that it did not create (never a retained object, a
    /// ManagedService's or another Stack's).
    pub const ADOPT: &str = "core.navique.com/adopt";
    /// Break-glass, on a Lock: the time (UTC, `2026-12-01T19:30:00Z`) until
    /// which the Lock is suspended. Written with [`SUSPEND_REASON`] and
    /// [`SUSPENDED_BY`]; the lock-suspension admission rule checks all three.
    pub const SUSPENDED_UNTIL: &str = "core.navique.com/suspended-until";
    /// Break-glass, on a Lock: why it is suspended (required).
    pub const SUSPEND_REASON: &str = "core.navique.com/suspend-reason";
    /// Break-glass, on a Lock: who suspended it. Admission lets a request
    /// set it only to its own `request.userInfo.username`.
    pub const SUSPENDED_BY: &str = "core.navique.com/suspended-by";
}

/// The RBAC verb, on `locks.core.navique.com`, that lets a user suspend or
/// resume a Lock (write the suspension annotations). Neither `update` nor
/// `delete` gives it.
pub const SUSPEND_VERB: &str = "suspend";

/// What `cd.hanzo.ai/sync-options` may hold: comma-separated `Key=Value`
/// items, case-sensitive. Anything else is not understood, and a resource
/// whose options are not understood is neither pruned nor deleted.
pub mod sync_options {
    /// Removal when the resource leaves its Stack (seed: `Prune=confirm`,
    /// `Prune=false`).
    pub const PRUNE: &str = "Prune";
    /// Removal when its Stack is deleted, and the operator's own deletes of
    /// engine objects (seed: `Delete=confirm`).
    pub const DELETE: &str = "Delete";
    /// The values of [`PRUNE`] and [`DELETE`], most protective first.
    pub const FALSE: &str = "false";
    pub const CONFIRM: &str = "confirm";
    pub const TRUE: &str = "true";
    pub const REMOVAL_VALUES: [&str; 3] = [CONFIRM, FALSE, TRUE];
    /// Argo CD's resource sync options that do not concern removal: GitOps
    /// tools write them into the same annotation. Accepted with a boolean
    /// value, and ignored.
    pub const IGNORED: [&str; 11] = [
        "ApplyOutOfSyncOnly",
        "ClientSideApplyMigration",
        "CreateNamespace",
        "FailOnSharedResource",
        "Force",
        "PruneLast",
        "Replace",
        "RespectIgnoreDifferences",
        "ServerSideApply",
        "SkipDryRunOnMissingResource",
        "Validate",
    ];
    /// The values of the [`IGNORED`] options.
    pub const BOOLEAN_VALUES: [&str; 2] = [TRUE, FALSE];
}

/// Labels.
pub mod labels {
    /// `"true"` on every object a Lock protects, so `kubectl get -l
    /// core.navique.com/locked=true` lists them and webhooks can select them.
    pub const LOCKED: &str = "core.navique.com/locked";
    /// The name of the ManagedService an engine object belongs to.
    pub const SERVICE: &str = "services.kube-dc.com/service";
    /// `"true"` on engine objects left behind by a `Retain` deletion.
    pub const RETAINED: &str = "services.kube-dc.com/retained";
    /// The name of the Stack that applied an object.
    pub const STACK: &str = "core.navique.com/stack";
    /// The standard "managed by" label and the value the operator writes.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    pub const MANAGED_BY_VALUE: &str = "navique";
    /// The name of the ServiceBinding whose credentials a Secret holds.
    pub const BINDING: &str = "services.kube-dc.com/binding";
}

/// Finalizers: each blocks the removal of an object until its controller has
/// finished the work that must happen before it is gone.
pub mod finalizers {
    /// On a Lock: its name is removed from the target before the Lock goes.
    pub const LOCK: &str = "core.navique.com/lock";
    /// On a Stack: its resources are torn down, in reverse wave order, first.
    pub const STACK: &str = "core.navique.com/stack-teardown";
    /// On a ManagedService: its deletion policy is carried out first.
    pub const MANAGED_SERVICE: &str = "services.kube-dc.com/deletion-policy";
}

/// Condition types.
pub mod condition_types {
    pub const READY: &str = "Ready";
}

/// Condition reasons. Seed reasons are contracts.
pub mod reasons {
    // Lock (seed: MissingReference, InvalidTarget).
    pub const PROTECTING: &str = "Protecting";
    pub const MISSING_REFERENCE: &str = "MissingReference";
    pub const INVALID_TARGET: &str = "InvalidTarget";
    /// A Lock's Ready reason while a break-glass suspension lets its
    /// target be deleted.
    pub const SUSPENDED: &str = "Suspended";

    // ManagedService while running.
    pub const PROVISIONING: &str = "Provisioning";
    pub const AVAILABLE: &str = "Available";
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    // ManagedService while deleting (seed).
    pub const DELETION_CONFIRMATION_NEEDED: &str = "DeletionConfirmationNeeded";
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    pub const RETAINED: &str = "Retained";

    // ServiceBinding and ServiceCredentialPolicy (seed).
    pub const CREDENTIAL_PENDING: &str = "CredentialPending";
    pub const SERVICE_DELETING: &str = "ServiceDeleting";
    // ServiceBinding.
    pub const CREDENTIALS_DELIVERED: &str = "CredentialsDelivered";
    pub const SECRET_CONFLICT: &str = "SecretConflict";
    // ServiceCredentialPolicy.
    pub const ROTATION_SCHEDULED: &str = "RotationScheduled";
    pub const ROTATION_FAILED: &str = "RotationFailed";
    pub const INVALID_ROTATION_INTERVAL: &str = "InvalidRotationInterval";
    pub const ROTATION_UNSUPPORTED: &str = "RotationUnsupported";

    // Stack.
    pub const SYNCED: &str = "Synced";
    pub const PROGRESSING: &str = "Progressing";
    pub const SYNC_FAILED: &str = "SyncFailed";
    pub const INVALID_MANIFEST: &str = "InvalidManifest";
    /// Resources left the Stack but are marked `Prune=false`.
    pub const PRUNE_SKIPPED: &str = "PruneSkipped";
    pub const DELETING: &str = "Deleting";
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
    pub const DELETION_DENIED: &str = "DeletionDenied";
    /// A resource to remove carries `cd.hanzo.ai/sync-options` that are not
    /// understood: it is held, neither pruned nor deleted.
    pub const INVALID_SYNC_OPTIONS: &str = "InvalidSyncOptions";
}

/// Event reasons. Seed reasons are contracts.
pub mod events {
    /// Warning: the requested deletion policy could not be applied (seed).
    pub const DELETION_POLICY_DOWNGRADED: &str = "DeletionPolicyDowngraded";
    /// Normal: the service is deleted because its Project is (seed).
    pub const PROJECT_DELETED: &str = "ProjectDeleted";
    /// A `SnapshotAndDelete` found no engine to back up, so data volumes
    /// and credential Secrets were retained instead of deleted.
    pub const DATA_RETAINED: &str = "DataRetained";
    /// Warning: provisioning (or its restore) failed; once per cause.
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    /// Normal: a final backup was asked of backup-runner.
    pub const FINAL_BACKUP_STARTED: &str = "FinalBackupStarted";
    /// Normal: the final backup is stored and verified.
    pub const FINAL_BACKUP_COMPLETED: &str = "FinalBackupCompleted";
    /// Normal: the service's database and roles were dropped.
    pub const DATABASE_DROPPED: &str = "DatabaseDropped";
    /// Normal: an InProject engine and its data volumes were deleted.
    pub const ENGINE_REMOVED: &str = "EngineRemoved";
    /// Normal: the engine and its objects were retained.
    pub const ENGINE_RETAINED: &str = "EngineRetained";
    /// Normal: a backup was restored into the service.
    pub const RESTORED: &str = "Restored";
    /// Warning: a final backup failed; recorded once per cause in a row.
    pub const FINAL_BACKUP_FAILED: &str = "FinalBackupFailed";
    /// Normal: a prune or delete waits for `cd.hanzo.ai/deletion-approved`.
    pub const DELETION_APPROVAL_REQUIRED: &str = "DeletionApprovalRequired";
    /// A person's approval of a waiting prune or delete was counted
    /// (Normal): who, when, and how many of how many.
    pub const DELETION_APPROVED: &str = "DeletionApproved";
    /// An approved prune or delete ran (Normal): by whose approval, when.
    pub const APPROVED_REMOVAL: &str = "ApprovedRemoval";
    /// Warning: admission denied the delete of a Stack resource (a Lock).
    pub const DELETION_DENIED: &str = "DeletionDenied";
    /// Warning: a Stack resource's `cd.hanzo.ai/sync-options` are not
    /// understood: it is held, neither pruned nor deleted.
    pub const INVALID_SYNC_OPTIONS: &str = "InvalidSyncOptions";
    /// Warning: a Stack resource's `cd.hanzo.ai/sync-options` give one
    /// option conflicting values: the most protective holds.
    pub const CONFLICTING_SYNC_OPTIONS: &str = "ConflictingSyncOptions";
    /// Warning: a Stack resource's kind is not served by the API server: it
    /// is left alone, neither pruned nor deleted.
    pub const KIND_NOT_SERVED: &str = "KindNotServed";
    /// Normal: a backup's retention ended; its archive and record are gone.
    pub const BACKUP_EXPIRED: &str = "BackupExpired";
    /// Normal: a credential policy gave its service a new password.
    pub const CREDENTIALS_ROTATED: &str = "CredentialsRotated";
    /// Normal, on a Lock: it protects its target (its Ready condition
    /// turned `Protecting`).
    pub const LOCK_PROTECTING: &str = super::reasons::PROTECTING;
    /// Warning, on a Lock: its target does not exist (Ready `MissingReference`).
    pub const LOCK_MISSING_REFERENCE: &str = super::reasons::MISSING_REFERENCE;
    /// Warning, on a Lock: its target cannot be locked (Ready `InvalidTarget`).
    pub const LOCK_INVALID_TARGET: &str = super::reasons::INVALID_TARGET;
    /// Normal, on a Lock: its name was stamped on its target.
    pub const TARGET_STAMPED: &str = "TargetStamped";
    /// Normal, on a Lock: its name was taken off its target.
    pub const TARGET_CLEARED: &str = "TargetCleared";
    /// Normal, on a Lock: a break-glass suspension took effect.
    pub const LOCK_SUSPENDED: &str = "LockSuspended";
    /// Normal, on a Lock: its suspension ended (deadline or lifted): it
    /// protects its target again.
    pub const LOCK_RESUMED: &str = "LockResumed";
    /// Warning, on a Lock: a suspension it cannot accept (unreadable,
    /// beyond the limit, already past); the Lock stays active.
    pub const SUSPENSION_REFUSED: &str = "SuspensionRefused";
}
