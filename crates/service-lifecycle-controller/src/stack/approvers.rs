//! Who approved a waiting removal, and whether that is enough: the names in
//! `core.navique.com/approved-by` (which the approval-identity policy lets
//! a request only extend with its own authenticated user name), counted
//! once each, against `spec.approvals.required`. Free of I/O.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use navique_api::constants::annotations;
use navique_api::core::Approver;

pub use navique_api::approvals::{Approval, Marks, approval};

/// The approvers of a waiting removal with when each was first counted:
/// the time recorded in the stored status (`previous`) for a name already
/// there, else `now`. Only names of the live object count, so a name taken
/// away is no longer listed.
pub fn recorded(marks: &Marks, previous: &[Approver], now: Timestamp) -> Vec<Approver> {
    marks
        .approvers
        .iter()
        .map(|user| {
            let time = previous
                .iter()
                .find(|a| a.user == *user)
                .map_or_else(|| Time(now), |a| a.time.clone());
            Approver {
                user: user.clone(),
                time,
            }
        })
        .collect()
}

/// `alice, bob`: the approvers' names, for messages.
pub fn names(approvers: &[Approver]) -> String {
    approvers
        .iter()
        .map(|a| a.user.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The row message of a removal that waits for approval (`verb`: prune or
/// delete).
pub fn waiting_message(marks: &Marks, approvers: &[Approver], required: u32, verb: &str) -> String {
    if approvers.is_empty() {
        if marks.approved {
            return format!(
                "waiting for approval: cd.hanzo.ai/deletion-approved is set, but no approver is named in {}; run kubectl navique approve, which records who you are, to {verb} it",
                annotations::APPROVED_BY
            );
        }
        if required <= 1 {
            return format!(
                "waiting for approval: run kubectl navique approve, or annotate cd.hanzo.ai/deletion-approved=true and add your user name to {}, to {verb} it",
                annotations::APPROVED_BY
            );
        }
    }
    format!(
        "waiting for approval: {} of {required} distinct approvers{}; {} more must run kubectl navique approve to {verb} it",
        approvers.len(),
        if approvers.is_empty() {
            String::new()
        } else {
            format!(" ({})", names(approvers))
        },
        usize::try_from(required)
            .unwrap_or(usize::MAX)
            .saturating_sub(approvers.len())
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use navique_api::messages::who_and_when;

    const ACCOUNT: &str = "system:serviceaccount:team:navique-stack";

    fn marks(approved: bool, by: Option<&str>) -> Marks {
        let mut annotations = BTreeMap::new();
        if approved {
            annotations.insert(annotations::DELETION_APPROVED.to_owned(), "true".to_owned());
        }
        if let Some(by) = by {
            annotations.insert(annotations::APPROVED_BY.to_owned(), by.to_owned());
        }
        Marks::of(Some(&annotations), ACCOUNT)
    }

    #[test]
    fn each_name_counts_once_and_the_stacks_own_account_never() {
        let m = marks(true, Some(&format!("alice,bob,alice,{ACCOUNT}, ,bob")));
        assert_eq!(m.approvers, ["alice", "bob"]);
        assert!(m.named);
        assert_eq!(marks(true, Some(ACCOUNT)).approvers, Vec::<String>::new());
        assert!(!marks(true, None).named);
    }

    #[test]
    fn a_removal_proceeds_only_once_enough_distinct_people_approved_while_it_waits() {
        use Approval::*;
        assert_eq!(approval(&marks(true, Some("alice")), false, true, 1), Given);
        assert_eq!(
            approval(&marks(true, Some("alice")), false, true, 2),
            Missing
        );
        assert_eq!(
            approval(&marks(true, Some("alice,alice")), false, true, 2),
            Missing,
            "one person twice is one approver"
        );
        assert_eq!(
            approval(&marks(true, Some("alice,bob")), false, true, 2),
            Given
        );
        assert_eq!(
            approval(
                &marks(true, Some(&format!("alice,{ACCOUNT}"))),
                false,
                true,
                2
            ),
            Missing,
            "the Stack's account is no second person"
        );
        assert_eq!(
            approval(&marks(false, Some("alice,bob")), false, true, 2),
            Missing,
            "names without cd.hanzo.ai/deletion-approved"
        );
        assert_eq!(
            approval(&marks(true, None), false, true, 1),
            Missing,
            "an approval without a name counts for nobody"
        );
        assert_eq!(approval(&marks(false, None), false, true, 1), Missing);
    }

    /// Stale authorisation: whatever was set before the wait is taken away.
    #[test]
    fn marks_set_before_the_wait_are_stale() {
        use Approval::*;
        assert_eq!(
            approval(&marks(true, Some("alice")), false, false, 1),
            Stale
        );
        assert_eq!(
            approval(&marks(false, Some("alice")), false, false, 1),
            Stale
        );
        assert_eq!(approval(&marks(true, None), false, false, 1), Stale);
        assert_eq!(approval(&marks(false, None), false, false, 1), Missing);
        assert_eq!(
            approval(&marks(true, Some("alice")), true, false, 1),
            Stale,
            "a name is never declared, so is stale even beside a declared approval"
        );
    }

    #[test]
    fn a_declared_approval_counts_for_one_approver_only() {
        use Approval::*;
        assert_eq!(approval(&marks(true, None), true, false, 1), Given);
        assert_eq!(approval(&marks(false, None), true, false, 1), Given);
        assert_eq!(approval(&marks(true, None), true, true, 2), Missing);
        assert_eq!(
            approval(&marks(true, Some("alice")), true, true, 2),
            Missing
        );
        assert_eq!(
            approval(&marks(true, Some("alice,bob")), true, true, 2),
            Given
        );
    }

    #[test]
    fn an_approvers_time_is_kept_from_the_stored_status() {
        let then: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-12-01T11:00:00Z".parse().unwrap();
        let previous = [
            Approver {
                user: "alice".into(),
                time: Time(then),
            },
            Approver {
                user: "carol".into(),
                time: Time(then),
            },
        ];
        let approvers = recorded(&marks(true, Some("alice,bob")), &previous, now);
        assert_eq!(
            who_and_when(&approvers),
            "alice at 2026-12-01T10:00:00Z, bob at 2026-12-01T11:00:00Z"
        );
    }

    #[test]
    fn the_waiting_message_says_what_is_missing() {
        let now: Timestamp = "2026-12-01T11:00:00Z".parse().unwrap();
        let none = marks(false, None);
        assert_eq!(
            waiting_message(&none, &[], 1, "prune"),
            "waiting for approval: run kubectl navique approve, or annotate cd.hanzo.ai/deletion-approved=true and add your user name to core.navique.com/approved-by, to prune it"
        );
        assert_eq!(
            waiting_message(&marks(true, None), &[], 1, "delete"),
            "waiting for approval: cd.hanzo.ai/deletion-approved is set, but no approver is named in core.navique.com/approved-by; run kubectl navique approve, which records who you are, to delete it"
        );
        assert_eq!(
            waiting_message(&none, &[], 2, "prune"),
            "waiting for approval: 0 of 2 distinct approvers; 2 more must run kubectl navique approve to prune it"
        );
        let alice = marks(true, Some("alice"));
        let approvers = recorded(&alice, &[], now);
        assert_eq!(
            waiting_message(&alice, &approvers, 2, "prune"),
            "waiting for approval: 1 of 2 distinct approvers (alice); 1 more must run kubectl navique approve to prune it"
        );
    }
}
