//! RBAC on a dev API server started with `--authorization rbac`: requests
//! are refused with kube-apiserver's message unless a binding allows them,
//! and `kubectl auth can-i --as` answers from the stored roles. Alice acts
//! with her own token (and her users-file groups); `--as` impersonates her
//! with the groups given.

use navique_e2e::Cluster;

#[test]
fn a_user_without_a_binding_is_refused_and_can_i_answers_from_the_roles() {
    let cluster = Cluster::dev(&["--authorization", "rbac"]);
    cluster.add_user("alice", &["project-users"]);
    let ns = cluster.namespace("rbac");

    let as_alice = ["--as", "alice", "--as-group", "project-users"];
    let err = cluster.kubectl_err(
        &["get", "configmaps", "-n", &ns, "--token", "alice-token"],
        None,
    );
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"\n"
        )
    );
    let can_i = cluster.kubectl(
        &[
            &["auth", "can-i", "list", "configmaps", "-n", &ns][..],
            &as_alice,
        ]
        .concat(),
        None,
    );
    assert_eq!(String::from_utf8_lossy(&can_i.stdout), "no\n");
    assert_eq!(can_i.status.code(), Some(1));

    // Granted through an aggregated ClusterRole bound to alice's group.
    let rbac = format!(
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: navique-project-view
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {{navique.test/aggregate-to-project-view: "true"}}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: navique-configmap-reader
  labels: {{navique.test/aggregate-to-project-view: "true"}}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: project-users-view
  namespace: {ns}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: navique-project-view}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: project-users}}
"#
    );
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&rbac));
    assert_eq!(
        cluster.kubectl_ok(
            &[
                &["auth", "can-i", "list", "configmaps", "-n", &ns][..],
                &as_alice
            ]
            .concat()
        ),
        "yes\n"
    );
    assert_eq!(
        cluster.kubectl_ok(&["get", "configmaps", "-n", &ns, "--token", "alice-token"]),
        ""
    );
    let denied = cluster.kubectl(
        &[
            &["auth", "can-i", "delete", "configmaps", "-n", &ns][..],
            &as_alice,
        ]
        .concat(),
        None,
    );
    assert_eq!(String::from_utf8_lossy(&denied.stdout), "no\n");
    let aggregated = cluster.kubectl_ok(&[
        "get",
        "clusterrole",
        "navique-project-view",
        "-o",
        "jsonpath={.rules[0].resources}",
    ]);
    assert_eq!(aggregated, r#"["configmaps"]"#);
    let err = cluster.kubectl_err(
        &[
            "create",
            "configmap",
            "x",
            "-n",
            &ns,
            "--token",
            "alice-token",
        ],
        None,
    );
    assert_eq!(
        err,
        format!(
            "error: failed to create configmap: configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"\n"
        )
    );
}

/// TokenReview, as kube-apiserver answers it: whom a bearer token stands
/// for (with `system:authenticated`), or `{"user": {}}` for an unknown
/// token; only to callers that may create tokenreviews, such as those bound
/// to `system:auth-delegator`.
#[test]
fn a_token_review_names_the_token_s_user_to_an_auth_delegator() {
    let cluster = Cluster::dev(&["--authorization", "rbac"]);
    cluster.add_user("alice", &["project-users"]);
    cluster.add_user("reviewer", &[]);
    let resources = cluster.kubectl_ok(&[
        "api-resources",
        "--api-group=authentication.k8s.io",
        "-o",
        "name",
    ]);
    assert!(
        resources
            .lines()
            .any(|l| l == "tokenreviews.authentication.k8s.io"),
        "{resources}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let review = |token: &str, as_token: Option<&str>| {
        let file = dir.path().join("review.json");
        let body = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        std::fs::write(&file, body.to_string()).expect("write review");
        let mut args = vec![
            "create",
            "--raw",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            "-f",
            file.to_str().expect("utf-8 path"),
        ];
        if let Some(token) = as_token {
            args.extend(["--token", token]);
        }
        cluster.kubectl(&args, None)
    };
    let status = |output: std::process::Output| -> serde_json::Value {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let review: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(review["kind"], "TokenReview");
        review["status"].clone()
    };

    assert_eq!(
        status(review("alice-token", None)),
        serde_json::json!({
            "authenticated": true,
            "user": {"username": "alice", "groups": ["project-users", "system:authenticated"]},
            "audiences": ["https://kubernetes.default.svc.cluster.local"]
        })
    );
    assert_eq!(
        status(review("bogus-token", None)),
        serde_json::json!({"user": {}})
    );

    let refused = review("alice-token", Some("reviewer-token"));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("User \"reviewer\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"),
        "{stderr}"
    );
    let binding = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reviewer-auth-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: reviewer}
"#;
    cluster.kubectl_in(&["apply", "-f", "-"], Some(binding));
    assert_eq!(
        status(review("alice-token", Some("reviewer-token")))["user"]["username"],
        "alice"
    );
}
