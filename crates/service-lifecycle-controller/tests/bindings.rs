//! ServiceBindings and ServiceCredentialPolicies end to end, in-process, on
//! the dev API server and a throwaway PostgreSQL (see `common::cluster`):
//! delivered credentials work, rotations change the password on PostgreSQL
//! and reach the bindings, and what each deletion policy leaves behind.

mod common;

use std::fmt::Debug;
use std::time::Duration;

use common::cluster::{Env, TIMEOUT, orders_db, phase_and_reason};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use navique_api::services::{
    DeletionPolicy, ManagedService, ServiceBinding, ServiceCredentialPolicy, ServicePhase,
};
use navique_testkit::eventually;
use navique_testkit::postgres::connect_uri;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_postgres::error::SqlState;

/// The database and owner role of service `orders` asking for `orders` on
/// the shared server: prefixed by its Project `my-project`.
const ORDERS: &str = "my_project__orders";

const NAMESPACE: &str = "my-project";

fn binding(name: &str, service: &str, uid: Option<&str>, secret: Option<&str>) -> ServiceBinding {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "services.kube-dc.com/v1alpha1",
        "kind": "ServiceBinding",
        "metadata": {"name": name},
        "spec": {"serviceRef": {"name": service, "uid": uid}, "secretName": secret},
    }))
    .unwrap()
}

fn policy(name: &str, service: &str, interval: &str) -> ServiceCredentialPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "services.kube-dc.com/v1alpha1",
        "kind": "ServiceCredentialPolicy",
        "metadata": {"name": name},
        "spec": {"serviceRef": {"name": service}, "rotationInterval": interval},
    }))
    .unwrap()
}

/// The `Ready` condition's status, reason and message.
async fn ready<K>(api: &Api<K>, name: &str) -> Option<(String, String, String)>
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    let object = serde_json::to_value(api.get_opt(name).await.ok()??).ok()?;
    let condition = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    let field = |key: &str| condition[key].as_str().unwrap_or_default().to_owned();
    Some((field("status"), field("reason"), field("message")))
}

/// Waits for `Ready` with the given reason and message; returns its status.
async fn reported<K>(api: &Api<K>, name: &str, reason: &str, message: &str) -> String
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    let (status, _, _) = eventually(
        TIMEOUT,
        &format!("{name} to report {reason}: {message}"),
        || async {
            ready(api, name)
                .await
                .filter(|(_, r, m)| r == reason && m == message)
        },
    )
    .await;
    status
}

fn value(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + Debug + DeserializeOwned,
{
    eventually(TIMEOUT, &format!("{name} to be gone"), || async {
        api.get_opt(name)
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await
}

/// Creates `service` in the Project and waits until it is Ready.
async fn provision(client: &Client, service: &ManagedService) -> Api<ManagedService> {
    let services = Api::<ManagedService>::namespaced(client.clone(), NAMESPACE);
    services
        .create(&PostParams::default(), service)
        .await
        .unwrap();
    eventually(TIMEOUT, "the service to be Ready", || async {
        phase_and_reason(&services, &service.name_any())
            .await
            .filter(|(phase, _, _)| *phase == ServicePhase::Ready)
    })
    .await;
    services
}

/// Waits until a policy has rotated at least once; returns its status.
async fn first_rotation(
    policies: &Api<ServiceCredentialPolicy>,
    name: &str,
) -> navique_api::services::ServiceCredentialPolicyStatus {
    eventually(TIMEOUT, "a rotation", || async {
        policies
            .get_opt(name)
            .await
            .ok()??
            .status
            .filter(|s| s.last_rotation_time.is_some())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_deliver_working_credentials_and_rotations_reach_them() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);
    let services = provision(client, &orders_db()).await;
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let bindings = Api::<ServiceBinding>::namespaced(client.clone(), NAMESPACE);
    let policies = Api::<ServiceCredentialPolicy>::namespaced(client.clone(), NAMESPACE);

    // The Secret defaults to the binding's name and holds exactly the
    // credential Secret's data, owned by the binding.
    bindings
        .create(
            &PostParams::default(),
            &binding("orders-app", "orders-db", None, None),
        )
        .await
        .unwrap();
    let status = reported(
        &bindings,
        "orders-app",
        "CredentialsDelivered",
        "credentials of service orders-db are in Secret orders-app",
    )
    .await;
    assert_eq!(status, "True");
    let stored = bindings.get("orders-app").await.unwrap();
    let binding_status = stored.status.clone().unwrap();
    assert_eq!(binding_status.secret_name.as_deref(), Some("orders-app"));
    assert_eq!(
        binding_status.observed_generation,
        stored.metadata.generation
    );
    let credentials = secrets.get("orders-db-credentials").await.unwrap();
    let delivered = secrets.get("orders-app").await.unwrap();
    assert_eq!(delivered.data, credentials.data);
    let owner = &delivered.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid), owner.controller),
        ("ServiceBinding", stored.uid().as_ref(), Some(true))
    );
    assert_eq!(
        delivered
            .labels()
            .get("services.kube-dc.com/binding")
            .map(String::as_str),
        Some("orders-app")
    );
    let session = connect_uri(&value(&delivered, "uri"))
        .await
        .expect("the delivered uri logs in");
    let row = session
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), ORDERS);
    drop(session);

    // A rotation every 2 s, then one every 720h so that none follows the
    // checks below.
    let old = value(&credentials, "password");
    policies
        .create(
            &PostParams::default(),
            &policy("orders-rotation", "orders-db", "2s"),
        )
        .await
        .unwrap();
    first_rotation(&policies, "orders-rotation").await;
    policies
        .patch(
            "orders-rotation",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"rotationInterval": "720h"}})),
        )
        .await
        .unwrap();
    let settled = eventually(TIMEOUT, "the 720h interval to be in force", || async {
        let policy = policies.get_opt("orders-rotation").await.ok()??;
        let status = policy.status?;
        let last = status.last_rotation_time.as_ref()?.0;
        let next = status.next_rotation_time.as_ref()?.0;
        (status.observed_generation == policy.metadata.generation
            && next.duration_since(last).as_secs() == 720 * 3600)
            .then_some(status)
    })
    .await;
    let next = settled.next_rotation_time.unwrap().0;
    let status = reported(
        &policies,
        "orders-rotation",
        "RotationScheduled",
        &format!("next rotation at {next}"),
    )
    .await;
    assert_eq!(status, "True");

    // The new password is in the credential Secret and on PostgreSQL; the
    // old one no longer logs in.
    let rotated = secrets.get("orders-db-credentials").await.unwrap();
    let new = value(&rotated, "password");
    assert_ne!(new, old);
    connect_uri(&value(&rotated, "uri"))
        .await
        .expect("the rotated uri logs in");
    pg.login(ORDERS, &new, ORDERS)
        .await
        .expect("the new password logs in");
    let refused = pg.login(ORDERS, &old, ORDERS).await.unwrap_err();
    assert_eq!(refused.code(), Some(&SqlState::INVALID_PASSWORD));
    // ... and reached the binding.
    eventually(TIMEOUT, "the rotated password to be delivered", || async {
        let delivered = secrets.get_opt("orders-app").await.ok()??;
        (delivered.data == rotated.data).then_some(())
    })
    .await;

    let events = Api::<Event>::namespaced(client.clone(), NAMESPACE);
    let event = eventually(TIMEOUT, "the CredentialsRotated event", || async {
        events
            .list(&Default::default())
            .await
            .ok()
            .and_then(|list| {
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("CredentialsRotated"))
            })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.regarding.and_then(|r| r.name).as_deref(),
        Some("orders-rotation")
    );
    assert_eq!(
        event.note.as_deref(),
        Some("rotated the password of role my_project__orders of service orders-db")
    );

    // Delete, confirmed: the delivered Secret goes; binding and policy stay,
    // pending.
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
    services
        .delete("orders-db", &DeleteParams::default())
        .await
        .unwrap();
    gone(&services, "orders-db").await;
    gone(&secrets, "orders-app").await;
    let status = reported(
        &bindings,
        "orders-app",
        "CredentialPending",
        "service not found: orders-db",
    )
    .await;
    assert_eq!(status, "False");
    let stored = bindings.get("orders-app").await.unwrap();
    assert_eq!(stored.status.unwrap().secret_name, None);
    reported(
        &policies,
        "orders-rotation",
        "CredentialPending",
        "service not found: orders-db",
    )
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_keeps_delivered_secrets_and_foreign_secrets_are_left_alone() {
    let env = Env::start().await;
    let client = &env.client;
    let mut service = orders_db();
    service.metadata.name = Some("ledger-db".to_owned());
    service.spec.parameters = None;
    service.spec.deletion_policy = DeletionPolicy::Retain;
    let services = provision(client, &service).await;
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let bindings = Api::<ServiceBinding>::namespaced(client.clone(), NAMESPACE);

    // A Secret the binding does not own is never overwritten.
    let foreign = Secret {
        metadata: ObjectMeta {
            name: Some("app-config".to_owned()),
            ..Default::default()
        },
        data: Some([("mode".to_owned(), ByteString(b"blue".to_vec()))].into()),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding("taken", "ledger-db", None, Some("app-config")),
        )
        .await
        .unwrap();
    let status = reported(
        &bindings,
        "taken",
        "SecretConflict",
        "Secret app-config exists and does not belong to this ServiceBinding; set spec.secretName to another name or remove that Secret",
    )
    .await;
    assert_eq!(status, "False");
    let untouched = secrets.get("app-config").await.unwrap();
    assert_eq!(untouched.data, foreign.data);
    assert!(untouched.owner_references().is_empty());

    // A reference pinned to another uid does not follow this service.
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "pinned",
                "ledger-db",
                Some("00000000-0000-0000-0000-000000000000"),
                None,
            ),
        )
        .await
        .unwrap();
    reported(
        &bindings,
        "pinned",
        "CredentialPending",
        "service not found: ledger-db",
    )
    .await;
    assert!(secrets.get_opt("pinned").await.unwrap().is_none());

    bindings
        .create(
            &PostParams::default(),
            &binding("ledger-app", "ledger-db", None, Some("ledger-creds")),
        )
        .await
        .unwrap();
    reported(
        &bindings,
        "ledger-app",
        "CredentialsDelivered",
        "credentials of service ledger-db are in Secret ledger-creds",
    )
    .await;
    let delivered = secrets.get("ledger-creds").await.unwrap();

    // Retain: the binding reports the service gone and keeps its Secret,
    // which still logs in to the retained database.
    services
        .delete("ledger-db", &DeleteParams::default())
        .await
        .unwrap();
    gone(&services, "ledger-db").await;
    let status = reported(
        &bindings,
        "ledger-app",
        "CredentialPending",
        "service not found: ledger-db",
    )
    .await;
    assert_eq!(status, "False");
    let kept = secrets.get("ledger-creds").await.unwrap();
    assert_eq!(kept.data, delivered.data);
    connect_uri(&value(&kept, "uri"))
        .await
        .expect("the kept credentials log in to the retained database");
    assert_eq!(
        bindings
            .get("ledger-app")
            .await
            .unwrap()
            .status
            .unwrap()
            .secret_name
            .as_deref(),
        Some("ledger-creds")
    );

    // Deleting the binding removes its Secret (garbage collection).
    bindings
        .delete("ledger-app", &DeleteParams::default())
        .await
        .unwrap();
    gone(&secrets, "ledger-creds").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_rotates_while_the_service_is_being_deleted() {
    let env = Env::start().await;
    let (pg, client) = (&env.pg, &env.client);
    let services = provision(client, &orders_db()).await;
    let secrets = Api::<Secret>::namespaced(client.clone(), NAMESPACE);
    let bindings = Api::<ServiceBinding>::namespaced(client.clone(), NAMESPACE);
    let policies = Api::<ServiceCredentialPolicy>::namespaced(client.clone(), NAMESPACE);
    bindings
        .create(
            &PostParams::default(),
            &binding("orders-app", "orders-db", None, None),
        )
        .await
        .unwrap();
    reported(
        &bindings,
        "orders-app",
        "CredentialsDelivered",
        "credentials of service orders-db are in Secret orders-app",
    )
    .await;
    policies
        .create(
            &PostParams::default(),
            &policy("orders-rotation", "orders-db", "2s"),
        )
        .await
        .unwrap();
    first_rotation(&policies, "orders-rotation").await;

    // Delete without the confirmation: the service stays, Deleting.
    services
        .delete("orders-db", &DeleteParams::default())
        .await
        .unwrap();
    eventually(TIMEOUT, "DeletionConfirmationNeeded", || async {
        phase_and_reason(&services, "orders-db")
            .await
            .filter(|(_, reason, _)| reason == "DeletionConfirmationNeeded")
    })
    .await;
    let status = reported(
        &policies,
        "orders-rotation",
        "ServiceDeleting",
        "service orders-db is being deleted; no rotations are submitted",
    )
    .await;
    assert_eq!(status, "False");
    reported(
        &bindings,
        "orders-app",
        "CredentialPending",
        "service orders-db is being deleted",
    )
    .await;

    // Several intervals later, the password is the same everywhere.
    let before = secrets.get("orders-db-credentials").await.unwrap();
    let password = value(&before, "password");
    let last = policies
        .get("orders-rotation")
        .await
        .unwrap()
        .status
        .unwrap()
        .last_rotation_time;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = secrets.get("orders-db-credentials").await.unwrap();
    assert_eq!(value(&after, "password"), password);
    pg.login(ORDERS, &password, ORDERS)
        .await
        .expect("the password is unchanged on PostgreSQL");
    let stored = policies.get("orders-rotation").await.unwrap();
    assert_eq!(stored.status.unwrap().last_rotation_time, last);
    assert_eq!(
        ready(&policies, "orders-rotation").await.unwrap().1,
        "ServiceDeleting"
    );
    // The delivered Secret stays while the service is being deleted.
    let delivered = secrets.get("orders-app").await.unwrap();
    assert_eq!(delivered.data, after.data);
    env.stop().await;
}
