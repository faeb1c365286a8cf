//! The manifest written next to an archive once it is verified. Its
//! presence is what makes a backup exist: an archive without one is an
//! unfinished attempt, taken again from scratch.

use serde::{Deserialize, Serialize};

/// `<backup>.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The layout version of this document.
    pub version: u32,
    pub idempotency_key: String,
    pub backup_name: String,
    pub origin: String,
    pub service: ServiceRecord,
    /// Where the archive is, e.g. `s3://bucket/key`.
    pub location: String,
    /// `pg_dump --format=custom`: compressed by pg_dump, read by pg_restore.
    pub format: String,
    pub size_bytes: u64,
    /// sha256 of the archive, lowercase hex.
    pub sha256: String,
    /// Entries `pg_restore --list` found when verifying.
    pub entries: u64,
    /// RFC 3339.
    pub started_at: String,
    pub completed_at: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

pub const VERSION: u32 = 1;
pub const FORMAT: &str = "pg_dump-custom";

impl Manifest {
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec_pretty(self).expect("a manifest always serializes");
        json.push(b'\n');
        json
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if manifest.version != VERSION {
            return Err(format!(
                "version {} is not the {VERSION} this backup-runner reads",
                manifest.version
            ));
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_what_was_written() {
        let manifest = Manifest {
            version: VERSION,
            idempotency_key: "k".into(),
            backup_name: "b".into(),
            origin: "Final".into(),
            service: ServiceRecord {
                namespace: "ns".into(),
                name: "db".into(),
                uid: "u".into(),
            },
            location: "s3://bucket/ns/db-u/b.dump".into(),
            format: FORMAT.into(),
            size_bytes: 42,
            sha256: "ab".into(),
            entries: 7,
            started_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:01:00Z".into(),
        };
        let json = manifest.to_json();
        assert!(String::from_utf8_lossy(&json).contains("\"sizeBytes\": 42"));
        assert_eq!(Manifest::from_json(&json).unwrap(), manifest);
        let mut future = manifest;
        future.version = 2;
        assert!(Manifest::from_json(&future.to_json()).is_err());
    }
}
