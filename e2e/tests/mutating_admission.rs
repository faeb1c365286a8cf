//! Mutating admission on the dev API server: MutatingWebhookConfigurations
//! called over TLS before validating admission, their JSON patches applied,
//! pruned, defaulted and validated against the CRD's schema, and their
//! failures reaching kubectl as a real cluster words them.

use std::sync::Once;
use std::time::Duration;

use base64::Engine;
use navique_e2e::{WebhookServer, cluster, eventually};
use serde_json::{Value, json};

const GROUP: &str = "mutating.navique.test";

/// Widgets: `spec.size` (required, 1 to 10) and `spec.tier` (defaulted).
fn install_widgets() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let crd = format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{GROUP}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {{type: integer, minimum: 1, maximum: 10}}
              tier: {{type: string, default: standard}}
"#
        );
        cluster().kubectl_in(&["apply", "-f", "-"], Some(&crd));
    });
}

fn widget(name: &str, ns: &str, spec: &str) -> String {
    format!(
        "apiVersion: {GROUP}/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec: {spec}\n"
    )
}

/// A webhook configuration of `kind` named `name`, with one webhook of the
/// same name calling `server` for `operations` on `resource` (`group/plural`)
/// in namespace `ns`. `extra` adds fields to the webhook (YAML, indented).
fn configuration(
    kind: &str,
    name: &str,
    server: &WebhookServer,
    ns: &str,
    resource: (&str, &str),
    operations: &str,
    extra: &str,
) -> String {
    let (group, plural) = resource;
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata:
  name: {name}
webhooks:
- name: {name}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  timeoutSeconds: 5
  clientConfig:
    url: https://{addr}/mutate
    caBundle: {ca}
  rules:
  - apiGroups: ["{group}"]
    apiVersions: ["*"]
    resources: ["{plural}"]
    operations: [{operations}]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {ns}
{extra}"#,
        addr = server.addr,
        ca = server.ca_bundle,
    )
}

fn register(manifest: &str) {
    cluster().kubectl_in(&["apply", "-f", "-"], Some(manifest));
}

/// An allowing response carrying `operations` as a JSON patch.
fn patch(operations: Value) -> Value {
    json!({
        "allowed": true,
        "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(operations.to_string()),
    })
}

/// A patch adding label `key=value` to the request's object.
fn add_label(request: &Value, key: &str, value: &str) -> Value {
    if request["object"]["metadata"]["labels"].is_object() {
        json!({"op": "add", "path": format!("/metadata/labels/{key}"), "value": value})
    } else {
        json!({"op": "add", "path": "/metadata/labels", "value": {key: value}})
    }
}

fn get(kind: &str, name: &str, ns: &str) -> Value {
    let out = cluster().kubectl_ok(&["get", kind, name, "-n", ns, "-o", "json"]);
    serde_json::from_str(&out).expect("kubectl get -o json")
}

fn received(server: &WebhookServer) -> Vec<Value> {
    server.received.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_completes_a_custom_resource_which_is_then_pruned_defaulted_validated_and_stored() {
    install_widgets();
    let ns = cluster().namespace("mutate-crd");
    let name = format!("complete.{ns}.navique.test");
    let server = WebhookServer::start(|request: &Value| {
        let label = add_label(request, "mutated", "true");
        if request["operation"] == "CREATE" {
            patch(json!([
                label,
                {"op": "add", "path": "/spec/size", "value": 3},
                {"op": "add", "path": "/spec/junk", "value": "pruned"},
            ]))
        } else {
            let by = request["userInfo"]["username"].clone();
            patch(json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"navique.test/updated-by": by}},
            ]))
        }
    })
    .await;
    register(&configuration(
        "MutatingWebhookConfiguration",
        &name,
        &server,
        &ns,
        (GROUP, "widgets"),
        "CREATE, UPDATE",
        "",
    ));

    // Without the webhook this widget lacks its required size.
    cluster().kubectl_in(&["create", "-f", "-"], Some(&widget("w", &ns, "{}")));
    let stored = get("widgets", "w", &ns);
    assert_eq!(stored["metadata"]["labels"], json!({"mutated": "true"}));
    assert_eq!(stored["spec"], json!({"size": 3, "tier": "standard"}));
    let create = received(&server).remove(0);
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(create["dryRun"], false);
    assert_eq!(create["oldObject"], Value::Null);
    assert_eq!(create["options"]["kind"], "CreateOptions");
    // Called after decoding and defaulting.
    assert_eq!(create["object"]["spec"], json!({"tier": "standard"}));

    cluster().kubectl_ok(&[
        "label",
        "widget",
        "w",
        "-n",
        &ns,
        "color=blue",
        "--as",
        "bob",
    ]);
    let stored = get("widgets", "w", &ns);
    assert_eq!(
        stored["metadata"]["annotations"],
        json!({"navique.test/updated-by": "bob"})
    );
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"mutated": "true", "color": "blue"})
    );
    let update = received(&server).remove(1);
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["userInfo"]["username"], "bob");
    assert_eq!(update["oldObject"]["metadata"]["labels"]["mutated"], "true");
    assert_eq!(update["object"]["metadata"]["labels"]["color"], "blue");

    let dry = cluster().kubectl_in(
        &["create", "-f", "-", "--dry-run=server", "-o", "json"],
        Some(&widget("dry", &ns, "{}")),
    );
    let dry: Value = serde_json::from_str(&dry).expect("dry-run output");
    assert_eq!(dry["spec"], json!({"size": 3, "tier": "standard"}));
    assert_eq!(received(&server).remove(2)["dryRun"], true);
    assert!(
        !cluster()
            .kubectl(&["get", "widget", "dry", "-n", &ns], None)
            .status
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_reaches_kubectl_verbatim_and_nothing_is_stored() {
    let ns = cluster().namespace("mutate-deny");
    let name = format!("deny.{ns}.navique.test");
    let server = WebhookServer::start(|_: &Value| {
        json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "no new ConfigMaps here"}})
    })
    .await;
    register(&configuration(
        "MutatingWebhookConfiguration",
        &name,
        &server,
        &ns,
        ("", "configmaps"),
        "CREATE",
        "",
    ));
    let manifest =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\n");
    let err = cluster().kubectl_err(&["create", "-f", "-"], Some(&manifest));
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"{name}\" denied the request: no new ConfigMaps here\n"
        )
    );
    assert!(
        !cluster()
            .kubectl(&["get", "configmap", "c", "-n", &ns], None)
            .status
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_breaks_the_schema_or_does_not_apply_fails_the_write() {
    install_widgets();
    let ns = cluster().namespace("mutate-bad");
    let name = format!("bad.{ns}.navique.test");
    let server = WebhookServer::start(|request: &Value| match request["operation"].as_str() {
        Some("CREATE") if request["name"] == "too-big" => {
            patch(json!([{"op": "replace", "path": "/spec/size", "value": 50}]))
        }
        Some("CREATE") => patch(json!([{"op": "replace", "path": "/spec/missing", "value": 1}])),
        _ => patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"deleted": "no"}}])),
    })
    .await;
    register(&configuration(
        "MutatingWebhookConfiguration",
        &name,
        &server,
        &ns,
        (GROUP, "widgets"),
        "CREATE, DELETE",
        "",
    ));

    let err = cluster().kubectl_err(
        &["create", "-f", "-"],
        Some(&widget("too-big", &ns, "{size: 5}")),
    );
    assert_eq!(
        err,
        "The Widget \"too-big\" is invalid: spec.size: Invalid value: 50: spec.size in body should be less than or equal to 10\n"
    );
    let err = cluster().kubectl_err(
        &["create", "-f", "-"],
        Some(&widget("unpatchable", &ns, "{size: 5}")),
    );
    assert_eq!(
        err,
        "Error from server (InternalError): error when creating \"STDIN\": Internal error occurred: operation '/0' failed at path '/spec/missing': path is invalid\n"
    );
    for widget in ["too-big", "unpatchable"] {
        assert!(
            !cluster()
                .kubectl(&["get", "widget", widget, "-n", &ns], None)
                .status
                .success()
        );
    }

    // A delete cannot be patched: kube-apiserver refuses it.
    cluster().kubectl_ok(&["delete", "mutatingwebhookconfiguration", &name]);
    cluster().kubectl_in(
        &["create", "-f", "-"],
        Some(&widget("kept", &ns, "{size: 5}")),
    );
    register(&configuration(
        "MutatingWebhookConfiguration",
        &name,
        &server,
        &ns,
        (GROUP, "widgets"),
        "DELETE",
        "",
    ));
    let err = cluster().kubectl_err(&["delete", "widget", "kept", "-n", &ns], None);
    assert_eq!(
        err,
        format!(
            "Error from server (InternalError): Internal error occurred: admission webhook \"{name}\" attempted to modify the object, which is not supported for this operation\n"
        )
    );
    assert_eq!(get("widgets", "kept", &ns)["spec"]["size"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_sees_the_mutated_object() {
    let ns = cluster().namespace("mutate-order");
    let mutator = WebhookServer::start(|request: &Value| {
        patch(json!([add_label(request, "owner", "platform")]))
    })
    .await;
    let validator = WebhookServer::start(|_: &Value| json!({"allowed": true})).await;
    let mutating = format!("label.{ns}.navique.test");
    let validating = format!("check.{ns}.navique.test");
    register(&configuration(
        "MutatingWebhookConfiguration",
        &mutating,
        &mutator,
        &ns,
        ("", "configmaps"),
        "CREATE",
        "",
    ));
    register(&configuration(
        "ValidatingWebhookConfiguration",
        &validating,
        &validator,
        &ns,
        ("", "configmaps"),
        "CREATE",
        "",
    ));
    // A policy that refuses ConfigMaps without an owner.
    let policy = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: "owned-{ns}"}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE"]}}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: every ConfigMap needs an owner
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: "owned-{ns}"}}
spec:
  policyName: "owned-{ns}"
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}
"#
    );
    register(&policy);

    cluster().kubectl_ok(&["create", "configmap", "c", "-n", &ns]);
    assert_eq!(
        get("configmap", "c", &ns)["metadata"]["labels"],
        json!({"owner": "platform"})
    );
    let seen = received(&validator);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["object"]["metadata"]["labels"]["owner"], "platform");
    assert!(received(&mutator)[0]["object"]["metadata"]["labels"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_run_in_configuration_name_order_and_if_needed_ones_are_called_again() {
    let ns = cluster().namespace("mutate-reinvoke");
    let watcher = WebhookServer::start(|_: &Value| json!({"allowed": true})).await;
    let labeller =
        WebhookServer::start(|request: &Value| patch(json!([add_label(request, "team", "a")])))
            .await;
    // "a-" sorts first: the watcher sees the object before the labeller.
    register(&configuration(
        "MutatingWebhookConfiguration",
        &format!("a-watch.{ns}.navique.test"),
        &watcher,
        &ns,
        ("", "configmaps"),
        "CREATE",
        "  reinvocationPolicy: IfNeeded\n",
    ));
    register(&configuration(
        "MutatingWebhookConfiguration",
        &format!("b-label.{ns}.navique.test"),
        &labeller,
        &ns,
        ("", "configmaps"),
        "CREATE",
        "",
    ));

    cluster().kubectl_ok(&["create", "configmap", "c", "-n", &ns]);
    let watched = received(&watcher);
    assert_eq!(watched.len(), 2);
    assert!(watched[0]["object"]["metadata"]["labels"].is_null());
    assert_eq!(
        watched[1]["object"]["metadata"]["labels"],
        json!({"team": "a"})
    );
    assert_eq!(received(&labeller).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespace_controller_deletes_through_mutating_webhooks() {
    let ns = cluster().namespace("mutate-controller");
    let server = WebhookServer::start(|_: &Value| json!({"allowed": true})).await;
    register(&configuration(
        "MutatingWebhookConfiguration",
        &format!("watch.{ns}.navique.test"),
        &server,
        &ns,
        ("", "configmaps"),
        "DELETE",
        "",
    ));
    cluster().kubectl_ok(&["create", "configmap", "c", "-n", &ns]);
    cluster().kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    let request = eventually(
        Duration::from_secs(20),
        "the namespace controller's delete",
        || async { received(&server).pop() },
    )
    .await;
    assert_eq!(request["operation"], "DELETE");
    assert_eq!(request["name"], "c");
    assert_eq!(
        request["userInfo"]["username"],
        "system:serviceaccount:kube-system:namespace-controller"
    );
}
