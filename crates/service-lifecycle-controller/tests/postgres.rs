//! The PostgreSQL engine against a real server: every test that needs one
//! starts its own throwaway PostgreSQL with `scripts/postgres.sh` (in a
//! fresh directory under /tmp, on a free port) and stops it when it ends,
//! also when it panics. A server that cannot be started fails the test with
//! the script's output; nothing is skipped.
//!
//! The script's server trusts every connection; each test server is switched
//! to password authentication (`scram-sha-256` over TCP) first, so that the
//! tests can tell a right password from a wrong one.

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;

use common::Provider;
use navique_testkit::free_port;
use navique_testkit::postgres::{ADMIN_USER, Auth, Postgres, connect_uri};
use service_lifecycle_controller::postgres::{
    AdminConnection, Conflict, Database, Engine, Error, NameKind, Owner, generate_password,
};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

fn sqlstate(e: &tokio_postgres::Error) -> Option<&SqlState> {
    e.code()
}

/// The ManagedService with uid `uid`, as the owner of engine objects.
fn service(uid: &str) -> Owner {
    Owner {
        uid: uid.to_owned(),
        namespace: "shop".to_owned(),
        name: format!("service-{uid}"),
    }
}

async fn count(client: &Client, table: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn ensure_creates_the_role_and_the_database() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    let password = generate_password();

    engine.ensure(&service("u1"), &db, &password).await.unwrap();

    let admin = pg.admin().await;
    assert_eq!(pg.database_owner("shop").as_deref(), Some("shop_owner"));
    let role = admin
        .query_one(
            "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolpassword \
             FROM pg_authid WHERE rolname = 'shop_owner'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            role.get::<_, bool>(0),
            role.get::<_, bool>(1),
            role.get::<_, bool>(2),
            role.get::<_, bool>(3)
        ),
        (true, false, false, false)
    );
    // The server got a SCRAM verifier, never the clear password.
    assert!(role.get::<_, String>(4).starts_with("SCRAM-SHA-256$4096:"));

    // The credentials' URI logs in, and the owner can create tables.
    let credentials = engine.credentials("shop", "shop_owner", &password);
    let owner = connect_uri(&credentials.uri()).await.unwrap();
    owner
        .batch_execute("CREATE TABLE orders (id int PRIMARY KEY); INSERT INTO orders VALUES (1)")
        .await
        .unwrap();
    assert_eq!(count(&owner, "orders").await, 1);
}

#[tokio::test]
async fn ensure_twice_converges_and_the_second_password_wins() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    let (first, second) = (generate_password(), generate_password());

    engine.ensure(&service("u1"), &db, &first).await.unwrap();
    pg.login("shop_owner", &first, "shop")
        .await
        .unwrap()
        .batch_execute("CREATE TABLE orders (id int); INSERT INTO orders VALUES (1)")
        .await
        .unwrap();
    engine.ensure(&service("u1"), &db, &second).await.unwrap();

    let refused = pg.login("shop_owner", &first, "shop").await.unwrap_err();
    assert_eq!(sqlstate(&refused), Some(&SqlState::INVALID_PASSWORD));
    let owner = pg.login("shop_owner", &second, "shop").await.unwrap();
    // The existing database was kept, data and all.
    assert_eq!(count(&owner, "orders").await, 1);
    assert_eq!(pg.database_owner("shop").as_deref(), Some("shop_owner"));
}

#[tokio::test]
async fn the_readonly_role_can_select_but_not_insert() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop");
    let password = generate_password();
    engine.ensure(&service("u1"), &db, &password).await.unwrap();
    let owner = pg.login("shop", &password, "shop").await.unwrap();
    owner
        .batch_execute("CREATE TABLE orders (id int); INSERT INTO orders VALUES (1), (2)")
        .await
        .unwrap();

    let readonly_password = generate_password();
    engine
        .ensure_readonly(&service("u1"), &db, &readonly_password)
        .await
        .unwrap();
    let readonly = pg
        .login("shop_readonly", &readonly_password, "shop")
        .await
        .unwrap();

    assert_eq!(count(&readonly, "orders").await, 2);
    let insert = readonly
        .batch_execute("INSERT INTO orders VALUES (3)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&insert), Some(&SqlState::INSUFFICIENT_PRIVILEGE));
    let create = readonly
        .batch_execute("CREATE TABLE mine (id int)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&create), Some(&SqlState::INSUFFICIENT_PRIVILEGE));

    // What the owner creates later is readable too, in new schemas as well.
    owner
        .batch_execute(
            "CREATE TABLE invoices (id int); INSERT INTO invoices VALUES (1); \
             CREATE SCHEMA reporting; CREATE TABLE reporting.totals (n int); \
             INSERT INTO reporting.totals VALUES (1)",
        )
        .await
        .unwrap();
    assert_eq!(count(&readonly, "invoices").await, 1);
    assert_eq!(count(&readonly, "reporting.totals").await, 1);

    // Idempotent, and the second password wins.
    let second = generate_password();
    engine
        .ensure_readonly(&service("u1"), &db, &second)
        .await
        .unwrap();
    let refused = pg
        .login("shop_readonly", &readonly_password, "shop")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&refused), Some(&SqlState::INVALID_PASSWORD));
    let readonly = pg.login("shop_readonly", &second, "shop").await.unwrap();
    assert_eq!(count(&readonly, "orders").await, 2);
}

#[tokio::test]
async fn exists_tells_whether_the_database_exists() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");

    assert!(!engine.exists("u1").await.unwrap());
    engine
        .ensure(&service("u1"), &db, &generate_password())
        .await
        .unwrap();
    assert!(engine.exists("u1").await.unwrap());
    engine.drop_owned("u1").await.unwrap();
    assert!(!engine.exists("u1").await.unwrap());
}

#[tokio::test]
async fn drop_removes_the_database_and_its_roles_and_is_idempotent() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    engine
        .ensure(&service("u1"), &db, &generate_password())
        .await
        .unwrap();
    engine
        .ensure_readonly(&service("u1"), &db, &generate_password())
        .await
        .unwrap();
    assert!(pg.role_exists("shop_owner_readonly"));

    engine.drop_owned("u1").await.unwrap();

    assert_eq!(pg.database_owner("shop"), None);
    assert!(!pg.role_exists("shop_owner"));
    assert!(!pg.role_exists("shop_owner_readonly"));
    engine.drop_owned("u1").await.unwrap();
    // A service that never provisioned owns nothing, and drops nothing.
    assert!(engine.drop_owned("u2").await.unwrap().is_empty());
}

#[tokio::test]
async fn drop_succeeds_while_a_client_is_connected() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    let password = generate_password();
    engine.ensure(&service("u1"), &db, &password).await.unwrap();
    let client = pg.login("shop_owner", &password, "shop").await.unwrap();
    client
        .batch_execute("BEGIN; CREATE TABLE orders (id int); LOCK orders")
        .await
        .unwrap();

    engine.drop_owned("u1").await.unwrap();

    assert!(!engine.exists("u1").await.unwrap());
    assert!(!pg.role_exists("shop_owner"));
    assert!(client.batch_execute("SELECT 1").await.is_err());
}

#[tokio::test]
async fn set_password_rotates_the_password() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    let old = generate_password();
    engine.ensure(&service("u1"), &db, &old).await.unwrap();
    // Quotes, a backslash and URI delimiters: quoted in SQL, encoded in URIs.
    let new = r#"it's a "new" \ p@ss:w/rd?#% é"#;

    engine
        .set_password(&service("u1"), "shop_owner", new)
        .await
        .unwrap();

    let refused = pg.login("shop_owner", &old, "shop").await.unwrap_err();
    assert_eq!(sqlstate(&refused), Some(&SqlState::INVALID_PASSWORD));
    pg.login("shop_owner", new, "shop").await.unwrap();
    connect_uri(&engine.credentials("shop", "shop_owner", new).uri())
        .await
        .unwrap();

    let missing = engine
        .set_password(&service("u1"), "ghost", &generate_password())
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::RoleMissing { .. }), "{missing:?}");
    assert_eq!(
        missing.to_string(),
        format!(
            "role \"ghost\" does not exist on PostgreSQL at 127.0.0.1:{}",
            pg.port
        )
    );
    assert!(!pg.role_exists("ghost"));
    // A rotation records nothing: the missing name stays free.
    let recorded = count_where(&pg.admin().await, "ghost").await;
    assert_eq!(recorded, 0);
}

async fn count_where(admin: &Client, name: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM navique.engine_objects WHERE name = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get(0)
}

#[test]
fn missing_secret_keys_are_named() {
    let full: BTreeMap<String, String> = [
        ("host", "db"),
        ("port", "5432"),
        ("user", "admin"),
        ("password", "pw"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for key in ["host", "port", "user", "password"] {
        let mut data = full.clone();
        data.remove(key);
        let err = AdminConnection::from_secret(&data).unwrap_err();
        assert_eq!(err.to_string(), format!("Secret key \"{key}\" is missing"));
    }
    let err = AdminConnection::from_secret(&BTreeMap::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Secret keys \"host\", \"port\", \"user\" and \"password\" are missing"
    );
    // sslmode is optional.
    AdminConnection::from_secret(&full).unwrap();
}

#[tokio::test]
async fn invalid_names_are_refused_without_touching_the_server() {
    // A listener that records whether anything connected.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut data = BTreeMap::new();
    for (key, value) in [
        ("host", "127.0.0.1".to_owned()),
        ("port", listener.local_addr().unwrap().port().to_string()),
        ("user", "admin".to_owned()),
        ("password", "pw".to_owned()),
    ] {
        data.insert(key.to_owned(), value);
    }
    let engine = Engine::new(AdminConnection::from_secret(&data).unwrap());
    let pw = "a-password";

    let cases = [
        (
            Database::new("Shop", "shop"),
            "invalid database name \"Shop\": may hold only lowercase letters, digits and \"_\", not 'S'",
        ),
        (
            Database::new("shop\"; DROP DATABASE x; --", "shop"),
            "invalid database name \"shop\"; DROP DATABASE x; --\": may hold only lowercase \
             letters, digits and \"_\", not '\"'",
        ),
        (
            Database::new("postgres", "shop"),
            "invalid database name \"postgres\": is one of PostgreSQL's own databases",
        ),
        (
            Database::new("shop", "o".repeat(64)),
            &format!(
                "invalid role name \"{}\": is 64 bytes long; PostgreSQL names hold at most 63",
                "o".repeat(64)
            ),
        ),
        (
            Database::new("shop", "pg_shop"),
            "invalid role name \"pg_shop\": the prefix \"pg_\" is reserved for PostgreSQL's own roles",
        ),
        (
            Database::new("shop", "admin"),
            "invalid role name \"admin\": is the server's admin role",
        ),
    ];
    for (db, message) in &cases {
        for result in [
            engine.ensure(&service("u1"), db, pw).await,
            engine.reserve(&service("u1"), db).await,
            engine.check_owned(&service("u1"), db).await,
            engine.ensure_readonly(&service("u1"), db, pw).await,
        ] {
            let err = result.unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
            assert_eq!(&err.to_string(), message);
        }
    }
    for role in ["", "Shop", "public", "admin"] {
        let err = engine
            .set_password(&service("u1"), role, pw)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidName {
                    kind: NameKind::Role,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    // The readonly role's name is checked too: 55 + "_readonly" > 63 bytes.
    let long_owner = Database::new("shop", "o".repeat(55));
    let err = engine
        .ensure_readonly(&service("u1"), &long_owner, pw)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "invalid role name \"{}_readonly\": is 64 bytes long; PostgreSQL names hold at most 63",
            "o".repeat(55)
        )
    );
    let err = engine
        .ensure(&service("u1"), &Database::new("shop", "shop"), "")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid password: must not be empty");

    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("something connected to the server: {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_reported_with_host_port_and_user() {
    let port = free_port();
    let mut data = BTreeMap::new();
    for (key, value) in [
        ("host", "127.0.0.1".to_owned()),
        ("port", port.to_string()),
        ("user", "admin".to_owned()),
        ("password", "pw".to_owned()),
    ] {
        data.insert(key.to_owned(), value);
    }
    let engine = Engine::new(AdminConnection::from_secret(&data).unwrap());

    let err = engine.exists("u1").await.unwrap_err();

    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port} as admin: error connecting to server: "
        )),
        "{message}"
    );
    assert!(message.contains("Connection refused"), "{message}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn sslmode_require_is_refused_until_tls_is_supported() {
    let mut data = BTreeMap::new();
    for (key, value) in [
        ("host", "127.0.0.1"),
        ("port", "1"),
        ("user", "admin"),
        ("password", "pw"),
        ("sslmode", "require"),
    ] {
        data.insert(key.to_owned(), value.to_owned());
    }
    let engine = Engine::new(AdminConnection::from_secret(&data).unwrap());
    let err = engine.exists("u1").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "sslmode=require is not supported yet: connections to the provider's PostgreSQL are made \
         without TLS; set the Secret's sslmode to \"disable\" or \"prefer\""
    );
}

#[tokio::test]
async fn a_wrong_admin_password_is_reported_with_host_port_and_user() {
    let pg = Postgres::start(Auth::Scram);
    let engine =
        Engine::new(AdminConnection::from_secret(&pg.secret(ADMIN_USER, "wrong")).unwrap());

    let err = engine.exists("u1").await.unwrap_err();

    assert_eq!(
        err.to_string(),
        format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{} as postgres: FATAL: password \
             authentication failed for user \"postgres\"",
            pg.port
        )
    );
}

#[tokio::test]
async fn another_services_role_cannot_connect_to_the_database() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let (shop, blog) = (Database::new("shop", "shop"), Database::new("blog", "blog"));
    let blog_password = generate_password();
    engine
        .ensure(&service("u1"), &shop, &generate_password())
        .await
        .unwrap();
    engine
        .ensure(&service("u2"), &blog, &blog_password)
        .await
        .unwrap();

    let refused = pg.login("blog", &blog_password, "shop").await.unwrap_err();
    assert_eq!(sqlstate(&refused), Some(&SqlState::INSUFFICIENT_PRIVILEGE));
    pg.login("blog", &blog_password, "blog").await.unwrap();
}

/// The message of a name the service may not use.
fn not_owned(pg: &Postgres, kind: &str, name: &str, conflict: Conflict, field: &str) -> String {
    format!(
        "{kind} \"{name}\" on PostgreSQL at 127.0.0.1:{} {}: refusing to use, take over or drop \
         it; choose another spec.parameters.{field}",
        pg.port,
        conflict.describe()
    )
}

// identity by name: a database is the service's only when recorded for its uid.
#[tokio::test]
async fn a_database_nobody_recorded_is_neither_taken_over_nor_dropped() {
    let pg = Postgres::start(Auth::Scram);
    let admin = pg.admin().await;
    admin.batch_execute("CREATE ROLE someone").await.unwrap();
    admin
        .batch_execute("CREATE DATABASE shop OWNER someone")
        .await
        .unwrap();
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");

    let err = engine
        .ensure(&service("u1"), &db, &generate_password())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        not_owned(&pg, "database", "shop", Conflict::Unrecorded, "database")
    );
    assert!(engine.drop_owned("u1").await.unwrap().is_empty());

    assert_eq!(pg.database_owner("shop").as_deref(), Some("someone"));
    assert!(!pg.role_exists("shop_owner"));
}

// identity by name: another Project's service naming this database.
#[tokio::test]
async fn a_database_of_another_service_gives_no_credential_and_is_never_dropped() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    let password = generate_password();
    engine.ensure(&service("u1"), &db, &password).await.unwrap();
    let first = pg.login("shop_owner", &password, "shop").await.unwrap();
    first
        .batch_execute("CREATE TABLE orders (id int); INSERT INTO orders VALUES (1)")
        .await
        .unwrap();

    let err = engine
        .ensure(&service("u2"), &db, &generate_password())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        not_owned(&pg, "database", "shop", Conflict::OtherService, "database")
    );
    // The same role name alone is refused too, and so is rotating it.
    let err = engine
        .ensure(
            &service("u2"),
            &Database::new("other", "shop_owner"),
            &generate_password(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        not_owned(&pg, "role", "shop_owner", Conflict::OtherService, "owner")
    );
    let err = engine
        .set_password(&service("u2"), "shop_owner", "stolen")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotOwned { .. }), "{err:?}");
    assert!(engine.check_owned(&service("u2"), &db).await.is_err());
    assert!(engine.drop_owned("u2").await.unwrap().is_empty());

    // The first service's password still works and its rows are there.
    let again = pg.login("shop_owner", &password, "shop").await.unwrap();
    assert_eq!(count(&again, "orders").await, 1);
    assert!(pg.database_owner("other").is_none());
    engine.check_owned(&service("u1"), &db).await.unwrap();
}

// stale authorisation: Retain is kept, whatever service comes later.
#[tokio::test]
async fn a_retained_database_is_used_and_dropped_by_no_service() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let db = Database::new("shop", "shop_owner");
    engine
        .ensure(&service("u1"), &db, &generate_password())
        .await
        .unwrap();

    engine.retain("u1").await.unwrap();

    assert!(!engine.exists("u1").await.unwrap());
    for uid in ["u1", "u2"] {
        let err = engine
            .ensure(&service(uid), &db, &generate_password())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            not_owned(&pg, "database", "shop", Conflict::Retained, "database")
        );
        assert!(engine.drop_owned(uid).await.unwrap().is_empty());
    }
    assert_eq!(pg.database_owner("shop").as_deref(), Some("shop_owner"));
}

// tenant-writable configuration: the records are the provider's alone.
#[tokio::test]
async fn a_services_role_can_neither_read_nor_write_the_ownership_records() {
    let pg = Postgres::start(Auth::Scram);
    let engine = pg.engine();
    let password = generate_password();
    engine
        .ensure(
            &service("u1"),
            &Database::new("shop", "shop_owner"),
            &password,
        )
        .await
        .unwrap();
    let tenant = pg.login("shop_owner", &password, "postgres").await.unwrap();
    for sql in [
        "SELECT * FROM navique.engine_objects",
        "INSERT INTO navique.engine_objects (kind, name, service_uid, namespace, service) \
         VALUES ('database', 'x', 'u9', 'n', 's')",
        "UPDATE navique.engine_objects SET service_uid = 'u9'",
    ] {
        let refused = tenant.batch_execute(sql).await.unwrap_err();
        assert_eq!(
            sqlstate(&refused),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}"
        );
    }
}

#[tokio::test]
async fn a_non_superuser_admin_with_createdb_and_createrole_provisions_and_drops() {
    let pg = Postgres::start(Auth::Scram);
    pg.admin()
        .await
        .batch_execute("CREATE ROLE provider LOGIN CREATEDB CREATEROLE PASSWORD 'provider-pw'")
        .await
        .unwrap();
    let engine =
        Engine::new(AdminConnection::from_secret(&pg.secret("provider", "provider-pw")).unwrap());
    let db = Database::new("shop", "shop");
    let password = generate_password();
    // The ownership records need CREATE on the maintenance database.
    let err = engine
        .ensure(&service("u1"), &db, &password)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Setting up the ownership records on PostgreSQL at 127.0.0.1:{} failed: ERROR: \
             permission denied for database postgres",
            pg.port
        )
    );
    pg.admin()
        .await
        .batch_execute("GRANT CREATE ON DATABASE postgres TO provider")
        .await
        .unwrap();

    engine.ensure(&service("u1"), &db, &password).await.unwrap();
    engine.ensure(&service("u1"), &db, &password).await.unwrap();
    let owner = pg.login("shop", &password, "shop").await.unwrap();
    owner
        .batch_execute("CREATE TABLE orders (id int); INSERT INTO orders VALUES (1)")
        .await
        .unwrap();
    let readonly_password = generate_password();
    engine
        .ensure_readonly(&service("u1"), &db, &readonly_password)
        .await
        .unwrap();
    let readonly = pg
        .login("shop_readonly", &readonly_password, "shop")
        .await
        .unwrap();
    assert_eq!(count(&readonly, "orders").await, 1);

    engine.drop_owned("u1").await.unwrap();

    assert_eq!(pg.database_owner("shop"), None);
    assert!(!pg.role_exists("shop"));
    assert!(!pg.role_exists("shop_readonly"));
    assert!(owner.batch_execute("SELECT 1").await.is_err());
    assert!(readonly.batch_execute("SELECT 1").await.is_err());
}
