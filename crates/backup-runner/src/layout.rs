//! Where a backup lives in the store, and the keys that name snapshots.
//!
//! An archive is `<namespace>/<service>-<service uid>/<backup>.dump` and its
//! manifest the same with `.json`: the uid keeps a later service of the same
//! name from ever meeting an earlier one's backups, and the namespace prefix
//! keeps each Project's backups apart (a store policy can scope by it). A
//! parallel dump is a folder `<backup>.d/` of one object per file of
//! pg_dump's directory format, `<file>.zst`.

use crate::Error;

/// A backup of one service, by the names that place it in the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BackupKey {
    pub namespace: String,
    pub service: String,
    pub uid: String,
    pub backup_name: String,
}

impl BackupKey {
    /// Checks every part, so that none can escape its folder or collide.
    pub fn new(
        namespace: &str,
        service: &str,
        uid: &str,
        backup_name: &str,
    ) -> Result<Self, Error> {
        check_name("service namespace", namespace)?;
        check_name("service name", service)?;
        check_name("backup name", backup_name)?;
        if uid.is_empty() || !uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(Error::InvalidRequest(format!(
                "service uid must be a Kubernetes UID (letters, digits and -), got {uid:?}"
            )));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            uid: uid.to_owned(),
            backup_name: backup_name.to_owned(),
        })
    }

    fn stem(&self) -> String {
        format!(
            "{}/{}-{}/{}",
            self.namespace, self.service, self.uid, self.backup_name
        )
    }

    /// The archive's key in the store.
    pub fn archive(&self) -> String {
        format!("{}.dump", self.stem())
    }

    /// The folder of a directory archive (a parallel dump): `<backup>.d`.
    pub fn directory(&self) -> String {
        format!("{}.d", self.stem())
    }

    /// The key of the directory archive's file `name`, compressed.
    pub fn part(&self, name: &str) -> String {
        format!("{}/{name}.zst", self.directory())
    }

    /// The manifest's key: it exists only for verified archives.
    pub fn manifest(&self) -> String {
        format!("{}.json", self.stem())
    }

    /// `<namespace>/<service>` for messages.
    pub fn service_display(&self) -> String {
        format!("{}/{}", self.namespace, self.service)
    }
}

/// A Kubernetes object name: lowercase letters, digits, `-` and `.`, not
/// starting with `.` (so never `.` or `..`), at most 253 characters.
fn check_name(what: &str, value: &str) -> Result<(), Error> {
    let valid = !value.is_empty()
        && value.len() <= 253
        && !value.starts_with('.')
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidRequest(format!(
            "{what} must be a Kubernetes object name (lowercase letters, digits, - and .), got {value:?}"
        )))
    }
}

/// The idempotency key of a manual backup: one snapshot per ServiceBackup
/// record of one service.
pub fn manual_key(service_uid: &str, backup_uid: &str) -> String {
    format!("{service_uid}/manual/{backup_uid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_namespace_service_uid_and_backup() {
        let key = BackupKey::new("my-project", "orders-db", "1f2e-3d", "orders-db-final").unwrap();
        assert_eq!(
            key.archive(),
            "my-project/orders-db-1f2e-3d/orders-db-final.dump"
        );
        assert_eq!(
            key.manifest(),
            "my-project/orders-db-1f2e-3d/orders-db-final.json"
        );
        assert_eq!(
            key.part("toc.dat"),
            "my-project/orders-db-1f2e-3d/orders-db-final.d/toc.dat.zst"
        );
        assert_eq!(
            key.directory(),
            "my-project/orders-db-1f2e-3d/orders-db-final.d"
        );
    }

    #[test]
    fn names_that_could_escape_or_collide_are_refused() {
        for (ns, name, uid, backup) in [
            ("", "db", "u", "b"),
            ("ns", "a/b", "u", "b"),
            ("ns", "db", "u", ".."),
            ("ns", "db", "u", "B"),
            ("ns", "db", "u/v", "b"),
            ("ns", "db", "", "b"),
            ("ns", "db", "u", "x/../../y"),
        ] {
            let error = BackupKey::new(ns, name, uid, backup).unwrap_err();
            assert!(
                matches!(error, Error::InvalidRequest(_)),
                "{ns} {name} {uid} {backup}: {error}"
            );
        }
    }

    #[test]
    fn manual_keys_name_service_and_record() {
        assert_eq!(manual_key("svc-uid", "rec-uid"), "svc-uid/manual/rec-uid");
    }
}
