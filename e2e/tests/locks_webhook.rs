//! The Locks guide end to end with the guard in webhook mode: the real
//! lock-controller and webhook against the dev API server, driven by kubectl.

navique_e2e::lock_guard_tests!(navique_e2e::locks::GuardMode::Webhook);

use navique_e2e::locks::{lock, stack};
use serde_json::{Value, json};

/// The webhook stores a Lock with the lock-controller's finalizer from its
/// first write, so that the controller writes only the marker and the
/// status, and puts it back when a tool replaces the Lock from a manifest
/// without it.
#[tokio::test]
async fn a_lock_is_stored_with_its_finalizer_and_a_replace_without_it_keeps_it() {
    let env = env();
    let k = &env.cluster;
    let ns = k.namespace("finalizer");
    k.kubectl_in(&["apply", "-f", "-"], Some(&stack(&ns, "forge")));
    let manifest = lock(
        &ns,
        "keep",
        "core.navique.com/v1alpha1",
        "Stack",
        "forge",
        "production",
    );
    let created: Value =
        serde_json::from_str(&k.kubectl_in(&["create", "-f", "-", "-o", "json"], Some(&manifest)))
            .expect("the created Lock");
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["core.navique.com/lock"])
    );
    env.until_lock(&ns, "keep", true, "Protecting").await;
    assert_eq!(env.marker(&["stack", "forge", "-n", &ns]), "keep");

    // The controller wrote the Lock's status only: kubectl's create is the
    // one write of the Lock itself.
    let stored: Value = serde_json::from_str(&k.kubectl_ok(&[
        "get",
        "lock",
        "keep",
        "-n",
        &ns,
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .expect("the Lock");
    let writers: Vec<(&str, &str)> = stored["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or_default(),
                entry["subresource"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        writers
            .iter()
            .all(|(manager, subresource)| *manager == "kubectl-create" || *subresource == "status"),
        "{writers:?}"
    );

    // A tool replacing the Lock from its manifest, which has no finalizers.
    k.kubectl_in(&["replace", "-f", "-"], Some(&manifest));
    assert_eq!(
        env.lock_field(&ns, "keep", "{.metadata.finalizers}"),
        r#"["core.navique.com/lock"]"#
    );
    assert!(
        k.kubectl_err(&["delete", "stack", "forge", "-n", &ns], None)
            .contains("keep"),
        "the Stack is still locked"
    );

    // Deleting the Lock still takes the marker off before the Lock goes.
    k.kubectl_ok(&["delete", "lock", "keep", "-n", &ns]);
    assert_eq!(env.marker(&["stack", "forge", "-n", &ns]), "");
    k.kubectl_ok(&["delete", "stack", "forge", "-n", &ns]);
}
