//! The quantity fields of the API (`spec.parameters.storage.size`): a
//! Kubernetes quantity such as `10Gi`, read by `kube_quantity` (the parser of
//! k8s-openapi's [`Quantity`]), above zero and at most [`MAX_STORAGE`].

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::{ParseQuantityError, ParsedQuantity};

use crate::{Error, messages};

/// The largest volume a service may ask for.
pub const MAX_STORAGE: &str = "64Ti";
/// [`MAX_STORAGE`] in bytes.
pub const MAX_STORAGE_BYTES: u64 = 64 << 40;
/// The longest quantity text taken (its schema's `maxLength`): far more
/// than any size needs.
pub const MAX_LENGTH: usize = 64;

/// The bytes of the storage quantity `quantity` of the field `field`
/// (named in the error): a well-formed quantity, above zero and at most
/// [`MAX_STORAGE`]. A fraction of a byte is rounded up, as Kubernetes does.
pub fn storage_bytes(field: &'static str, quantity: &Quantity) -> Result<u64, Error> {
    let text = quantity.0.as_str();
    let invalid = |problem| Error::Quantity {
        field,
        value: text.to_owned(),
        problem,
    };
    let malformed = || invalid(messages::QUANTITY_MALFORMED);
    let too_large = || invalid(messages::QUANTITY_TOO_LARGE);
    // kube_quantity also reads what Kubernetes refuses: a second sign
    // (`--1`), an empty number (`Gi`, read as zero), `inf`, and an exponent
    // with a suffix (`1e3Gi`).
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let exponent = unsigned.find(['e', 'E']).is_some_and(|at| {
        unsigned[at + 1..].starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-')
    });
    let well_formed = text.len() <= MAX_LENGTH
        && unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && !(exponent && unsigned.ends_with(char::is_alphabetic));
    if !well_formed {
        return Err(malformed());
    }
    let parsed = match ParsedQuantity::try_from(text) {
        Ok(parsed) => parsed,
        // A number beyond what it holds, such as `1e400`.
        Err(ParseQuantityError::DecimalParsingFailed) => return Err(too_large()),
        Err(_) => return Err(malformed()),
    };
    // In floating point, exact for whole bytes up to 2^53 (far above the
    // limit); its integer conversions drop the fraction of `1.5Gi`.
    let bytes = parsed.to_bytes_f64().ok_or_else(too_large)?;
    if bytes.is_nan() || bytes <= 0.0 {
        return Err(malformed());
    }
    if bytes > MAX_STORAGE_BYTES as f64 {
        return Err(too_large());
    }
    Ok(bytes.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FIELD: &str = "spec.parameters.storage.size";

    fn bytes(text: &str) -> Result<u64, String> {
        storage_bytes(FIELD, &Quantity(text.to_owned())).map_err(|e| e.to_string())
    }

    #[test]
    fn sizes_are_read_in_bytes() {
        assert_eq!(bytes("10Gi"), Ok(10 << 30));
        assert_eq!(bytes("1Gi"), Ok(1 << 30));
        assert_eq!(bytes("500M"), Ok(500_000_000));
        assert_eq!(bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(bytes("1e3"), Ok(1000));
        assert_eq!(bytes("+2Ki"), Ok(2048));
        assert_eq!(bytes("64Ti"), Ok(MAX_STORAGE_BYTES));
    }

    #[test]
    fn bad_sizes_name_the_field_and_the_value() {
        for bad in [
            "-10Gi", "0", "0Gi", "-0", "big", "", "Gi", "1e400Gi", "1e3Gi", "10 Gi", " 10Gi",
            "10Gi ", "10gi", "10GB", "inf", "NaN", "1.2.3", "0x10", "1_000", "--1", "+",
        ] {
            assert_eq!(
                bytes(bad),
                Err(format!(
                    "spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not {bad:?}"
                )),
                "{bad}"
            );
        }
        for large in ["65Ti", "1Pi", "1e400", "100000Ti"] {
            assert_eq!(
                bytes(large),
                Err(format!(
                    "spec.parameters.storage.size: must be at most 64Ti, not {large:?}"
                )),
                "{large}"
            );
        }
    }

    /// Well-formed quantities of every suffix, from Kubernetes' grammar.
    fn quantity() -> impl Strategy<Value = (String, f64)> {
        let suffixes = prop::sample::select(vec![
            ("", 1.0),
            ("k", 1e3),
            ("M", 1e6),
            ("G", 1e9),
            ("T", 1e12),
            ("Ki", 1024.0),
            ("Mi", 1024f64.powi(2)),
            ("Gi", 1024f64.powi(3)),
            ("Ti", 1024f64.powi(4)),
        ]);
        (1u32..100_000, suffixes)
            .prop_map(|(n, (suffix, scale))| (format!("{n}{suffix}"), f64::from(n) * scale))
    }

    proptest! {
        /// Fuzzing: any text is read or refused naming the field, never a
        /// panic, and whatever is read is within the bounds.
        #[test]
        fn any_text_is_read_within_bounds_or_refused(text in ".{0,80}") {
            match storage_bytes(FIELD, &Quantity(text.clone())) {
                Ok(bytes) => prop_assert!(bytes > 0 && bytes <= MAX_STORAGE_BYTES, "{text}: {bytes}"),
                Err(e) => prop_assert!(e.to_string().starts_with("spec.parameters.storage.size: must be "), "{e}"),
            }
        }

        #[test]
        fn quantity_like_text_is_read_within_bounds_or_refused(text in "[-+]?[0-9.]{0,8}([eE][-+]?[0-9]{0,4})?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|n|u)?") {
            if let Ok(bytes) = storage_bytes(FIELD, &Quantity(text.clone())) {
                prop_assert!(bytes > 0 && bytes <= MAX_STORAGE_BYTES, "{text}: {bytes}");
            }
        }

        #[test]
        fn well_formed_sizes_are_read_exactly((text, expected) in quantity()) {
            match storage_bytes(FIELD, &Quantity(text.clone())) {
                Ok(bytes) => prop_assert_eq!(bytes as f64, expected, "{}", text),
                Err(e) => prop_assert!(expected > MAX_STORAGE_BYTES as f64, "{}: {}", text, e),
            }
        }
    }
}
