//! Object name rules, with kube-apiserver's messages.

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Why `name` is not a valid name for objects of this kind, as the detail
/// of a `metadata.name` field error.
pub fn invalid_name(name: &str, namespace_like: bool) -> Option<String> {
    if namespace_like {
        if is_label(name) {
            return None;
        }
        if name.len() > 63 {
            return Some("must be no more than 63 characters".to_owned());
        }
        return Some(LABEL_MESSAGE.to_owned());
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters".to_owned());
    }
    if name.split('.').all(is_label) {
        None
    } else {
        Some(SUBDOMAIN_MESSAGE.to_owned())
    }
}

/// A random suffix for `generateName`, from kube-apiserver's alphabet.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_allow_dots_and_labels_do_not() {
        assert_eq!(invalid_name("orders-db.v1", false), None);
        assert_eq!(invalid_name("my-project", true), None);
        assert_eq!(invalid_name("a.b", true).as_deref(), Some(LABEL_MESSAGE));
        assert_eq!(
            invalid_name("Orders", false).as_deref(),
            Some(SUBDOMAIN_MESSAGE)
        );
        assert_eq!(
            invalid_name("-x", false).as_deref(),
            Some(SUBDOMAIN_MESSAGE)
        );
    }

    #[test]
    fn generated_suffixes_are_five_lowercase_characters() {
        let suffix = random_suffix();
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
    }
}
