//! Scheduled backups: a Ready service whose plan has `backup.enabled` and a
//! `backup.schedule` gets a ServiceBackup with `spec.origin: Scheduled` at
//! each tick of the schedule, which backup-runner takes like a manual one.
//! The service's `status.lastScheduledBackupTime` remembers the last tick
//! recorded, so a record removed by its retention is never made again, and
//! ticks missed while the controller was down give one backup, not many.

use std::time::Duration;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use navique_api::services::{
    BackupOrigin, ManagedService, ServiceBackup, ServiceBackupSpec, ServicePlan, ServiceRef,
};

use crate::Error;

/// Parses a plan's `backup.schedule`: five fields, or six starting with
/// seconds.
pub fn parse(plan: &str, text: &str) -> Result<Cron, Error> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(text)
        .map_err(|e| Error::InvalidSchedule {
            plan: plan.to_owned(),
            schedule: text.to_owned(),
            problem: e.to_string(),
        })
}

fn chrono(time: Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(time.as_second(), time.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

fn jiff(time: DateTime<Utc>) -> Option<Timestamp> {
    Timestamp::new(time.timestamp(), time.timestamp_subsec_nanos() as i32).ok()
}

/// The tick to record now: the latest one at or before `now`, if it is
/// after both the service's creation and the last tick recorded.
pub fn due(
    cron: &Cron,
    created: Timestamp,
    last: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let tick = jiff(cron.find_previous_occurrence(&chrono(now), true).ok()?)?;
    (tick > created && last.is_none_or(|last| tick > last)).then_some(tick)
}

/// How long until the tick after `now`.
pub fn until_next(cron: &Cron, now: Timestamp) -> Option<Duration> {
    let next = jiff(cron.find_next_occurrence(&chrono(now), false).ok()?)?;
    let wait = next.as_second().saturating_sub(now.as_second()).max(1);
    Some(Duration::from_secs(u64::try_from(wait).ok()?))
}

/// The record of `service`'s backup at `tick`, e.g.
/// `orders-db-scheduled-20261130-030000`.
pub fn record_name(service: &str, tick: Timestamp) -> String {
    format!("{service}-scheduled-{}", tick.strftime("%Y%m%d-%H%M%S"))
}

/// What a reconcile of a Ready service does about its schedule.
pub struct Scheduled {
    /// The tick recorded now, for `status.lastScheduledBackupTime`.
    pub recorded: Option<Timestamp>,
    /// When to look again: at the next tick.
    pub next: Option<Duration>,
}

/// Records the backup due now, if one is.
pub async fn ensure(
    client: &Client,
    service: &ManagedService,
    plan: Option<&ServicePlan>,
    now: Timestamp,
) -> Result<Scheduled, Error> {
    let nothing = Scheduled {
        recorded: None,
        next: None,
    };
    let Some(plan) = plan.filter(|p| p.spec.backup.enabled) else {
        return Ok(nothing);
    };
    let Some(schedule) = plan.spec.backup.schedule.as_deref() else {
        return Ok(nothing);
    };
    let cron = parse(&plan.name_any(), schedule)?;
    let created = service
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let last = service
        .status
        .as_ref()
        .and_then(|s| s.last_scheduled_backup_time.as_ref())
        .map(|t| t.0);
    let next = until_next(&cron, now);
    let Some(tick) = due(&cron, created, last, now) else {
        return Ok(Scheduled {
            recorded: None,
            next,
        });
    };
    let namespace = service.namespace().ok_or(Error::Unnamed)?;
    let name = record_name(&service.name_any(), tick);
    let record = ServiceBackup::new(
        &name,
        ServiceBackupSpec {
            service_ref: ServiceRef {
                name: service.name_any(),
                uid: service.uid(),
            },
            origin: BackupOrigin::Scheduled,
            retention: plan.spec.backup.retention.clone(),
        },
    );
    match Api::<ServiceBackup>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &record)
        .await
    {
        // 409: recorded before a crash kept the status from saying so.
        Ok(_) => {
            tracing::info!(service = %format!("{namespace}/{}", service.name_any()), record = %name, "scheduled backup recorded")
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(source) => {
            return Err(Error::Write {
                kind: "ServiceBackup",
                name: format!("{namespace}/{name}"),
                source,
            });
        }
    }
    Ok(Scheduled {
        recorded: Some(tick),
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn the_latest_tick_after_creation_and_the_last_record_is_due() {
        let daily = parse("p", "0 3 * * *").unwrap();
        let created = at("2026-11-01T12:00:00Z");
        let now = at("2026-11-30T10:00:00Z");
        assert_eq!(
            due(&daily, created, None, now),
            Some(at("2026-11-30T03:00:00Z"))
        );
        // Ticks missed while the controller was down give one backup.
        assert_eq!(
            due(&daily, created, Some(at("2026-11-20T03:00:00Z")), now),
            Some(at("2026-11-30T03:00:00Z"))
        );
        // Recorded already (and maybe expired since): not again.
        assert_eq!(
            due(&daily, created, Some(at("2026-11-30T03:00:00Z")), now),
            None
        );
        // No tick since the service was created.
        assert_eq!(due(&daily, at("2026-11-30T04:00:00Z"), None, now), None);
    }

    #[test]
    fn six_fields_start_with_seconds_and_the_next_tick_is_waited_for() {
        let every_ten = parse("p", "*/10 * * * * *").unwrap();
        let now = at("2026-11-30T10:00:05Z");
        assert_eq!(
            due(&every_ten, at("2026-11-30T09:00:00Z"), None, now),
            Some(at("2026-11-30T10:00:00Z"))
        );
        assert_eq!(until_next(&every_ten, now), Some(Duration::from_secs(5)));
    }

    #[test]
    fn records_are_named_after_the_service_and_the_tick() {
        assert_eq!(
            record_name("orders-db", at("2026-11-30T03:00:00Z")),
            "orders-db-scheduled-20261130-030000"
        );
    }

    #[test]
    fn a_bad_schedule_names_the_plan_and_the_problem() {
        let error = parse("postgresql-platform-ha", "61 * * * *").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("ServicePlan postgresql-platform-ha: backup.schedule \"61 * * * *\" is not a cron schedule: "),
            "{error}"
        );
    }
}
