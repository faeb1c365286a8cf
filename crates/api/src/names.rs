//! The names a spec uses to point at other objects (`targetRef.name`,
//! `serviceRef.name`, `restoreFrom.backupName`, ...). They go into request
//! URLs, so they are checked, by their schemas' patterns and again before
//! any API call, rather than sent as typed.

/// An object name: a lowercase RFC 1123 subdomain (at most
/// [`MAX_OBJECT_NAME`] characters), as Kubernetes requires of custom
/// resources and most built-in kinds.
pub const OBJECT_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// The longest object name.
pub const MAX_OBJECT_NAME: usize = 253;
/// A namespace name: a lowercase RFC 1123 label (at most
/// [`MAX_NAMESPACE_NAME`] characters).
pub const NAMESPACE_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The longest namespace name.
pub const MAX_NAMESPACE_NAME: usize = 63;
/// A kind: a letter, then letters and digits, such as `Stack`.
pub const KIND_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9]*$";
/// The longest kind.
pub const MAX_KIND: usize = 63;

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAMESPACE_NAME
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `name` matches [`OBJECT_NAME_PATTERN`] and is at most
/// [`MAX_OBJECT_NAME`] long.
pub fn is_object_name(name: &str) -> bool {
    name.len() <= MAX_OBJECT_NAME && name.split('.').all(is_label)
}

/// Whether `kind` matches [`KIND_PATTERN`] and is at most [`MAX_KIND`] long.
pub fn is_kind(kind: &str) -> bool {
    kind.len() <= MAX_KIND
        && kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_lowercase_subdomains() {
        for good in ["forge", "orders-db", "a.b-c.d", "1st", "x"] {
            assert!(is_object_name(good), "{good}");
        }
        let long = "a".repeat(MAX_OBJECT_NAME + 1);
        for bad in [
            "", "Forge Ü", "Forge", "-x", "x-", "a..b", ".a", "a/b", "a b", &long,
        ] {
            assert!(!is_object_name(bad), "{bad}");
        }
    }

    #[test]
    fn kinds_are_letters_and_digits_starting_with_a_letter() {
        for good in ["Stack", "ManagedService", "V2Thing"] {
            assert!(is_kind(good), "{good}");
        }
        for bad in ["", "Forge Ü", "1Stack", "Stack/x", "Stack.v1", "Stack-x"] {
            assert!(!is_kind(bad), "{bad}");
        }
    }
}
