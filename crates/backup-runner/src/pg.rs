//! pg_dump and pg_restore: where they are, how they connect, what their
//! output means.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::ByteString;
use navique_provider_postgres::{AdminConnection, Database};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::Error;

/// Where Debian installs each PostgreSQL version.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";
/// How much of a tool's stderr a message keeps.
pub const STDERR_LIMIT: usize = 16 * 1024;
const MESSAGE_LIMIT: usize = 2000;

/// The folder holding pg_dump and pg_restore.
#[derive(Clone, Debug)]
pub struct PgTools {
    bin_dir: PathBuf,
}

impl PgTools {
    /// `explicit`, else the folder of pg_dump on PATH, else the newest
    /// `/usr/lib/postgresql/<version>/bin` (as scripts/postgres.sh looks).
    pub fn locate(explicit: Option<&Path>) -> Result<Self, Error> {
        if let Some(dir) = explicit {
            return if has_tools(dir) {
                Ok(Self {
                    bin_dir: dir.to_owned(),
                })
            } else {
                Err(Error::PgTools(format!(
                    "--pg-bin-dir {} holds no pg_dump and pg_restore",
                    dir.display()
                )))
            };
        }
        let on_path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .unwrap_or_default();
        let debian = std::fs::read_dir(DEBIAN_ROOT)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let newest = newest_versions(debian)
            .into_iter()
            .map(|version| Path::new(DEBIAN_ROOT).join(version).join("bin"));
        on_path
            .into_iter()
            .chain(newest)
            .find(|dir| has_tools(dir))
            .map(|bin_dir| Self { bin_dir })
            .ok_or_else(|| {
                Error::PgTools(format!(
                    "pg_dump and pg_restore are neither on PATH nor in {DEBIAN_ROOT}/<version>/bin; \
                     install PostgreSQL's client tools or pass --pg-bin-dir"
                ))
            })
    }

    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    fn command(&self, tool: &str) -> Command {
        let mut command = Command::new(self.bin_dir.join(tool));
        // Only what the connection says: no PG* variable of this process
        // leaks in. PATH stays for Debian's pg_wrapper scripts.
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command
            .env("LC_ALL", "C")
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// `pg_dump --format=custom --compress=0` of the connection's database
    /// to stdout: backup-runner compresses (see `compression`). With
    /// `snapshot`, inside that exported snapshot (`--snapshot`).
    pub fn dump(&self, connection: &Connection, snapshot: Option<&str>) -> Command {
        let mut command = self.command("pg_dump");
        command
            // --verbose: the tables it starts on are its progress.
            .args([
                "--format=custom",
                "--compress=0",
                "--verbose",
                "--no-password",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if let Some(snapshot) = snapshot {
            command.arg(format!("--snapshot={snapshot}"));
        }
        connection.apply(&mut command);
        command
    }

    /// `pg_restore` of `input` into the connection's (scratch) database,
    /// objects owned by the connecting role: one transaction, or parallel
    /// jobs (a scratch database is dropped whatever happened).
    pub fn restore_scratch(&self, connection: &Connection, input: &Input) -> Command {
        let mut command = self.command("pg_restore");
        command
            .args([
                "--no-password",
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
            ])
            .arg(format!("--dbname={}", connection.database))
            .stdout(Stdio::null());
        input.apply(&mut command);
        connection.apply(&mut command);
        command
    }

    /// `pg_dump --format=directory --jobs=<jobs> --compress=0` of the
    /// connection's database into `dir` (which must not exist), inside
    /// `snapshot` when given; backup-runner compresses each file.
    pub fn dump_directory(
        &self,
        connection: &Connection,
        snapshot: Option<&str>,
        jobs: u32,
        dir: &Path,
    ) -> Command {
        let mut command = self.command("pg_dump");
        command
            .args([
                "--format=directory",
                "--compress=0",
                "--verbose",
                "--no-password",
            ])
            .arg(format!("--jobs={jobs}"))
            .arg(format!("--file={}", dir.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(snapshot) = snapshot {
            command.arg(format!("--snapshot={snapshot}"));
        }
        connection.apply(&mut command);
        command
    }

    /// `pg_restore --list` of a directory archive: reads its `toc.dat`.
    pub fn list_directory(&self, dir: &Path) -> Command {
        let mut command = self.command("pg_restore");
        command
            .arg("--list")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        command
    }

    /// `pg_restore --list` of the archive on stdin.
    pub fn list(&self) -> Command {
        let mut command = self.command("pg_restore");
        command
            .arg("--list")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        command
    }

    /// `pg_restore` of `input` into the connection's database, dropping
    /// first what the archive recreates: one transaction, or (`Input`
    /// with jobs, only into a database that held nothing) parallel jobs.
    pub fn restore(&self, connection: &Connection, input: &Input) -> Command {
        let mut command = self.command("pg_restore");
        command
            .args([
                "--no-password",
                "--no-owner",
                "--no-privileges",
                "--clean",
                "--if-exists",
                "--exit-on-error",
            ])
            .arg(format!("--role={}", connection.role))
            .arg(format!("--dbname={}", connection.database))
            .stdout(Stdio::null());
        input.apply(&mut command);
        connection.apply(&mut command);
        command
    }
}

/// What pg_restore reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A custom-format archive on stdin, restored in one transaction.
    Stdin,
    /// A directory archive on local disk, in one transaction (`jobs` 1) or
    /// with `jobs` parallel jobs, which cannot share one transaction.
    Directory { dir: PathBuf, jobs: u32 },
}

impl Input {
    fn apply(&self, command: &mut Command) {
        match self {
            Self::Stdin => {
                command.arg("--single-transaction").stdin(Stdio::piped());
            }
            Self::Directory { dir, jobs } => {
                if *jobs > 1 {
                    command.arg(format!("--jobs={jobs}"));
                } else {
                    command.arg("--single-transaction");
                }
                command.arg(dir).stdin(Stdio::null());
            }
        }
    }
}

fn has_tools(dir: &Path) -> bool {
    ["pg_dump", "pg_restore"]
        .iter()
        .all(|tool| dir.join(tool).is_file())
}

/// Version folder names, newest first (`17` before `9.6`); others dropped.
pub fn newest_versions(names: Vec<String>) -> Vec<String> {
    let version = |name: &str| -> Option<Vec<u32>> {
        name.split('.').map(|part| part.parse().ok()).collect()
    };
    let mut versions: Vec<(Vec<u32>, String)> = names
        .into_iter()
        .filter_map(|name| Some((version(&name)?, name)))
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, name)| name).collect()
}

/// The `password` of an `InProject` service's credential Secret: the only
/// key read from it, so that the Secret never says where to connect.
pub fn password_of(
    data: &BTreeMap<String, ByteString>,
    namespace: &str,
    name: &str,
) -> Result<String, Error> {
    data.get("password")
        .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        .filter(|password| !password.is_empty())
        .ok_or_else(|| Error::SecretInvalid {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason: "missing or empty key: password".to_owned(),
        })
}

/// How pg_dump and pg_restore reach a service's database, and the role a
/// restore recreates its objects as (the service's owner).
#[derive(Clone)]
pub struct Connection {
    pub host: String,
    pub port: String,
    pub database: String,
    pub user: String,
    password: String,
    sslmode: Option<String>,
    /// The service's owner role: restored objects belong to it.
    pub role: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The provider's admin connection into the service's database: a dump
    /// holds every object, whatever role owns it.
    pub fn as_provider(admin: &AdminConnection, db: &Database) -> Self {
        Self {
            host: admin.host.clone(),
            port: admin.port.to_string(),
            database: db.name.clone(),
            user: admin.user.clone(),
            password: admin.password.clone(),
            sslmode: Some(admin.sslmode.as_str().to_owned()),
            role: db.owner.clone(),
        }
    }

    /// An `InProject` engine, as its owner, at the given host and port.
    pub fn in_project(host: String, port: u16, db: &Database, password: String) -> Self {
        Self {
            host,
            port: port.to_string(),
            database: db.name.clone(),
            user: db.owner.clone(),
            password,
            sslmode: None,
            role: db.owner.clone(),
        }
    }

    /// Connection settings go through libpq's variables, so that the
    /// password never appears on a command line (`ps` shows those).
    fn apply(&self, command: &mut Command) {
        command
            .env("PGHOST", &self.host)
            .env("PGPORT", &self.port)
            .env("PGDATABASE", &self.database)
            .env("PGUSER", &self.user)
            .env("PGPASSWORD", &self.password)
            .env("PGCONNECT_TIMEOUT", "15")
            .env("PGAPPNAME", "navique-backup-runner");
        if let Some(sslmode) = &self.sslmode {
            command.env("PGSSLMODE", sslmode);
        }
    }

    /// The same server and login, into another database.
    pub fn with_database(&self, database: &str) -> Self {
        Self {
            database: database.to_owned(),
            ..self.clone()
        }
    }

    /// A client session on the connection's database.
    pub async fn connect(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port.parse().unwrap_or(5432))
            .user(&self.user)
            .password(&self.password)
            .dbname(&self.database)
            .application_name("navique-backup-runner")
            .connect_timeout(std::time::Duration::from_secs(15));
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Whether the database holds any table, view, sequence or other
    /// relation outside PostgreSQL's own schemas.
    pub async fn holds_data(&self) -> Result<bool, Error> {
        let failed = |e: tokio_postgres::Error| {
            sql_failed(
                "a check",
                format!("of whether {} holds data", self.describe()),
                e,
            )
        };
        let client = self.connect().await.map_err(failed)?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%')",
                &[],
            )
            .await
            .map_err(failed)?;
        Ok(row.get(0))
    }

    /// `database orders on db.example:5432 as orders`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "database {} on {}:{} as {}",
            self.database, self.host, self.port, self.user
        )
    }
}

/// A failed SQL step, with the server's own message when it gave one.
pub fn sql_failed(what: &'static str, context: String, e: tokio_postgres::Error) -> Error {
    Error::ToolFailed {
        tool: what,
        context,
        status: "error".to_owned(),
        stderr: e
            .as_db_error()
            .map_or_else(|| e.to_string(), |db| db.message().to_owned()),
    }
}

/// Reads a tool's stderr to the end, keeping its first 16 KiB.
pub async fn read_stderr(stderr: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut stderr) = stderr else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let room = STDERR_LIMIT.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// A tool's stderr as one line for a status message.
pub fn summarize(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return "no error output".to_owned();
    }
    match line.char_indices().nth(MESSAGE_LIMIT) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// Whether a line of `pg_restore --list` is an archive entry (not a
/// `;` comment or blank).
pub fn is_list_entry(line: &str) -> bool {
    let line = line.trim();
    !line.is_empty() && !line.starts_with(';')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_folders_come_first() {
        let names = ["9.6", "15", "lost+found", "17", "16.2"]
            .map(String::from)
            .to_vec();
        assert_eq!(newest_versions(names), ["17", "16.2", "15", "9.6"]);
    }

    #[test]
    fn only_the_password_is_read_from_a_project_secret() {
        let data: BTreeMap<String, ByteString> = [("host", "evil"), ("password", "")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect();
        let error = password_of(&data, "ns", "db-credentials")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "Secret ns/db-credentials: missing or empty key: password"
        );
    }

    #[test]
    fn the_provider_connects_to_the_services_database_and_restores_as_its_owner() {
        let admin = AdminConnection::from_secret(
            &[
                ("host", "h"),
                ("port", "5432"),
                ("user", "admin"),
                ("password", "s3cret"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        )
        .unwrap();
        let connection = Connection::as_provider(&admin, &Database::new("a__orders", "a__app"));
        assert!(!format!("{connection:?}").contains("s3cret"));
        assert_eq!(
            connection.describe(),
            "database a__orders on h:5432 as admin"
        );
        let tools = PgTools {
            bin_dir: PathBuf::from("/bin"),
        };
        for command in [
            tools.dump(&connection, Some("00000003-0000001B-1")),
            tools.restore(&connection, &Input::Stdin),
            tools.restore_scratch(
                &connection.with_database("_navique_verify_0"),
                &Input::Stdin,
            ),
            tools.dump_directory(&connection, None, 4, Path::new("/tmp/d")),
        ] {
            let args: Vec<_> = command.as_std().get_args().collect();
            assert!(!args.iter().any(|a| a.to_string_lossy().contains("s3cret")));
        }
        let restore = tools.restore(&connection, &Input::Stdin);
        let args: Vec<_> = restore.as_std().get_args().collect();
        assert!(
            args.contains(&std::ffi::OsStr::new("--role=a__app")),
            "{args:?}"
        );
    }

    fn args(command: &Command) -> Vec<String> {
        command
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn parallel_jobs_replace_the_single_transaction() {
        let tools = PgTools {
            bin_dir: PathBuf::from("/bin"),
        };
        let connection = Connection::in_project(
            "h".into(),
            5432,
            &Database::new("a__orders", "a__app"),
            "pw".into(),
        );
        let stream = args(&tools.restore(&connection, &Input::Stdin));
        assert!(
            stream.contains(&"--single-transaction".to_owned()),
            "{stream:?}"
        );
        let one = Input::Directory {
            dir: PathBuf::from("/w/dump"),
            jobs: 1,
        };
        let one = args(&tools.restore(&connection, &one));
        assert!(one.contains(&"--single-transaction".to_owned()), "{one:?}");
        assert_eq!(one.last().map(String::as_str), Some("/w/dump"));
        let four = Input::Directory {
            dir: PathBuf::from("/w/dump"),
            jobs: 4,
        };
        let four = args(&tools.restore_scratch(&connection, &four));
        assert!(four.contains(&"--jobs=4".to_owned()), "{four:?}");
        assert!(
            !four.contains(&"--single-transaction".to_owned()),
            "{four:?}"
        );
        let dump = args(&tools.dump_directory(&connection, Some("s-1"), 4, Path::new("/w/dump")));
        for flag in [
            "--format=directory",
            "--compress=0",
            "--jobs=4",
            "--file=/w/dump",
            "--snapshot=s-1",
        ] {
            assert!(dump.contains(&flag.to_owned()), "{flag}: {dump:?}");
        }
    }

    #[test]
    fn stderr_becomes_one_bounded_line() {
        assert_eq!(
            summarize(
                "pg_dump: error: connection failed\n  FATAL:  password authentication failed\n"
            ),
            "pg_dump: error: connection failed; FATAL: password authentication failed"
        );
        assert_eq!(summarize(""), "no error output");
        assert!(summarize(&"x ".repeat(5000)).len() < MESSAGE_LIMIT + 10);
    }

    #[test]
    fn list_entries_skip_comments_and_blanks() {
        let list = ";\n; Archive created at ...\n\n215; 1259 16386 TABLE public orders orders\n3; 0 0 ENCODING - ENCODING\n";
        assert_eq!(list.lines().filter(|l| is_list_entry(l)).count(), 2);
    }
}
