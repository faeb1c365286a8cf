//! The chart's Project roles (`templates/project-roles.yaml`) on a dev API
//! server with RBAC authorization: the CRDs, the provider's catalogue and the
//! rendered roles are installed, and kubectl acts as Project users with their
//! own tokens. In each test's Project, alice is bound to `admin`, bob to
//! `edit` and carol to `view`; dave has no binding. No controller and no
//! webhook runs: what is refused here is refused by RBAC alone.
//!
//! The standard `admin`, `edit` and `view` ClusterRoles are the dev API
//! server's implied bootstrap roles, which aggregate by the
//! `rbac.authorization.k8s.io/aggregate-to-*` labels as kube-controller-manager
//! does (they are not readable with `kubectl get clusterrole`).

use std::process::Output;
use std::sync::OnceLock;

use navique_e2e::locks::{helm_template, lock, stack};
use navique_e2e::{Cluster, PROJECT_MEMBERS, repo_root};

const SERVICES: &str = "services.kube-dc.com";
const CORE: &str = "core.navique.com";

fn env() -> &'static Cluster {
    static ENV: OnceLock<Cluster> = OnceLock::new();
    ENV.get_or_init(|| {
        let cluster = Cluster::dev(&["--authorization", "rbac"]);
        let crds = repo_root().join("charts/navique/files/crds");
        cluster.kubectl_ok(&["apply", "-f", crds.to_str().unwrap()]);
        cluster.wait_for_crds();
        let catalogue = repo_root().join("deploy/examples/catalogue.yaml");
        cluster.kubectl_ok(&["apply", "-f", catalogue.to_str().unwrap()]);
        let roles = helm_template(&["--show-only", "templates/project-roles.yaml"]);
        cluster.kubectl_in(&["apply", "-f", "-"], Some(&roles));
        for user in ["alice", "bob", "carol", "dave"] {
            cluster.add_user(user, &[]);
        }
        cluster
    })
}

/// A new Project namespace with alice as admin, bob as editor, carol as
/// viewer.
fn project(prefix: &str) -> String {
    env().project(prefix, &PROJECT_MEMBERS)
}

/// kubectl as `user`, with the user's own token.
fn kubectl_as(user: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let token = format!("{user}-token");
    env().kubectl(&[args, &["--token", &token]].concat(), stdin)
}

/// kubectl as `user`; asserts exit code 0 and returns stdout.
fn allowed(user: &str, args: &[&str], stdin: Option<&str>) -> String {
    let output = kubectl_as(user, args, stdin);
    assert_eq!(
        output.status.code(),
        Some(0),
        "kubectl {} as {user}:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// kubectl as `user`; asserts exit code 1 and returns stderr.
fn refused(user: &str, args: &[&str], stdin: Option<&str>) -> String {
    let output = kubectl_as(user, args, stdin);
    assert_eq!(
        output.status.code(),
        Some(1),
        "kubectl {} as {user}: stdout:\n{}\nstderr:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// kube-apiserver's reason for an RBAC refusal; `ns` None for cluster scope.
fn cannot(user: &str, verb: &str, resource: &str, group: &str, ns: Option<&str>) -> String {
    let scope = match ns {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_owned(),
    };
    format!(
        "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
    )
}

fn orders_db(ns: &str) -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples/orders-db.yaml"))
        .unwrap()
        .replace("namespace: my-project", &format!("namespace: {ns}"))
}

/// A manual backup of orders-db ("Take a backup now").
fn manual_backup(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServiceBackup\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  serviceRef: {{name: orders-db}}\n  origin: Manual\n"
    )
}

#[test]
fn a_project_admin_manages_services_and_locks_and_requests_backups_it_cannot_delete() {
    let ns = project("admin");
    let ms = "managedservice.services.kube-dc.com";

    assert_eq!(
        allowed("alice", &["create", "-f", "-"], Some(&orders_db(&ns))),
        format!("{ms}/orders-db created\n")
    );
    assert_eq!(
        allowed(
            "alice",
            &[
                "get",
                "managedservice",
                "orders-db",
                "-n",
                &ns,
                "-o",
                "name"
            ],
            None
        ),
        format!("{ms}/orders-db\n")
    );
    assert_eq!(
        allowed(
            "alice",
            &[
                "patch",
                "managedservice",
                "orders-db",
                "-n",
                &ns,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"deletionProtection":true}}"#
            ],
            None
        ),
        format!("{ms}/orders-db patched\n")
    );

    // The status subresource: neither written nor read directly.
    let err = refused(
        "alice",
        &[
            "apply",
            "--server-side",
            "--subresource",
            "status",
            "-f",
            "-",
        ],
        Some(&orders_db(&ns)),
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): managedservices.services.kube-dc.com \"orders-db\" is forbidden: {}\n",
            cannot(
                "alice",
                "patch",
                "managedservices/status",
                SERVICES,
                Some(&ns)
            )
        )
    );
    let err = refused(
        "alice",
        &[
            "get",
            "managedservice",
            "orders-db",
            "-n",
            &ns,
            "--subresource",
            "status",
        ],
        None,
    );
    assert!(
        err.contains(&cannot(
            "alice",
            "get",
            "managedservices/status",
            SERVICES,
            Some(&ns)
        )),
        "{err}"
    );
    let can_i = kubectl_as(
        "alice",
        &[
            "auth",
            "can-i",
            "update",
            "managedservices",
            "--subresource",
            "status",
            "-n",
            &ns,
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&can_i.stdout), "no\n");
    assert_eq!(can_i.status.code(), Some(1));

    // Backups: requested and read, never changed or deleted.
    assert_eq!(
        allowed(
            "alice",
            &["create", "-f", "-"],
            Some(&manual_backup(&ns, "now"))
        ),
        "servicebackup.services.kube-dc.com/now created\n"
    );
    assert_eq!(
        allowed(
            "alice",
            &["get", "servicebackups", "-n", &ns, "-o", "name"],
            None
        ),
        "servicebackup.services.kube-dc.com/now\n"
    );
    let err = refused(
        "alice",
        &["delete", "servicebackup", "now", "-n", &ns],
        None,
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): servicebackups.services.kube-dc.com \"now\" is forbidden: {}\n",
            cannot("alice", "delete", "servicebackups", SERVICES, Some(&ns))
        )
    );
    let err = refused(
        "alice",
        &["label", "servicebackup", "now", "-n", &ns, "keep=no"],
        None,
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): servicebackups.services.kube-dc.com \"now\" is forbidden: {}\n",
            cannot("alice", "patch", "servicebackups", SERVICES, Some(&ns))
        )
    );

    // Locks: the Project admin locks and unlocks.
    allowed("alice", &["create", "-f", "-"], Some(&stack(&ns, "forge")));
    let keep = lock(
        &ns,
        "keep",
        "core.navique.com/v1alpha1",
        "Stack",
        "forge",
        "prod",
    );
    assert_eq!(
        allowed("alice", &["create", "-f", "-"], Some(&keep)),
        "lock.core.navique.com/keep created\n"
    );
    assert_eq!(
        allowed("alice", &["delete", "lock", "keep", "-n", &ns], None),
        "lock.core.navique.com \"keep\" deleted\n"
    );

    // No webhook runs here, so deletionProtection does not hold the delete.
    assert_eq!(
        allowed(
            "alice",
            &["delete", "managedservice", "orders-db", "-n", &ns],
            None
        ),
        format!("{ms} \"orders-db\" deleted\n")
    );
}

#[test]
fn an_editor_manages_services_and_stacks_but_only_reads_locks() {
    let ns = project("edit");
    assert_eq!(
        allowed("bob", &["create", "-f", "-"], Some(&orders_db(&ns))),
        "managedservice.services.kube-dc.com/orders-db created\n"
    );
    assert_eq!(
        allowed("bob", &["create", "-f", "-"], Some(&stack(&ns, "forge"))),
        "stack.core.navique.com/forge created\n"
    );
    assert_eq!(
        allowed(
            "bob",
            &["create", "-f", "-"],
            Some(&manual_backup(&ns, "now"))
        ),
        "servicebackup.services.kube-dc.com/now created\n"
    );
    let err = refused("bob", &["delete", "servicebackup", "now", "-n", &ns], None);
    assert!(
        err.contains(&cannot(
            "bob",
            "delete",
            "servicebackups",
            SERVICES,
            Some(&ns)
        )),
        "{err}"
    );

    let keep = lock(
        &ns,
        "keep",
        "core.navique.com/v1alpha1",
        "Stack",
        "forge",
        "prod",
    );
    let err = refused("bob", &["create", "-f", "-"], Some(&keep));
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": locks.core.navique.com is forbidden: {}\n",
            cannot("bob", "create", "locks", CORE, Some(&ns))
        )
    );
    env().kubectl_in(&["create", "-f", "-"], Some(&keep));
    assert_eq!(
        allowed("bob", &["get", "locks", "-n", &ns, "-o", "name"], None),
        "lock.core.navique.com/keep\n"
    );
    let err = refused("bob", &["delete", "lock", "keep", "-n", &ns], None);
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): locks.core.navique.com \"keep\" is forbidden: {}\n",
            cannot("bob", "delete", "locks", CORE, Some(&ns))
        )
    );

    assert_eq!(
        allowed("bob", &["delete", "stack", "forge", "-n", &ns], None),
        "stack.core.navique.com \"forge\" deleted\n"
    );
    assert_eq!(
        allowed(
            "bob",
            &["delete", "managedservice", "orders-db", "-n", &ns],
            None
        ),
        "managedservice.services.kube-dc.com \"orders-db\" deleted\n"
    );
}

#[test]
fn a_viewer_lists_every_project_kind_but_cannot_create_or_delete() {
    let ns = project("view");
    env().kubectl_in(&["create", "-f", "-"], Some(&orders_db(&ns)));
    env().kubectl_in(&["create", "-f", "-"], Some(&manual_backup(&ns, "now")));

    assert_eq!(
        allowed(
            "carol",
            &[
                "get",
                "managedservices,servicebackups,servicebindings,servicecredentialpolicies,stacks,locks",
                "-n",
                &ns,
                "-o",
                "name",
            ],
            None,
        ),
        "managedservice.services.kube-dc.com/orders-db\nservicebackup.services.kube-dc.com/now\n"
    );
    let err = refused("carol", &["create", "-f", "-"], Some(&orders_db(&ns)));
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": managedservices.services.kube-dc.com is forbidden: {}\n",
            cannot("carol", "create", "managedservices", SERVICES, Some(&ns))
        )
    );
    let err = refused(
        "carol",
        &["create", "-f", "-"],
        Some(&manual_backup(&ns, "mine")),
    );
    assert!(
        err.contains(&cannot(
            "carol",
            "create",
            "servicebackups",
            SERVICES,
            Some(&ns)
        )),
        "{err}"
    );
    let err = refused(
        "carol",
        &["delete", "managedservice", "orders-db", "-n", &ns],
        None,
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): managedservices.services.kube-dc.com \"orders-db\" is forbidden: {}\n",
            cannot("carol", "delete", "managedservices", SERVICES, Some(&ns))
        )
    );
}

#[test]
fn every_user_reads_the_classes_and_no_project_user_reads_the_plans() {
    let ns = project("catalogue");
    for user in ["alice", "bob", "carol", "dave"] {
        assert_eq!(
            allowed(user, &["get", "serviceclasses", "-o", "name"], None),
            "serviceclass.services.kube-dc.com/postgresql\n"
        );
        assert_eq!(
            allowed(
                user,
                &["get", "serviceclass", "postgresql", "-o", "name"],
                None
            ),
            "serviceclass.services.kube-dc.com/postgresql\n"
        );
        let err = refused(user, &["get", "serviceplans"], None);
        assert_eq!(
            err,
            format!(
                "Error from server (Forbidden): serviceplans.services.kube-dc.com is forbidden: {}\n",
                cannot(user, "list", "serviceplans", SERVICES, None)
            )
        );
        let err = refused(
            user,
            &["get", "serviceplan", "postgresql-platform-ha"],
            None,
        );
        assert_eq!(
            err,
            format!(
                "Error from server (Forbidden): serviceplans.services.kube-dc.com \"postgresql-platform-ha\" is forbidden: {}\n",
                cannot(user, "get", "serviceplans", SERVICES, None)
            )
        );
    }
    // The catalogue is all that dave, bound to nothing, may read.
    let err = refused("dave", &["get", "managedservices", "-n", &ns], None);
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): managedservices.services.kube-dc.com is forbidden: {}\n",
            cannot("dave", "list", "managedservices", SERVICES, Some(&ns))
        )
    );
    let err = refused("alice", &["delete", "serviceclass", "postgresql"], None);
    assert!(
        err.contains(&cannot("alice", "delete", "serviceclasses", SERVICES, None)),
        "{err}"
    );
}
