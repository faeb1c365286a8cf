//! The names a service's database and roles get on the provider's server.
//!
//! One server holds the services of many Projects, and two Projects may both
//! ask for `parameters.database: orders`. A requested name is therefore
//! prefixed by its Project: `<project>__<name>`, where `<project>` is the
//! namespace with `-` written as `_` (`team-a` asking for `orders` gets
//! `team_a__orders`). Requested names may neither start with `_` nor hold
//! `__`, so the last `__` of a physical name always separates the Project
//! from the name, and two Projects never get the same name.
//!
//! A physical name longer than PostgreSQL allows keeps its first bytes and
//! ends with `_` and 16 hex digits of the SHA-256 of `<namespace>/<name>`.
//! Whatever the name, what a service may use is decided by the ownership
//! records (see the crate documentation), never by the name alone.

use kube::ResourceExt;
use navique_api::services::{ManagedService, PlacementMode, PostgresParameters};
use sha2::{Digest, Sha256};

use crate::{Database, Error, MAX_NAME_LEN, NameKind, READONLY_SUFFIX, validate_name};

/// Between the Project and the requested name.
pub const SEPARATOR: &str = "__";
/// The longest physical owner role: its readonly role appends
/// [`READONLY_SUFFIX`] and must still be a valid name.
pub const MAX_OWNER_LEN: usize = MAX_NAME_LEN - READONLY_SUFFIX.len();
/// Hex digits of the hash that ends a shortened name.
const HASH_DIGITS: usize = 16;

/// Checks a name a service asks for: a valid PostgreSQL name
/// ([`validate_name`]) that starts with a letter and does not hold `__`.
pub fn check_requested(kind: NameKind, name: &str) -> Result<(), Error> {
    validate_name(kind, name)?;
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(Error::InvalidName {
            kind,
            name: name.to_owned(),
            reason: "must not start with a digit".to_owned(),
        });
    }
    if name.starts_with('_') || name.contains(SEPARATOR) {
        return Err(Error::InvalidName {
            kind,
            name: name.to_owned(),
            reason: "must neither start with \"_\" nor hold \"__\" (the server's names are \
                     <project>__<name>)"
                .to_owned(),
        });
    }
    Ok(())
}

/// The default database and role name: the service's name with `-` as `_`.
pub fn default_identifier(service: &str) -> String {
    service.replace('-', "_")
}

/// The database and owner role a service asks for:
/// `spec.parameters.database` and `spec.parameters.owner`, each defaulting
/// to [`default_identifier`] (also when empty), checked by
/// [`check_requested`] (the error names the field).
pub fn requested(
    service: &str,
    parameters: Option<&PostgresParameters>,
) -> Result<Database, Error> {
    let default = default_identifier(service);
    let parameter = |field: &'static str, kind, given: Option<&String>| -> Result<String, Error> {
        let name = given.filter(|s| !s.is_empty()).unwrap_or(&default);
        check_requested(kind, name).map_err(|source| Error::InvalidParameter {
            field,
            source: Box::new(source),
        })?;
        Ok(name.clone())
    };
    Ok(Database::new(
        parameter(
            "spec.parameters.database",
            NameKind::Database,
            parameters.and_then(|p| p.database.as_ref()),
        )?,
        parameter(
            "spec.parameters.owner",
            NameKind::Role,
            parameters.and_then(|p| p.owner.as_ref()),
        )?,
    ))
}

/// The database and owner a service gets: on the provider's shared server
/// its Project's names ([`physical`]); in its own `InProject` engine the
/// requested ones.
pub fn of_service(service: &ManagedService) -> Result<Database, Error> {
    let asked = requested(&service.name_any(), service.spec.parameters.as_ref())?;
    Ok(match service.spec.placement.mode {
        PlacementMode::ProviderShared => {
            let namespace = service.namespace().unwrap_or_default();
            Database::new(
                physical(&namespace, &asked.name, MAX_NAME_LEN),
                physical(&namespace, &asked.owner, MAX_OWNER_LEN),
            )
        }
        PlacementMode::InProject => asked,
    })
}

/// The name `requested` gets on the shared server for a service of
/// `namespace`, at most `max_len` bytes.
pub fn physical(namespace: &str, requested: &str, max_len: usize) -> String {
    let full = format!("{}{SEPARATOR}{requested}", namespace.replace('-', "_"));
    if full.len() <= max_len {
        return full;
    }
    let digest = Sha256::digest(format!("{namespace}/{requested}").as_bytes());
    let hash: String = digest
        .iter()
        .take(HASH_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    // Every byte is ASCII, so any cut is on a character boundary.
    let kept = max_len - HASH_DIGITS - 1;
    format!("{}_{hash}", &full[..kept])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(database: Option<&str>, owner: Option<&str>) -> PostgresParameters {
        PostgresParameters {
            database: database.map(str::to_owned),
            owner: owner.map(str::to_owned),
            ..PostgresParameters::default()
        }
    }

    #[test]
    fn names_default_to_the_service_name_and_errors_name_the_field() {
        assert_eq!(
            requested("orders-db", None).unwrap(),
            Database::new("orders_db", "orders_db")
        );
        assert_eq!(
            requested("x", Some(&asking(Some("orders"), Some("")))).unwrap(),
            Database::new("orders", "x")
        );
        assert_eq!(
            requested("x", Some(&asking(Some("Orders"), None)))
                .unwrap_err()
                .to_string(),
            "spec.parameters.database: invalid database name \"Orders\": may hold only \
             lowercase letters, digits and \"_\", not 'O'"
        );
        assert_eq!(
            requested("x", Some(&asking(None, Some("1st"))))
                .unwrap_err()
                .to_string(),
            "spec.parameters.owner: invalid role name \"1st\": must not start with a digit"
        );
    }

    #[test]
    fn two_projects_asking_for_one_name_get_two_names() {
        assert_eq!(physical("team-a", "orders", MAX_NAME_LEN), "team_a__orders");
        assert_eq!(physical("team-b", "orders", MAX_NAME_LEN), "team_b__orders");
    }

    #[test]
    fn names_that_would_blur_the_project_boundary_are_refused() {
        // Without the rule, team-a asking for "x" and team asking for
        // "a__x" would meet at team_a__x.
        for name in ["a__x", "_x", "x__"] {
            let error = check_requested(NameKind::Database, name).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid database name \"{name}\": must neither start with \"_\" nor hold \
                     \"__\" (the server's names are <project>__<name>)"
                )
            );
        }
        check_requested(NameKind::Role, "orders_owner").unwrap();
        assert!(check_requested(NameKind::Role, "Orders").is_err());
    }

    #[test]
    fn long_names_are_shortened_with_a_hash_and_stay_distinct() {
        let namespace = "a-very-long-project-namespace-name-for-a-team";
        let one = physical(namespace, "orders_database_of_the_shop", MAX_NAME_LEN);
        let two = physical(namespace, "orders_database_of_the_shop2", MAX_NAME_LEN);
        assert_eq!(one.len(), MAX_NAME_LEN);
        assert!(one.starts_with("a_very_long_project_namespace_name_for_a_t"));
        assert_ne!(one, two);
        validate_name(NameKind::Database, &one).unwrap();
        let owner = physical(namespace, "orders_owner", MAX_OWNER_LEN);
        assert_eq!(owner.len(), MAX_OWNER_LEN);
        validate_name(NameKind::Role, &format!("{owner}{READONLY_SUFFIX}")).unwrap();
    }

    #[test]
    fn a_project_whose_namespace_starts_with_a_digit_gets_a_usable_name() {
        // Identifiers are always quoted, so a physical name may start with
        // a digit; only requested names must not.
        let name = physical("1st-team", "orders", MAX_NAME_LEN);
        assert_eq!(name, "1st_team__orders");
        validate_name(NameKind::Database, &name).unwrap();
        assert_eq!(
            check_requested(NameKind::Database, "1db")
                .unwrap_err()
                .to_string(),
            "invalid database name \"1db\": must not start with a digit"
        );
    }
}
