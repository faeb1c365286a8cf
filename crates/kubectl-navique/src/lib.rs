//! `kubectl navique`: a kubectl plugin for Navique's Locks and deletion
//! approvals (the binary `kubectl-navique`; kubectl runs it for
//! `kubectl navique ...` when it is on `PATH`). See `docs/kubectl-plugin.md`.
//!
//! This library holds the pure parts, tested without a cluster: the command
//! line ([`cli`]), naming resources as kubectl does ([`resources`]),
//! pending approvals computed from Stacks ([`approvals`]), what Locks protect
//! ([`locks`]), watch events ([`events`]) and every text the plugin prints
//! ([`render`]). The binary (`main.rs`, `commands/`) talks to the cluster.
//!
//! Choices:
//!
//! - **Pending approvals come from the cluster's state**, the Stacks'
//!   `status.resources[]` entries with `requiresDeletionApproval: true`
//!   (a prune when `requiresPruning`, else a delete), so `approvals` and
//!   `approve` need nothing but the API server and RBAC on Stacks. Only
//!   `approvals --watch` talks to the service-lifecycle-controller's
//!   `ApprovalEvents` gRPC service, with the kubeconfig user's own bearer
//!   token ([`credentials`]), so it streams only what that user may list.
//! - **Approving is a merge patch** ([`approve`]) of `metadata.annotations
//!   ["cd.hanzo.ai/deletion-approved"] = "true"` with the user's own name
//!   (a SelfSubjectReview) appended to `core.navique.com/approved-by`, sent
//!   with the user's own kubeconfig credentials (field manager
//!   `kubectl-navique`): whoever may patch the resource may approve it,
//!   admission checks the name, and the API server's refusal is printed as
//!   kubectl prints it.
//! - **Only pending resources are approved.** `approve` first looks the
//!   resource up in the pending approvals of the namespace's Stacks and
//!   refuses, patching nothing, when it is not there: an approval left on a
//!   resource that is not pending would silently approve a later prune.
//! - **Resource names resolve through aggregated discovery** (`/api`,
//!   `/apis`, two requests): plural, singular, kind, short names, `.group`
//!   and `.version.group`, case-insensitive. A name several groups serve
//!   (`events`) is narrowed by what is pending; the table's `KIND/NAME`
//!   always works as an argument.
//! - **Locks protect while `status.active`**: the per-object summary is
//!   computed from the Locks alone (no read of each target, so listing
//!   needs only `list` on Locks).
//! - **`ui` serves a page on 127.0.0.1 that acts as the user**: it watches
//!   Stacks, Locks and ManagedServices and approves with the same
//!   kubeconfig credentials and the same approve function as the command
//!   line; a one-time token in the URL and `Host`/`Origin` checks keep
//!   other local pages and users from driving it ([`ui::guard`]).
#![forbid(unsafe_code)]

pub mod approvals;
pub mod approve;
pub mod cli;
pub mod completion;
pub mod credentials;
pub mod events;
pub mod follow;
pub mod locks;
pub mod preview;
pub mod render;
pub mod resources;
pub mod suspend;
pub mod ui;
pub mod version;

mod error;
pub use error::Error;
