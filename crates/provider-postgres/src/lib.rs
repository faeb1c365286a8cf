//! The PostgreSQL engine of the `ProviderShared` placement: a service is a
//! login role and a database owned by it on the provider's server, whose
//! admin connection is in the ServiceClass's Secret (`host`, `port`, `user`,
//! `password`, optionally `sslmode`).
//!
//! Every operation opens its own admin connection (bounded by a connect
//! timeout), runs with a server-side `statement_timeout` and a client-side
//! deadline, and is idempotent: the controller may crash and retry at any
//! point, and running an operation again converges on the same state.
//!
//! The lifecycle controller provisions, rotates and drops with it;
//! backup-runner reads through it which database a service owns before it
//! dumps or restores ([`Engine::check_owned`]).
//!
//! # Ownership
//!
//! Every database and role the engine creates is recorded for exactly one
//! service uid in a table on the provider's server that no Project identity
//! can write ([`ownership`]). The engine alters, rotates, grants on, drops
//! (and lets backup-runner dump or restore) only what is recorded as that
//! service's own and not retained. A name that exists without a record, is
//! recorded for another service, or was retained is refused
//! ([`Error::NotOwned`]) before anything changes, and no credential is
//! handed out for it. Physical names are prefixed by the Project
//! ([`names`]), so two Projects may ask for the same database name.
//!
//! # Safety of the SQL
//!
//! - Database and role names are validated ([`validate_name`]: lowercase
//!   letters, digits and `_`, at most 63 bytes, not reserved; requested
//!   names also [`names::check_requested`]) and are still quoted as identifiers (`"..."`, doubled
//!   quotes) wherever they appear in SQL. Lookups pass them as bind
//!   parameters.
//! - `CREATE ROLE` / `ALTER ROLE ... PASSWORD` cannot take bind parameters,
//!   so the password has to be a literal. It never is the clear text: the
//!   client computes the SCRAM-SHA-256 verifier (as `psql`'s `\password`
//!   does) and sends that, quoted as a literal (`'...'`, doubled quotes; the
//!   `E'...'` form when it holds a backslash), so the password appears in
//!   no server log, `pg_stat_activity` or `pg_stat_statements`.
//!
//! # Isolation on a shared server
//!
//! A service's database is closed to `PUBLIC` (`REVOKE ALL ON DATABASE`):
//! only its owner (and its readonly role, when asked for) can connect, not
//! the other services' roles on the same server.
//!
//! # Admin privileges
//!
//! A superuser admin needs nothing more. A non-superuser admin (the managed
//! offerings' "master user") needs `CREATEDB` and `CREATEROLE`; the engine
//! then makes it a member of each role it creates (`GRANT role TO
//! CURRENT_USER`), which PostgreSQL requires to create a database owned by
//! the role, to drop it, and to terminate its sessions. Either needs
//! `CREATE` on the maintenance database `postgres`, where the ownership
//! records live (schema `navique`).
//!
//! # TLS
//!
//! Connections are plaintext (`NoTls`) for now. `sslmode` `disable`,
//! `allow` and `prefer` connect without TLS; `require`, `verify-ca` and
//! `verify-full` are refused with [`Error::TlsNotSupported`] rather than
//! silently downgraded. The seam is [`Engine::connect`]: it is the one place
//! that picks the connector, and supporting TLS means passing a rustls
//! connector there (for example `tokio-postgres-rustls`) with
//! `tokio_postgres::config::SslMode::Require` and the certificate checks
//! `sslmode` asks for.

use std::collections::BTreeMap;
use std::error::Error as _;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

use crate::ownership::{Claim, Record};
pub use crate::ownership::{Conflict, Owner};

pub mod catalogue;
pub mod names;
pub mod ownership;

/// The database the engine connects to for server-wide statements.
pub const MAINTENANCE_DATABASE: &str = "postgres";
/// PostgreSQL's identifier limit (`NAMEDATALEN - 1`), in bytes.
pub const MAX_NAME_LEN: usize = 63;
/// Appended to a database's owner to name its readonly role.
pub const READONLY_SUFFIX: &str = "_readonly";
/// The length of [`generate_password`]'s passwords.
pub const PASSWORD_LEN: usize = 32;

/// What the server shows in `pg_stat_activity.application_name`.
const APPLICATION_NAME: &str = "navique-service-lifecycle-controller";
/// `DROP DATABASE ... WITH (FORCE)` is PostgreSQL 13 or newer.
const MIN_SERVER_VERSION_NUM: i32 = 130_000;
/// PostgreSQL 15 stopped granting `CREATE` on schema `public` to `PUBLIC`.
const PUBLIC_SCHEMA_LOCKED_VERSION_NUM: i32 = 150_000;
/// The 64 characters of [`generate_password`]: RFC 4648's URL-safe
/// alphabet, so that a password needs no escaping in a URI or a shell.
const PASSWORD_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// What a URI's userinfo may hold unencoded: RFC 3986's unreserved set.
const USERINFO: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Errors of the PostgreSQL engine. The messages name what to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Keys the admin Secret lacks.
    #[error("{}", missing_keys_message(.keys))]
    MissingSecretKeys { keys: Vec<&'static str> },
    /// A key of the admin Secret holds a value that cannot be used.
    #[error("Secret key \"{key}\" is invalid: {reason}")]
    InvalidSecretKey { key: &'static str, reason: String },
    /// A database or role name that is not a valid (or allowed) identifier.
    #[error("invalid {kind} name \"{name}\": {reason}")]
    InvalidName {
        kind: NameKind,
        name: String,
        reason: String,
    },
    /// A password PostgreSQL cannot store.
    #[error("invalid password: {reason}")]
    InvalidPassword { reason: &'static str },
    /// The Secret asks for TLS, which this build does not do yet.
    #[error(
        "sslmode={sslmode} is not supported yet: connections to the provider's PostgreSQL are \
         made without TLS; set the Secret's sslmode to \"disable\" or \"prefer\""
    )]
    TlsNotSupported { sslmode: SslMode },
    /// The admin connection failed (unreachable, refused, authentication).
    #[error("cannot connect to PostgreSQL at {endpoint} as {user}: {cause}")]
    Connect {
        endpoint: String,
        user: String,
        cause: String,
    },
    /// An operation ran past its deadline.
    #[error("PostgreSQL at {endpoint} did not complete {operation} within {after:?}")]
    Timeout {
        endpoint: String,
        operation: &'static str,
        after: Duration,
    },
    /// A statement failed.
    #[error("{action} on PostgreSQL at {endpoint} failed: {cause}")]
    Query {
        action: String,
        endpoint: String,
        /// The SQLSTATE, when the server answered with an error.
        code: Option<String>,
        cause: String,
    },
    /// The database exists but belongs to another role: it is not this
    /// service's, and is neither taken over nor dropped.
    #[error(
        "database \"{database}\" already exists on PostgreSQL at {endpoint} and is owned by \
         \"{owner}\", not \"{expected}\": refusing to take it over or drop it; pick another name"
    )]
    ForeignDatabase {
        endpoint: String,
        database: String,
        owner: String,
        expected: String,
    },
    /// A name the service may not use: recorded for another service,
    /// retained, or on the server without a record (see [`ownership`]).
    #[error(
        "{kind} \"{name}\" on PostgreSQL at {endpoint} {}: refusing to use, take over or drop \
         it; choose another {}",
        .conflict.describe(),
        parameter_of(*.kind)
    )]
    NotOwned {
        kind: NameKind,
        name: String,
        endpoint: String,
        conflict: Conflict,
    },
    /// A service parameter that names no usable database or role.
    #[error("{field}: {source}")]
    InvalidParameter {
        field: &'static str,
        #[source]
        source: Box<Error>,
    },
    /// The database an operation needs does not exist.
    #[error("database \"{database}\" does not exist on PostgreSQL at {endpoint}")]
    DatabaseMissing { endpoint: String, database: String },
    /// The role an operation needs does not exist.
    #[error("role \"{role}\" does not exist on PostgreSQL at {endpoint}")]
    RoleMissing { endpoint: String, role: String },
    /// The server is older than the engine supports.
    #[error(
        "PostgreSQL at {endpoint} is version {version}; version 13 or newer is needed \
         (DROP DATABASE ... WITH (FORCE))"
    )]
    ServerTooOld { endpoint: String, version: String },
}

impl Error {
    /// Whether trying the same call again later may succeed without anyone
    /// changing the Secret, the names or the server's configuration: lost
    /// connections, timeouts, and server errors of the classes that mean
    /// "busy" (serialization failures and deadlocks, insufficient
    /// resources, operator intervention, objects in use).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::Timeout { .. } => true,
            Self::Query { code: None, .. } => true,
            Self::Query {
                code: Some(code), ..
            } => ["08", "40", "53", "55", "57"]
                .iter()
                .any(|c| code.starts_with(c)),
            _ => false,
        }
    }

    /// The SQLSTATE of a failed statement.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Self::Query { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

/// The service parameter that names an object of the kind.
fn parameter_of(kind: NameKind) -> &'static str {
    match kind {
        NameKind::Database => "spec.parameters.database",
        NameKind::Role => "spec.parameters.owner",
    }
}

fn missing_keys_message(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    match quoted.as_slice() {
        [one] => format!("Secret key {one} is missing"),
        [init @ .., last] => format!("Secret keys {} and {last} are missing", init.join(", ")),
        [] => "no Secret key is missing".to_owned(),
    }
}

/// What a validated name is for; it names the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    Database,
    Role,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Database => "database",
            Self::Role => "role",
        })
    }
}

/// Checks a database or role name against the rules the engine applies:
/// 1 to 63 bytes of lowercase ASCII letters, digits and `_`; not one of PostgreSQL's own databases (`postgres`,
/// `template0`, `template1`) or reserved role names (`public`, `none`,
/// `current_user`, `current_role`, `session_user`, the `pg_` prefix).
pub fn validate_name(kind: NameKind, name: &str) -> Result<(), Error> {
    let invalid = |reason: String| Error::InvalidName {
        kind,
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("must not be empty".to_owned()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "is {} bytes long; PostgreSQL names hold at most {MAX_NAME_LEN}",
            name.len()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '_'))
    {
        return Err(invalid(format!(
            "may hold only lowercase letters, digits and \"_\", not {c:?}"
        )));
    }
    match kind {
        NameKind::Database if ["postgres", "template0", "template1"].contains(&name) => {
            Err(invalid("is one of PostgreSQL's own databases".to_owned()))
        }
        NameKind::Role if name.starts_with("pg_") => Err(invalid(
            "the prefix \"pg_\" is reserved for PostgreSQL's own roles".to_owned(),
        )),
        NameKind::Role
            if [
                "public",
                "none",
                "current_user",
                "current_role",
                "session_user",
            ]
            .contains(&name) =>
        {
            Err(invalid("is reserved by PostgreSQL".to_owned()))
        }
        _ => Ok(()),
    }
}

/// Quotes an identifier for SQL: `"..."` with inner quotes doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes a string literal for SQL: `'...'` with inner quotes doubled, or
/// `E'...'` with backslashes doubled too when it holds a backslash, which
/// reads the same whatever `standard_conforming_strings` is.
pub fn quote_literal(value: &str) -> String {
    if value.contains('\\') {
        format!("E'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
    } else {
        format!("'{}'", value.replace('\'', "''"))
    }
}

fn check_password(password: &str) -> Result<(), Error> {
    if password.is_empty() {
        return Err(Error::InvalidPassword {
            reason: "must not be empty",
        });
    }
    if password.contains('\0') {
        return Err(Error::InvalidPassword {
            reason: "must not contain a NUL character",
        });
    }
    Ok(())
}

/// A 32-character password from the URL-safe alphabet `A-Z a-z 0-9 - _`
/// (192 bits), drawn from the operating system's random number generator.
///
/// # Panics
///
/// When the operating system cannot provide random bytes, which on the
/// platforms the controller runs on does not happen once it has booted.
pub fn generate_password() -> String {
    let mut bytes = [0u8; PASSWORD_LEN];
    getrandom::fill(&mut bytes).expect("the operating system's random number generator failed");
    // 64 symbols: the low six bits of a uniform byte are uniform.
    bytes
        .iter()
        .map(|b| char::from(PASSWORD_ALPHABET[usize::from(b & 63)]))
        .collect()
}

/// `sslmode`, as libpq spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const ALL: [Self; 6] = [
        Self::Disable,
        Self::Allow,
        Self::Prefer,
        Self::Require,
        Self::VerifyCa,
        Self::VerifyFull,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection without TLS must be refused.
    pub fn requires_tls(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SslMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|m| m.as_str()).collect();
                format!("\"{s}\" is not one of {}", names.join(", "))
            })
    }
}

/// Admin connection to the provider's server, from the ServiceClass's
/// Secret data (decoded strings). `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminConnection {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub sslmode: SslMode,
}

impl AdminConnection {
    /// The keys the Secret must hold.
    pub const REQUIRED_KEYS: [&'static str; 4] = ["host", "port", "user", "password"];

    /// Reads the Secret's data: `host`, `port`, `user` and `password` are
    /// required (an error names every one that is missing), `sslmode`
    /// defaults to `prefer`. Surrounding whitespace (a trailing newline from
    /// `echo` or `--from-file`) is trimmed from every value but the
    /// password, which is taken as is.
    pub fn from_secret(data: &BTreeMap<String, String>) -> Result<Self, Error> {
        let missing: Vec<&'static str> = Self::REQUIRED_KEYS
            .into_iter()
            .filter(|key| !data.contains_key(*key))
            .collect();
        if !missing.is_empty() {
            return Err(Error::MissingSecretKeys { keys: missing });
        }
        let invalid = |key: &'static str, reason: String| Error::InvalidSecretKey { key, reason };
        let non_empty = |key: &'static str| {
            let value = data[key].trim();
            if value.is_empty() {
                Err(invalid(key, "is empty".to_owned()))
            } else {
                Ok(value.to_owned())
            }
        };
        let host = non_empty("host")?;
        let port = non_empty("port")?;
        let port = match port.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(invalid(
                    "port",
                    format!("\"{port}\" is not a port number (1-65535)"),
                ));
            }
        };
        let user = non_empty("user")?;
        let password = data["password"].clone();
        if password.contains('\0') {
            return Err(invalid(
                "password",
                "must not contain a NUL character".to_owned(),
            ));
        }
        let sslmode = match data.get("sslmode").map(|s| s.trim()) {
            None | Some("") => SslMode::default(),
            Some(value) => value.parse().map_err(|reason| invalid("sslmode", reason))?,
        };
        Ok(Self {
            host,
            port,
            user,
            password,
            sslmode,
        })
    }

    /// `host:port`, with an IPv6 address in brackets.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", bracket_ipv6(&self.host), self.port)
    }
}

impl fmt::Debug for AdminConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminConnection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("sslmode", &self.sslmode)
            .finish()
    }
}

fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// What a service gets: a database and the login role that owns it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Database {
    pub name: String,
    pub owner: String,
}

impl Database {
    pub fn new(name: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            owner: owner.into(),
        }
    }

    /// The name of the readonly role: `<owner>_readonly`.
    pub fn readonly_role(&self) -> String {
        format!("{}{READONLY_SUFFIX}", self.owner)
    }

    /// Validates both names ([`validate_name`]).
    pub fn validate(&self) -> Result<(), Error> {
        validate_name(NameKind::Database, &self.name)?;
        validate_name(NameKind::Role, &self.owner)
    }
}

/// How an application connects to its database. `Debug` hides the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
}

impl Credentials {
    /// `postgresql://user:password@host:port/database`, with user,
    /// password and database percent-encoded (all but RFC 3986's unreserved
    /// characters) and an IPv6 host in brackets.
    pub fn uri(&self) -> String {
        format!(
            "postgresql://{}:{}@{}:{}/{}",
            utf8_percent_encode(&self.user, USERINFO),
            utf8_percent_encode(&self.password, USERINFO),
            bracket_ipv6(&self.host),
            self.port,
            utf8_percent_encode(&self.database, USERINFO),
        )
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Provisions services on one provider server. Holds the admin connection
/// parameters and connects anew for every operation.
#[derive(Clone, Debug)]
pub struct Engine {
    admin: AdminConnection,
    connect_timeout: Duration,
    operation_timeout: Duration,
}

impl Engine {
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

    pub fn new(admin: AdminConnection) -> Self {
        Self {
            admin,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
        }
    }

    /// Sets how long connecting may take, and how long a whole operation
    /// may take (also the sessions' `statement_timeout`).
    pub fn with_timeouts(mut self, connect: Duration, operation: Duration) -> Self {
        self.connect_timeout = connect;
        self.operation_timeout = operation;
        self
    }

    pub fn admin(&self) -> &AdminConnection {
        &self.admin
    }

    /// The credentials of `user` for `database` on this server.
    pub fn credentials(&self, database: &str, user: &str, password: &str) -> Credentials {
        Credentials {
            host: self.admin.host.clone(),
            port: self.admin.port,
            database: database.to_owned(),
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }

    /// Creates the role (LOGIN, the given password) and the database owned
    /// by it for `owner`, idempotently: the names are first recorded for
    /// the service (see [`ownership`]); existing ones are kept, the password
    /// is set to the given one (so a retried create converges), and the
    /// database is closed to `PUBLIC`. A name recorded for another service,
    /// retained, or taken on the server without a record is refused
    /// ([`Error::NotOwned`]) before anything changes.
    pub async fn ensure(&self, owner: &Owner, db: &Database, password: &str) -> Result<(), Error> {
        self.check_database(db)?;
        check_password(password)?;
        self.bounded("ensuring the database", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.claim(&session, owner, &Self::names_of(db)).await?;
            let existing = self.check_owner(&session, db).await?;
            self.ensure_login_role(&session, &db.owner, password)
                .await?;
            self.grant_membership_if_needed(&session, &db.owner).await?;
            if existing.is_none() {
                let created = self
                    .execute(
                        &session,
                        &format!("creating database \"{}\"", db.name),
                        &format!(
                            "CREATE DATABASE {} OWNER {}",
                            quote_identifier(&db.name),
                            quote_identifier(&db.owner)
                        ),
                    )
                    .await;
                match created {
                    // Another replica created it meanwhile: check whose it is.
                    Err(e) if e.sqlstate() == Some(SqlState::DUPLICATE_DATABASE.code()) => {
                        self.check_owner(&session, db).await?;
                    }
                    other => other?,
                }
            }
            self.execute(
                &session,
                &format!("closing database \"{}\" to PUBLIC", db.name),
                &format!(
                    "REVOKE ALL ON DATABASE {} FROM PUBLIC",
                    quote_identifier(&db.name)
                ),
            )
            .await
        })
        .await
    }

    /// Records the service's database, owner and readonly role names
    /// without creating anything, so that no credential is handed out for
    /// a name that is not the service's own ([`Error::NotOwned`]).
    pub async fn reserve(&self, owner: &Owner, db: &Database) -> Result<(), Error> {
        self.check_database(db)?;
        self.bounded("recording the database", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.claim(&session, owner, &Self::names_of(db)).await
        })
        .await
    }

    /// The names a service's database claims: the database, its owner and,
    /// when its name is valid, the readonly role.
    fn names_of(db: &Database) -> Vec<(NameKind, String)> {
        let mut names = vec![
            (NameKind::Database, db.name.clone()),
            (NameKind::Role, db.owner.clone()),
        ];
        let readonly = db.readonly_role();
        if validate_name(NameKind::Role, &readonly).is_ok() {
            names.push((NameKind::Role, readonly));
        }
        names
    }

    /// Whether a database recorded for the service (and not retained)
    /// exists on the server, for retain/delete decisions.
    pub async fn exists(&self, service_uid: &str) -> Result<bool, Error> {
        self.bounded("checking the database", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            for record in self.records_of(&session, service_uid).await? {
                if record.kind == NameKind::Database
                    && !record.retained
                    && self.database_owner(&session, &record.name).await?.is_some()
                {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await
    }

    /// Checks that `db` is recorded for the service and exists: what a
    /// backup may dump, or a restore write into.
    pub async fn check_owned(&self, owner: &Owner, db: &Database) -> Result<(), Error> {
        self.check_database(db)?;
        self.bounded("checking the database's owner", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.verify(
                &session,
                owner,
                &[
                    (NameKind::Database, db.name.as_str()),
                    (NameKind::Role, db.owner.as_str()),
                ],
            )
            .await?;
            if self.check_owner(&session, db).await?.is_none() {
                return Err(Error::DatabaseMissing {
                    endpoint: self.admin.endpoint(),
                    database: db.name.clone(),
                });
            }
            Ok(())
        })
        .await
    }

    /// The backup last restored into the service's database (as
    /// [`Engine::record_restore`] wrote it); `None` when none was. The
    /// database must be the service's own ([`Error::NotOwned`]).
    pub async fn restored_from(
        &self,
        owner: &Owner,
        db: &Database,
    ) -> Result<Option<String>, Error> {
        self.check_database(db)?;
        self.bounded("reading the database's last restore", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.verify(&session, owner, &[(NameKind::Database, db.name.as_str())])
                .await?;
            let rows = self
                .query(
                    &session,
                    &format!("reading the last restore into database \"{}\"", db.name),
                    &format!(
                        "SELECT restored_from FROM {} WHERE kind = 'database' AND name = $1",
                        ownership::TABLE
                    ),
                    &[&db.name],
                )
                .await?;
            Ok(rows.first().and_then(|row| row.get(0)))
        })
        .await
    }

    /// Records that `backup` was restored into the service's database, so
    /// that a retry of that restore is known for one, not for an in-place
    /// restore over live data.
    pub async fn record_restore(
        &self,
        owner: &Owner,
        db: &Database,
        backup: &str,
    ) -> Result<(), Error> {
        self.check_database(db)?;
        self.bounded("recording the restore", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.query(
                &session,
                &format!("recording the restore into database \"{}\"", db.name),
                &format!(
                    "UPDATE {} SET restored_from = $1 \
                     WHERE kind = 'database' AND name = $2 AND service_uid = $3 AND NOT retained",
                    ownership::TABLE
                ),
                &[&backup, &db.name, &owner.uid],
            )
            .await
            .map(drop)
        })
        .await
    }

    /// Drops what is recorded for the service and not retained, and
    /// nothing else: its databases (`WITH (FORCE)`, terminating their
    /// connections), then its roles, each record going with its object.
    /// Idempotent: what is absent counts as dropped. A recorded database
    /// owned by a role that is not the service's is refused
    /// ([`Error::ForeignDatabase`]) and kept. Returns the names of what
    /// existed and was dropped.
    pub async fn drop_owned(&self, service_uid: &str) -> Result<Vec<String>, Error> {
        self.bounded("dropping the database", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            let (version_num, version) = self.server_version(&session).await?;
            if version_num < MIN_SERVER_VERSION_NUM {
                return Err(Error::ServerTooOld {
                    endpoint: self.admin.endpoint(),
                    version,
                });
            }
            let records: Vec<Record> = self
                .records_of(&session, service_uid)
                .await?
                .into_iter()
                .filter(|r| !r.retained)
                .collect();
            let roles: Vec<&str> = records
                .iter()
                .filter(|r| r.kind == NameKind::Role)
                .map(|r| r.name.as_str())
                .collect();
            let mut dropped = Vec::new();
            for record in records.iter().filter(|r| r.kind == NameKind::Database) {
                let existed = self
                    .object_exists(&session, NameKind::Database, &record.name)
                    .await?;
                if let Some(owner) = self.database_owner(&session, &record.name).await?
                    && !roles.contains(&owner.as_str())
                {
                    return Err(Error::ForeignDatabase {
                        endpoint: self.admin.endpoint(),
                        database: record.name.clone(),
                        owner,
                        expected: roles.join(", "),
                    });
                }
                self.execute(
                    &session,
                    &format!("dropping database \"{}\"", record.name),
                    &format!(
                        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                        quote_identifier(&record.name)
                    ),
                )
                .await?;
                self.forget(&session, record).await?;
                if existed {
                    dropped.push(record.name.clone());
                }
            }
            for record in records.iter().filter(|r| r.kind == NameKind::Role) {
                // Reserved names (a readonly role never asked for) count as
                // dropped only when they existed.
                let existed = self
                    .object_exists(&session, NameKind::Role, &record.name)
                    .await?;
                self.execute(
                    &session,
                    &format!("dropping role \"{}\"", record.name),
                    &format!("DROP ROLE IF EXISTS {}", quote_identifier(&record.name)),
                )
                .await?;
                self.forget(&session, record).await?;
                if existed {
                    dropped.push(record.name.clone());
                }
            }
            Ok(dropped)
        })
        .await
    }

    /// `Retain`: the service's records are marked retained, so that its
    /// database and roles stay, and no service (a later one of the same
    /// name included) uses, alters or drops them until the provider removes
    /// them.
    pub async fn retain(&self, service_uid: &str) -> Result<(), Error> {
        self.bounded("retaining the database", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            if !self.records_exist(&session).await? {
                return Ok(());
            }
            self.query(
                &session,
                "marking the service's objects retained",
                &format!(
                    "UPDATE {} SET retained = true WHERE service_uid = $1",
                    ownership::TABLE
                ),
                &[&service_uid],
            )
            .await
            .map(drop)
        })
        .await
    }

    /// Sets a new password on the service's role (credential rotation),
    /// recording nothing. A role recorded for another service, retained,
    /// or on the server without a record is [`Error::NotOwned`]; a missing
    /// one [`Error::RoleMissing`].
    pub async fn set_password(
        &self,
        owner: &Owner,
        role: &str,
        password: &str,
    ) -> Result<(), Error> {
        self.check_role(role)?;
        check_password(password)?;
        self.bounded("setting the password", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            // A rotation records nothing: a role that is neither recorded
            // nor on the server fails below as missing.
            match self
                .verify(&session, owner, &[(NameKind::Role, role)])
                .await
            {
                Err(Error::NotOwned {
                    conflict: Conflict::Unrecorded,
                    ..
                }) if !self.object_exists(&session, NameKind::Role, role).await? => {}
                other => other?,
            }
            let result = self
                .execute(
                    &session,
                    &format!("setting the password of role \"{role}\""),
                    &format!(
                        "ALTER ROLE {} WITH PASSWORD {}",
                        quote_identifier(role),
                        quote_literal(&scram_verifier(password))
                    ),
                )
                .await;
            match result {
                Err(e) if e.sqlstate() == Some(SqlState::UNDEFINED_OBJECT.code()) => {
                    Err(Error::RoleMissing {
                        endpoint: self.admin.endpoint(),
                        role: role.to_owned(),
                    })
                }
                other => other,
            }
        })
        .await
    }

    /// Creates (or converges) the readonly role `<owner>_readonly` (LOGIN,
    /// the given password) with CONNECT on the database, USAGE on its
    /// schemas and SELECT on all their tables, now and (through default
    /// privileges) on those the owner creates later. The database must
    /// exist ([`Error::DatabaseMissing`]) and, with the role, be recorded
    /// for the service ([`Error::NotOwned`]).
    pub async fn ensure_readonly(
        &self,
        owner: &Owner,
        db: &Database,
        password: &str,
    ) -> Result<(), Error> {
        self.check_database(db)?;
        let readonly = db.readonly_role();
        self.check_role(&readonly)?;
        check_password(password)?;
        self.bounded("ensuring the readonly role", async {
            let session = self.connect(MAINTENANCE_DATABASE).await?;
            self.claim(&session, owner, &Self::names_of(db)).await?;
            if self.check_owner(&session, db).await?.is_none() {
                return Err(Error::DatabaseMissing {
                    endpoint: self.admin.endpoint(),
                    database: db.name.clone(),
                });
            }
            let version_num = self.server_version(&session).await?.0;
            self.ensure_login_role(&session, &readonly, password)
                .await?;
            self.grant_membership_if_needed(&session, &readonly).await?;
            let (database, owner, ro) = (
                quote_identifier(&db.name),
                quote_identifier(&db.owner),
                quote_identifier(&readonly),
            );
            self.execute(
                &session,
                &format!("granting CONNECT on database \"{}\"", db.name),
                &format!("GRANT CONNECT ON DATABASE {database} TO {ro}"),
            )
            .await?;
            drop(session);

            let session = self.connect(&db.name).await?;
            let schemas: Vec<String> = self
                .query(
                    &session,
                    "listing schemas",
                    "SELECT nspname::text FROM pg_catalog.pg_namespace \
                     WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\\_%' \
                     ORDER BY nspname",
                    &[],
                )
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect();
            // One multi-statement batch: one implicit transaction.
            let mut sql = String::new();
            for schema in &schemas {
                let schema = quote_identifier(schema);
                sql.push_str(&format!(
                    "GRANT USAGE ON SCHEMA {schema} TO {ro};\n\
                     GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {ro};\n"
                ));
            }
            sql.push_str(&format!(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} GRANT SELECT ON TABLES TO {ro};\n\
                 ALTER DEFAULT PRIVILEGES FOR ROLE {owner} GRANT USAGE ON SCHEMAS TO {ro};\n"
            ));
            // Before 15 every role may create tables in `public`; a readonly
            // role must not. The owner keeps the right explicitly.
            if version_num < PUBLIC_SCHEMA_LOCKED_VERSION_NUM
                && schemas.iter().any(|s| s == "public")
            {
                sql.push_str(&format!(
                    "REVOKE CREATE ON SCHEMA public FROM PUBLIC;\n\
                     GRANT CREATE ON SCHEMA public TO {owner};\n"
                ));
            }
            self.execute(
                &session,
                &format!("granting read access on database \"{}\"", db.name),
                &sql,
            )
            .await
        })
        .await
    }

    // Below: the pieces the operations are made of.

    /// Records `names` for `owner`, in one transaction under the records'
    /// lock (creating the records table on first use); refuses, recording
    /// nothing, when any name is not the service's to use.
    async fn claim(
        &self,
        session: &Client,
        owner: &Owner,
        names: &[(NameKind, String)],
    ) -> Result<(), Error> {
        self.execute(session, "starting the ownership transaction", "BEGIN")
            .await?;
        let claimed = self.claim_in_transaction(session, owner, names).await;
        let end = if claimed.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = self
            .execute(session, "ending the ownership transaction", end)
            .await;
        claimed.and(ended)
    }

    async fn claim_in_transaction(
        &self,
        session: &Client,
        owner: &Owner,
        names: &[(NameKind, String)],
    ) -> Result<(), Error> {
        self.execute(
            session,
            "locking the ownership records",
            &format!(
                "SELECT pg_catalog.pg_advisory_xact_lock({})",
                ownership::LOCK_KEY
            ),
        )
        .await?;
        self.execute(
            session,
            "setting up the ownership records",
            ownership::SETUP,
        )
        .await?;
        let mut free = Vec::new();
        for (kind, name) in names {
            let (kind, name) = (*kind, name.as_str());
            let record = self.record(session, kind, name).await?;
            let exists = self.object_exists(session, kind, name).await?;
            match ownership::judge(record.as_ref(), exists, &owner.uid) {
                Claim::Ours => {}
                Claim::Free => free.push((kind, name)),
                Claim::Refused(conflict) => return Err(self.not_owned(kind, name, conflict)),
            }
        }
        for (kind, name) in free {
            self.query(
                session,
                &format!("recording {kind} \"{name}\" for the service"),
                &format!(
                    "INSERT INTO {} (kind, name, service_uid, namespace, service) \
                     VALUES ($1, $2, $3, $4, $5)",
                    ownership::TABLE
                ),
                &[
                    &ownership::kind_name(kind),
                    &name,
                    &owner.uid,
                    &owner.namespace,
                    &owner.name,
                ],
            )
            .await?;
        }
        Ok(())
    }

    /// Checks, without recording anything, that every name is recorded
    /// for `owner` and not retained ([`Error::NotOwned`] otherwise; a name
    /// with no record is `Unrecorded`).
    async fn verify(
        &self,
        session: &Client,
        owner: &Owner,
        names: &[(NameKind, &str)],
    ) -> Result<(), Error> {
        for &(kind, name) in names {
            let record = self.record(session, kind, name).await?;
            let conflict = match ownership::judge(record.as_ref(), true, &owner.uid) {
                Claim::Ours => continue,
                Claim::Refused(conflict) => conflict,
                Claim::Free => Conflict::Unrecorded,
            };
            return Err(self.not_owned(kind, name, conflict));
        }
        Ok(())
    }

    fn not_owned(&self, kind: NameKind, name: &str, conflict: Conflict) -> Error {
        Error::NotOwned {
            kind,
            name: name.to_owned(),
            endpoint: self.admin.endpoint(),
            conflict,
        }
    }

    /// Whether the records table exists (no service was ever recorded on
    /// this server before).
    async fn records_exist(&self, session: &Client) -> Result<bool, Error> {
        let rows = self
            .query(
                session,
                "looking up the ownership records",
                "SELECT pg_catalog.to_regclass($1) IS NOT NULL",
                &[&ownership::TABLE],
            )
            .await?;
        Ok(rows.first().is_some_and(|row| row.get::<_, bool>(0)))
    }

    /// The record of one name, `None` when it has none.
    async fn record(
        &self,
        session: &Client,
        kind: NameKind,
        name: &str,
    ) -> Result<Option<Record>, Error> {
        if !self.records_exist(session).await? {
            return Ok(None);
        }
        let rows = self
            .query(
                session,
                &format!("reading the record of {kind} \"{name}\""),
                &format!(
                    "SELECT kind, name, service_uid, retained FROM {} \
                     WHERE kind = $1 AND name = $2",
                    ownership::TABLE
                ),
                &[&ownership::kind_name(kind), &name],
            )
            .await?;
        Ok(rows.iter().find_map(record_of_row))
    }

    /// Every record of a service.
    async fn records_of(&self, session: &Client, service_uid: &str) -> Result<Vec<Record>, Error> {
        if !self.records_exist(session).await? {
            return Ok(Vec::new());
        }
        let rows = self
            .query(
                session,
                "reading the service's ownership records",
                &format!(
                    "SELECT kind, name, service_uid, retained FROM {} \
                     WHERE service_uid = $1 ORDER BY kind, name",
                    ownership::TABLE
                ),
                &[&service_uid],
            )
            .await?;
        Ok(rows.iter().filter_map(record_of_row).collect())
    }

    /// Removes the record of an object just dropped.
    async fn forget(&self, session: &Client, record: &Record) -> Result<(), Error> {
        self.query(
            session,
            &format!("removing the record of {} \"{}\"", record.kind, record.name),
            &format!(
                "DELETE FROM {} WHERE kind = $1 AND name = $2 AND service_uid = $3",
                ownership::TABLE
            ),
            &[
                &ownership::kind_name(record.kind),
                &record.name,
                &record.service_uid,
            ],
        )
        .await
        .map(drop)
    }

    /// Whether a database or role of that name exists on the server.
    async fn object_exists(
        &self,
        session: &Client,
        kind: NameKind,
        name: &str,
    ) -> Result<bool, Error> {
        let sql = match kind {
            NameKind::Database => "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1",
            NameKind::Role => "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1",
        };
        let rows = self
            .query(
                session,
                &format!("looking up {kind} \"{name}\""),
                sql,
                &[&name],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    fn check_database(&self, db: &Database) -> Result<(), Error> {
        validate_name(NameKind::Database, &db.name)?;
        self.check_role(&db.owner)
    }

    /// Validates a role name, and refuses the admin's own role: its password
    /// is the provider's, and dropping it would lock the controller out.
    fn check_role(&self, role: &str) -> Result<(), Error> {
        validate_name(NameKind::Role, role)?;
        if role == self.admin.user {
            return Err(Error::InvalidName {
                kind: NameKind::Role,
                name: role.to_owned(),
                reason: "is the server's admin role".to_owned(),
            });
        }
        Ok(())
    }

    /// Runs an operation within the operation timeout.
    async fn bounded<T>(
        &self,
        operation: &'static str,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.operation_timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    endpoint: self.admin.endpoint(),
                    operation,
                    after: self.operation_timeout,
                })
            })
    }

    /// Opens an admin session on `database`.
    ///
    /// The TLS seam: this is the only place that picks the connector. Today
    /// it is `NoTls`, and an `sslmode` that needs TLS is refused here.
    async fn connect(&self, database: &str) -> Result<Client, Error> {
        let admin = &self.admin;
        if admin.sslmode.requires_tls() {
            return Err(Error::TlsNotSupported {
                sslmode: admin.sslmode,
            });
        }
        let connect_error = |cause: String| Error::Connect {
            endpoint: admin.endpoint(),
            user: admin.user.clone(),
            cause,
        };
        let mut config = Config::new();
        config
            .host(&admin.host)
            .port(admin.port)
            .user(&admin.user)
            .password(&admin.password)
            .dbname(database)
            .application_name(APPLICATION_NAME)
            .ssl_mode(tokio_postgres::config::SslMode::Disable)
            .connect_timeout(self.connect_timeout);
        let (client, connection) =
            match tokio::time::timeout(self.connect_timeout, config.connect(NoTls)).await {
                Ok(Ok(connected)) => connected,
                Ok(Err(e)) => return Err(connect_error(describe(&e))),
                Err(_) => {
                    return Err(connect_error(format!(
                        "no answer within {:?}",
                        self.connect_timeout
                    )));
                }
            };
        // Drives the connection; it ends when the client is dropped. Its
        // errors reach the client's calls too, which report them.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let timeout_ms = self.operation_timeout.as_millis().max(1);
        self.execute(
            &client,
            "setting statement_timeout",
            &format!("SET statement_timeout = {timeout_ms}"),
        )
        .await?;
        Ok(client)
    }

    /// Runs statements without results (simple query protocol; several
    /// statements run in one implicit transaction).
    async fn execute(&self, session: &Client, action: &str, sql: &str) -> Result<(), Error> {
        session
            .batch_execute(sql)
            .await
            .map_err(|e| self.query_error(action, &e))
    }

    async fn query(
        &self,
        session: &Client,
        action: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        session
            .query(sql, params)
            .await
            .map_err(|e| self.query_error(action, &e))
    }

    fn query_error(&self, action: &str, e: &tokio_postgres::Error) -> Error {
        Error::Query {
            action: capitalize(action),
            endpoint: self.admin.endpoint(),
            code: e.code().map(|c| c.code().to_owned()),
            cause: describe(e),
        }
    }

    async fn server_version(&self, session: &Client) -> Result<(i32, String), Error> {
        let rows = self
            .query(
                session,
                "reading the server version",
                "SELECT current_setting('server_version_num')::int4, \
                 current_setting('server_version')",
                &[],
            )
            .await?;
        let row = rows.first().ok_or_else(|| Error::Query {
            action: "Reading the server version".to_owned(),
            endpoint: self.admin.endpoint(),
            code: None,
            cause: "no row returned".to_owned(),
        })?;
        Ok((row.get(0), row.get(1)))
    }

    /// The owner of a database, `None` when it does not exist.
    async fn database_owner(&self, session: &Client, name: &str) -> Result<Option<String>, Error> {
        let rows = self
            .query(
                session,
                &format!("looking up database \"{name}\""),
                "SELECT pg_catalog.pg_get_userbyid(datdba)::text \
                 FROM pg_catalog.pg_database WHERE datname = $1",
                &[&name],
            )
            .await?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    /// Refuses a database owned by another role; returns its owner, `None`
    /// when it does not exist.
    async fn check_owner(&self, session: &Client, db: &Database) -> Result<Option<String>, Error> {
        match self.database_owner(session, &db.name).await? {
            Some(owner) if owner != db.owner => Err(Error::ForeignDatabase {
                endpoint: self.admin.endpoint(),
                database: db.name.clone(),
                owner,
                expected: db.owner.clone(),
            }),
            owner => Ok(owner),
        }
    }

    /// Creates a LOGIN role with the password, or sets LOGIN and the
    /// password on an existing one.
    async fn ensure_login_role(
        &self,
        session: &Client,
        role: &str,
        password: &str,
    ) -> Result<(), Error> {
        let exists = !self
            .query(
                session,
                &format!("looking up role \"{role}\""),
                "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1",
                &[&role],
            )
            .await?
            .is_empty();
        let alter = format!(
            "ALTER ROLE {} WITH LOGIN PASSWORD {}",
            quote_identifier(role),
            quote_literal(&scram_verifier(password))
        );
        let action = format!("setting LOGIN and the password of role \"{role}\"");
        if exists {
            return self.execute(session, &action, &alter).await;
        }
        let created = self
            .execute(
                session,
                &format!("creating role \"{role}\""),
                &format!(
                    "CREATE ROLE {} WITH LOGIN PASSWORD {}",
                    quote_identifier(role),
                    quote_literal(&scram_verifier(password))
                ),
            )
            .await;
        match created {
            // Created meanwhile by another replica: converge it.
            Err(e) if e.sqlstate() == Some(SqlState::DUPLICATE_OBJECT.code()) => {
                self.execute(session, &action, &alter).await
            }
            other => other,
        }
    }

    /// A non-superuser admin must be a member of a role to create a
    /// database it owns, drop that database and terminate the role's
    /// sessions; a superuser needs no membership.
    async fn grant_membership_if_needed(&self, session: &Client, role: &str) -> Result<(), Error> {
        let superuser = self
            .query(
                session,
                "checking whether the admin is a superuser",
                "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user",
                &[],
            )
            .await?
            .first()
            .is_some_and(|row| row.get::<_, bool>(0));
        if superuser {
            return Ok(());
        }
        self.execute(
            session,
            &format!("granting role \"{role}\" to the admin"),
            &format!("GRANT {} TO CURRENT_USER", quote_identifier(role)),
        )
        .await
    }
}

/// A row of the records table (`kind, name, service_uid, retained`); a
/// kind this version does not know is skipped.
fn record_of_row(row: &tokio_postgres::Row) -> Option<Record> {
    Some(Record {
        kind: ownership::parse_kind(row.get(0))?,
        name: row.get(1),
        service_uid: row.get(2),
        retained: row.get(3),
    })
}

/// The SCRAM-SHA-256 verifier of a password, what the server stores.
fn scram_verifier(password: &str) -> String {
    postgres_protocol::password::scram_sha_256(password.as_bytes())
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A tokio-postgres error with its causes: the server's message, detail
/// and hint for a server error, else the chain of sources.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" (DETAIL: {detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!(" (HINT: {hint})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const FULL: [(&str, &str); 4] = [
        ("host", "db.provider.example"),
        ("port", "5432"),
        ("user", "admin"),
        ("password", "s3cret"),
    ];

    #[test]
    fn a_complete_secret_is_read_with_sslmode_prefer_by_default() {
        let admin = AdminConnection::from_secret(&secret(&FULL)).unwrap();
        assert_eq!(admin.host, "db.provider.example");
        assert_eq!(admin.port, 5432);
        assert_eq!(admin.user, "admin");
        assert_eq!(admin.password, "s3cret");
        assert_eq!(admin.sslmode, SslMode::Prefer);
        assert_eq!(admin.endpoint(), "db.provider.example:5432");
    }

    #[test]
    fn values_are_trimmed_but_the_password_is_taken_as_is() {
        let admin = AdminConnection::from_secret(&secret(&[
            ("host", " db\n"),
            ("port", "5432\n"),
            ("user", "admin\n"),
            ("password", " pw \n"),
            ("sslmode", "disable\n"),
        ]))
        .unwrap();
        assert_eq!(
            (admin.host.as_str(), admin.port, admin.user.as_str()),
            ("db", 5432, "admin")
        );
        assert_eq!(admin.password, " pw \n");
        assert_eq!(admin.sslmode, SslMode::Disable);
    }

    #[test]
    fn every_missing_key_is_named() {
        let err = AdminConnection::from_secret(&secret(&FULL[..3])).unwrap_err();
        assert_eq!(err.to_string(), "Secret key \"password\" is missing");
        let err = AdminConnection::from_secret(&secret(&[("user", "u")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Secret keys \"host\", \"port\" and \"password\" are missing"
        );
    }

    #[test]
    fn bad_values_are_named_with_the_reason() {
        let with = |key: &str, value: &str| {
            let mut data = secret(&FULL);
            data.insert(key.to_owned(), value.to_owned());
            AdminConnection::from_secret(&data).unwrap_err().to_string()
        };
        assert_eq!(
            with("port", "54x"),
            "Secret key \"port\" is invalid: \"54x\" is not a port number (1-65535)"
        );
        assert_eq!(
            with("port", "0"),
            "Secret key \"port\" is invalid: \"0\" is not a port number (1-65535)"
        );
        assert_eq!(
            with("host", "  "),
            "Secret key \"host\" is invalid: is empty"
        );
        assert_eq!(
            with("sslmode", "on"),
            "Secret key \"sslmode\" is invalid: \"on\" is not one of disable, allow, prefer, \
             require, verify-ca, verify-full"
        );
    }

    #[test]
    fn debug_output_hides_passwords() {
        let admin = AdminConnection::from_secret(&secret(&FULL)).unwrap();
        assert!(!format!("{admin:?}").contains("s3cret"));
        let credentials = Engine::new(admin).credentials("d", "u", "hunter2");
        assert!(!format!("{credentials:?}").contains("hunter2"));
    }

    #[test]
    fn valid_names_pass() {
        for name in ["a", "_a", "shop_db_1", &"x".repeat(63)] {
            validate_name(NameKind::Database, name).unwrap();
            validate_name(NameKind::Role, name).unwrap();
        }
    }

    #[test]
    fn invalid_names_are_refused_with_the_rule_they_break() {
        let reason = |kind, name: &str| validate_name(kind, name).unwrap_err().to_string();
        use NameKind::*;
        assert_eq!(
            reason(Database, ""),
            "invalid database name \"\": must not be empty"
        );
        assert_eq!(
            reason(Database, &"a".repeat(64)),
            format!(
                "invalid database name \"{}\": is 64 bytes long; PostgreSQL names hold at most 63",
                "a".repeat(64)
            )
        );
        assert_eq!(
            reason(Role, "Shop"),
            "invalid role name \"Shop\": may hold only lowercase letters, digits and \"_\", not 'S'"
        );
        assert_eq!(
            reason(Role, "a\"b"),
            "invalid role name \"a\"b\": may hold only lowercase letters, digits and \"_\", not '\"'"
        );
        for name in ["a-b", "a b", "é", "a;drop"] {
            assert!(validate_name(Database, name).is_err(), "{name}");
        }
        assert_eq!(
            reason(Database, "template1"),
            "invalid database name \"template1\": is one of PostgreSQL's own databases"
        );
        assert_eq!(
            reason(Role, "pg_monitor"),
            "invalid role name \"pg_monitor\": the prefix \"pg_\" is reserved for PostgreSQL's own roles"
        );
        assert_eq!(
            reason(Role, "public"),
            "invalid role name \"public\": is reserved by PostgreSQL"
        );
        // Role rules do not apply to databases and the other way round.
        validate_name(Database, "public").unwrap();
        validate_name(Role, "postgres").unwrap();
    }

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(quote_identifier("shop"), "\"shop\"");
        assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("pw"), "'pw'");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\'b"), "E'a\\\\''b'");
    }

    #[test]
    fn the_readonly_role_is_named_after_the_owner() {
        assert_eq!(
            Database::new("shop", "shop").readonly_role(),
            "shop_readonly"
        );
    }

    #[test]
    fn the_uri_percent_encodes_user_and_password() {
        let credentials = Credentials {
            host: "db".to_owned(),
            port: 5432,
            database: "shop".to_owned(),
            user: "shop".to_owned(),
            password: "p@ss:w/rd?#%é ~-._".to_owned(),
        };
        assert_eq!(
            credentials.uri(),
            "postgresql://shop:p%40ss%3Aw%2Frd%3F%23%25%C3%A9%20~-._@db:5432/shop"
        );
        let ipv6 = Credentials {
            host: "::1".to_owned(),
            ..credentials
        };
        assert!(ipv6.uri().contains("@[::1]:5432/"));
    }

    #[test]
    fn passwords_are_32_url_safe_characters_and_differ() {
        let a = generate_password();
        let b = generate_password();
        assert_eq!(a.len(), PASSWORD_LEN);
        assert!(a.bytes().all(|c| PASSWORD_ALPHABET.contains(&c)));
        assert_ne!(a, b);
    }

    #[test]
    fn transient_errors_are_told_apart() {
        let query = |code: &str| Error::Query {
            action: String::new(),
            endpoint: String::new(),
            code: Some(code.to_owned()),
            cause: String::new(),
        };
        assert!(query("57014").is_transient());
        assert!(query("40P01").is_transient());
        assert!(!query("42501").is_transient());
        assert!(!Error::MissingSecretKeys { keys: vec!["host"] }.is_transient());
    }
}
