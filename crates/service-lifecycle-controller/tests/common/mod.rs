//! A throwaway PostgreSQL for the integration tests, shared by
//! `tests/postgres.rs`, `tests/controller.rs` and `tests/bindings.rs`:
//! started with `scripts/postgres.sh` in a fresh directory under /tmp on a
//! free port, switched to password authentication, stopped when dropped
//! (also on panic). [`cluster`] adds the dev API server and the controllers.
#![allow(dead_code)]

pub mod cluster;

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::str::FromStr;
use std::time::{Duration, Instant};

use service_lifecycle_controller::postgres::{AdminConnection, Engine};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

pub const ADMIN_USER: &str = "postgres";
pub const ADMIN_PASSWORD: &str = "admin-pw";
pub const PG_HBA: &str = "\
# Written by tests/postgres.rs: passwords over TCP, trust on the socket only.
local all all trust
host all all 127.0.0.1/32 scram-sha-256
";

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("no free port on 127.0.0.1")
        .port()
}

pub fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A running throwaway server. Dropping it stops the server (then the
/// temporary directory goes).
pub struct Server {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Server {
    pub async fn start() -> Server {
        let dir = tempfile::Builder::new()
            .prefix("navique-pg-")
            .tempdir_in("/tmp")
            .expect("cannot create a directory under /tmp");
        // The script runs the server as an unprivileged user when root.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
            .expect("cannot chmod the server directory");
        // The guard exists before the first start: whatever happens next,
        // its Drop stops what was started.
        let mut server = Server { dir, port: 0 };
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
                server.require_passwords().await;
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

    /// Gives the admin a password, switches TCP connections to
    /// `scram-sha-256` and turns durability off, waiting until the server
    /// has reloaded.
    pub async fn require_passwords(&self) {
        let admin = connect(self.config(ADMIN_USER, "", "postgres"))
            .await
            .expect("cannot connect to the fresh server as postgres");
        admin
            .batch_execute(&format!(
                "ALTER ROLE {ADMIN_USER} PASSWORD '{ADMIN_PASSWORD}'"
            ))
            .await
            .unwrap();
        fs::write(self.dir.path().join("data/pg_hba.conf"), PG_HBA).expect("cannot write pg_hba");
        // A throwaway server needs no durability: without fsync, CREATE and
        // DROP DATABASE and the shutdown checkpoint are much faster.
        for setting in [
            "fsync = off",
            "synchronous_commit = off",
            "full_page_writes = off",
        ] {
            admin
                .batch_execute(&format!("ALTER SYSTEM SET {setting}"))
                .await
                .unwrap();
        }
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match connect(self.config(ADMIN_USER, "wrong", "postgres")).await {
                Err(e) if e.code() == Some(&SqlState::INVALID_PASSWORD) => return,
                _ if Instant::now() > deadline => {
                    panic!("the server still accepts a wrong password after reloading pg_hba.conf")
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    pub fn secret(&self, user: &str, password: &str) -> BTreeMap<String, String> {
        [
            ("host", "127.0.0.1".to_owned()),
            ("port", self.port.to_string()),
            ("user", user.to_owned()),
            ("password", password.to_owned()),
            ("sslmode", "disable".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    pub fn engine(&self) -> Engine {
        Engine::new(AdminConnection::from_secret(&self.secret(ADMIN_USER, ADMIN_PASSWORD)).unwrap())
    }

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

    pub async fn admin(&self) -> Client {
        connect(self.config(ADMIN_USER, ADMIN_PASSWORD, "postgres"))
            .await
            .expect("cannot connect as the admin")
    }

    pub async fn login(
        &self,
        user: &str,
        password: &str,
        database: &str,
    ) -> Result<Client, tokio_postgres::Error> {
        connect(self.config(user, password, database)).await
    }

    /// The owner of a database, as the admin sees it in `pg_database`.
    pub async fn database_owner(&self, name: &str) -> Option<String> {
        self.admin()
            .await
            .query_opt(
                "SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = $1",
                &[&name],
            )
            .await
            .unwrap()
            .map(|row| row.get(0))
    }

    /// Whether a role exists in `pg_roles`.
    pub async fn role_exists(&self, name: &str) -> bool {
        self.admin()
            .await
            .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&name])
            .await
            .unwrap()
            .is_some()
    }
}

impl Drop for Server {
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
    }
}

pub async fn connect(config: Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

pub async fn connect_uri(uri: &str) -> Result<Client, tokio_postgres::Error> {
    connect(Config::from_str(uri).expect("the URI does not parse")).await
}
