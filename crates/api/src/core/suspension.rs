//! Break-glass: a Lock suspended until a time. A person with the `suspend`
//! verb on `locks.core.navique.com` writes three annotations on the Lock
//! (`core.navique.com/suspended-until`, `suspend-reason`, `suspended-by`);
//! the lock-suspension admission rule ([`admit`], and the same rule as the
//! chart's ValidatingAdmissionPolicy `<release>-lock-suspension`) makes sure
//! that `suspended-by` is the requester's authenticated name, that the
//! reason is given and that the time reads. The lock-controller, which has
//! a clock, then applies the limit and the deadline.

use std::collections::BTreeMap;

use crate::constants::annotations;
use crate::messages;

/// The suspension annotations of a Lock, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub until: Option<String>,
    pub reason: Option<String>,
    pub by: Option<String>,
}

impl Written {
    /// The suspension annotations among `annotations`.
    pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Self {
        // Set to "" counts as not set, as in the policy.
        let get = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        Self {
            until: get(annotations::SUSPENDED_UNTIL),
            reason: get(annotations::SUSPEND_REASON),
            by: get(annotations::SUSPENDED_BY),
        }
    }

    /// None of the three is set: no suspension is asked for.
    pub fn is_empty(&self) -> bool {
        self.until.is_none() && self.reason.is_none() && self.by.is_none()
    }
}

/// Whether `text` is a time as `suspended-until` takes it: RFC 3339 in UTC
/// to the second, `2026-12-01T19:30:00Z` (what `date -u
/// +%Y-%m-%dT%H:%M:%SZ` prints). The policy checks the same pattern.
pub fn is_utc_time(text: &str) -> bool {
    const SHAPE: &[u8; 20] = b"dddd-dd-ddTdd:dd:ddZ";
    text.len() == SHAPE.len()
        && text.bytes().zip(SHAPE).all(|(c, shape)| match shape {
            b'd' => c.is_ascii_digit(),
            other => c == *other,
        })
}

/// The request being judged.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub user: &'a str,
    pub namespace: &'a str,
    pub lock: &'a str,
}

/// Whether a write from `old` to `new` touches the suspension: only such
/// writes are judged (and need the `suspend` verb).
pub fn changes(old: &Written, new: &Written) -> bool {
    old != new
}

/// The lock-suspension admission rule for a write from `old` to `new` that
/// [`changes`] the suspension, `may_suspend` being whether the requester
/// holds the `suspend` verb on this Lock. Removing all three annotations
/// resumes the Lock early; setting them needs all three, the requester's
/// own name in `suspended-by`. One refusal at a time, in this order.
pub fn admit(request: Request<'_>, new: &Written, may_suspend: bool) -> Result<(), String> {
    if !may_suspend {
        return Err(messages::suspend_forbidden(
            request.user,
            request.namespace,
            request.lock,
        ));
    }
    if new.is_empty() {
        return Ok(());
    }
    let until = new.until.as_deref().unwrap_or_default();
    if !is_utc_time(until) {
        return Err(messages::suspended_until_malformed(until));
    }
    if new.reason.as_deref().unwrap_or_default().trim().is_empty() {
        return Err(messages::SUSPEND_REASON_REQUIRED.to_owned());
    }
    let by = new.by.as_deref().unwrap_or_default();
    if by != request.user {
        return Err(messages::suspended_by_not_requester(request.user, by));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: Request<'static> = Request {
        user: "alice",
        namespace: "shop",
        lock: "keep",
    };

    fn written(until: &str, reason: &str, by: &str) -> Written {
        let some = |v: &str| (!v.is_empty()).then(|| v.to_owned());
        Written {
            until: some(until),
            reason: some(reason),
            by: some(by),
        }
    }

    #[test]
    fn a_complete_suspension_in_the_requesters_name_is_admitted() {
        let new = written("2026-12-01T19:30:00Z", "restore drill", "alice");
        assert_eq!(admit(ALICE, &new, true), Ok(()));
    }

    #[test]
    fn without_the_suspend_verb_nothing_is_admitted_not_even_a_resume() {
        let refusal = "alice may not suspend or resume Lock shop/keep: that needs the suspend verb on locks.core.navique.com, which update and delete do not give";
        let new = written("2026-12-01T19:30:00Z", "drill", "alice");
        assert_eq!(admit(ALICE, &new, false).unwrap_err(), refusal);
        assert_eq!(
            admit(ALICE, &Written::default(), false).unwrap_err(),
            refusal
        );
    }

    #[test]
    fn removing_every_annotation_resumes() {
        assert_eq!(admit(ALICE, &Written::default(), true), Ok(()));
    }

    #[test]
    fn an_until_that_is_not_a_utc_time_is_refused_naming_the_field() {
        for until in [
            "",
            "tomorrow",
            "2026-12-01T19:30:00+01:00",
            "2026-12-01 19:30:00Z",
            "2026-12-01T19:30:00.5Z",
        ] {
            let new = written(until, "drill", "alice");
            assert_eq!(
                admit(ALICE, &new, true).unwrap_err(),
                format!(
                    "core.navique.com/suspended-until must be a time in UTC such as 2026-12-01T19:30:00Z, not {until:?}"
                )
            );
        }
    }

    #[test]
    fn a_missing_or_blank_reason_is_refused() {
        for reason in ["", "   "] {
            let new = written("2026-12-01T19:30:00Z", reason, "alice");
            assert_eq!(
                admit(ALICE, &new, true).unwrap_err(),
                "core.navique.com/suspend-reason is required: say why the Lock is suspended"
            );
        }
    }

    // identity by name: nobody suspends in someone else's name.
    #[test]
    fn suspended_by_must_be_the_requester() {
        for by in ["bob", "", "alice,bob"] {
            let new = written("2026-12-01T19:30:00Z", "drill", by);
            assert_eq!(
                admit(ALICE, &new, true).unwrap_err(),
                format!(
                    "core.navique.com/suspended-by must be the user who suspends the Lock, alice, not {by:?}"
                )
            );
        }
    }

    #[test]
    fn only_writes_that_touch_the_annotations_are_judged() {
        let a = written("2026-12-01T19:30:00Z", "drill", "bob");
        assert!(!changes(&a, &a.clone()));
        assert!(changes(&Written::default(), &a));
        assert!(changes(
            &a,
            &written("2026-12-01T19:30:00Z", "other", "bob")
        ));
    }

    #[test]
    fn written_reads_the_three_annotations() {
        let annotations: BTreeMap<String, String> = [
            (annotations::SUSPENDED_UNTIL, "2026-12-01T19:30:00Z"),
            (annotations::SUSPEND_REASON, "drill"),
            ("other", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(
            Written::of(Some(&annotations)),
            Written {
                until: Some("2026-12-01T19:30:00Z".into()),
                reason: Some("drill".into()),
                by: None,
            }
        );
        assert!(Written::of(None).is_empty());
    }
}
