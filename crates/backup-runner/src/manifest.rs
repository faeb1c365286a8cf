//! The manifest written next to an archive once it is verified. Its
//! presence is what makes a backup exist: an archive without one is an
//! unfinished attempt, taken again from scratch.
//!
//! Two archive formats: one object holding pg_dump's custom format
//! (versions 1 and 2), or pg_dump's directory format (a parallel dump,
//! version 3), each of its files one zstd object under `<backup>.d/`,
//! listed in `parts` with its size and checksum.

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
    /// Where the archive is, e.g. `s3://bucket/key`; a directory
    /// archive's prefix ends with `/`.
    pub location: String,
    /// `pg_dump-custom` (one object) or `pg_dump-directory` (`parts`).
    pub format: String,
    /// What the stored bytes are besides: `zstd` around an uncompressed
    /// custom format, or `none` (version 1: pg_dump compressed inside it).
    #[serde(default)]
    pub compression: Compression,
    /// The stored bytes: of the object, or of every part together.
    pub size_bytes: u64,
    /// sha256 of the stored bytes, lowercase hex; of a directory archive,
    /// the sha256 of its [`parts_digest_input`] (`sha256sum`'s lines).
    pub sha256: String,
    /// A directory archive's files, each stored as `<name>.zst`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
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

/// One file of a directory archive, as stored (compressed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// pg_dump's file name: `toc.dat`, `<dump id>.dat`, `blobs.toc`...
    pub name: String,
    pub size_bytes: u64,
    pub sha256: String,
}

/// The archive's layout, by what its manifest says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One object, pg_restore's input once decompressed.
    Single,
    /// A folder of objects, one per file of pg_dump's directory format.
    Directory,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Version 2 added `compression`: a backup-runner that reads only
/// version 1 refuses these manifests rather than feed zstd to pg_restore.
/// Single-object archives are still written as version 2, so that the
/// previous release can restore them.
pub const VERSION_SINGLE: u32 = 2;
/// Version 3 added the directory format and `parts`. Written only for
/// directory archives: the previous release refuses them.
pub const VERSION_DIRECTORY: u32 = 3;
/// The versions this build reads.
const READS: [u32; 3] = [1, VERSION_SINGLE, VERSION_DIRECTORY];
pub const FORMAT: &str = "pg_dump-custom";
pub const FORMAT_DIRECTORY: &str = "pg_dump-directory";
/// The file of a directory archive that `pg_restore --list` reads.
pub const TOC: &str = "toc.dat";

/// What a directory archive's `sha256` is the checksum of: one
/// `<sha256>  <name>.zst` line per part, as `sha256sum` prints them, so
/// that `sha256sum -c` checks a downloaded copy.
pub fn parts_digest_input(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| format!("{}  {}.zst\n", p.sha256, p.name))
        .collect()
}

/// A part's name is one of pg_dump's plain file names: nothing that
/// could leave the archive's folder, locally or in the store.
pub fn is_part_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

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
                "version {} is not one this backup-runner reads (1 to {VERSION_DIRECTORY})",
                manifest.version
            ));
        }
        if manifest.version == 1 && manifest.compression != Compression::None {
            return Err("version 1 has no compression but pg_dump's own".to_owned());
        }
        manifest.layout()?;
        Ok(manifest)
    }

    /// The layout the manifest describes, checked whole: a directory
    /// archive (version 3 only) lists its table of contents and plain,
    /// distinct names whose checksum is `sha256`; a single object lists
    /// no parts. Anything else is refused, never guessed at.
    pub fn layout(&self) -> Result<Layout, String> {
        match self.format.as_str() {
            FORMAT if self.parts.is_empty() => Ok(Layout::Single),
            FORMAT => Err(format!("format {FORMAT} has no parts")),
            FORMAT_DIRECTORY if self.version < VERSION_DIRECTORY => Err(format!(
                "format {FORMAT_DIRECTORY} needs version {VERSION_DIRECTORY}"
            )),
            FORMAT_DIRECTORY => {
                if self.compression != Compression::Zstd {
                    return Err(format!("format {FORMAT_DIRECTORY} is stored with zstd"));
                }
                let mut names = std::collections::BTreeSet::new();
                for part in &self.parts {
                    if !is_part_name(&part.name) || !names.insert(part.name.as_str()) {
                        return Err(format!("part {:?} is not a file of pg_dump's", part.name));
                    }
                }
                if !names.contains(TOC) {
                    return Err(format!("the parts hold no {TOC}"));
                }
                let size: u64 = self.parts.iter().map(|p| p.size_bytes).sum();
                let digest = crate::transfer::hex(&<sha2::Sha256 as sha2::Digest>::digest(
                    parts_digest_input(&self.parts),
                ));
                if size != self.size_bytes || digest != self.sha256 {
                    return Err("sizeBytes and sha256 are not those of the parts".to_owned());
                }
                Ok(Layout::Directory)
            }
            other => Err(format!(
                "format {other:?} is not one this backup-runner reads"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_what_was_written() {
        let manifest = Manifest {
            version: VERSION_SINGLE,
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
            parts: Vec::new(),
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
        future.version = 4;
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

    fn directory(parts: &[(&str, u64, &str)]) -> Manifest {
        let parts: Vec<Part> = parts
            .iter()
            .map(|&(name, size, sha)| Part {
                name: name.into(),
                size_bytes: size,
                sha256: sha.into(),
            })
            .collect();
        Manifest {
            version: VERSION_DIRECTORY,
            idempotency_key: "k".into(),
            backup_name: "b".into(),
            origin: "Final".into(),
            service: ServiceRecord {
                namespace: "ns".into(),
                name: "db".into(),
                uid: "u".into(),
            },
            location: "file:///s/ns/db-u/b.d/".into(),
            format: FORMAT_DIRECTORY.into(),
            compression: Compression::Zstd,
            size_bytes: parts.iter().map(|p| p.size_bytes).sum(),
            sha256: crate::transfer::hex(&<sha2::Sha256 as sha2::Digest>::digest(
                parts_digest_input(&parts),
            )),
            parts,
            entries: 9,
            row_counts: None,
            test_restore: None,
            started_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:01:00Z".into(),
        }
    }

    #[test]
    fn a_directory_manifest_lists_its_parts_and_their_checksum() {
        let manifest = directory(&[("3456.dat", 100, "aa"), ("toc.dat", 20, "bb")]);
        assert_eq!(
            parts_digest_input(&manifest.parts),
            "aa  3456.dat.zst\nbb  toc.dat.zst\n"
        );
        let json = manifest.to_json();
        let text = String::from_utf8_lossy(&json);
        assert!(text.contains("\"format\": \"pg_dump-directory\""), "{text}");
        assert!(text.contains("\"name\": \"3456.dat\""), "{text}");
        let read = Manifest::from_json(&json).unwrap();
        assert_eq!(read.layout(), Ok(Layout::Directory));
        assert_eq!(read, manifest);
        // A single object never lists parts.
        let mut single = manifest.clone();
        single.format = FORMAT.into();
        assert!(Manifest::from_json(&single.to_json()).is_err());
    }

    #[test]
    fn a_directory_manifest_that_does_not_add_up_is_refused() {
        let whole = directory(&[("1.dat", 5, "aa"), ("toc.dat", 2, "bb")]);
        let refused = |manifest: Manifest, why: &str| {
            let error = Manifest::from_json(&manifest.to_json()).unwrap_err();
            assert!(error.contains(why), "{error}");
        };
        let mut older = whole.clone();
        older.version = VERSION_SINGLE;
        refused(older, "needs version 3");
        let mut bigger = whole.clone();
        bigger.size_bytes += 1;
        refused(bigger, "not those of the parts");
        let mut dropped = whole.clone();
        dropped.parts.remove(0);
        refused(dropped, "not those of the parts");
        refused(directory(&[("1.dat", 5, "aa")]), "no toc.dat");
        for name in ["../toc.dat", "a/b", "", ".hidden", "toc.dat"] {
            let parts = [("toc.dat", 1, "aa"), (name, 1, "bb")];
            refused(directory(&parts), "is not a file of pg_dump's");
        }
        let mut plain = whole.clone();
        plain.compression = Compression::None;
        refused(plain, "stored with zstd");
        let mut unknown = whole;
        unknown.format = "pg_dump-tar".into();
        refused(unknown, "is not one this backup-runner reads");
    }
}
