//! The ManagedService reconciler end to end, in-process: a dev API server
//! (the `dev-apiserver` binary, `cargo build -p dev-apiserver` first; `make
//! test` builds every binary), a throwaway PostgreSQL as the provider's
//! server, the CRDs and the catalogue from `deploy/`, and
//! `deploy/examples/orders-db.yaml` provisioned and then deleted under
//! `deletionPolicy: Delete`.

mod common;

use std::time::Duration;

use common::cluster::{Env, TIMEOUT, orders_db, phase_and_reason};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use navique_api::services::{ManagedService, ServicePhase, ServicePlan};
use navique_testkit::eventually;
use navique_testkit::postgres::connect_uri;

/// The database and owner role of service `orders` asking for `orders` on
/// the shared server: prefixed by its Project `my-project`.
const ORDERS: &str = "my_project__orders";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_db_is_provisioned_and_deleted_only_when_confirmed() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);

    // orders-db.yaml, without the confirmation at first.
    let service = orders_db();
    let services = Api::<ManagedService>::namespaced(client.clone(), "my-project");
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("create orders-db");

    let (_, _, message) = eventually(TIMEOUT, "orders-db to be Ready", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, reason, _)| *phase == ServicePhase::Ready && reason == "Available")
    })
    .await;
    assert_eq!(
        message,
        format!("database {ORDERS} on 127.0.0.1:{}", pg.port)
    );
    let stored = services.get("orders-db").await.unwrap();
    let status = stored.status.clone().unwrap();
    assert_eq!(status.instance_namespace.as_deref(), Some("my-project"));
    assert_eq!(status.observed_generation, stored.metadata.generation);
    assert_eq!(
        status.applied_deletion_policy,
        Some(navique_api::services::DeletionPolicy::Delete)
    );
    assert!(
        stored
            .finalizers()
            .iter()
            .any(|f| f == "services.kube-dc.com/deletion-policy")
    );
    assert_eq!(pg.database_owner(ORDERS).as_deref(), Some(ORDERS));
    assert!(pg.role_exists(ORDERS));

    // The credential Secret works, is labelled and owned by the service.
    let secrets = Api::<Secret>::namespaced(client.clone(), "my-project");
    let credentials = secrets.get("orders-db-credentials").await.unwrap();
    assert_eq!(
        credentials
            .labels()
            .get("services.kube-dc.com/service")
            .map(String::as_str),
        Some("orders-db")
    );
    assert_eq!(credentials.owner_references()[0].uid, stored.uid().unwrap());
    let data = credentials.data.clone().unwrap();
    let value = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    assert_eq!(value("database"), ORDERS);
    assert_eq!(value("user"), ORDERS);
    assert_eq!(value("port"), pg.port.to_string());
    let session = connect_uri(&value("uri"))
        .await
        .expect("the credential Secret's uri logs in");
    let row = session
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), ORDERS);
    drop(session);

    // The password is kept across reconciles: a change wakes the service
    // and the Secret still holds the same password.
    services
        .patch(
            "orders-db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = secrets.get("orders-db-credentials").await.unwrap();
    assert_eq!(again.data.unwrap()["password"], data["password"]);
    connect_uri(&value("uri"))
        .await
        .expect("the password still works");

    // A deleted credential Secret is written again (it is watched), with a
    // new password the role gets too.
    secrets
        .delete("orders-db-credentials", &DeleteParams::default())
        .await
        .unwrap();
    let recreated = eventually(
        TIMEOUT,
        "the credential Secret to be written again",
        || async {
            secrets
                .get_opt("orders-db-credentials")
                .await
                .ok()
                .flatten()
        },
    )
    .await;
    let uri = String::from_utf8(recreated.data.unwrap()["uri"].0.clone()).unwrap();
    eventually(TIMEOUT, "the new password to work", || async {
        connect_uri(&uri).await.ok()
    })
    .await;

    // Delete without the confirmation: nothing is touched.
    services
        .delete("orders-db", &DeleteParams::default())
        .await
        .expect("delete orders-db");
    let (_, _, message) = eventually(TIMEOUT, "DeletionConfirmationNeeded", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, reason, _)| {
                *phase == ServicePhase::Deleting && reason == "DeletionConfirmationNeeded"
            })
    })
    .await;
    assert_eq!(
        message,
        "deletionPolicy Delete destroys data; annotate services.kube-dc.com/confirm-delete=orders-db to confirm, or the instance stays retained"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(services.get_opt("orders-db").await.unwrap().is_some());
    assert_eq!(pg.database_owner(ORDERS).as_deref(), Some(ORDERS));

    // Confirmed: the database and role are dropped and the object goes.
    services
        .patch(
            "orders-db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "services.kube-dc.com/confirm-delete": "orders-db"
            }}})),
        )
        .await
        .unwrap();
    eventually(TIMEOUT, "orders-db to be gone", || async {
        services
            .get_opt("orders-db")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;
    assert_eq!(pg.database_owner(ORDERS), None);
    assert!(!pg.role_exists(ORDERS));
    // The credential Secret goes with its owner (garbage collection).
    eventually(TIMEOUT, "the credential Secret to be collected", || async {
        secrets
            .get_opt("orders-db-credentials")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;

    env.stop().await;
}

/// A plan that allows only Retain: a service asking for Delete is deleted
/// under Retain, with a DeletionPolicyDowngraded Warning; its database stays
/// and its credential Secret is left unowned and labelled retained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_plan_does_not_allow_is_downgraded_to_retain() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);
    let plan: ServicePlan = serde_yaml::from_str(
        "apiVersion: services.kube-dc.com/v1alpha1
kind: ServicePlan
metadata:
  name: retain-only
spec:
  classRef:
    name: postgresql
  allowedDeletionPolicies: [Retain]
",
    )
    .unwrap();
    Api::<ServicePlan>::all(client.clone())
        .create(&PostParams::default(), &plan)
        .await
        .unwrap();
    let mut service = orders_db();
    service.metadata.name = Some("ledger-db".to_owned());
    service.spec.plan_ref.name = "retain-only".to_owned();
    service.spec.parameters = None;
    let services = Api::<ManagedService>::namespaced(client.clone(), "my-project");
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let (_, _, message) = eventually(TIMEOUT, "ledger-db to be Ready", || async {
        phase_and_reason(&services, "ledger-db")
            .await
            .filter(|(phase, _, _)| *phase == ServicePhase::Ready)
    })
    .await;
    assert_eq!(
        message,
        format!("database my_project__ledger_db on 127.0.0.1:{}", pg.port)
    );
    let stored = services.get("ledger-db").await.unwrap();
    // Delete is not allowed and nothing was applied before.
    assert_eq!(stored.status.unwrap().applied_deletion_policy, None);
    assert_eq!(
        pg.database_owner("my_project__ledger_db").as_deref(),
        Some("my_project__ledger_db")
    );

    services
        .delete("ledger-db", &DeleteParams::default())
        .await
        .unwrap();
    eventually(TIMEOUT, "ledger-db to be gone", || async {
        services
            .get_opt("ledger-db")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;
    assert_eq!(
        pg.database_owner("my_project__ledger_db").as_deref(),
        Some("my_project__ledger_db")
    );
    let secrets = Api::<Secret>::namespaced(client.clone(), "my-project");
    let retained = secrets.get("ledger-db-credentials").await.unwrap();
    assert!(retained.owner_references().is_empty());
    assert_eq!(
        retained
            .labels()
            .get("services.kube-dc.com/retained")
            .map(String::as_str),
        Some("true")
    );
    let uri = String::from_utf8(retained.data.unwrap()["uri"].0.clone()).unwrap();
    connect_uri(&uri)
        .await
        .expect("the retained credentials work");

    let events = Api::<Event>::namespaced(client.clone(), "my-project");
    let event = eventually(TIMEOUT, "the DeletionPolicyDowngraded event", || async {
        events
            .list(&Default::default())
            .await
            .ok()
            .and_then(|list| {
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("DeletionPolicyDowngraded"))
            })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.note.as_deref(),
        Some(
            "deletionPolicy Delete cannot be applied (plan retain-only does not allow Delete); deleting under Retain, the less destructive policy in force; the engine and its volumes are retained and keep consuming capacity"
        )
    );
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("service-lifecycle-controller")
    );
    env.stop().await;
}

/// Deleting the Project removes the service whatever its policy and
/// confirmation, with a ProjectDeleted event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_project_removes_the_database() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);
    let mut service = orders_db();
    service.spec.deletion_policy = navique_api::services::DeletionPolicy::Retain;
    let services = Api::<ManagedService>::namespaced(client.clone(), "my-project");
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    eventually(TIMEOUT, "orders-db to be Ready", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, _, _)| *phase == ServicePhase::Ready)
    })
    .await;
    assert_eq!(pg.database_owner(ORDERS).as_deref(), Some(ORDERS));

    Api::<Namespace>::all(client.clone())
        .delete("my-project", &DeleteParams::default())
        .await
        .unwrap();
    eventually(TIMEOUT, "my-project to be gone", || async {
        Api::<Namespace>::all(client.clone())
            .get_opt("my-project")
            .await
            .ok()
            .and_then(|n| n.is_none().then_some(()))
    })
    .await;
    assert_eq!(pg.database_owner(ORDERS), None);
    assert!(!pg.role_exists(ORDERS));
    // A terminating namespace takes no events: it regards the Namespace,
    // so it is in `default`.
    let events = Api::<Event>::namespaced(client.clone(), "default");
    let event = eventually(TIMEOUT, "the ProjectDeleted event", || async {
        events
            .list(&Default::default())
            .await
            .ok()
            .and_then(|list| {
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("ProjectDeleted"))
            })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    let regarding = event.regarding.unwrap();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("Namespace"), Some("my-project"))
    );
    assert_eq!(
        event.related.and_then(|r| r.name).as_deref(),
        Some("orders-db")
    );
    assert_eq!(
        event.note.as_deref(),
        Some(
            "ManagedService orders-db: the Project is being deleted: the service and its data are removed"
        )
    );
    env.stop().await;
}

/// A name PostgreSQL cannot take fails provisioning with the reason and
/// converges once fixed; SnapshotAndDelete is blocked until final backups
/// exist, and switching to Retain lets the deletion through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_and_blocked_deletions_are_reported() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);
    let mut service = orders_db();
    service.spec.deletion_policy = navique_api::services::DeletionPolicy::SnapshotAndDelete;
    service.spec.parameters = Some(
        serde_json::from_value(serde_json::json!({"database": "Orders", "owner": "orders"}))
            .unwrap(),
    );
    let services = Api::<ManagedService>::namespaced(client.clone(), "my-project");
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let (_, _, message) = eventually(TIMEOUT, "ProvisioningFailed", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, reason, _)| {
                *phase == ServicePhase::Failed && reason == "ProvisioningFailed"
            })
    })
    .await;
    assert!(
        message.starts_with("spec.parameters.database: invalid database name \"Orders\""),
        "{message}"
    );

    services
        .patch(
            "orders-db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"parameters": {"database": "orders"}}})),
        )
        .await
        .unwrap();
    eventually(TIMEOUT, "orders-db to be Ready", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, _, _)| *phase == ServicePhase::Ready)
    })
    .await;

    services
        .delete("orders-db", &DeleteParams::default())
        .await
        .unwrap();
    let (_, _, message) = eventually(TIMEOUT, "DeletionBlocked", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(phase, reason, _)| {
                *phase == ServicePhase::Deleting && reason == "DeletionBlocked"
            })
    })
    .await;
    // No backup-runner in this test: nothing is removed without the backup.
    assert_eq!(
        message,
        "no backup-runner is configured (--backup-runner-url), so no final backup can be taken; switch to Retain or Delete"
    );
    assert_eq!(pg.database_owner(ORDERS).as_deref(), Some(ORDERS));

    services
        .patch(
            "orders-db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"deletionPolicy": "Retain"}})),
        )
        .await
        .unwrap();
    eventually(TIMEOUT, "orders-db to be gone", || async {
        services
            .get_opt("orders-db")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;
    assert_eq!(pg.database_owner(ORDERS).as_deref(), Some(ORDERS));
    env.stop().await;
}
