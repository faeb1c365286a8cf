//! Parallel dumps and restores: pg_dump's directory format, which is the
//! only one `pg_dump --jobs` writes and the only one `pg_restore --jobs`
//! reads from a pipe-less source. It is a folder of files on local disk
//! (one per table's data, and `toc.dat`), so a parallel backup is dumped
//! into backup-runner's work folder, then each file is compressed with zstd
//! into its own object `<backup>.d/<file>.zst`, listed in the manifest with
//! its size and checksum. A restore fetches every part back (checked)
//! before pg_restore starts.
//!
//! Local disk holds the uncompressed dump (about the database's size
//! without indexes) for the time of a parallel backup or restore; memory
//! stays that of one streamed object.

use std::path::{Path, PathBuf};

use tokio::io::BufReader;
use tokio_util::sync::CancellationToken;

use crate::compression::{self, Compression};
use crate::layout::BackupKey;
use crate::manifest::{Layout, Part};
use crate::store::Store;
use crate::transfer::{self, Digested};
use crate::{Error, Metrics};

/// The most jobs a dump or restore runs: each is a PostgreSQL session.
pub const MAX_JOBS: u32 = 16;
/// Work folders start with this, so that those a killed process left are
/// recognised and removed at start-up.
const WORK_PREFIX: &str = "navique-work-";
/// pg_dump's folder inside a work folder (pg_dump creates it).
const DUMP: &str = "dump";

/// The jobs of a request: its own (1 to 16), or `default` (`--jobs`)
/// when it sets none (0). Anything else is refused, never clamped.
pub fn jobs(requested: u32, default: u32) -> Result<u32, Error> {
    match requested {
        0 => Ok(default),
        1..=MAX_JOBS => Ok(requested),
        other => Err(Error::InvalidRequest(format!(
            "jobs {other} is not between 1 and {MAX_JOBS}"
        ))),
    }
}

/// Whether a restore into a service runs pg_restore's parallel jobs. They
/// cannot share one transaction, so a failure half way is not rolled
/// back: only a directory archive, into a database that holds nothing,
/// and only where a retry can restore over what it left (the provider
/// records the restore first, or the target is not protected). Otherwise
/// the one-transaction restore, whatever the jobs.
pub fn restores_in_parallel(
    jobs: u32,
    layout: Layout,
    target_holds_data: bool,
    retry_allowed: bool,
) -> bool {
    jobs > 1 && layout == Layout::Directory && !target_holds_data && retry_allowed
}

/// A fresh work folder under `base`, removed when dropped; pg_dump's
/// folder is [`dump_dir`] inside it.
pub fn work_dir(base: &Path) -> Result<tempfile::TempDir, Error> {
    std::fs::create_dir_all(base)
        .map_err(Error::io(format!("cannot create {}", base.display())))?;
    tempfile::Builder::new()
        .prefix(WORK_PREFIX)
        .tempdir_in(base)
        .map_err(Error::io(format!(
            "cannot create a work folder in {}",
            base.display()
        )))
}

pub fn dump_dir(work: &tempfile::TempDir) -> PathBuf {
    work.path().join(DUMP)
}

/// Removes the work folders a killed backup-runner left under `base`: one
/// replica runs, so none is in use at start-up.
pub fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(WORK_PREFIX)
            && let Err(e) = std::fs::remove_dir_all(entry.path())
        {
            tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a stale work folder");
        }
    }
}

/// The bytes in the files of `dir`, for progress while pg_dump writes.
pub fn size_of(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or_default()
}

/// The files pg_dump wrote, sorted by name. Anything else in the folder
/// (a folder, a name that is not pg_dump's) fails the backup.
pub fn files(dir: &Path) -> Result<Vec<String>, Error> {
    let unexpected = |what: String| Error::PgTools(format!("pg_dump's folder holds {what}"));
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(Error::io(format!("cannot read {}", dir.display())))?
    {
        let entry = entry.map_err(Error::io(format!("cannot read {}", dir.display())))?;
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| unexpected(format!("{n:?}")))?;
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || !crate::manifest::is_part_name(&name) {
            return Err(unexpected(format!("{name:?}, not a file of pg_dump's")));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Compresses and uploads every file of `dir` as a part of `backup`, one
/// after another, each removed from local disk once stored. `progress`
/// gets the bytes stored so far.
pub async fn upload_parts(
    store: &Store,
    backup: &BackupKey,
    dir: &Path,
    zstd_workers: u32,
    metrics: &Metrics,
    progress: &(dyn Fn(u64) + Send + Sync),
    cancel: &CancellationToken,
) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    let mut stored = 0u64;
    for name in files(dir)? {
        let path = dir.join(&name);
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(Error::io(format!("cannot open {}", path.display())))?;
        let mut compressed = compression::compress(BufReader::new(file), zstd_workers);
        let before = stored;
        let digested = transfer::upload(
            store,
            &backup.part(&name),
            &mut compressed,
            &|written| progress(before + written),
            metrics,
            cancel,
            || async { Ok(()) },
        )
        .await?;
        stored += digested.size;
        progress(stored);
        tokio::fs::remove_file(&path)
            .await
            .map_err(Error::io(format!("cannot remove {}", path.display())))?;
        parts.push(Part {
            name,
            size_bytes: digested.size,
            sha256: digested.sha256,
        });
    }
    Ok(parts)
}

/// Deletes every object under the backup's folder: what an interrupted
/// attempt left, or the parts of one that failed. Missing is deleted.
pub async fn remove_parts(store: &Store, backup: &BackupKey) -> Result<(), Error> {
    store.delete_under(&backup.directory()).await
}

/// Fetches the parts of `backup` into `dir`, decompressed; those `keep`
/// refuses are read, checked and dropped (verification keeps only the
/// table of contents). Each must have the size and sha256 its manifest
/// lists and decompress whole. `Ok(Err(reason))` says which did not; an
/// `Err` is the store's.
pub async fn fetch(
    store: &Store,
    backup: &BackupKey,
    parts: &[Part],
    dir: &Path,
    keep: impl Fn(&str) -> bool,
    cancel: &CancellationToken,
) -> Result<Result<(), String>, Error> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(Error::io(format!("cannot create {}", dir.display())))?;
    for part in parts {
        let key = backup.part(&part.name);
        let (read, failed) = if keep(&part.name) {
            let path = dir.join(&part.name);
            let file = tokio::fs::File::create(&path)
                .await
                .map_err(Error::io(format!("cannot create {}", path.display())))?;
            let mut sink =
                compression::decompressing(tokio::io::BufWriter::new(file), Compression::Zstd);
            transfer::copy_object(store, &key, &mut sink, cancel).await?
        } else {
            let mut sink = compression::decompressing(tokio::io::sink(), Compression::Zstd);
            transfer::copy_object(store, &key, &mut sink, cancel).await?
        };
        let expected = Digested {
            size: part.size_bytes,
            sha256: part.sha256.clone(),
        };
        let object = format!("{}.zst", part.name);
        if read != expected {
            return Ok(Err(format!(
                "part {object}: read back {} bytes with sha256 {}, but {} bytes with sha256 {} were stored",
                read.size, read.sha256, expected.size, expected.sha256
            )));
        }
        if let Some(e) = failed {
            return Ok(Err(format!("part {object} does not decompress: {e}")));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::{ObjectStoreExt, PutPayload};

    #[test]
    fn jobs_come_from_the_request_or_the_flag_and_bad_ones_are_refused() {
        assert_eq!(jobs(0, 1).unwrap(), 1);
        assert_eq!(jobs(0, 4).unwrap(), 4);
        assert_eq!(jobs(16, 1).unwrap(), 16);
        assert_eq!(jobs(1, 8).unwrap(), 1);
        let error = jobs(17, 1).unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            error.to_string(),
            "invalid request: jobs 17 is not between 1 and 16"
        );
    }

    #[test]
    fn only_an_empty_target_is_restored_by_parallel_jobs() {
        use Layout::{Directory, Single};
        assert!(restores_in_parallel(4, Directory, false, true));
        assert!(!restores_in_parallel(1, Directory, false, true), "one job");
        assert!(!restores_in_parallel(4, Single, false, true), "a stream");
        assert!(
            !restores_in_parallel(4, Directory, true, true),
            "holds data"
        );
        assert!(
            !restores_in_parallel(4, Directory, false, false),
            "no retry"
        );
    }

    #[test]
    fn only_pg_dumps_plain_files_become_parts() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["toc.dat", "3456.dat", "blobs.toc"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        assert_eq!(
            files(dir.path()).unwrap(),
            ["3456.dat", "blobs.toc", "toc.dat"]
        );
        assert_eq!(size_of(dir.path()), 7 + 8 + 9);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let error = files(dir.path()).unwrap_err().to_string();
        assert_eq!(
            error,
            "pg_dump's folder holds \"sub\", not a file of pg_dump's"
        );
    }

    #[test]
    fn stale_work_folders_go_and_others_stay() {
        let base = tempfile::tempdir().unwrap();
        let stale = work_dir(base.path()).unwrap().keep();
        std::fs::write(stale.join("x"), "x").unwrap();
        std::fs::create_dir(base.path().join("other")).unwrap();
        remove_stale(base.path());
        assert!(!stale.exists());
        assert!(base.path().join("other").exists());
    }

    #[tokio::test]
    async fn parts_upload_and_fetch_back_and_an_altered_one_is_named() {
        let root = tempfile::tempdir().unwrap();
        let store =
            Store::from_url_opts(&format!("file://{}", root.path().join("s").display()), [])
                .unwrap();
        let backup = BackupKey::new("ns", "db", "u1", "b").unwrap();
        let dump = root.path().join("dump");
        std::fs::create_dir(&dump).unwrap();
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 97) as u8).collect();
        std::fs::write(dump.join("3456.dat"), &data).unwrap();
        std::fs::write(dump.join("toc.dat"), b"PGDMP toc").unwrap();
        let cancel = CancellationToken::new();
        let parts = upload_parts(
            &store,
            &backup,
            &dump,
            1,
            &Metrics::default(),
            &|_| {},
            &cancel,
        )
        .await
        .unwrap();
        assert_eq!(
            parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["3456.dat", "toc.dat"]
        );
        assert!(
            files(&dump).unwrap().is_empty(),
            "local files go once stored"
        );
        let object = root.path().join("s/ns/db-u1/b.d/3456.dat.zst");
        assert_eq!(
            std::fs::metadata(&object).unwrap().len(),
            parts[0].size_bytes
        );

        let back = root.path().join("back");
        let fetched = fetch(&store, &backup, &parts, &back, |_| true, &cancel)
            .await
            .unwrap();
        assert_eq!(fetched, Ok(()));
        assert!(std::fs::read(back.join("3456.dat")).unwrap() == data);
        let toc_only = root.path().join("toc-only");
        let fetched = fetch(
            &store,
            &backup,
            &parts,
            &toc_only,
            |n| n == "toc.dat",
            &cancel,
        )
        .await
        .unwrap();
        assert_eq!(fetched, Ok(()));
        assert!(!toc_only.join("3456.dat").exists());
        assert_eq!(
            std::fs::read(toc_only.join("toc.dat")).unwrap(),
            b"PGDMP toc"
        );

        let mut bytes = std::fs::read(&object).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        store
            .inner()
            .put(
                &store.path(&backup.part("3456.dat")),
                PutPayload::from(bytes),
            )
            .await
            .unwrap();
        let reason = fetch(&store, &backup, &parts, &back, |_| true, &cancel)
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            reason.starts_with("part 3456.dat.zst: read back "),
            "{reason}"
        );

        remove_parts(&store, &backup).await.unwrap();
        assert!(!root.path().join("s/ns/db-u1/b.d/toc.dat.zst").exists());
        remove_parts(&store, &backup).await.unwrap();
    }
}
