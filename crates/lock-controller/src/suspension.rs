//! Break-glass: a Lock suspended until a time (`core.navique.com/suspended-
//! until`, `suspend-reason`, `suspended-by`, admitted by the lock-suspension
//! rule, see `navique_api::core::suspension`). Admission has no clock, so
//! the limit and the deadline are judged here: a suspension is in effect
//! from when this controller first sees it (`status.suspension.since`) until
//! its `until`, at most `--max-suspension` later. While it is, the Lock does
//! not count in its target's marker, so deletes pass; at the deadline the
//! reconcile (requeued for it) stamps the target again. Anything that does
//! not read, or is beyond the limit, is refused and the Lock stays active.
//!
//! Pure functions of the Lock, the time and the limit, so that a restart
//! judges a Lock as the last run did: what was decided is in its status.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use navique_api::conditions;
use navique_api::constants::{events, reasons};
use navique_api::core::suspension::{self, Written};
use navique_api::core::{Lock, LockStatus, LockSuspension, SuspensionState};
use navique_api::messages;

use crate::decision::{self, LockEvent, Outcome};

/// The longest suspension a Lock may have (`--max-suspension`, the chart's
/// `lockGuard.maxSuspension`), with its text for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    pub duration: Duration,
    pub text: String,
}

impl Limit {
    /// `text` as the API's duration fields read it (`1h`, `90m`, `30s`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let duration =
            navique_api::duration::parse("--max-suspension", text).map_err(|e| e.to_string())?;
        Ok(Self {
            duration,
            text: text.to_owned(),
        })
    }
}

/// The suspension `lock`'s status should record at `now`: `None` when
/// there is none (nor one to remember).
pub fn judge(lock: &Lock, now: Timestamp, limit: &Limit) -> Option<LockSuspension> {
    let written = Written::of(lock.metadata.annotations.as_ref());
    let recorded = lock.status.as_ref().and_then(|s| s.suspension.as_ref());
    let target = &lock.spec.target_ref;
    if written.is_empty() {
        // Lifted by hand: remembered as ended; a refusal goes with its
        // annotations.
        return match recorded {
            Some(r) if r.state == SuspensionState::Suspended => Some(LockSuspension {
                state: SuspensionState::Ended,
                message: messages::lock_resumed_early(&target.kind, &target.name, &r.suspended_by),
                ..r.clone()
            }),
            Some(r) if r.state == SuspensionState::Ended => Some(r.clone()),
            _ => None,
        };
    }
    let until = written.until.unwrap_or_default();
    let reason = written.reason.unwrap_or_default();
    let by = written.by.unwrap_or_default();
    let same = recorded.filter(|r| {
        r.until == until
            && r.reason == reason
            && r.suspended_by == by
            && r.state != SuspensionState::Unknown
    });
    // What was settled stays settled: a refused suspension never becomes
    // acceptable by waiting, an ended one never comes back.
    if let Some(r) = same.filter(|r| r.state != SuspensionState::Suspended) {
        return Some(r.clone());
    }
    let since = match same {
        Some(r) => r.since.clone(),
        None => Timestamp::from_second(now.as_second())
            .unwrap_or(now)
            .to_string(),
    };
    let record = |state, message| LockSuspension {
        state,
        until: until.clone(),
        suspended_by: by.clone(),
        reason: reason.clone(),
        since: since.clone(),
        message,
    };
    let refused = |message| Some(record(SuspensionState::Refused, message));
    if !suspension::is_utc_time(&until) {
        return refused(messages::suspension_unreadable(
            &messages::suspended_until_malformed(&until),
        ));
    }
    let (Ok(until_at), Ok(since_at)) = (until.parse::<Timestamp>(), since.parse::<Timestamp>())
    else {
        return refused(messages::suspension_unreadable(
            &messages::suspended_until_malformed(&until),
        ));
    };
    if reason.trim().is_empty() {
        return refused(messages::suspension_unreadable(
            messages::SUSPEND_REASON_REQUIRED,
        ));
    }
    if by.is_empty() {
        return refused(messages::suspension_unreadable(
            messages::SUSPENDED_BY_REQUIRED,
        ));
    }
    if until_at <= since_at {
        return refused(messages::suspension_not_in_future(&until, &since));
    }
    let longest = SignedDuration::try_from(limit.duration).unwrap_or(SignedDuration::MAX);
    if until_at.duration_since(since_at) > longest {
        return refused(messages::suspension_beyond_limit(
            &until,
            &limit.text,
            &since,
        ));
    }
    if now >= until_at {
        return Some(record(
            SuspensionState::Ended,
            messages::lock_resumed_at_deadline(&target.kind, &target.name, &until, &by),
        ));
    }
    Some(record(
        SuspensionState::Suspended,
        messages::lock_suspended(&target.kind, &target.name, &until, &by, &reason),
    ))
}

/// Whether `lock`'s suspension lets its target be deleted at `now`.
pub fn in_effect(lock: &Lock, now: Timestamp, limit: &Limit) -> bool {
    judge(lock, now, limit).is_some_and(|s| s.state == SuspensionState::Suspended)
}

/// How long until a suspension in effect ends: when to reconcile again.
pub fn time_left(suspension: Option<&LockSuspension>, now: Timestamp) -> Option<Duration> {
    let suspension = suspension.filter(|s| s.state == SuspensionState::Suspended)?;
    let until: Timestamp = suspension.until.parse().ok()?;
    let left = until.duration_since(now);
    // A moment past the deadline, so that the reconcile finds it over.
    Some(Duration::try_from(left).unwrap_or_default() + Duration::from_millis(500))
}

/// The status of `lock` after `outcome` with `suspension`, or `None` when
/// it has it already. A suspension in effect turns a protecting Lock's
/// Ready `False`, reason `Suspended`, and `active` false.
pub fn lock_status(
    lock: &Lock,
    outcome: &Outcome,
    suspension: Option<LockSuspension>,
    now: Timestamp,
) -> Option<LockStatus> {
    let current = lock.status.clone().unwrap_or_default();
    let mut next = match suspension.as_ref() {
        Some(s) if s.state == SuspensionState::Suspended && *outcome == Outcome::Protecting => {
            let generation = lock.metadata.generation;
            let mut next = LockStatus {
                active: false,
                reason: lock.spec.reason.clone(),
                observed_generation: generation,
                conditions: current.conditions.clone(),
                suspension: None,
            };
            conditions::upsert(
                &mut next.conditions,
                conditions::ready(
                    false,
                    reasons::SUSPENDED,
                    s.message.clone(),
                    generation,
                    now,
                ),
            );
            next
        }
        _ => decision::lock_status(lock, outcome, now).unwrap_or_else(|| current.clone()),
    };
    next.suspension = suspension;
    (next != current).then_some(next)
}

/// Whether the Ready condition follows the suspension rather than the
/// outcome (whose own Event is then not recorded).
pub fn overrides_outcome(suspension: Option<&LockSuspension>, outcome: &Outcome) -> bool {
    suspension.is_some_and(|s| s.state == SuspensionState::Suspended)
        && *outcome == Outcome::Protecting
}

fn is(s: Option<&LockSuspension>, state: SuspensionState) -> Option<&LockSuspension> {
    s.filter(|s| s.state == state)
}

fn same_suspension(a: &LockSuspension, b: &LockSuspension) -> bool {
    a.until == b.until && a.reason == b.reason && a.suspended_by == b.suspended_by
}

/// The Events a change of the recorded suspension from `before` to `after`
/// calls for: `LockSuspended` when one takes effect, `LockResumed` when one
/// in effect ends, `SuspensionRefused` (Warning) for a new refusal.
pub fn events(
    lock: &Lock,
    before: Option<&LockSuspension>,
    after: Option<&LockSuspension>,
) -> Vec<LockEvent> {
    let target = &lock.spec.target_ref;
    let mut out = Vec::new();
    let was_suspended = is(before, SuspensionState::Suspended);
    let now_suspended = is(after, SuspensionState::Suspended);
    if let Some(was) = was_suspended
        && now_suspended.is_none_or(|now| !same_suspension(was, now))
    {
        let note = match after {
            Some(a) if a.state == SuspensionState::Ended && same_suspension(was, a) => {
                a.message.clone()
            }
            _ => messages::lock_resumed_early(&target.kind, &target.name, &was.suspended_by),
        };
        out.push(LockEvent {
            warning: false,
            reason: events::LOCK_RESUMED,
            note,
        });
    }
    if let Some(now) = now_suspended
        && was_suspended.is_none_or(|was| !same_suspension(was, now))
    {
        out.push(LockEvent {
            warning: false,
            reason: events::LOCK_SUSPENDED,
            note: now.message.clone(),
        });
    }
    if let Some(refused) = is(after, SuspensionState::Refused)
        && is(before, SuspensionState::Refused).is_none_or(|was| !same_suspension(was, refused))
    {
        out.push(LockEvent {
            warning: true,
            reason: events::SUSPENSION_REFUSED,
            note: refused.message.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use navique_api::constants::annotations;
    use navique_api::core::{LockSpec, TargetRef};

    use super::*;

    const NOW: &str = "2026-12-01T19:00:00Z";

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn hour() -> Limit {
        Limit::parse("1h").unwrap()
    }

    fn lock(annotations: &[(&str, &str)], recorded: Option<LockSuspension>) -> Lock {
        let mut lock = Lock::new(
            "keep",
            LockSpec {
                target_ref: TargetRef {
                    api_version: "core.navique.com/v1alpha1".into(),
                    kind: "Stack".into(),
                    name: "forge".into(),
                },
                reason: None,
            },
        );
        lock.metadata.namespace = Some("shop".into());
        let map: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        lock.metadata.annotations = (!map.is_empty()).then_some(map);
        lock.status = Some(LockStatus {
            suspension: recorded,
            ..LockStatus::default()
        });
        lock
    }

    fn suspended(until: &str) -> Lock {
        lock(
            &[
                (annotations::SUSPENDED_UNTIL, until),
                (annotations::SUSPEND_REASON, "restore drill"),
                (annotations::SUSPENDED_BY, "alice"),
            ],
            None,
        )
    }

    /// The Lock after its status recorded what `judge` decided.
    fn recorded(mut lock: Lock, now: &str) -> Lock {
        let judged = judge(&lock, at(now), &hour());
        lock.status.as_mut().unwrap().suspension = judged;
        lock
    }

    #[test]
    fn a_suspension_within_the_limit_is_in_effect_until_its_deadline() {
        let lock = suspended("2026-12-01T19:30:00Z");
        let judged = judge(&lock, at(NOW), &hour()).unwrap();
        assert_eq!(judged.state, SuspensionState::Suspended);
        assert_eq!(judged.since, NOW);
        assert_eq!(
            judged.message,
            "suspended by alice until 2026-12-01T19:30:00Z (restore drill): this Lock does not protect Stack forge until then"
        );
        assert_eq!(
            time_left(Some(&judged), at(NOW)),
            Some(Duration::from_millis(30 * 60 * 1000 + 500))
        );
        // Later runs (a restart included) keep when it was first seen.
        let lock = recorded(lock, NOW);
        assert!(in_effect(&lock, at("2026-12-01T19:29:59Z"), &hour()));
        assert_eq!(
            judge(&lock, at("2026-12-01T19:29:59Z"), &hour())
                .unwrap()
                .since,
            NOW
        );
    }

    #[test]
    fn at_the_deadline_it_ends_and_stays_ended() {
        let lock = recorded(suspended("2026-12-01T19:30:00Z"), NOW);
        let ended = judge(&lock, at("2026-12-01T19:30:00Z"), &hour()).unwrap();
        assert_eq!(ended.state, SuspensionState::Ended);
        assert_eq!(
            ended.message,
            "the suspension by alice ended at 2026-12-01T19:30:00Z: protecting Stack forge again"
        );
        let lock = recorded(lock, "2026-12-01T19:30:00Z");
        assert!(!in_effect(&lock, at("2026-12-01T19:40:00Z"), &hour()));
        assert_eq!(time_left(Some(&ended), at(NOW)), None);
    }

    #[test]
    fn a_suspension_beyond_the_limit_is_refused_for_good() {
        let lock = suspended("2026-12-01T20:00:01Z");
        let refused = judge(&lock, at(NOW), &hour()).unwrap();
        assert_eq!(refused.state, SuspensionState::Refused);
        assert_eq!(
            refused.message,
            "core.navique.com/suspended-until 2026-12-01T20:00:01Z is more than 1h (lockGuard.maxSuspension) after the suspension was seen at 2026-12-01T19:00:00Z: the Lock stays active"
        );
        // fail open: waiting never makes a refused suspension acceptable.
        let lock = recorded(lock, NOW);
        assert!(!in_effect(&lock, at("2026-12-01T19:30:00Z"), &hour()));
        // Exactly the limit is allowed.
        assert!(in_effect(
            &suspended("2026-12-01T20:00:00Z"),
            at(NOW),
            &hour()
        ));
    }

    #[test]
    fn a_lowered_limit_ends_a_suspension_in_effect() {
        let lock = recorded(suspended("2026-12-01T19:50:00Z"), NOW);
        let judged = judge(
            &lock,
            at("2026-12-01T19:10:00Z"),
            &Limit::parse("30m").unwrap(),
        );
        assert_eq!(judged.unwrap().state, SuspensionState::Refused);
    }

    #[test]
    fn a_past_or_unreadable_until_is_refused_naming_the_field() {
        let past = judge(&suspended("2026-12-01T18:00:00Z"), at(NOW), &hour()).unwrap();
        assert_eq!(
            past.message,
            "core.navique.com/suspended-until 2026-12-01T18:00:00Z is not after 2026-12-01T19:00:00Z, when the suspension was seen: the Lock stays active"
        );
        for until in ["soon", "2026-13-01T19:30:00Z"] {
            let judged = judge(&suspended(until), at(NOW), &hour()).unwrap();
            assert_eq!(judged.state, SuspensionState::Refused);
            assert_eq!(
                judged.message,
                format!(
                    "core.navique.com/suspended-until must be a time in UTC such as 2026-12-01T19:30:00Z, not {until:?}: the Lock stays active"
                )
            );
        }
    }

    #[test]
    fn a_suspension_without_reason_or_suspender_is_refused() {
        let no_reason = lock(
            &[
                (annotations::SUSPENDED_UNTIL, "2026-12-01T19:30:00Z"),
                (annotations::SUSPENDED_BY, "alice"),
            ],
            None,
        );
        assert_eq!(
            judge(&no_reason, at(NOW), &hour()).unwrap().message,
            "core.navique.com/suspend-reason is required: say why the Lock is suspended: the Lock stays active"
        );
        let no_by = lock(
            &[
                (annotations::SUSPENDED_UNTIL, "2026-12-01T19:30:00Z"),
                (annotations::SUSPEND_REASON, "drill"),
            ],
            None,
        );
        assert_eq!(
            judge(&no_by, at(NOW), &hour()).unwrap().state,
            SuspensionState::Refused
        );
    }

    #[test]
    fn removing_the_annotations_ends_it_early_and_forgets_a_refusal() {
        let in_effect = recorded(suspended("2026-12-01T19:30:00Z"), NOW);
        let mut lifted = in_effect.clone();
        lifted.metadata.annotations = None;
        let ended = judge(&lifted, at("2026-12-01T19:05:00Z"), &hour()).unwrap();
        assert_eq!(ended.state, SuspensionState::Ended);
        assert_eq!(
            ended.message,
            "the suspension by alice was lifted before its deadline: protecting Stack forge again"
        );
        let mut refused = recorded(suspended("2026-12-01T23:00:00Z"), NOW);
        refused.metadata.annotations = None;
        assert_eq!(judge(&refused, at(NOW), &hour()), None);
        assert_eq!(judge(&lock(&[], None), at(NOW), &hour()), None);
    }

    #[test]
    fn a_suspension_turns_ready_false_with_reason_suspended_and_back() {
        let lock = suspended("2026-12-01T19:30:00Z");
        let judged = judge(&lock, at(NOW), &hour());
        let status = lock_status(&lock, &Outcome::Protecting, judged.clone(), at(NOW)).unwrap();
        assert!(!status.active);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "Suspended")
        );
        assert_eq!(status.suspension, judged);
        let mut written = lock.clone();
        written.status = Some(status);
        // Unchanged: nothing to write (no write loop).
        assert_eq!(
            lock_status(&written, &Outcome::Protecting, judged, at(NOW)),
            None
        );
        let ended = judge(&written, at("2026-12-01T19:30:00Z"), &hour());
        let status = lock_status(
            &written,
            &Outcome::Protecting,
            ended,
            at("2026-12-01T19:30:00Z"),
        )
        .unwrap();
        assert!(status.active);
        assert_eq!(status.conditions[0].reason, "Protecting");
    }

    #[test]
    fn events_mark_the_start_the_end_and_a_refusal_once() {
        let lock = suspended("2026-12-01T19:30:00Z");
        let start = judge(&lock, at(NOW), &hour());
        let reasons = |events: Vec<LockEvent>| -> Vec<&'static str> {
            events.into_iter().map(|e| e.reason).collect()
        };
        assert_eq!(
            reasons(events(&lock, None, start.as_ref())),
            ["LockSuspended"]
        );
        assert!(events(&lock, start.as_ref(), start.as_ref()).is_empty());
        let lock = recorded(lock, NOW);
        let end = judge(&lock, at("2026-12-01T19:31:00Z"), &hour());
        let ended = events(&lock, start.as_ref(), end.as_ref());
        assert_eq!(reasons(ended.clone()), ["LockResumed"]);
        assert_eq!(
            ended[0].note,
            "the suspension by alice ended at 2026-12-01T19:30:00Z: protecting Stack forge again"
        );
        let refused = judge(&suspended("2026-12-02T00:00:00Z"), at(NOW), &hour());
        let warned = events(&lock, None, refused.as_ref());
        assert_eq!(reasons(warned.clone()), ["SuspensionRefused"]);
        assert!(warned[0].warning);
        assert!(events(&lock, refused.as_ref(), refused.as_ref()).is_empty());
    }
}
