//! Proof by test restore (`verify: Restore`): the row count of every table,
//! read inside the snapshot pg_dump dumps, is compared with the same
//! table's once the archive is restored into a scratch database on the
//! provider's server. The scratch database is dropped afterwards, and
//! before each attempt (a crashed one may have left it).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use tokio_postgres::Client;

/// Rows per table, by `schema.table`.
pub type RowCounts = BTreeMap<String, u64>;

/// Tables whose rows pg_dump dumps: ordinary tables (partitions included,
/// partitioned parents hold none) outside PostgreSQL's own schemas, except
/// the members of extensions, which `CREATE EXTENSION` makes.
pub const TABLES: &str = "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c \
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' \
     AND n.nspname NOT LIKE 'pg\\_%' \
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d \
       WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') \
     ORDER BY 1, 2";

/// Starts with `_`, which no service's database can (they are
/// `<project>__<name>`, the Project a namespace), so it never names one.
const SCRATCH_PREFIX: &str = "_navique_verify_";

/// The scratch database of the snapshot `idempotency_key`: the same on
/// every attempt, so that a retry drops what a crashed attempt left.
pub fn scratch_name(idempotency_key: &str) -> String {
    let digest = Sha256::digest(idempotency_key.as_bytes());
    format!("{SCRATCH_PREFIX}{}", crate::transfer::hex(&digest[..8]))
}

/// `name` as a quoted SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Counts the rows of every table the client sees (inside its transaction,
/// when one is open).
pub async fn count_rows(client: &Client) -> Result<RowCounts, tokio_postgres::Error> {
    let mut counts = RowCounts::new();
    for table in client.query(TABLES, &[]).await? {
        let (schema, name): (String, String) = (table.get(0), table.get(1));
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM ONLY {}.{}",
                    quote_ident(&schema),
                    quote_ident(&name)
                ),
                &[],
            )
            .await?;
        let count: i64 = row.get(0);
        counts.insert(
            format!("{schema}.{name}"),
            u64::try_from(count).unwrap_or_default(),
        );
    }
    Ok(counts)
}

/// What a passed comparison covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compared {
    pub tables: u64,
    pub rows: u64,
}

/// Compares the restored counts with the source's: the same tables, each
/// with the same rows. The error lists what differs (at most five tables).
pub fn compare(source: &RowCounts, restored: &RowCounts) -> Result<Compared, String> {
    const SHOWN: usize = 5;
    let mut differences = Vec::new();
    for (table, &rows) in source {
        match restored.get(table) {
            Some(&got) if got == rows => {}
            Some(&got) => {
                differences.push(format!("{table}: {rows} rows at dump time, {got} restored"))
            }
            None => differences.push(format!("{table}: {rows} rows at dump time, not restored")),
        }
    }
    for (table, got) in restored {
        if !source.contains_key(table) {
            differences.push(format!("{table}: not in the source, {got} rows restored"));
        }
    }
    if differences.is_empty() {
        return Ok(Compared {
            tables: source.len() as u64,
            rows: source.values().sum(),
        });
    }
    let more = differences.len().saturating_sub(SHOWN);
    differences.truncate(SHOWN);
    let mut message = format!("row counts differ: {}", differences.join("; "));
    if more > 0 {
        message.push_str(&format!("; and {more} more tables"));
    }
    Err(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> RowCounts {
        pairs.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
    }

    #[test]
    fn equal_counts_pass_and_say_what_they_covered() {
        let source = counts(&[
            ("public.items", 1000),
            ("shop.orders", 5),
            ("public.empty", 0),
        ]);
        assert_eq!(
            compare(&source, &source.clone()),
            Ok(Compared {
                tables: 3,
                rows: 1005
            })
        );
        assert_eq!(
            compare(&RowCounts::new(), &RowCounts::new()),
            Ok(Compared { tables: 0, rows: 0 })
        );
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        let source = counts(&[("public.items", 1000), ("public.gone", 3)]);
        let restored = counts(&[("public.items", 990), ("public.extra", 1)]);
        assert_eq!(
            compare(&source, &restored).unwrap_err(),
            "row counts differ: public.gone: 3 rows at dump time, not restored; \
             public.items: 1000 rows at dump time, 990 restored; \
             public.extra: not in the source, 1 rows restored"
        );
        let many: RowCounts = (0..8).map(|i| (format!("public.t{i}"), 1)).collect();
        let message = compare(&many, &RowCounts::new()).unwrap_err();
        assert!(message.ends_with("; and 3 more tables"), "{message}");
    }

    #[test]
    fn scratch_names_are_stable_and_never_a_services() {
        let name = scratch_name("uid-1/final");
        assert_eq!(name, scratch_name("uid-1/final"));
        assert_ne!(name, scratch_name("uid-2/final"));
        assert!(name.starts_with("_navique_verify_"), "{name}");
        assert_eq!(name.len(), SCRATCH_PREFIX.len() + 16);
        // A service's database never starts with "_" (see names.rs).
        assert!(
            navique_provider_postgres::names::check_requested(
                navique_provider_postgres::NameKind::Database,
                &name
            )
            .is_err()
        );
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("items"), "\"items\"");
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
    }
}
