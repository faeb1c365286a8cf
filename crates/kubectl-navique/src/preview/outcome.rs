//! The one-line outcome of a preview. The vocabulary (docs/kubectl-plugin.md,
//! "Outcomes"):
//!
//! - `refused: <why>`: the API server refuses the request itself (a Lock on
//!   the object, a namespace holding Locks, `deletionProtection`); nothing
//!   changes.
//! - `waits: <object>: <why>` or `waits: <object> stops at <other> (<why>)`:
//!   the request is accepted and the object is marked for deletion, but
//!   nothing is removed until someone acts (an approval, the confirmation
//!   annotation, a Lock on what goes first).
//! - `partial: <object> stops at <other> (<why>)`: some of what would go
//!   goes (the object itself, or what goes first), then it stops at the
//!   first object that stays; the rest waits.
//! - `allowed: <what happens>`: everything listed as removed goes and
//!   nothing stops it.
//! - `unknown: <what could not be read>`: what decides could not be read
//!   with the user's credentials; the preview does not guess.
//!
//! "and N more" counts the other stops.

use serde::Serialize;

use super::{Cause, Object, Plan};

/// The kind of outcome.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Refused,
    Waits,
    Partial,
    Allowed,
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Waits => "waits",
            Self::Partial => "partial",
            Self::Allowed => "allowed",
            Self::Unknown => "unknown",
        }
    }
}

/// The verdict and its line.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub line: String,
}

/// Decides the outcome of `plan` for a request on `target`.
pub fn decide(target: &Object, plan: &Plan) -> Outcome {
    let (verdict, detail) = if let Some(refusal) = plan
        .stops
        .iter()
        .find(|s| s.object == *target && s.cause.refuses())
    {
        (Verdict::Refused, refusal.summary.clone())
    } else if let Some(unknown) = plan.stops.iter().find(|s| s.cause == Cause::Unreadable) {
        (Verdict::Unknown, unknown.summary.clone())
    } else if let Some(first) = plan.stops.first() {
        let mut detail = if first.object == *target {
            format!("{}: {}", target.display(), first.summary)
        } else {
            format!(
                "{} stops at {} ({})",
                target.display(),
                first.object.display(),
                first.summary
            )
        };
        if plan.stops.len() > 1 {
            detail.push_str(&format!(" and {} more", plan.stops.len() - 1));
        }
        let verdict = if !plan.removed.is_empty() {
            Verdict::Partial
        } else {
            Verdict::Waits
        };
        (verdict, detail)
    } else {
        (Verdict::Allowed, plan.allowed.clone())
    };
    Outcome {
        verdict,
        line: format!("{}: {detail}", verdict.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(name: &str) -> Object {
        Object::new("core.navique.com/v1alpha1", "Stack", Some("shop"), name)
    }

    fn config_map(name: &str) -> Object {
        Object::new("v1", "ConfigMap", Some("shop"), name)
    }

    fn plan() -> Plan {
        Plan {
            allowed: "Stack forge and 2 resources are deleted".to_owned(),
            ..Plan::default()
        }
    }

    #[test]
    fn a_lock_on_the_object_itself_refuses_whatever_else_stops() {
        let mut plan = plan();
        plan.stop(
            config_map("a"),
            None,
            Cause::ApprovalRequired,
            "waiting for deletion approval",
            "",
        );
        plan.stop(
            stack("forge"),
            None,
            Cause::Locked,
            "locked by protect-forge-stack",
            "",
        );
        let outcome = decide(&stack("forge"), &plan);
        assert_eq!(outcome.verdict, Verdict::Refused);
        assert_eq!(outcome.line, "refused: locked by protect-forge-stack");
    }

    #[test]
    fn a_lock_on_a_child_that_goes_first_is_not_a_refusal() {
        let mut plan = plan();
        plan.stop(
            config_map("settings"),
            Some(0),
            Cause::Locked,
            "locked by keep",
            "",
        );
        let outcome = decide(&stack("forge"), &plan);
        assert_eq!(outcome.verdict, Verdict::Waits);
        assert_eq!(
            outcome.line,
            "waits: Stack forge stops at ConfigMap settings (locked by keep)"
        );
    }

    #[test]
    fn something_removed_before_the_stop_makes_it_partial_and_counts_the_other_stops() {
        let mut plan = plan();
        plan.remove(config_map("front"), Some(1), "deleted");
        plan.stop(
            config_map("settings"),
            Some(0),
            Cause::Locked,
            "locked by keep",
            "",
        );
        plan.stop(
            config_map("data"),
            Some(0),
            Cause::ApprovalRequired,
            "waiting for deletion approval",
            "",
        );
        let outcome = decide(&stack("forge"), &plan);
        assert_eq!(outcome.verdict, Verdict::Partial);
        assert_eq!(
            outcome.line,
            "partial: Stack forge stops at ConfigMap settings (locked by keep) and 1 more"
        );
    }

    #[test]
    fn the_target_going_while_a_dependent_stays_is_partial() {
        let mut plan = plan();
        plan.remove(config_map("owner"), None, "deleted");
        plan.stop(stack("child"), None, Cause::Locked, "locked by keep", "");
        assert_eq!(
            decide(&config_map("owner"), &plan).line,
            "partial: ConfigMap owner stops at Stack child (locked by keep)"
        );
    }

    #[test]
    fn a_stop_on_the_target_itself_says_so_without_stops_at() {
        let mut plan = plan();
        plan.stop(
            stack("forge"),
            None,
            Cause::ConfirmationMissing,
            "needs x",
            "",
        );
        assert_eq!(
            decide(&stack("forge"), &plan).line,
            "waits: Stack forge: needs x"
        );
    }

    #[test]
    fn nothing_in_the_way_is_allowed_with_the_plans_words() {
        let mut plan = plan();
        plan.remove(config_map("a"), None, "deleted");
        let outcome = decide(&stack("forge"), &plan);
        assert_eq!(outcome.verdict, Verdict::Allowed);
        assert_eq!(
            outcome.line,
            "allowed: Stack forge and 2 resources are deleted"
        );
    }

    // fail closed: what could not be read is never reported as allowed.
    #[test]
    fn an_unreadable_fact_is_unknown_not_allowed() {
        let mut plan = plan();
        plan.stop(
            stack("forge"),
            None,
            Cause::Unreadable,
            "cannot read ServicePlan p: forbidden",
            "",
        );
        let outcome = decide(&stack("forge"), &plan);
        assert_eq!(outcome.verdict, Verdict::Unknown);
        assert_eq!(
            outcome.line,
            "unknown: cannot read ServicePlan p: forbidden"
        );
    }
}
