//! Managed services end to end, as the user guide describes them: the real
//! service-lifecycle-controller and webhook on the dev API server, a real
//! PostgreSQL as the provider's server, driven by kubectl as the provider
//! and as a Project user (alice). Each test has its own Project namespace
//! and database names.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use navique_api::messages;
use navique_api::services::ManagedService;
use navique_e2e::eventually;
use navique_e2e::readable::assert_readable;
use navique_e2e::services::{ALICE, ServiceEnv, WAIT, on_server};

fn env() -> &'static ServiceEnv {
    static ENV: OnceLock<ServiceEnv> = OnceLock::new();
    ENV.get_or_init(|| ServiceEnv::start(&[]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_service_is_protected_then_deleted_only_once_confirmed() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("seed");
    let db = "seed_orders";
    env.apply(&env.orders_db(&ns, db, "Delete", true)).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    assert!(env.postgres.database_exists(&on_server(&ns, db)));
    assert!(env.postgres.role_exists(&on_server(&ns, db)));
    assert_eq!(
        env.field(&ns, "orders-db", "{.status.observedGeneration}"),
        env.field(&ns, "orders-db", "{.metadata.generation}"),
        "the result is current"
    );
    assert_eq!(
        env.field(&ns, "orders-db", "{.status.instanceNamespace}"),
        ns
    );
    assert_eq!(
        env.field(&ns, "orders-db", "{.status.appliedDeletionPolicy}"),
        "Delete"
    );
    // The credential Secret works on PostgreSQL, and a Service names it.
    let uri = env.get(&ns, "secret/orders-db-credentials", "{.data.uri}");
    assert!(!uri.is_empty(), "credential Secret missing");
    assert_eq!(
        env.get(
            &ns,
            "service/orders-db",
            "{.spec.type} {.spec.externalName}"
        ),
        "ExternalName 127.0.0.1"
    );

    // Protected: kubectl delete exits 1 with the guide's message.
    let output = env
        .cluster
        .kubectl(&["delete", "managedservice", "orders-db", "-n", &ns], None);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(messages::DELETION_PROTECTION_ENABLED),
        "{stderr}"
    );

    // Unprotected in its own apply, without the confirmation annotation.
    let unconfirmed = env
        .orders_db(&ns, db, "Delete", false)
        .replace("    services.kube-dc.com/confirm-delete: orders-db\n", "");
    env.apply(&unconfirmed).await;
    env.cluster.kubectl_ok(&[
        "annotate",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "services.kube-dc.com/confirm-delete-",
    ]);
    // kubectl says what the delete waits for, not only the status after.
    let output = env.cluster.kubectl(
        &[
            "delete",
            "managedservice",
            "orders-db",
            "-n",
            &ns,
            "--wait=false",
        ],
        None,
    );
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "Warning: deletionPolicy Delete: nothing is removed until you annotate services.kube-dc.com/confirm-delete=orders-db\n"
    );
    let needed = format!(
        "Deleting DeletionConfirmationNeeded: {}",
        messages::deletion_confirmation_needed("orders-db")
    );
    assert_eq!(env.until_state(&ns, "orders-db", "Deleting").await, needed);
    // A wrong value confirms nothing either.
    env.cluster.kubectl_ok(&[
        "annotate",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "services.kube-dc.com/confirm-delete=orders",
    ]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(env.state(&ns, "orders-db"), needed);
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "untouched until confirmed"
    );
    // What the service and its Events say while it waits reads as prose.
    assert_readable(&env.cluster, &ns);

    env.cluster.kubectl_ok(&[
        "annotate",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "--overwrite",
        "services.kube-dc.com/confirm-delete=orders-db",
    ]);
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));
    assert!(!env.postgres.role_exists(&on_server(&ns, db)));
    assert_eq!(
        env.cluster.event_messages(&ns, "DatabaseDropped"),
        format!(
            "Normal dropped {0}, {0} on PostgreSQL at 127.0.0.1:{1}\n",
            on_server(&ns, db),
            env.postgres.port
        ),
        "the database, then its owner role"
    );
    eventually(WAIT, "the credential Secret to be collected", || async {
        env.get(&ns, "secret/orders-db-credentials", "{.metadata.name}")
            .is_empty()
            .then_some(())
    })
    .await;
}

/// Protection turned on while a `Delete` waits for its confirmation holds
/// the deletion once confirmed: `DeletionBlocked` with the seed's message
/// (and in `deletions_blocked`), the database untouched; turned off, the
/// deletion finishes.
// stale authorisation: protection is read from the stored object at every
// step, not only when the delete request came in (Argo CD #27570).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_turned_on_mid_deletion_blocks_it_until_turned_off() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("protect-late");
    let db = "late_orders";
    let unconfirmed = env
        .orders_db(&ns, db, "Delete", false)
        .replace("    services.kube-dc.com/confirm-delete: orders-db\n", "");
    env.apply(&unconfirmed).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    env.start_deleting(&ns, "orders-db");
    env.until_state(&ns, "orders-db", "Deleting DeletionConfirmationNeeded")
        .await;
    let patch = |protected: bool| {
        env.cluster.kubectl_ok(&[
            "patch",
            "managedservice",
            "orders-db",
            "-n",
            &ns,
            "--type",
            "merge",
            "-p",
            &format!(r#"{{"spec":{{"deletionProtection":{protected}}}}}"#),
        ]);
    };
    patch(true);
    env.cluster.kubectl_ok(&[
        "annotate",
        "managedservice",
        "orders-db",
        "-n",
        &ns,
        "services.kube-dc.com/confirm-delete=orders-db",
    ]);
    assert_eq!(
        env.until_state(&ns, "orders-db", "Deleting DeletionBlocked")
            .await,
        format!(
            "Deleting DeletionBlocked: {}",
            messages::DELETION_PROTECTION_ENABLED
        )
    );
    let blocked = "navique_service_lifecycle_controller_deletions_blocked{kind=\"ManagedService\",reason=\"DeletionBlocked\"} ";
    eventually(WAIT, "the blocked deletion to be counted", || async {
        (env.controller_metric(blocked).await >= 1.0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "nothing dropped while protected"
    );
    patch(false);
    env.until_gone(&ns, "orders-db").await;
    assert!(!env.postgres.database_exists(&on_server(&ns, db)));
}

/// An InProject service's data claim carries an owner reference a Project
/// user planted (to their own ConfigMap). `Retain` takes every owner off, so
/// deleting that ConfigMap afterwards leaves the retained volume.
// side door, trusted group: the garbage collector acting on a tenant's
// reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_volume_loses_every_owner_so_a_planted_one_cannot_collect_it() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("planted");
    let manifest = ServiceEnv::in_project(
        &env.orders_db(&ns, "rdb", "Retain", false)
            .replace("name: orders-db", "name: rdb"),
    );
    env.apply(&manifest).await;
    eventually(WAIT, "the StatefulSet", || async {
        (env.get(&ns, "statefulset/rdb", "{.metadata.name}") == "rdb").then_some(())
    })
    .await;
    let alice = format!("{ALICE}-token");
    env.cluster
        .kubectl_ok(&["create", "configmap", "bait", "-n", &ns, "--token", &alice]);
    let bait = env.get(&ns, "configmap/bait", "{.metadata.uid}");
    // The claim the StatefulSet controller would make, with the planted owner.
    let claim = format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-rdb-0\n  namespace: {ns}\n  labels: {{services.kube-dc.com/service: rdb}}\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: bait, uid: {bait}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n"
    );
    env.cluster
        .kubectl_in(&["apply", "-f", "-", "--token", &alice], Some(&claim));
    env.start_deleting(&ns, "rdb");
    env.until_gone(&ns, "rdb").await;
    assert_eq!(
        env.get(
            &ns,
            "pvc/data-rdb-0",
            "{.metadata.labels.services\\.kube-dc\\.com/retained} owners={.metadata.ownerReferences}"
        ),
        "true owners="
    );
    env.cluster
        .kubectl_ok(&["delete", "configmap", "bait", "-n", &ns, "--token", &alice]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        env.get(&ns, "pvc/data-rdb-0", "{.metadata.name}"),
        "data-rdb-0",
        "the retained volume survives its planted owner"
    );
}

/// A service of a class that never existed provisioned nothing: deleting it
/// (Delete, confirmed) removes nothing and finishes, with a Warning saying
/// so; it never waits forever.
// stuck forever: a finalizer that waits on something that cannot happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_of_a_class_that_never_existed_is_deleted_without_waiting() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("no-class");
    let manifest = env.orders_db(&ns, "mysql_orders", "Delete", false).replace(
        "classRef:\n    name: postgresql",
        "classRef:\n    name: mysql",
    );
    assert!(manifest.contains("name: mysql"), "{manifest}");
    env.apply(&manifest).await;
    assert_eq!(
        env.until_state(&ns, "orders-db", "Failed").await,
        "Failed ProvisioningFailed: ServiceClass mysql not found"
    );
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(
        env.cluster.event_messages(&ns, "DataRetained"),
        "Warning ServiceClass mysql does not exist, so no server can be reached: nothing was \
         removed; a database this service held stays on its server until the provider removes it\n"
    );
    assert!(
        env.cluster
            .event_messages(&ns, "ProvisioningFailed")
            .starts_with("Warning ServiceClass mysql not found"),
        "one Warning for the provisioning failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_leaves_the_database_and_objects_unowned_and_protected() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("retain");
    let db = "retained_orders";
    env.apply(&env.orders_db(&ns, db, "Retain", false)).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;

    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "Retain keeps the database"
    );
    assert!(env.postgres.role_exists(&on_server(&ns, db)));
    for object in ["secret/orders-db-credentials", "service/orders-db"] {
        assert_eq!(
            env.get(&ns,
                object,
                "{.metadata.labels.services\\.kube-dc\\.com/retained} owners={.metadata.ownerReferences}"
            ),
            "true owners=",
            "{object} is retained and unowned"
        );
        // A Project user can neither delete nor change it...
        let output = env
            .cluster
            .kubectl(&["delete", object, "-n", &ns, "--as", ALICE], None);
        assert_eq!(output.status.code(), Some(1), "{object}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(messages::RETAINED_OBJECT_PROTECTED),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let output = env.cluster.kubectl(
            &["label", object, "-n", &ns, "--as", ALICE, "team=shop"],
            None,
        );
        assert_eq!(output.status.code(), Some(1), "{object}");
    }
    // ...and a new service cannot take the retained name over.
    env.apply(&env.orders_db(&ns, db, "Retain", false)).await;
    let failed = env.until_state(&ns, "orders-db", "Failed").await;
    assert!(
        failed.contains("is retained from a deleted service of the same name"),
        "{failed}"
    );
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "still retained"
    );

    // The provider can remove them.
    env.cluster.kubectl_ok(&[
        "delete",
        "secret/orders-db-credentials",
        "service/orders-db",
        "-n",
        &ns,
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_precondition_refuses_another_service_of_the_same_name() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("uid");
    env.apply(&env.orders_db(&ns, "uid_orders", "Retain", false))
        .await;
    let first = env.field(&ns, "orders-db", "{.metadata.uid}");
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    env.cluster.kubectl_ok(&[
        "delete",
        "secret/orders-db-credentials",
        "service/orders-db",
        "-n",
        &ns,
    ]);
    env.apply(&env.orders_db(&ns, "uid_orders", "Retain", false))
        .await;
    let second = env.field(&ns, "orders-db", "{.metadata.uid}");
    assert_ne!(first, second);

    let api = Api::<ManagedService>::namespaced(env.cluster.client().await, &ns);
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(first.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let error = api.delete("orders-db", &stale).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("{error}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(
        status.message,
        format!(
            "Operation cannot be fulfilled on managedservices.services.kube-dc.com \"orders-db\": Precondition failed: UID in precondition: {first}, UID in object meta: {second}"
        )
    );
    assert_eq!(env.field(&ns, "orders-db", "{.metadata.uid}"), second);
    let current = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(second),
            resource_version: None,
        }),
        ..Default::default()
    };
    api.delete("orders-db", &current).await.unwrap();
    env.until_gone(&ns, "orders-db").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_plan_no_longer_allows_is_downgraded_with_a_warning() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("downgrade");
    let plan = "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServicePlan\nmetadata: {name: e2e-downgrade}\nspec:\n  classRef: {name: postgresql}\n  allowedDeletionPolicies: [Retain, Delete]\n";
    env.cluster.kubectl_in(&["apply", "-f", "-"], Some(plan));
    let db = "downgraded_orders";
    let service = env
        .orders_db(&ns, db, "Delete", false)
        .replace("name: postgresql-platform-ha", "name: e2e-downgrade");
    env.apply(&service).await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    env.cluster.kubectl_in(
        &["apply", "-f", "-"],
        Some(&plan.replace("[Retain, Delete]", "[Retain]")),
    );
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert!(
        env.postgres.database_exists(&on_server(&ns, db)),
        "ran under Retain"
    );
    let events = env.cluster.event_messages(&ns, "DeletionPolicyDowngraded");
    assert!(events.starts_with("Warning "), "{events}");
    assert!(events.contains("Retain"), "{events}");
    assert!(events.contains("e2e-downgrade"), "{events}");
    assert!(events.contains("keep consuming capacity"), "{events}");
    assert_readable(&env.cluster, &ns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_project_removes_every_service_and_its_database() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("project");
    // Protected, Retain, unconfirmed Delete: the Project's deletion ignores all of it.
    let services = [
        ("orders-db", "project_orders", "Retain", true),
        ("billing-db", "project_billing", "Delete", true),
    ];
    for (name, db, policy, protected) in services {
        let manifest = env
            .orders_db(&ns, db, policy, protected)
            .replace("name: orders-db", &format!("name: {name}"))
            .replace("confirm-delete: orders-db", "confirm-delete: someone-else");
        env.apply(&manifest).await;
        env.until_state(&ns, name, "Ready Available").await;
    }
    env.cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    eventually(WAIT, "the Project to be gone", || async {
        let output = env
            .cluster
            .kubectl(&["get", "namespace", &ns, "-o", "name"], None);
        (!output.status.success()).then_some(())
    })
    .await;
    for (name, db, _, _) in services {
        assert!(
            !env.postgres.database_exists(&on_server(&ns, db)),
            "{name}'s database"
        );
        assert!(
            !env.postgres.role_exists(&on_server(&ns, db)),
            "{name}'s role"
        );
        let events = env.cluster.event_messages("default", "ProjectDeleted");
        assert!(
            events.contains(&format!(
                "ManagedService {name}: the Project is being deleted"
            )),
            "{events}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_project_service_runs_a_stateful_set_and_delete_removes_its_volume_once_approved() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("inproject");
    let manifest = ServiceEnv::in_project(&env.orders_db(&ns, "orders", "Delete", false));
    env.apply(&manifest).await;
    let waiting = env.until_state(&ns, "orders-db", "Provisioning").await;
    eventually(WAIT, "the StatefulSet", || async {
        (env.get(&ns, "statefulset/orders-db", "{.metadata.name}") == "orders-db").then_some(())
    })
    .await;
    assert_eq!(
        env.until_state(&ns, "orders-db", "Provisioning Provisioning: waiting")
            .await,
        "Provisioning Provisioning: waiting for StatefulSet orders-db: 0/1 replicas ready",
        "{waiting}"
    );
    assert_eq!(
        env.get(&ns,
            "statefulset/orders-db",
            "{.spec.volumeClaimTemplates[0].spec.resources.requests.storage} {.spec.persistentVolumeClaimRetentionPolicy.whenDeleted}"
        ),
        "10Gi Retain"
    );
    assert_eq!(
        env.get(&ns, "secret/orders-db-credentials", "{.data.host}"),
        base64(&format!("orders-db.{ns}.svc"))
    );
    assert_eq!(
        env.get(&ns, "service/orders-db-headless", "{.spec.clusterIP}"),
        "None"
    );

    // What the StatefulSet controller and kubelet would do: make the claim
    // and report the replica ready.
    let client = env.cluster.client().await;
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data-orders-db-0", "labels": {
            "app.kubernetes.io/name": "postgresql",
            "app.kubernetes.io/instance": "orders-db",
            "services.kube-dc.com/service": "orders-db",
        }},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    let sets = Api::<StatefulSet>::namespaced(client.clone(), &ns);
    let generation = sets.get("orders-db").await.unwrap().metadata.generation;
    sets.patch_status(
        "orders-db",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {
            "replicas": 1, "readyReplicas": 1, "observedGeneration": generation,
        }})),
    )
    .await
    .unwrap();
    env.until_state(&ns, "orders-db", "Ready Available").await;

    // The volume is marked Delete=confirm: it goes only once approved.
    let annotate = |annotation: &str| {
        env.cluster
            .kubectl_ok(&["annotate", "pvc", "data-orders-db-0", "-n", &ns, annotation])
    };
    annotate("cd.hanzo.ai/sync-options=Delete=confirm");
    env.start_deleting(&ns, "orders-db");
    assert_eq!(
        env.until_state(&ns, "orders-db", "Deleting DeletionBlocked")
            .await,
        format!(
            "Deleting DeletionBlocked: waiting for deletion approval of PersistentVolumeClaim {ns}/data-orders-db-0 (cd.hanzo.ai/sync-options: Delete=confirm): annotate it cd.hanzo.ai/deletion-approved=true"
        )
    );
    assert_eq!(
        env.get(&ns, "statefulset/orders-db", "{.metadata.name}"),
        "",
        "the engine went first"
    );
    assert_eq!(
        env.get(&ns, "pvc/data-orders-db-0", "{.metadata.name}"),
        "data-orders-db-0"
    );
    annotate("cd.hanzo.ai/deletion-approved=true");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(env.get(&ns, "pvc/data-orders-db-0", "{.metadata.name}"), "");
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_left_out_of_the_manifest_is_the_plans_default() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("default-protection");
    let plan = "apiVersion: services.kube-dc.com/v1alpha1\nkind: ServicePlan\nmetadata: {name: e2e-unprotected}\nspec:\n  classRef: {name: postgresql}\n  allowedDeletionPolicies: [Retain]\n";
    env.cluster.kubectl_in(&["apply", "-f", "-"], Some(plan));
    let without = |name: &str, plan: &str| {
        env.orders_db(
            &ns,
            &format!("default_{}", name.replace('-', "_")),
            "Retain",
            false,
        )
        .replace("  deletionProtection: false\n", "")
        .replace("name: orders-db", &format!("name: {name}"))
        .replace("name: postgresql-platform-ha", &format!("name: {plan}"))
    };
    // The seed's plan protects by default; a plan that says nothing does not.
    env.apply(&without("protected-db", "postgresql-platform-ha"))
        .await;
    env.apply(&without("plain-db", "e2e-unprotected")).await;
    assert_eq!(
        env.field(&ns, "protected-db", "{.spec.deletionProtection}"),
        "true"
    );
    assert_eq!(
        env.field(&ns, "plain-db", "{.spec.deletionProtection}"),
        "false"
    );
    let output = env.cluster.kubectl(
        &["delete", "managedservice", "protected-db", "-n", &ns],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(messages::DELETION_PROTECTION_ENABLED)
    );
    // An apply that still leaves it out keeps what is stored.
    env.apply(&without("protected-db", "postgresql-platform-ha"))
        .await;
    assert_eq!(
        env.field(&ns, "protected-db", "{.spec.deletionProtection}"),
        "true"
    );
    env.start_deleting(&ns, "plain-db");
    env.until_gone(&ns, "plain-db").await;
    env.cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_of_the_same_name_that_is_not_the_services_is_left_alone() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("taken");
    env.cluster.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "orders-db-credentials",
        "-n",
        &ns,
        "--from-literal=password=the-teams-own",
    ]);
    env.apply(&env.orders_db(&ns, "taken_orders", "Retain", false))
        .await;
    let failed = env.until_state(&ns, "orders-db", "Failed").await;
    assert_eq!(
        failed,
        format!(
            "Failed ProvisioningFailed: Secret {ns}/orders-db-credentials exists and does not belong to this service; rename or remove it, or choose another service name"
        )
    );
    assert_eq!(
        env.get(&ns, "secret/orders-db-credentials", "{.data.password}"),
        base64("the-teams-own"),
        "untouched"
    );
    env.cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_delete_without_an_engine_retains_the_secrets_and_says_so() {
    let env = env();
    env.controller_ready().await;
    let ns = env.cluster.namespace("no-engine");
    let db = "vanished_orders";
    env.apply(&env.orders_db(&ns, db, "SnapshotAndDelete", false))
        .await;
    env.until_state(&ns, "orders-db", "Ready Available").await;
    // Let the reconcile that the Ready status itself wakes finish first: a
    // provisioning pass after the drop would make the database again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The engine disappears behind the platform's back.
    env.postgres.query(&format!(
        "drop database {} with (force)",
        on_server(&ns, db)
    ));
    env.start_deleting(&ns, "orders-db");
    env.until_gone(&ns, "orders-db").await;
    assert_eq!(
        env.get(
            &ns,
            "secret/orders-db-credentials",
            "{.metadata.labels.services\\.kube-dc\\.com/retained}"
        ),
        "true"
    );
    assert_eq!(
        env.cluster.event_messages(&ns, "DataRetained").trim(),
        "Warning the engine no longer exists, so no final backup can be taken: the data volumes and credential Secrets are retained"
    );
    assert_readable(&env.cluster, &ns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_component_is_refused_what_the_charts_rbac_does_not_grant() {
    let env = env();
    let ns = env.cluster.namespace("least-privilege");
    let as_user = |user: &str, args: &[&str]| {
        let token = format!("{user}-token");
        let output = env
            .cluster
            .kubectl(&[args, &["--token", &token]].concat(), None);
        assert!(!output.status.success(), "{user} may {args:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let backup_runner = navique_e2e::services::BACKUP_RUNNER_USER;
    // backup-runner reads the credential Secrets it is told about by name,
    // never lists them.
    assert!(
        as_user(backup_runner, &["get", "secrets", "-n", &ns]).contains(&format!(
            "User \"{backup_runner}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{ns}\""
        ))
    );
    // It deletes expired backup records, not services.
    assert!(
        as_user(
            backup_runner,
            &["delete", "managedservice", "anything", "-n", &ns]
        )
        .contains("cannot delete resource \"managedservices\"")
    );
    // The lifecycle controller never touches Locks.
    let controller = navique_e2e::services::CONTROLLER_USER;
    assert!(
        as_user(controller, &["get", "locks", "-n", &ns])
            .contains("cannot list resource \"locks\" in API group \"core.navique.com\"")
    );
    // Stacks act as a ServiceAccount of their namespace, so the controller
    // itself has no rights on the kinds a Stack manages ("privileged
    // deputy"), and may impersonate ServiceAccounts only: no user, no group.
    let refused = as_user(controller, &["get", "deployments", "-n", &ns]);
    assert!(
        refused.contains("cannot list resource \"deployments\" in API group \"apps\""),
        "{refused}"
    );
    // (--raw: kubectl's discovery would print only "Forbidden: unknown".)
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    let refused = as_user(controller, &["get", "--raw", &configmaps, "--as", ALICE]);
    assert!(
        refused.contains(&format!(
            "users \"{ALICE}\" is forbidden: User \"{controller}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )),
        "{refused}"
    );
    let account = format!("system:serviceaccount:{ns}:navique-stack");
    let as_masters = ["--as", &account, "--as-group", "system:masters"];
    let refused = as_user(
        controller,
        &[&["get", "--raw", &configmaps][..], &as_masters].concat(),
    );
    assert!(
        refused.contains(&format!(
            "groups \"system:masters\" is forbidden: User \"{controller}\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        )),
        "{refused}"
    );
}

/// `kubectl get serviceplans` reads as words: the controller writes each
/// plan's allowed deletion policies into its status for the POLICIES
/// column (a column of the list itself would print JSON).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policies_column_lists_a_plans_policies_in_words() {
    let env = env();
    env.controller_ready().await;
    let table = eventually(WAIT, "the plan's status", || async {
        let table = env
            .cluster
            .kubectl_ok(&["get", "serviceplan", "postgresql-platform-ha"]);
        table
            .contains("Retain, SnapshotAndDelete, Delete")
            .then_some(table)
    })
    .await;
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "CLASS", "POLICIES", "BACKUP", "AGE"]
    );
    assert!(
        lines.next().unwrap().starts_with(
            "postgresql-platform-ha   postgresql   Retain, SnapshotAndDelete, Delete   true"
        ),
        "{table}"
    );
}
