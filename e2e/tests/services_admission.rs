//! The managed-services admission rules end to end: the real webhook behind
//! the chart's webhook configuration, on the dev API server, driven by
//! kubectl as a provider admin and as a Project user (alice).

use std::sync::OnceLock;
use std::time::Duration;

use navique_e2e::locks::{helm_template, start_webhook};
use navique_e2e::{Cluster, Process, eventually, free_port, repo_root};

struct Env {
    cluster: Cluster,
    _webhook: Process,
    _dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cluster = Cluster::dev(&[&format!("--webhook-service=navique-system/navique-webhook=127.0.0.1:{port}")]);
        cluster.install_crds();
        cluster.kubectl_ok(&["create", "namespace", "navique-system"]);
        cluster.kubectl_ok(&["apply", "-f", repo_root().join("deploy/examples/catalogue.yaml").to_str().unwrap()]);
        let retain_only = "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServicePlan\nmetadata: {name: retain-only}\nspec:\n  classRef: {name: postgresql}\n  allowedDeletionPolicies: [Retain]\n";
        cluster.kubectl_in(&["apply", "-f", "-"], Some(retain_only));
        let (webhook, ca_bundle) = start_webhook(&cluster, &dir, port);
        let configuration = helm_template(&[
            "--set",
            &format!("webhook.caBundle={ca_bundle}"),
            "--show-only",
            "templates/services-webhook.yaml",
        ]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&configuration));
        Env { cluster, _webhook: webhook, _dir: dir }
    })
}

fn orders_db(ns: &str, plan: &str, policy: &str, protected: bool) -> String {
    orders_db_from(
        "deploy/examples/orders-db.yaml",
        ns,
        plan,
        policy,
        protected,
    )
}

/// The seed's own orders-db (every field it shows), as [`orders_db`].
fn seed_orders_db(ns: &str, plan: &str, policy: &str, protected: bool) -> String {
    orders_db_from(
        "e2e/fixtures/seeds/orders-db.yaml",
        ns,
        plan,
        policy,
        protected,
    )
}

fn orders_db_from(file: &str, ns: &str, plan: &str, policy: &str, protected: bool) -> String {
    std::fs::read_to_string(repo_root().join(file))
        .unwrap()
        .replace("namespace: my-project", &format!("namespace: {ns}"))
        .replace("name: postgresql-platform-ha", &format!("name: {plan}"))
        .replace(
            "deletionPolicy: Delete",
            &format!("deletionPolicy: {policy}"),
        )
        .replace(
            "deletionProtection: false",
            &format!("deletionProtection: {protected}"),
        )
}

/// Retries a kubectl call while the webhook's caches are still syncing.
async fn apply_when_ready(cluster: &Cluster, manifest: &str) {
    eventually(
        Duration::from_secs(20),
        "the webhook to admit the manifest",
        || async {
            cluster
                .kubectl(&["apply", "-f", "-"], Some(manifest))
                .status
                .success()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn deletion_protection_refuses_the_delete_until_turned_off_in_its_own_apply() {
    let k = &env().cluster;
    let ns = k.namespace("protected");
    apply_when_ready(k, &orders_db(&ns, "postgresql-platform-ha", "Delete", true)).await;
    let err = k.kubectl_err(&["delete", "managedservice", "orders-db", "-n", &ns], None);
    assert_eq!(
        err,
        "Error from server (Forbidden): admission webhook \"managedservices.navique.com\" denied the request: deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first\n"
    );
    k.kubectl_in(
        &["apply", "-f", "-"],
        Some(&orders_db(&ns, "postgresql-platform-ha", "Delete", false)),
    );
    assert_eq!(
        k.kubectl_ok(&["delete", "managedservice", "orders-db", "-n", &ns]),
        "managedservice.services.kube-dc.com \"orders-db\" deleted\n"
    );
}

#[tokio::test]
async fn a_deletion_policy_the_plan_does_not_allow_is_refused_naming_the_allowed_ones() {
    let k = &env().cluster;
    let ns = k.namespace("plans");
    apply_when_ready(k, &orders_db(&ns, "retain-only", "Retain", false)).await;
    let err = k.kubectl_err(
        &["apply", "-f", "-"],
        Some(&orders_db(&ns, "retain-only", "Delete", false)),
    );
    assert!(
        err.contains("denied the request: spec.deletionPolicy: Delete is not allowed by plan retain-only; allowed: Retain"),
        "{err}"
    );
    let policy = k.kubectl_ok(&[
        "get",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "-o",
        "jsonpath={.spec.deletionPolicy}",
    ]);
    assert_eq!(policy, "Retain");
}

#[tokio::test]
async fn backup_records_and_retained_objects_resist_project_users_but_not_the_provider() {
    let k = &env().cluster;
    let ns = k.namespace("records");
    let backup = format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: final-1, namespace: {ns}}}\nspec:\n  serviceRef: {{name: orders-db}}\n  origin: Final\n"
    );
    apply_when_ready(k, &backup).await;
    let err = k.kubectl_err(
        &[
            "delete",
            "servicebackup",
            "final-1",
            "-n",
            &ns,
            "--as",
            "alice",
        ],
        None,
    );
    assert!(err.contains("ServiceBackup records are kept by the platform and removed with their Project; they cannot be deleted"), "{err}");

    k.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "orders-db-credentials",
        "-n",
        &ns,
        "--from-literal",
        "password=x",
    ]);
    k.kubectl_ok(&[
        "label",
        "secret",
        "orders-db-credentials",
        "-n",
        &ns,
        "services.kube-dc.com/retained=true",
    ]);
    let err = k.kubectl_err(
        &[
            "delete",
            "secret",
            "orders-db-credentials",
            "-n",
            &ns,
            "--as",
            "alice",
        ],
        None,
    );
    assert!(err.contains("this object was retained when its ManagedService was deleted; only the provider can change or remove it"), "{err}");
    let err = k.kubectl_err(
        &[
            "label",
            "secret",
            "orders-db-credentials",
            "-n",
            &ns,
            "team=a",
            "--as",
            "alice",
        ],
        None,
    );
    assert!(
        err.contains("only the provider can change or remove it"),
        "{err}"
    );

    k.kubectl_ok(&["delete", "secret", "orders-db-credentials", "-n", &ns]);
    k.kubectl_ok(&["delete", "servicebackup", "final-1", "-n", &ns]);
}

#[tokio::test]
async fn deleting_the_project_removes_protected_services_and_backup_records() {
    let k = &env().cluster;
    let ns = k.namespace("project");
    apply_when_ready(k, &orders_db(&ns, "postgresql-platform-ha", "Retain", true)).await;
    let backup = format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: manual-1, namespace: {ns}}}\nspec:\n  serviceRef: {{name: orders-db}}\n"
    );
    k.kubectl_in(&["apply", "-f", "-"], Some(&backup));
    k.kubectl_ok(&["delete", "namespace", &ns, "--timeout", "30s"]);
    assert!(!k.kubectl(&["get", "namespace", &ns], None).status.success());
}

/// The seed's orders-db on the `postgresql-platform-ha` plan
/// with `from` replaced by `to` in its manifest.
fn orders_db_with(ns: &str, from: &str, to: &str) -> String {
    let manifest = seed_orders_db(ns, "postgresql-platform-ha", "Retain", false);
    assert!(manifest.contains(from), "{from} not in the manifest");
    manifest.replacen(from, to, 1)
}

#[tokio::test]
async fn the_seed_manifest_applies_with_a_warning_of_what_a_shared_service_does_not_apply() {
    let k = &env().cluster;
    let ns = k.namespace("seed-warning");
    let manifest = seed_orders_db(&ns, "postgresql-platform-ha", "Delete", false);
    let output = eventually(
        Duration::from_secs(20),
        "the webhook to admit the seed manifest",
        || async {
            let output = k.kubectl(&["apply", "-f", "-"], Some(&manifest));
            output.status.success().then_some(output)
        },
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "Warning: spec.parameters.storage, spec.parameters.instances, spec.parameters.postgresql.parameters are not applied to ProviderShared services: the service is a database on the provider's server, which the provider sizes and configures\n\
         Warning: spec.connectivity, spec.parameters.readonlyRole, spec.parameters.backup are not applied by this version: they are accepted, and do nothing (backups follow the plan's backup.enabled)\n"
    );
    // The example users start from holds only what is applied: no warning.
    let example = orders_db(&ns, "postgresql-platform-ha", "Delete", false)
        .replace("name: orders-db", "name: example-db")
        .replace("confirm-delete: orders-db", "confirm-delete: example-db")
        .replace("database: orders", "database: example")
        .replace("owner: orders", "owner: example");
    let output = k.kubectl(&["apply", "-f", "-"], Some(&example));
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

/// Fail open: each of these became a default, went through unread, or was
/// copied into a volume claim. Each is refused, naming the field, by the
/// CRD schema (the API server's own messages) or by the webhook.
#[tokio::test]
async fn bad_parameters_are_refused_naming_the_field() {
    let k = &env().cluster;
    let ns = k.namespace("bad-parameters");
    apply_when_ready(
        k,
        &orders_db(&ns, "postgresql-platform-ha", "Retain", false),
    )
    .await;
    k.kubectl_ok(&["delete", "managedservice", "orders-db", "-n", &ns]);
    let invalid = |detail: &str| format!("The ManagedService \"orders-db\" is invalid: {detail}\n");
    let denied = |message: &str| {
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"managedservices.navique.com\" denied the request: {message}\n"
        )
    };
    let cases = [
        (
            ("    storage:\n      size: 10Gi\n", "    storage: big\n"),
            invalid(r#"spec.parameters.storage: Invalid value: "string": spec.parameters.storage in body must be of type object: "string""#),
        ),
        (
            ("instances: 2", "instances: -3"),
            invalid("spec.parameters.instances: Invalid value: -3: spec.parameters.instances in body should be greater than or equal to 1"),
        ),
        (
            ("deletionProtection: false", "deletionProtection: \"true\""),
            invalid(r#"spec.deletionProtection: Invalid value: "string": spec.deletionProtection in body must be of type boolean: "string""#),
        ),
        (
            ("size: 10Gi", "size: \"-10Gi\""),
            denied(r#"spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not "-10Gi""#),
        ),
        (
            ("size: 10Gi", "size: \"0\""),
            denied(r#"spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not "0""#),
        ),
        (
            ("size: 10Gi", "size: 1e400Gi"),
            denied(r#"spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not "1e400Gi""#),
        ),
        (
            ("size: 10Gi", "size: 100Ti"),
            denied(r#"spec.parameters.storage.size: must be at most 64Ti, not "100Ti""#),
        ),
        (
            ("database: orders", "database: Orders"),
            denied(r#"spec.parameters.database: invalid database name "Orders": may hold only lowercase letters, digits and "_", not 'O'"#),
        ),
        (
            ("owner: orders", "owner: orders__x"),
            denied(r#"spec.parameters.owner: invalid role name "orders__x": must neither start with "_" nor hold "__" (the server's names are <project>__<name>)"#),
        ),
        (
            ("    readonlyRole: true\n", "    readonlyRole: true\n    storgae: {size: 10Gi}\n"),
            r#"Error from server (BadRequest): error when creating "STDIN": ManagedService in version "v1alpha1" cannot be handled as a ManagedService: strict decoding error: unknown field "spec.parameters.storgae""#.to_owned() + "\n",
        ),
    ];
    for ((from, to), expected) in cases {
        let err = k.kubectl_err(&["apply", "-f", "-"], Some(&orders_db_with(&ns, from, to)));
        assert_eq!(err, expected, "{to}");
    }
    // Nothing was created.
    let listed = k.kubectl_ok(&["get", "managedservices", "-n", &ns, "-o", "name"]);
    assert_eq!(listed, "");
}

#[tokio::test]
async fn a_lock_whose_target_name_is_not_an_object_name_is_refused_naming_the_field() {
    let k = &env().cluster;
    let ns = k.namespace("lock-name");
    let lock = format!(
        "apiVersion: core.navique.com/v1alpha1\nkind: Lock\nmetadata: {{name: protect-forge-stack, namespace: {ns}}}\nspec:\n  targetRef: {{kind: Stack, name: \"Forge Ü\"}}\n"
    );
    let err = k.kubectl_err(&["apply", "-f", "-"], Some(&lock));
    assert_eq!(
        err,
        format!(
            "The Lock \"protect-forge-stack\" is invalid: spec.targetRef.name: Invalid value: \"Forge Ü\": spec.targetRef.name in body should match '{}'\n",
            navique_api::names::OBJECT_NAME_PATTERN
        )
    );
}
