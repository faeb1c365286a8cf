//! Which service owns each database and role the engine created.
//!
//! The records are a table on the provider's server itself,
//! `navique.engine_objects` in the maintenance database, that only the
//! admin can read or write (`REVOKE ALL ... FROM PUBLIC`): no Project
//! identity can write it, neither through Kubernetes nor through the roles
//! the engine hands out. A name is recorded for a service's uid before the
//! object is created, and an object is used, altered, dumped, restored into
//! or dropped only while it is recorded for that uid and not retained.

use kube::ResourceExt;
use navique_api::services::ManagedService;

use crate::NameKind;

/// The schema of the records, in the maintenance database.
pub const SCHEMA: &str = "navique";
/// The table of the records.
pub const TABLE: &str = "navique.engine_objects";

/// Serialises the set-up and every claim on one server: two replicas (or
/// two services asking for one name) never both record it.
pub(crate) const LOCK_KEY: i64 = 0x006e_6176_6971_7565;

/// Creates the schema and table if missing; runs inside the claim's
/// transaction, under [`LOCK_KEY`].
pub(crate) const SETUP: &str = "\
CREATE SCHEMA IF NOT EXISTS navique;
REVOKE ALL ON SCHEMA navique FROM PUBLIC;
CREATE TABLE IF NOT EXISTS navique.engine_objects (
    kind text NOT NULL CHECK (kind IN ('database', 'role')),
    name text NOT NULL,
    service_uid text NOT NULL,
    namespace text NOT NULL,
    service text NOT NULL,
    retained boolean NOT NULL DEFAULT false,
    -- For a database: the last backup restored into it, by backup-runner.
    restored_from text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);
REVOKE ALL ON navique.engine_objects FROM PUBLIC;
";

/// The service a name is recorded for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `metadata.uid` of the ManagedService: a later service of the same
    /// name has another one.
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

impl Owner {
    /// The service as an owner; `None` when it lacks a uid or namespace.
    pub fn of(service: &ManagedService) -> Option<Self> {
        Some(Self {
            uid: service.uid()?,
            namespace: service.namespace()?,
            name: service.name_any(),
        })
    }
}

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: NameKind,
    pub name: String,
    pub service_uid: String,
    pub retained: bool,
}

/// Why a name cannot be used by a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// Recorded for a service that was deleted under `Retain`.
    Retained,
    /// Recorded for another service.
    OtherService,
    /// Exists on the server but is recorded for no service: created by the
    /// provider, another tool or an earlier version.
    Unrecorded,
}

impl Conflict {
    /// What the message says of the object.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Retained => {
                "was retained when its service was deleted and stays until the provider removes it"
            }
            Self::OtherService => "belongs to another service",
            Self::Unrecorded => "exists but was not created for this service",
        }
    }
}

/// What a service may do with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Recorded for this service: use it.
    Ours,
    /// Neither recorded nor on the server: record it, then create it.
    Free,
    /// Neither used, nor taken over, nor dropped.
    Refused(Conflict),
}

/// Decides a claim from the record of the name (if any), whether the object
/// exists on the server, and the claiming service's uid.
pub fn judge(record: Option<&Record>, exists: bool, uid: &str) -> Claim {
    match record {
        Some(r) if r.retained => Claim::Refused(Conflict::Retained),
        Some(r) if r.service_uid == uid => Claim::Ours,
        Some(_) => Claim::Refused(Conflict::OtherService),
        None if exists => Claim::Refused(Conflict::Unrecorded),
        None => Claim::Free,
    }
}

/// The `kind` column's spelling.
pub(crate) fn kind_name(kind: NameKind) -> &'static str {
    match kind {
        NameKind::Database => "database",
        NameKind::Role => "role",
    }
}

pub(crate) fn parse_kind(kind: &str) -> Option<NameKind> {
    match kind {
        "database" => Some(NameKind::Database),
        "role" => Some(NameKind::Role),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str, retained: bool) -> Record {
        Record {
            kind: NameKind::Database,
            name: "team_a__orders".to_owned(),
            service_uid: uid.to_owned(),
            retained,
        }
    }

    #[test]
    fn only_a_record_of_the_same_uid_lets_a_service_use_a_name() {
        assert_eq!(judge(Some(&record("u1", false)), true, "u1"), Claim::Ours);
        // Recorded and not created yet (a crash in between): still ours.
        assert_eq!(judge(Some(&record("u1", false)), false, "u1"), Claim::Ours);
        assert_eq!(
            judge(Some(&record("u1", false)), true, "u2"),
            Claim::Refused(Conflict::OtherService)
        );
    }

    #[test]
    fn a_retained_object_is_used_by_no_service_not_even_its_own() {
        // identity by name: a new service of the same name has another uid,
        // and the one that retained it is gone.
        for uid in ["u1", "u2"] {
            assert_eq!(
                judge(Some(&record("u1", true)), true, uid),
                Claim::Refused(Conflict::Retained)
            );
        }
    }

    #[test]
    fn an_object_nobody_recorded_is_never_taken_over() {
        assert_eq!(
            judge(None, true, "u1"),
            Claim::Refused(Conflict::Unrecorded)
        );
        assert_eq!(judge(None, false, "u1"), Claim::Free);
    }

    #[test]
    fn kinds_round_trip_through_their_column_spelling() {
        for kind in [NameKind::Database, NameKind::Role] {
            assert_eq!(parse_kind(kind_name(kind)), Some(kind));
        }
        assert_eq!(parse_kind("table"), None);
    }
}
