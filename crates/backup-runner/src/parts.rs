//! Part sizes of the multipart upload of an archive whose size is unknown
//! until pg_dump ends.
//!
//! S3 allows 10,000 parts of 5 MiB to 5 GiB (the last may be smaller). A
//! fixed 8 MiB part caps an archive at 78 GiB; doubling parts reaches far
//! but makes the last parts (which are held in memory) huge. Parts here grow
//! linearly instead, by 8 MiB every 64 parts: memory grows with the square
//! root of the archive (about 120 MiB parts at 50 GiB, 1.2 GiB at 6 TiB)
//! and 10,000 parts hold 6 TiB.

/// The first parts' size; also the growth step.
pub const BASE_PART: u64 = 8 * 1024 * 1024;
/// Parts of one size before the next size.
pub const PARTS_PER_STEP: u64 = 64;
/// S3's (and GCS's XML API's) limit on parts in one upload.
pub const MAX_PARTS: u64 = 10_000;
/// S3's largest part.
pub const MAX_PART: u64 = 5 * 1024 * 1024 * 1024;

/// The size of part `index` (0-based); `None` past the last part allowed.
pub fn part_size(index: u64) -> Option<u64> {
    (index < MAX_PARTS).then(|| (BASE_PART * (1 + index / PARTS_PER_STEP)).min(MAX_PART))
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
    fn parts_start_at_8_mib_and_grow_by_8_mib_every_64_parts() {
        assert_eq!(part_size(0), Some(8 * MIB));
        assert_eq!(part_size(63), Some(8 * MIB));
        assert_eq!(part_size(64), Some(16 * MIB));
        assert_eq!(part_size(128), Some(24 * MIB));
    }

    #[test]
    fn five_tib_fits_in_10000_parts() {
        assert!(max_archive() >= 5 * TIB, "{} bytes", max_archive());
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
        // The largest part, which bounds memory, stays far below S3's limit.
        assert!(part_size(MAX_PARTS - 1).unwrap() < 2 * GIB);
    }

    #[test]
    fn small_archives_use_small_parts() {
        // 50 GiB: the part size reached stays near 120 MiB.
        let parts = (0..MAX_PARTS).find(|&n| capacity(n) >= 50 * GIB).unwrap();
        assert!(part_size(parts).unwrap() <= 128 * MIB, "{parts} parts");
        // Below 512 MiB every part is 8 MiB.
        assert!(capacity(PARTS_PER_STEP) >= 512 * MIB);
    }
}
