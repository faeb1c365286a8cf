//! A throwaway PostgreSQL server (`scripts/postgres.sh`) in a fresh
//! directory under /tmp on a free port, tuned for speed over durability,
//! stopped when dropped (also on panic) and, when it is never dropped (a
//! server in a static), once the test process has exited.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, Config, NoTls};

use crate::{describe, free_port, repo_root};

/// The superuser.
pub const ADMIN_USER: &str = "postgres";
/// The superuser's password under [`Auth::Scram`].
pub const ADMIN_PASSWORD: &str = "admin-pw";

/// Passwords over TCP, trust on the socket only (which the helpers here use).
const PG_HBA: &str = "\
# Written by navique-testkit: passwords over TCP, trust on the socket only.
local all all trust
host all all 127.0.0.1/32 scram-sha-256
";

/// How the server checks logins over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Every login succeeds, whatever the password (the script's setup).
    Trust,
    /// `scram-sha-256`, the superuser's password [`ADMIN_PASSWORD`]: a
    /// wrong password in a Secret fails as it does in production.
    Scram,
}

/// A running throwaway server.
pub struct Postgres {
    dir: tempfile::TempDir,
    pub port: u16,
    /// The PostgreSQL bin directory (psql).
    bin: PathBuf,
    /// Stops the server after this process, when nothing else does.
    watchdog: Child,
}

fn script() -> PathBuf {
    repo_root().join("scripts/postgres.sh")
}

impl Postgres {
    pub fn start(auth: Auth) -> Postgres {
        let dir = tempfile::Builder::new()
            .prefix("navique-pg-")
            .tempdir_in("/tmp")
            .expect("cannot create a directory under /tmp");
        // The script runs the server as an unprivileged user when root.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
            .expect("cannot chmod the server directory");
        let bin = Command::new(script())
            .arg("bin")
            .output()
            .expect("cannot run scripts/postgres.sh bin");
        assert!(
            bin.status.success(),
            "scripts/postgres.sh bin: {}",
            describe(&bin)
        );
        let bin = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim());
        let watchdog = watchdog(dir.path());
        // The guard exists before the first start: whatever happens next,
        // its Drop stops what was started.
        let mut server = Postgres {
            dir,
            port: 0,
            bin,
            watchdog,
        };
        let mut attempts = Vec::new();
        for _ in 0..3 {
            server.port = free_port();
            let output = Command::new(script())
                .arg("start")
                .arg(server.dir.path())
                .arg(server.port.to_string())
                .output()
                .expect("cannot run scripts/postgres.sh");
            if output.status.success() {
                server.configure(auth);
                return server;
            }
            let text = describe(&output);
            // Another process took the port between our probe and the start.
            let port_taken = text.contains("Address already in use");
            attempts.push(text);
            if !port_taken {
                break;
            }
        }
        panic!(
            "PostgreSQL could not be started with scripts/postgres.sh:\n{}",
            attempts.join("\n---\n")
        );
    }

    /// Turns durability off and, under [`Auth::Scram`], requires passwords
    /// over TCP; returns once the server has reloaded.
    fn configure(&self, auth: Auth) {
        // A throwaway server needs no durability: without fsync, CREATE and
        // DROP DATABASE and the shutdown checkpoint are much faster.
        let mut statements = vec![
            "ALTER SYSTEM SET fsync = off".to_owned(),
            "ALTER SYSTEM SET synchronous_commit = off".to_owned(),
            "ALTER SYSTEM SET full_page_writes = off".to_owned(),
        ];
        if auth == Auth::Scram {
            statements.push(format!(
                "ALTER ROLE {ADMIN_USER} PASSWORD '{ADMIN_PASSWORD}'"
            ));
            fs::write(self.dir.path().join("data/pg_hba.conf"), PG_HBA)
                .expect("cannot write pg_hba.conf");
        }
        statements.push("SELECT pg_reload_conf()".to_owned());
        // One command each: ALTER SYSTEM refuses a multi-statement batch.
        let output = self.psql("postgres", &statements);
        assert!(
            output.status.success(),
            "cannot configure PostgreSQL: {}",
            describe(&output)
        );
        if auth == Auth::Scram {
            self.until_passwords_are_checked();
        }
    }

    /// Waits until a wrong password over TCP is refused: the reload is
    /// asynchronous.
    fn until_passwords_are_checked(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let output = Command::new(self.bin.join("psql"))
                .args(["-X", "-w", "-c", "SELECT 1"])
                .arg(format!(
                    "postgresql://{ADMIN_USER}:wrong@127.0.0.1:{}/postgres",
                    self.port
                ))
                .output()
                .expect("run psql");
            if String::from_utf8_lossy(&output.stderr).contains("password authentication failed") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server still accepts a wrong password after reloading pg_hba.conf"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs each of `commands` as the superuser in `database`, over the
    /// unix socket (trusted whatever [`Auth`]); psql's unaligned output.
    fn psql(&self, database: &str, commands: &[String]) -> Output {
        let mut psql = self.client("psql", database);
        psql.args(["-X", "-At", "-v", "ON_ERROR_STOP=1"]);
        for command in commands {
            psql.arg("-c").arg(command);
        }
        psql.output().expect("run psql")
    }

    /// `tool` (a PostgreSQL client) connected to `database` as the
    /// superuser over the unix socket.
    fn client(&self, tool: &str, database: &str) -> Command {
        let mut command = Command::new(self.bin.join(tool));
        command.arg("-h").arg(self.dir.path()).args([
            "-p",
            &self.port.to_string(),
            "-U",
            ADMIN_USER,
            "-d",
            database,
        ]);
        command
    }

    /// `pg_dump` of `database` as the superuser over the socket, with
    /// `args` (e.g. `--format=custom`): its stdout.
    pub fn pg_dump(&self, database: &str, args: &[&str]) -> Vec<u8> {
        let output = self
            .client("pg_dump", database)
            .args(args)
            .output()
            .expect("run pg_dump");
        assert!(output.status.success(), "pg_dump: {}", describe(&output));
        output.stdout
    }

    /// Runs `sql` as the superuser and returns psql's unaligned output.
    pub fn query(&self, sql: &str) -> String {
        self.query_in("postgres", sql)
    }

    /// Runs `sql` as the superuser in `database`.
    pub fn query_in(&self, database: &str, sql: &str) -> String {
        let output = self.psql(database, &[sql.to_owned()]);
        assert!(
            output.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs `sql`, which must fail, in `database`; returns psql's error.
    pub fn query_in_err(&self, database: &str, sql: &str) -> String {
        let output = self.psql(database, &[sql.to_owned()]);
        assert!(!output.status.success(), "psql {sql:?} succeeded");
        String::from_utf8_lossy(&output.stderr).trim().to_owned()
    }

    pub fn database_exists(&self, name: &str) -> bool {
        self.query(&format!(
            "select count(*) from pg_database where datname = '{name}'"
        )) == "1"
    }

    pub fn role_exists(&self, name: &str) -> bool {
        self.query(&format!(
            "select count(*) from pg_roles where rolname = '{name}'"
        )) == "1"
    }

    /// The owner of a database, as `pg_database` has it.
    pub fn database_owner(&self, name: &str) -> Option<String> {
        Some(self.query(&format!(
            "select pg_get_userbyid(datdba) from pg_database where datname = '{name}'"
        )))
        .filter(|owner| !owner.is_empty())
    }

    /// A tokio-postgres login over TCP.
    pub fn config(&self, user: &str, password: &str, database: &str) -> Config {
        let mut config = Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .user(user)
            .password(password)
            .dbname(database)
            .connect_timeout(Duration::from_secs(10));
        config
    }

    pub async fn login(
        &self,
        user: &str,
        password: &str,
        database: &str,
    ) -> Result<Client, tokio_postgres::Error> {
        connect(self.config(user, password, database)).await
    }

    /// The superuser's session in `postgres`.
    pub async fn admin(&self) -> Client {
        self.login(ADMIN_USER, ADMIN_PASSWORD, "postgres")
            .await
            .expect("cannot connect as the admin")
    }
}

/// A shell that stops the server in `dir` and removes `dir` once this
/// process has exited: a server shared by a test binary's tests lives in a
/// static and is never dropped.
fn watchdog(dir: &Path) -> Child {
    let watch = format!(
        "while kill -0 {parent} 2>/dev/null; do sleep 1; done; \"$0\" stop \"$1\" >/dev/null 2>&1; rm -rf \"$1\"",
        parent = std::process::id()
    );
    Command::new("/bin/sh")
        .arg("-c")
        .arg(watch)
        .arg(script())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the PostgreSQL watchdog")
}

impl Drop for Postgres {
    fn drop(&mut self) {
        match Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .output()
        {
            Ok(output) if output.status.success() => {}
            Ok(output) => eprintln!("scripts/postgres.sh stop failed: {}", describe(&output)),
            Err(e) => eprintln!("cannot run scripts/postgres.sh stop: {e}"),
        }
        // Stopped already: the watchdog has nothing left to do.
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

/// Connects, the connection driven by a task of its own.
pub async fn connect(config: Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// [`connect`] with a `postgresql://` URI (a delivered credential's).
pub async fn connect_uri(uri: &str) -> Result<Client, tokio_postgres::Error> {
    connect(Config::from_str(uri).expect("the URI does not parse")).await
}
