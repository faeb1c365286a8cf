//! Admission on the dev API server: ValidatingAdmissionPolicies evaluated
//! with CEL and validating webhooks called over TLS, their denials reaching
//! kubectl exactly as a real cluster words them.

use navique_e2e::{WebhookServer, cluster, free_port};
use serde_json::{Value, json};

/// A policy and binding that deny deleting ConfigMaps carrying
/// `core.navique.com/locked` in one namespace (the Lock guard's rule).
fn deny_locked_deletes(ns: &str) {
    let manifest = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: deny-locked-{ns}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["configmaps"]
      operations: ["DELETE"]
  validations:
  - expression: "!has(oldObject.metadata.annotations) || !('core.navique.com/locked' in oldObject.metadata.annotations)"
    messageExpression: "'resource is protected by Lock(s) [' + oldObject.metadata.annotations['core.navique.com/locked'] + ']'"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: deny-locked-{ns}
spec:
  policyName: deny-locked-{ns}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {ns}
"#
    );
    cluster().kubectl_in(&["apply", "-f", "-"], Some(&manifest));
}

#[test]
fn a_policy_denies_deleting_an_annotated_object_and_lets_others_go() {
    let ns = cluster().namespace("vap");
    deny_locked_deletes(&ns);
    cluster().kubectl_ok(&["create", "configmap", "locked", "-n", &ns]);
    cluster().kubectl_ok(&[
        "annotate",
        "configmap",
        "locked",
        "-n",
        &ns,
        "core.navique.com/locked=protect-forge",
    ]);
    cluster().kubectl_ok(&["create", "configmap", "free", "-n", &ns]);

    let denied = cluster().kubectl(&["delete", "configmap", "locked", "-n", &ns], None);
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr),
        format!(
            "Error from server (Forbidden): configmaps \"locked\" is forbidden: ValidatingAdmissionPolicy 'deny-locked-{ns}' with binding 'deny-locked-{ns}' denied request: resource is protected by Lock(s) [protect-forge]\n"
        )
    );
    assert!(
        cluster()
            .kubectl(&["get", "configmap", "locked", "-n", &ns], None)
            .status
            .success()
    );
    assert_eq!(
        cluster().kubectl_ok(&["delete", "configmap", "free", "-n", &ns]),
        "configmap \"free\" deleted\n"
    );
    // Updates are not deletes.
    cluster().kubectl_ok(&["label", "configmap", "locked", "-n", &ns, "still=writable"]);
}

fn webhook_configuration(
    name: &str,
    ns: &str,
    url: &str,
    ca_bundle: &str,
    failure_policy: &str,
) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {name}
webhooks:
- name: {name}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: {failure_policy}
  timeoutSeconds: 2
  clientConfig:
    url: {url}
    caBundle: {ca_bundle}
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["configmaps"]
    operations: ["DELETE"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {ns}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_sees_the_delete_and_its_denial_reaches_kubectl_verbatim() {
    let ns = cluster().namespace("webhook");
    let server = WebhookServer::start(|_request: &Value| {
        json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "no deletes on Fridays"}})
    })
    .await;
    let name = format!("fridays.{ns}.navique.test");
    let url = format!("https://{}/validate", server.addr);
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&webhook_configuration(
            &name,
            &ns,
            &url,
            &server.ca_bundle,
            "Fail",
        )),
    );
    cluster().kubectl_ok(&[
        "create",
        "configmap",
        "target",
        "-n",
        &ns,
        "--from-literal",
        "k=v",
    ]);

    let err = cluster().kubectl_err(
        &[
            "delete",
            "configmap",
            "target",
            "-n",
            &ns,
            "--as",
            "bob",
            "--as-group",
            "team-a",
            "--dry-run=server",
        ],
        None,
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): admission webhook \"{name}\" denied the request: no deletes on Fridays\n"
        )
    );
    let request = server
        .received
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the webhook was called");
    assert_eq!(request["operation"], "DELETE");
    assert_eq!(request["name"], "target");
    assert_eq!(request["namespace"], ns);
    assert_eq!(request["dryRun"], true);
    assert_eq!(request["object"], Value::Null);
    assert_eq!(request["oldObject"]["data"]["k"], "v");
    assert_eq!(request["userInfo"]["username"], "bob");
    assert_eq!(
        request["userInfo"]["groups"],
        json!(["team-a", "system:authenticated"])
    );
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert!(
        cluster()
            .kubectl(&["get", "configmap", "target", "-n", &ns], None)
            .status
            .success()
    );
}

#[test]
fn a_webhook_that_cannot_be_reached_fails_closed_or_open_as_configured() {
    let ns = cluster().namespace("webhook-down");
    let name = format!("down.{ns}.navique.test");
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}/validate");
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&webhook_configuration(&name, &ns, &url, "", "Fail")),
    );
    cluster().kubectl_ok(&["create", "configmap", "target", "-n", &ns]);

    let err = cluster().kubectl_err(&["delete", "configmap", "target", "-n", &ns], None);
    assert_eq!(
        err,
        format!(
            "Error from server (InternalError): Internal error occurred: failed calling webhook \"{name}\": failed to call webhook: Post \"{url}?timeout=2s\": dial tcp 127.0.0.1:{port}: connect: connection refused\n"
        )
    );
    cluster().kubectl_in(
        &["apply", "-f", "-"],
        Some(&webhook_configuration(&name, &ns, &url, "", "Ignore")),
    );
    assert_eq!(
        cluster().kubectl_ok(&["delete", "configmap", "target", "-n", &ns]),
        "configmap \"target\" deleted\n"
    );
}
