//! Whether a confirm-marked removal of a Stack's resource is approved: the
//! marks a live object carries (`cd.hanzo.ai/deletion-approved`, the names
//! in `core.navique.com/approved-by`, counted once each) against
//! `spec.approvals.required`. Free of I/O; the Stack controller decides
//! with it and the kubectl plugin's previews predict with it.

use std::collections::BTreeMap;

use crate::constants::annotations;

/// The approval marks a live object carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// `cd.hanzo.ai/deletion-approved: "true"`.
    pub approved: bool,
    /// `core.navique.com/approved-by` is present and not empty.
    pub named: bool,
    /// Its distinct names, in the order given, less the Stack's own
    /// ServiceAccount: what a Stack does is no person's approval.
    pub approvers: Vec<String>,
}

impl Marks {
    /// The marks of an object of a Stack acting as `stack_account` (its
    /// full user name, `system:serviceaccount:<ns>:<name>`).
    pub fn of(annotations: Option<&BTreeMap<String, String>>, stack_account: &str) -> Self {
        let get = |key| annotations.and_then(|a| a.get(key)).map(String::as_str);
        let approved = get(annotations::DELETION_APPROVED) == Some("true");
        let value = get(annotations::APPROVED_BY).unwrap_or_default();
        let mut approvers: Vec<String> = Vec::new();
        for name in value.split(',').map(str::trim) {
            if !name.is_empty() && name != stack_account && !approvers.iter().any(|a| a == name) {
                approvers.push(name.to_owned());
            }
        }
        Self {
            approved,
            named: !value.trim().is_empty(),
            approvers,
        }
    }
}

/// Where the approval of a removal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Not (yet) enough that counts.
    Missing,
    /// Given while the removal waits by enough distinct people, or declared
    /// by the Stack's own manifest of the resource (one approver needed).
    Given,
    /// Set before the removal waited, e.g. by hand while the resource was
    /// still in the Stack: taken away, never used ("stale authorisation").
    Stale,
}

/// The approval of a removal: `declared` when the Stack's manifest of the
/// resource sets `cd.hanzo.ai/deletion-approved: "true"`, `waiting` when
/// the stored status records the wait, `required` distinct approvers.
pub fn approval(marks: &Marks, declared: bool, waiting: bool, required: u32) -> Approval {
    if !waiting && (marks.named || (marks.approved && !declared)) {
        return Approval::Stale;
    }
    if declared && required <= 1 {
        return Approval::Given;
    }
    let enough = usize::try_from(required).unwrap_or(usize::MAX);
    if waiting && marks.approved && marks.approvers.len() >= enough.max(1) {
        Approval::Given
    } else {
        Approval::Missing
    }
}
