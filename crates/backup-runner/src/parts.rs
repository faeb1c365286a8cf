//! Part sizes of the multipart upload of an archive whose size is unknown
//! until pg_dump ends.
//!
//! S3 allows 10,000 parts of 5 MiB to 5 GiB (the last may be smaller).
//! Parts are held in memory, so their size is what bounds backup-runner's:
//! the first 4,096 parts are 8 MiB (archives up to 32 GiB, a database of
//! about 150 GiB at the benchmark's ratio, upload in constant memory). Only
//! past them do parts grow, linearly, by 8 MiB every 64 parts (doubling
//! would make the last parts huge): 10,000 parts hold about 2 TiB, in parts
//! of at most 744 MiB.

/// The first parts' size; also the growth step.
pub const BASE_PART: u64 = 8 * 1024 * 1024;
/// Parts of [`BASE_PART`] before any grows.
pub const FLAT_PARTS: u64 = 4096;
/// Parts of one size before the next size, past [`FLAT_PARTS`].
pub const PARTS_PER_STEP: u64 = 64;
/// S3's (and GCS's XML API's) limit on parts in one upload.
pub const MAX_PARTS: u64 = 10_000;
/// S3's largest part.
pub const MAX_PART: u64 = 5 * 1024 * 1024 * 1024;

/// The size of part `index` (0-based); `None` past the last part allowed.
pub fn part_size(index: u64) -> Option<u64> {
    let step = index.saturating_sub(FLAT_PARTS) / PARTS_PER_STEP;
    (index < MAX_PARTS).then(|| (BASE_PART * (1 + step)).min(MAX_PART))
}

/// The bytes that the first `parts` parts hold.
pub fn capacity(parts: u64) -> u64 {
    (0..parts.min(MAX_PARTS)).filter_map(part_size).sum()
}

/// The largest archive an upload can hold.
pub fn max_archive() -> u64 {
    capacity(MAX_PARTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    const TIB: u64 = 1024 * GIB;

    #[test]
    fn parts_stay_8_mib_to_32_gib_then_grow_by_8_mib_every_64_parts() {
        assert_eq!(part_size(0), Some(8 * MIB));
        assert_eq!(part_size(FLAT_PARTS - 1), Some(8 * MIB));
        assert_eq!(capacity(FLAT_PARTS), 32 * GIB);
        assert_eq!(part_size(FLAT_PARTS + 63), Some(8 * MIB));
        assert_eq!(part_size(FLAT_PARTS + 64), Some(16 * MIB));
        assert_eq!(part_size(FLAT_PARTS + 128), Some(24 * MIB));
    }

    #[test]
    fn two_tib_fits_in_10000_parts() {
        assert!(max_archive() >= 2 * TIB, "{} bytes", max_archive());
        assert!(capacity(MAX_PARTS + 5) == max_archive());
        assert_eq!(part_size(MAX_PARTS - 1).map(|s| s > 0), Some(true));
        assert_eq!(part_size(MAX_PARTS), None);
    }

    #[test]
    fn every_part_is_within_s3_limits() {
        for index in 0..MAX_PARTS {
            let size = part_size(index).unwrap();
            assert!((5 * MIB..=MAX_PART).contains(&size), "part {index}: {size}");
        }
        // The largest part stays far below S3's limit.
        assert_eq!(part_size(MAX_PARTS - 1), Some(744 * MIB));
    }

    #[test]
    fn archives_of_a_10_gib_database_use_8_mib_parts_only() {
        // Its archive is about 2 GiB; memory is flat far past it.
        let parts = (0..MAX_PARTS).find(|&n| capacity(n) >= 10 * GIB).unwrap();
        assert!((0..parts).all(|i| part_size(i) == Some(BASE_PART)));
        // 50 GiB: parts of 64 MiB at most.
        let parts = (0..MAX_PARTS).find(|&n| capacity(n) >= 50 * GIB).unwrap();
        assert_eq!(part_size(parts - 1), Some(64 * MIB), "{parts} parts");
    }
}
