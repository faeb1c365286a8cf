//! The duration fields of the API (`spec.rotationInterval`,
//! `spec.retention`): one or more `<digits><d|h|m|s>`, such as `30d`, `720h`,
//! `1h30m` or `90s`, as their schemas' pattern [`PATTERN`] admits. A day is
//! 24 hours (`30d` = `720h`).

use std::time::Duration;

use crate::Error;

/// The schema pattern of a duration field.
pub const PATTERN: &str = r"^([0-9]+(d|h|m|s))+$";

/// The longest duration taken: ten years.
pub const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Parses the duration `text` of the field `field` (named in the error),
/// longer than zero and at most [`MAX`].
pub fn parse(field: &'static str, text: &str) -> Result<Duration, Error> {
    let invalid = |problem| Error::Duration {
        field,
        value: text.to_owned(),
        problem,
    };
    let malformed = || invalid("is not a duration such as 30d, 720h, 1h30m or 90s");
    let too_long = || invalid("is longer than ten years");
    if text.is_empty() {
        return Err(malformed());
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let unit = match rest.as_bytes().get(digits) {
            Some(b'd') => 24 * 3600,
            Some(b'h') => 3600,
            Some(b'm') => 60,
            Some(b's') => 1,
            _ => return Err(malformed()),
        };
        if digits == 0 {
            return Err(malformed());
        }
        let count: u64 = rest[..digits].parse().map_err(|_| too_long())?;
        total = count
            .checked_mul(unit)
            .and_then(|seconds| total.checked_add(seconds))
            .ok_or_else(too_long)?;
        rest = &rest[digits + 1..];
    }
    let duration = Duration::from_secs(total);
    if duration.is_zero() {
        return Err(invalid("must be longer than zero"));
    }
    if duration > MAX {
        return Err(too_long());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELD: &str = "spec.retention";

    #[test]
    fn durations_are_sums_of_days_hours_minutes_and_seconds() {
        let parse = |s| parse(FIELD, s).unwrap().as_secs();
        assert_eq!(parse("30d"), parse("720h"));
        assert_eq!(parse("1d12h"), 36 * 3600);
        assert_eq!(parse("3650d"), MAX.as_secs());
        assert_eq!(parse("720h"), 720 * 3600);
        assert_eq!(parse("1h30m"), 5400);
        assert_eq!(parse("90s"), 90);
        assert_eq!(parse("2s"), 2);
        assert_eq!(parse("1m1m"), 120);
        assert_eq!(parse("0h5s"), 5);
        assert_eq!(parse("87600h"), MAX.as_secs());
    }

    #[test]
    fn bad_durations_name_the_field_and_the_problem() {
        let problem = |s| parse(FIELD, s).unwrap_err().to_string();
        for bad in [
            "", "5", "h", "d", "1w", "1h30", "1.5h", "-1h", " 1h", "1H", "1D",
        ] {
            assert_eq!(
                problem(bad),
                format!(
                    "spec.retention: {bad:?} is not a duration such as 30d, 720h, 1h30m or 90s"
                )
            );
        }
        assert_eq!(
            problem("0s"),
            "spec.retention: \"0s\" must be longer than zero"
        );
        assert_eq!(
            problem("0h0m"),
            "spec.retention: \"0h0m\" must be longer than zero"
        );
        for long in [
            "87601h",
            "3651d",
            "99999999999999999999h",
            "5124095576030431h",
            "213503982334602d",
        ] {
            assert_eq!(
                problem(long),
                format!("spec.retention: {long:?} is longer than ten years")
            );
        }
    }
}
