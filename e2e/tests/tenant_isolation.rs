//! ManagedServices of two Projects on one provider PostgreSQL, tried as
//! their admins would attack each other (RBAC mode; ann administers Project
//! A, ben Project B, each with their own token). What decides is recorded on
//! the provider's server, never a name a tenant typed: every check reads
//! PostgreSQL itself, and the victim stays Ready with a true status.

use std::sync::OnceLock;

use navique_e2e::eventually;
use navique_e2e::services::{ServiceEnv, WAIT, on_server};

fn env() -> &'static ServiceEnv {
    static ENV: OnceLock<ServiceEnv> = OnceLock::new();
    ENV.get_or_init(|| {
        let env = ServiceEnv::start(&[]);
        for user in ["ann", "ben"] {
            env.cluster.add_user(user, &["system:authenticated"]);
        }
        env
    })
}

/// A Project namespace administered by `admin` alone.
fn project(prefix: &str, admin: &str) -> String {
    let ns = env().cluster.namespace(prefix);
    env().cluster.bind_role(&ns, admin, "admin");
    ns
}

/// `kubectl apply` as `user`, retried while the webhook's caches sync.
async fn apply_as(user: &str, manifest: &str) {
    let token = format!("{user}-token");
    eventually(WAIT, "the manifest to be admitted", || async {
        let output = env()
            .cluster
            .kubectl(&["apply", "-f", "-", "--token", &token], Some(manifest));
        output.status.success().then_some(())
    })
    .await;
}

/// A Secret's key, decoded.
fn secret_value(ns: &str, secret: &str, key: &str) -> String {
    let encoded = env().get(ns, &format!("secret/{secret}"), &format!("{{.data.{key}}}"));
    let output = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(encoded.as_bytes())?;
            child.wait_with_output()
        })
        .expect("base64 -d");
    String::from_utf8(output.stdout).unwrap()
}

fn rows(ns: &str, db: &str) -> String {
    env()
        .postgres
        .query_in(&on_server(ns, db), "select count(*) from items")
}

fn fill(ns: &str, db: &str) {
    env().postgres.query_in(
        &on_server(ns, db),
        &format!(
            "set role {}; create table items (id int); insert into items select generate_series(1, 100)",
            on_server(ns, db)
        ),
    );
}

// identity by name: B names A's database, then A's physical name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_projects_asking_for_one_database_each_get_their_own_and_never_the_others() {
    let env = env();
    env.controller_ready().await;
    let (a, b) = (project("tenant-a", "ann"), project("tenant-b", "ben"));
    let db = "shared_orders";
    apply_as("ann", &env.orders_db(&a, db, "Retain", true)).await;
    apply_as("ben", &env.orders_db(&b, db, "Delete", false)).await;
    env.until_state(&a, "orders-db", "Ready Available").await;
    env.until_state(&b, "orders-db", "Ready Available").await;
    fill(&a, db);

    // Each credential names its own Project's database and role.
    for ns in [&a, &b] {
        assert_eq!(
            secret_value(ns, "orders-db-credentials", "database"),
            on_server(ns, db)
        );
        assert_eq!(
            secret_value(ns, "orders-db-credentials", "user"),
            on_server(ns, db)
        );
    }
    assert_ne!(on_server(&a, db), on_server(&b, db));

    // B asks for A's database by its name on the server: refused at
    // admission, naming the field, and nothing is created.
    let stolen = env
        .orders_db(&b, &on_server(&a, db), "Delete", false)
        .replace("name: orders-db", "name: thief-db")
        .replace("confirm-delete: orders-db", "confirm-delete: thief-db");
    let expected = format!(
        "spec.parameters.database: invalid database name \"{}\": must neither start with \
         \"_\" nor hold \"__\" (the server's names are <project>__<name>)",
        on_server(&a, db)
    );
    // Retried while the webhook's caches sync (another refusal until then).
    eventually(WAIT, "the admission refusal naming the field", || async {
        let refused = env
            .cluster
            .kubectl_err(&["apply", "-f", "-", "--token", "ben-token"], Some(&stolen));
        refused.contains(&expected).then_some(())
    })
    .await;
    assert_eq!(env.field(&b, "thief-db", "{.metadata.name}"), "");
    assert_eq!(
        env.get(&b, "secret/thief-db-credentials", "{.metadata.name}"),
        ""
    );

    // B deletes its service, confirmed: A's data stays.
    for name in ["orders-db"] {
        env.cluster.kubectl_ok(&[
            "delete",
            "managedservice",
            name,
            "-n",
            &b,
            "--wait=false",
            "--token",
            "ben-token",
        ]);
        env.until_gone(&b, name).await;
    }
    assert!(!env.postgres.database_exists(&on_server(&b, db)));
    assert_eq!(rows(&a, db), "100");
    assert!(env.postgres.role_exists(&on_server(&a, db)));
    assert_eq!(
        env.state(&a, "orders-db"),
        format!(
            "Ready Available: database {} on 127.0.0.1:{}",
            on_server(&a, db),
            env.postgres.port
        )
    );
}

// stale authorisation: Retain is kept whatever service comes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_database_is_neither_used_nor_dropped_by_a_new_service_of_its_name() {
    let env = env();
    env.controller_ready().await;
    let ns = project("reuse", "ann");
    let db = "kept_orders";
    apply_as("ann", &env.orders_db(&ns, db, "Retain", false)).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    fill(&ns, db);
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(rows(&ns, db), "100");

    // The provider removes the retained Kubernetes objects, and keeps the
    // database: the record on the server still guards it.
    for object in ["secret/orders-db-credentials", "service/orders-db"] {
        env.cluster
            .kubectl_ok(&["delete", object, "-n", &ns, "--ignore-not-found"]);
    }
    // A new service of the same name, Delete confirmed.
    apply_as("ann", &env.orders_db(&ns, db, "Delete", false)).await;
    let state = env
        .until_state(&ns, "orders-db", "Failed ProvisioningFailed")
        .await;
    assert_eq!(
        state,
        format!(
            "Failed ProvisioningFailed: database \"{}\" on PostgreSQL at 127.0.0.1:{} was \
             retained when its service was deleted and stays until the provider removes it: \
             refusing to use, take over or drop it; choose another spec.parameters.database",
            on_server(&ns, db),
            env.postgres.port
        )
    );
    assert_eq!(
        env.get(&ns, "secret/orders-db-credentials", "{.metadata.name}"),
        "",
        "no credential for the retained database"
    );
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(rows(&ns, db), "100", "the retained data survives");
    assert!(env.postgres.role_exists(&on_server(&ns, db)));
}
