//! The manifest written next to an archive once it is verified. Its
//! presence is what makes a backup exist: an archive without one is an
//! unfinished attempt, taken again from scratch.

use serde::{Deserialize, Serialize};

use crate::compression::Compression;
use crate::test_restore::RowCounts;

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
    /// `pg_dump-custom`: pg_dump's custom format, read by pg_restore.
    pub format: String,
    /// What the stored bytes are besides: `zstd` around an uncompressed
    /// custom format, or `none` (version 1: pg_dump compressed inside it).
    #[serde(default)]
    pub compression: Compression,
    pub size_bytes: u64,
    /// sha256 of the stored bytes, lowercase hex.
    pub sha256: String,
    /// Entries `pg_restore --list` found when verifying.
    pub entries: u64,
    /// Rows per table, read inside the dump's snapshot, when a test
    /// restore was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_counts: Option<RowCounts>,
    /// The test restore that passed before this manifest was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_restore: Option<TestRestoreRecord>,
    /// RFC 3339.
    pub started_at: String,
    pub completed_at: String,
}

/// A passed test restore: the tables and rows it compared, and when.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TestRestoreRecord {
    pub tables: u64,
    pub rows: u64,
    pub completed_at: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Version 2 added `compression`. A backup-runner of version 1 refuses
/// these manifests rather than feed zstd to pg_restore.
pub const VERSION: u32 = 2;
/// The versions this build reads: 1 (always `none`) and 2.
const READS: [u32; 2] = [1, VERSION];
pub const FORMAT: &str = "pg_dump-custom";

impl Manifest {
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec_pretty(self).expect("a manifest always serializes");
        json.push(b'\n');
        json
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if !READS.contains(&manifest.version) {
            return Err(format!(
                "version {} is not one this backup-runner reads (1 to {VERSION})",
                manifest.version
            ));
        }
        if manifest.version == 1 && manifest.compression != Compression::None {
            return Err("version 1 has no compression but pg_dump's own".to_owned());
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
            compression: Compression::Zstd,
            size_bytes: 42,
            sha256: "ab".into(),
            entries: 7,
            row_counts: Some([("public.items".to_owned(), 1000)].into()),
            test_restore: Some(TestRestoreRecord {
                tables: 1,
                rows: 1000,
                completed_at: "2026-01-01T00:01:00Z".into(),
            }),
            started_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:01:00Z".into(),
        };
        let json = manifest.to_json();
        let text = String::from_utf8_lossy(&json);
        assert!(text.contains("\"sizeBytes\": 42"), "{text}");
        assert!(text.contains("\"compression\": \"zstd\""), "{text}");
        assert!(text.contains("\"public.items\": 1000"), "{text}");
        assert_eq!(Manifest::from_json(&json).unwrap(), manifest);
        let mut future = manifest.clone();
        future.version = 3;
        assert!(Manifest::from_json(&future.to_json()).is_err());
        let mut unknown = String::from_utf8(json).unwrap();
        unknown = unknown.replace("\"zstd\"", "\"lz4\"");
        assert!(Manifest::from_json(unknown.as_bytes()).is_err());
    }

    #[test]
    fn a_version_1_manifest_reads_as_pg_dumps_own_compression() {
        let v1 = r#"{"version": 1, "idempotencyKey": "k", "backupName": "b",
            "origin": "Manual", "service": {"namespace": "ns", "name": "db", "uid": "u"},
            "location": "file:///s/ns/db-u/b.dump", "format": "pg_dump-custom",
            "sizeBytes": 9, "sha256": "ab", "entries": 3,
            "startedAt": "2026-01-01T00:00:00Z", "completedAt": "2026-01-01T00:01:00Z"}"#;
        let manifest = Manifest::from_json(v1.as_bytes()).unwrap();
        assert_eq!(manifest.compression, Compression::None);
        let claimed = v1.replace("\"entries\"", "\"compression\": \"zstd\", \"entries\"");
        assert!(Manifest::from_json(claimed.as_bytes()).is_err());
    }
}
