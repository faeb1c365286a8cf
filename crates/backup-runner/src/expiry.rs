//! Expired backups: a finished ServiceBackup whose `spec.retention` has run
//! out loses its archive, then its record. The manifest goes first, so that
//! a restore racing the sweep finds no backup rather than half of one; the
//! record goes last, so that a sweep cut short is finished by the next.
//! A `Final` backup is kept while its service exists (the deletion that
//! asked for it may still be running).
//!
//! Archives whose Project is gone have no record left to expire them: the
//! sweep marks such a Project's folder in the store (`<namespace>/.project-gone`,
//! holding when it was first seen gone) and removes the folder, manifests
//! first, once `--orphaned-backup-grace` has passed since (default 168h: a
//! Project deleted by mistake leaves a week to copy its archives). A Project
//! of that name that comes back clears the mark.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Client, ResourceExt};
use navique_api::constants::events;
use navique_api::services::{BackupOrigin, ServiceBackup};
use navique_runtime::events::Recorder;
use object_store::{ObjectStoreExt, PutPayload};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::engine::Engine;
use crate::store::Store;

/// What a sweep does with one record.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No retention, not finished, or not yet expired.
    Keep,
    /// Expired: remove these store keys (manifest first), then the record.
    /// A key ending with `/` is a directory archive's folder: everything
    /// under it goes.
    Expired { keys: Vec<String> },
    /// Expired, but its archive is not in this store (the store URL
    /// changed): kept, since deleting the record would orphan the archive.
    Foreign { location: String },
    /// `spec.retention` is not a duration (written before the webhook
    /// checked it): kept.
    Invalid(String),
}

/// The verdict on `record` at `now` for the archives in `store`.
pub fn verdict(record: &ServiceBackup, now: Timestamp, store: &Store) -> Verdict {
    let expiration = match record.expiration() {
        Ok(Some(expiration)) => expiration,
        Ok(None) => return Verdict::Keep,
        Err(e) => return Verdict::Invalid(e.to_string()),
    };
    if expiration > now {
        return Verdict::Keep;
    }
    let Some(location) = record.status.as_ref().and_then(|s| s.location.clone()) else {
        // A failed backup stored nothing.
        return Verdict::Expired { keys: Vec::new() };
    };
    // `<backup>.dump`, or a parallel dump's folder `<backup>.d/`.
    let stem_of = |archive: &str| {
        archive
            .strip_suffix(".dump")
            .or_else(|| archive.strip_suffix(".d/"))
            .map(str::to_owned)
    };
    match store
        .key_of(&location)
        .and_then(|archive| Some((stem_of(&archive)?, archive)))
    {
        Some((stem, archive)) => Verdict::Expired {
            keys: vec![format!("{stem}.json"), archive],
        },
        None => Verdict::Foreign { location },
    }
}

/// The name of the mark in a gone Project's folder.
pub const GONE_MARK: &str = ".project-gone";

/// What a sweep does with the folder of one Project in the store.
#[derive(Debug, PartialEq, Eq)]
pub enum Orphans {
    /// The Project is there (or still terminating): nothing to do.
    Keep,
    /// It is back: its mark goes.
    Unmark,
    /// First seen gone: mark the folder now.
    Mark,
    /// Gone, and the grace is still running.
    Wait,
    /// Gone for longer than the grace: remove the folder.
    Remove,
}

/// The verdict on a Project's folder: whether its namespace exists, when
/// its mark says it was first seen gone, now, and the grace.
pub fn orphans(
    exists: bool,
    marked: Option<Timestamp>,
    now: Timestamp,
    grace: Duration,
) -> Orphans {
    match (exists, marked) {
        (true, None) => Orphans::Keep,
        (true, Some(_)) => Orphans::Unmark,
        (false, None) => Orphans::Mark,
        (false, Some(at)) => {
            let grace = k8s_openapi::jiff::SignedDuration::try_from(grace).unwrap_or_default();
            if now.duration_since(at) >= grace {
                Orphans::Remove
            } else {
                Orphans::Wait
            }
        }
    }
}

/// Sweeps every `interval` until `shutdown`; archives of a Project gone for
/// `grace` go too.
pub async fn run(
    client: Client,
    engine: Arc<Engine>,
    interval: Duration,
    grace: Duration,
    shutdown: CancellationToken,
) {
    let sweeper = Sweeper {
        grace,
        recorder: Recorder::new(client.clone(), crate::NAME),
        client,
        engine,
    };
    loop {
        if let Err(e) = sweeper.sweep().await {
            tracing::warn!(error = %navique_runtime::one_line(&e), "cannot sweep expired backups");
        }
        if let Err(e) = sweeper.sweep_orphans().await {
            tracing::warn!(error = %navique_runtime::one_line(&e), "cannot sweep the archives of gone Projects");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

struct Sweeper {
    client: Client,
    engine: Arc<Engine>,
    recorder: Recorder,
    grace: Duration,
}

impl Sweeper {
    /// The folders of Projects that are gone: marked, then removed.
    async fn sweep_orphans(&self) -> Result<(), Error> {
        let store = self.engine.store();
        let root = store
            .inner()
            .list_with_delimiter(None)
            .await
            .map_err(Error::store("list", store.location("")))?;
        let now = Timestamp::now();
        let namespaces = Api::<Namespace>::all(self.client.clone());
        for folder in root.common_prefixes {
            let namespace = folder.as_ref().to_owned();
            let exists = namespaces
                .get_opt(&namespace)
                .await
                .map_err(Error::kube(format!("read Namespace {namespace}")))?
                .is_some();
            let mark = format!("{namespace}/{GONE_MARK}");
            let marked = self.read_mark(&mark).await?;
            let result = match orphans(exists, marked, now, self.grace) {
                Orphans::Keep | Orphans::Wait => Ok(()),
                Orphans::Unmark => self.delete(&mark).await,
                Orphans::Mark => {
                    tracing::warn!(%namespace, grace = ?self.grace, "the Project of these archives is gone: they are removed once the grace has passed");
                    store
                        .inner()
                        .put(&store.path(&mark), PutPayload::from(now.to_string()))
                        .await
                        .map(drop)
                        .map_err(Error::store("write", store.location(&mark)))
                }
                Orphans::Remove => self.remove_folder(&namespace, &mark).await,
            };
            if let Err(e) = result {
                tracing::warn!(%namespace, error = %navique_runtime::one_line(&e), "cannot sweep the archives of a gone Project; retried at the next sweep");
            }
        }
        Ok(())
    }

    async fn read_mark(&self, key: &str) -> Result<Option<Timestamp>, Error> {
        let store = self.engine.store();
        match store.inner().get(&store.path(key)).await {
            Ok(found) => {
                let bytes = found
                    .bytes()
                    .await
                    .map_err(Error::store("read", store.location(key)))?;
                // An unreadable mark counts from now: never removes early.
                Ok(Some(
                    String::from_utf8_lossy(&bytes)
                        .trim()
                        .parse()
                        .unwrap_or_else(|_| Timestamp::now()),
                ))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::store("read", store.location(key))(e)),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), Error> {
        self.engine.store().delete(key).await
    }

    /// Everything under the folder, manifests first (a restore racing the
    /// sweep finds no backup rather than half of one), the mark last.
    async fn remove_folder(&self, namespace: &str, mark: &str) -> Result<(), Error> {
        let store = self.engine.store();
        let prefix = object_store::path::Path::from(namespace);
        let mut keys: Vec<String> = store
            .inner()
            .list(Some(&prefix))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .map_err(Error::store("list", store.location(namespace)))?;
        keys.retain(|key| key != mark);
        keys.sort_by_key(|key| !key.ends_with(".json"));
        for key in &keys {
            self.delete(key).await?;
        }
        self.delete(mark).await?;
        self.engine
            .metrics()
            .orphans_removed
            .inc_by(keys.len() as u64);
        tracing::info!(%namespace, objects = keys.len(), "removed the archives of a gone Project");
        Ok(())
    }

    async fn sweep(&self) -> Result<(), Error> {
        let records = Api::<ServiceBackup>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("list ServiceBackups"))?;
        let now = Timestamp::now();
        for record in records {
            let name = format!(
                "{}/{}",
                record.namespace().unwrap_or_default(),
                record.name_any()
            );
            let result = match verdict(&record, now, self.engine.store()) {
                Verdict::Keep => Ok(()),
                Verdict::Expired { keys } => self.expire(&record, &keys).await,
                Verdict::Foreign { location } => {
                    tracing::warn!(record = %name, %location, "expired, but its archive is not in this store; keeping the record");
                    Ok(())
                }
                Verdict::Invalid(problem) => {
                    tracing::warn!(record = %name, %problem, "cannot tell when this backup expires; keeping it");
                    Ok(())
                }
            };
            if let Err(e) = result {
                tracing::warn!(record = %name, error = %navique_runtime::one_line(&e), "cannot remove the expired backup; retried at the next sweep");
            }
        }
        Ok(())
    }

    async fn expire(&self, record: &ServiceBackup, keys: &[String]) -> Result<(), Error> {
        let namespace = record.namespace().unwrap_or_default();
        let name = record.name_any();
        if record.spec.origin == BackupOrigin::Final && self.service_exists(record).await? {
            return Ok(());
        }
        let store = self.engine.store();
        for key in keys {
            match key.strip_suffix('/') {
                Some(folder) => store.delete_under(folder).await?,
                None => store.delete(key).await?,
            }
        }
        let event = Event {
            type_: EventType::Normal,
            reason: events::BACKUP_EXPIRED.to_owned(),
            note: Some(expired_note(record)),
            action: "Expire".to_owned(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &navique_runtime::events::regarding(record))
            .await
        {
            tracing::warn!(error = %navique_runtime::one_line(&e), "cannot record the event");
        }
        let api = Api::<ServiceBackup>::namespaced(self.client.clone(), &namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: record.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            // Gone already, or a new record of the same name: not ours.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                return Err(Error::kube(format!(
                    "delete ServiceBackup {namespace}/{name}"
                ))(e));
            }
        }
        self.engine.metrics().expired.inc();
        tracing::info!(record = %format!("{namespace}/{name}"), "removed the expired backup");
        Ok(())
    }

    /// Whether the service the record was taken of still exists.
    async fn service_exists(&self, record: &ServiceBackup) -> Result<bool, Error> {
        let reference = &record.spec.service_ref;
        let namespace = record.namespace().unwrap_or_default();
        match self
            .engine
            .service(&namespace, &reference.name, reference.uid.as_deref())
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::ServiceNotFound { .. } | Error::ServiceUidMismatch { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The Event's note: what was removed and why.
pub fn expired_note(record: &ServiceBackup) -> String {
    let retention = record.spec.retention.as_deref().unwrap_or_default();
    let location = record.status.as_ref().and_then(|s| s.location.as_deref());
    match location {
        Some(location) => {
            format!("retention {retention} ended: deleted the archive {location} and this record")
        }
        None => format!("retention {retention} ended: deleted this record"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use navique_api::services::{BackupPhase, ServiceBackupSpec, ServiceBackupStatus, ServiceRef};

    fn store() -> Store {
        Store::from_url_opts(
            "s3://backups/navique",
            [("AWS_REGION".to_owned(), "eu-west-1".to_owned())],
        )
        .unwrap()
    }

    fn record(phase: BackupPhase, location: Option<&str>) -> ServiceBackup {
        let mut backup = ServiceBackup::new(
            "db-final-1234abcd",
            ServiceBackupSpec {
                service_ref: ServiceRef {
                    name: "db".into(),
                    uid: Some("1234abcd-0000".into()),
                },
                origin: BackupOrigin::Final,
                retention: Some("1h".into()),
            },
        );
        backup.status = Some(ServiceBackupStatus {
            phase: Some(phase),
            location: location.map(str::to_owned),
            completion_time: Some(Time(Timestamp::from_second(1_000).unwrap())),
            ..Default::default()
        });
        backup
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    const LOCATION: &str = "s3://backups/navique/ns/db-1234abcd-0000/db-final-1234abcd.dump";

    // orphaned data: archives outlive their Project only for the grace.
    #[test]
    fn a_gone_projects_archives_are_marked_then_removed_after_the_grace() {
        let grace = Duration::from_secs(3600);
        assert_eq!(orphans(true, None, at(0), grace), Orphans::Keep);
        assert_eq!(orphans(false, None, at(0), grace), Orphans::Mark);
        assert_eq!(orphans(false, Some(at(0)), at(3599), grace), Orphans::Wait);
        assert_eq!(
            orphans(false, Some(at(0)), at(3600), grace),
            Orphans::Remove
        );
        // The Project came back: the mark goes, the archives stay.
        assert_eq!(orphans(true, Some(at(0)), at(9999), grace), Orphans::Unmark);
    }

    #[test]
    fn an_expired_backup_loses_its_manifest_then_its_archive() {
        let record = record(BackupPhase::Completed, Some(LOCATION));
        assert_eq!(verdict(&record, at(1_000 + 3_599), &store()), Verdict::Keep);
        assert_eq!(
            verdict(&record, at(1_000 + 3_600), &store()),
            Verdict::Expired {
                keys: vec![
                    "ns/db-1234abcd-0000/db-final-1234abcd.json".to_owned(),
                    "ns/db-1234abcd-0000/db-final-1234abcd.dump".to_owned(),
                ]
            }
        );
    }

    #[test]
    fn an_expired_parallel_backup_loses_its_manifest_then_its_folder() {
        let folder = LOCATION.replace(".dump", ".d/");
        let record = record(BackupPhase::Completed, Some(&folder));
        assert_eq!(
            verdict(&record, at(1_000 + 3_600), &store()),
            Verdict::Expired {
                keys: vec![
                    "ns/db-1234abcd-0000/db-final-1234abcd.json".to_owned(),
                    "ns/db-1234abcd-0000/db-final-1234abcd.d/".to_owned(),
                ]
            }
        );
    }

    #[test]
    fn a_failed_backup_expires_without_touching_the_store() {
        let record = record(BackupPhase::Failed, None);
        assert_eq!(
            verdict(&record, at(10_000), &store()),
            Verdict::Expired { keys: Vec::new() }
        );
    }

    #[test]
    fn an_archive_in_another_store_keeps_its_record() {
        let record = record(
            BackupPhase::Completed,
            Some("s3://elsewhere/ns/db-1234abcd-0000/db-final-1234abcd.dump"),
        );
        assert_eq!(
            verdict(&record, at(10_000), &store()),
            Verdict::Foreign {
                location: "s3://elsewhere/ns/db-1234abcd-0000/db-final-1234abcd.dump".to_owned()
            }
        );
    }

    #[test]
    fn running_unretained_or_malformed_backups_are_kept() {
        let mut running = record(BackupPhase::Running, None);
        running.status.as_mut().unwrap().completion_time = None;
        assert_eq!(verdict(&running, at(10_000), &store()), Verdict::Keep);
        let mut kept = record(BackupPhase::Completed, Some(LOCATION));
        kept.spec.retention = None;
        assert_eq!(verdict(&kept, at(10_000), &store()), Verdict::Keep);
        let mut malformed = record(BackupPhase::Completed, Some(LOCATION));
        malformed.spec.retention = Some("0s".into());
        assert_eq!(
            verdict(&malformed, at(10_000), &store()),
            Verdict::Invalid("spec.retention: \"0s\" must be longer than zero".to_owned())
        );
    }

    #[test]
    fn the_event_says_what_was_removed() {
        assert_eq!(
            expired_note(&record(BackupPhase::Completed, Some(LOCATION))),
            format!("retention 1h ended: deleted the archive {LOCATION} and this record")
        );
        assert_eq!(
            expired_note(&record(BackupPhase::Failed, None)),
            "retention 1h ended: deleted this record"
        );
    }
}
