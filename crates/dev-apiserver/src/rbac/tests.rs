use super::*;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    groups.push(AUTHENTICATED.to_owned());
    UserInfo {
        username: name.to_owned(),
        groups,
        ..UserInfo::default()
    }
}

fn request<'a>(user: &'a UserInfo, verb: &'a str, resource: &'a str) -> Request<'a> {
    Request {
        user,
        verb,
        resource_request: true,
        api_group: "",
        resource,
        subresource: "",
        namespace: "",
        name: "",
        path: "",
    }
}

fn in_namespace<'a>(request: Request<'a>, namespace: &'a str) -> Request<'a> {
    Request {
        namespace,
        ..request
    }
}

fn path<'a>(user: &'a UserInfo, path: &'a str) -> Request<'a> {
    Request {
        user,
        verb: "get",
        resource_request: false,
        api_group: "",
        resource: "",
        subresource: "",
        namespace: "",
        name: "",
        path,
    }
}

fn role(namespace: &str, name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": rules,
    })
}

fn cluster_role_object(name: &str, labels: Value, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": rules,
    })
}

fn binding(namespace: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    let mut binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": if namespace.is_empty() { "ClusterRoleBinding" } else { "RoleBinding" },
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
        "subjects": subjects,
    });
    if !namespace.is_empty() {
        binding["metadata"]["namespace"] = json!(namespace);
    }
    binding
}

fn user_subject(name: &str) -> Value {
    json!([{"apiGroup": RBAC_GROUP, "kind": "User", "name": name}])
}

fn configmap_reader() -> Value {
    json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
}

struct Store {
    roles: Vec<Value>,
    role_bindings: Vec<Value>,
    cluster_roles: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
}

impl Store {
    fn new() -> Self {
        Self {
            roles: vec![],
            role_bindings: vec![],
            cluster_roles: vec![],
            cluster_role_bindings: vec![],
        }
    }

    fn rbac(&self) -> Rbac<'_> {
        Rbac {
            roles: &self.roles,
            role_bindings: &self.role_bindings,
            cluster_roles: &self.cluster_roles,
            cluster_role_bindings: &self.cluster_role_bindings,
        }
    }

    fn allows(&self, request: &Request) -> bool {
        matches!(self.rbac().decide(request).0, Decision::Allow { .. })
    }

    fn reason(&self, request: &Request) -> String {
        match self.rbac().decide(request).0 {
            Decision::Allow { reason } => reason,
            Decision::Deny => panic!("denied: {}", forbidden_message(request)),
        }
    }
}

#[test]
fn members_of_system_masters_are_always_allowed_without_a_reason() {
    let store = Store::new();
    let admin = user("dev-admin", &[PRIVILEGED_GROUP]);
    let delete = request(&admin, "delete", "namespaces");
    assert_eq!(
        store.rbac().decide(&delete).0,
        Decision::Allow {
            reason: String::new()
        }
    );
    assert!(store.allows(&path(&admin, "/anything")));
}

#[test]
fn a_role_binding_to_a_role_allows_in_its_namespace_only() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-a", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "alice-reads",
        "Role",
        "reader",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let list = request(&alice, "list", "configmaps");
    assert_eq!(
        store.reason(&in_namespace(list, "team-a")),
        "RBAC: allowed by RoleBinding \"alice-reads/team-a\" of Role \"reader\" to User \"alice\""
    );
    assert!(!store.allows(&in_namespace(list, "team-b")));
    assert!(!store.allows(&list), "a Role grants nothing cluster-wide");
    assert!(!store.allows(&in_namespace(
        request(&alice, "delete", "configmaps"),
        "team-a"
    )));
    let bob = user("bob", &[]);
    assert!(!store.allows(&in_namespace(request(&bob, "list", "configmaps"), "team-a")));
}

#[test]
fn a_role_binding_cannot_use_a_role_of_another_namespace() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-b", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "alice-reads",
        "Role",
        "reader",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let list = in_namespace(request(&alice, "list", "configmaps"), "team-a");
    let (decision, reason) = store.rbac().decide(&list);
    assert_eq!(decision, Decision::Deny);
    assert_eq!(
        reason,
        "RBAC: role.rbac.authorization.k8s.io \"reader\" not found"
    );
    assert_eq!(
        forbidden_message_with_reason(&list, &reason),
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\": RBAC: role.rbac.authorization.k8s.io \"reader\" not found"
    );
}

#[test]
fn a_cluster_role_binding_allows_in_every_namespace_and_cluster_wide() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "configmap-reader",
        json!({}),
        configmap_reader(),
    ));
    store.cluster_role_bindings.push(binding(
        "",
        "alice-reads-everywhere",
        "ClusterRole",
        "configmap-reader",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let list = request(&alice, "list", "configmaps");
    let reason = "RBAC: allowed by ClusterRoleBinding \"alice-reads-everywhere\" of ClusterRole \"configmap-reader\" to User \"alice\"";
    assert_eq!(store.reason(&list), reason);
    assert_eq!(store.reason(&in_namespace(list, "team-z")), reason);
    assert!(!store.allows(&request(&alice, "create", "configmaps")));
}

#[test]
fn a_role_binding_to_a_cluster_role_grants_it_within_the_namespace() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "configmap-reader",
        json!({}),
        configmap_reader(),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "alice-reads",
        "ClusterRole",
        "configmap-reader",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let get = Request {
        name: "x",
        ..request(&alice, "get", "configmaps")
    };
    assert_eq!(
        store.reason(&in_namespace(get, "team-a")),
        "RBAC: allowed by RoleBinding \"alice-reads/team-a\" of ClusterRole \"configmap-reader\" to User \"alice\""
    );
    assert!(!store.allows(&in_namespace(get, "team-b")));
    assert!(!store.allows(&get));
}

#[test]
fn a_group_subject_grants_to_every_member() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-a", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "devs-read",
        "Role",
        "reader",
        json!([{"apiGroup": RBAC_GROUP, "kind": "Group", "name": "devs"}]),
    ));
    let carol = user("carol", &["devs"]);
    let list = in_namespace(request(&carol, "list", "configmaps"), "team-a");
    assert_eq!(
        store.reason(&list),
        "RBAC: allowed by RoleBinding \"devs-read/team-a\" of Role \"reader\" to Group \"devs\""
    );
    let dave = user("dave", &["ops"]);
    assert!(!store.allows(&in_namespace(
        request(&dave, "list", "configmaps"),
        "team-a"
    )));
}

#[test]
fn a_service_account_subject_names_its_user_and_defaults_to_the_binding_namespace() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-a", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "robot-reads",
        "Role",
        "reader",
        json!([
            {"kind": "ServiceAccount", "name": "robot", "namespace": "ci"},
            {"kind": "ServiceAccount", "name": "local"},
        ]),
    ));
    let robot = user(
        "system:serviceaccount:ci:robot",
        &["system:serviceaccounts"],
    );
    let list = in_namespace(request(&robot, "list", "configmaps"), "team-a");
    assert_eq!(
        store.reason(&list),
        "RBAC: allowed by RoleBinding \"robot-reads/team-a\" of Role \"reader\" to ServiceAccount \"robot/ci\""
    );
    let local = user("system:serviceaccount:team-a:local", &[]);
    assert_eq!(
        store.reason(&in_namespace(
            request(&local, "list", "configmaps"),
            "team-a"
        )),
        "RBAC: allowed by RoleBinding \"robot-reads/team-a\" of Role \"reader\" to ServiceAccount \"local/team-a\""
    );
    let other = user("system:serviceaccount:team-b:robot", &[]);
    assert!(!store.allows(&in_namespace(
        request(&other, "list", "configmaps"),
        "team-a"
    )));
    let named_robot = user("robot", &[]);
    assert!(!store.allows(&in_namespace(
        request(&named_robot, "list", "configmaps"),
        "team-a"
    )));
}

#[test]
fn a_service_account_subject_of_a_cluster_role_binding_needs_its_namespace() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "configmap-reader",
        json!({}),
        configmap_reader(),
    ));
    store.cluster_role_bindings.push(binding(
        "",
        "no-namespace",
        "ClusterRole",
        "configmap-reader",
        json!([{"kind": "ServiceAccount", "name": "robot"}]),
    ));
    let robot = user("system:serviceaccount:default:robot", &[]);
    assert!(!store.allows(&in_namespace(
        request(&robot, "list", "configmaps"),
        "default"
    )));
}

#[test]
fn resource_names_limit_a_rule_to_the_named_objects() {
    let mut store = Store::new();
    store.roles.push(role(
        "team-a",
        "one-map",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get", "update"]}]),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "alice-one-map",
        "Role",
        "one-map",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let get = in_namespace(request(&alice, "get", "configmaps"), "team-a");
    assert!(store.allows(&Request {
        name: "settings",
        ..get
    }));
    assert!(!store.allows(&Request {
        name: "other",
        ..get
    }));
    assert!(
        !store.allows(&in_namespace(
            request(&alice, "list", "configmaps"),
            "team-a"
        )),
        "a list has no name, so resourceNames never match it"
    );
}

#[test]
fn stars_match_every_verb_group_and_resource() {
    let mut store = Store::new();
    store.roles.push(role(
        "team-a",
        "everything",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    ));
    store.roles.push(role(
        "team-a",
        "any-verb-on-locks",
        json!([{"apiGroups": ["core.navique.com"], "resources": ["locks"], "verbs": ["*"]}]),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "root",
        "Role",
        "everything",
        user_subject("alice"),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "locks",
        "Role",
        "any-verb-on-locks",
        user_subject("bob"),
    ));
    let alice = user("alice", &[]);
    for (verb, group, resource, subresource) in [
        ("deletecollection", "", "secrets", ""),
        ("patch", "apps", "deployments", "scale"),
        ("escalate", "rbac.authorization.k8s.io", "roles", ""),
    ] {
        let request = Request {
            api_group: group,
            subresource,
            ..in_namespace(request(&alice, verb, resource), "team-a")
        };
        assert!(store.allows(&request), "{verb} {resource}");
    }
    let bob = user("bob", &[]);
    let locks = Request {
        api_group: "core.navique.com",
        ..in_namespace(request(&bob, "deletecollection", "locks"), "team-a")
    };
    assert!(store.allows(&locks));
    assert!(!store.allows(&Request {
        api_group: "",
        ..locks
    }));
    assert!(!store.allows(&Request {
        subresource: "status",
        ..locks
    }));
}

#[test]
fn subresources_need_their_own_rule() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "lock-status-writer",
        json!({}),
        json!([
            {"apiGroups": ["core.navique.com"], "resources": ["locks/status"], "verbs": ["patch", "update"]},
            {"apiGroups": [""], "resources": ["*/scale"], "verbs": ["get"]},
        ]),
    ));
    store.cluster_role_bindings.push(binding(
        "",
        "status-writer",
        "ClusterRole",
        "lock-status-writer",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let patch = Request {
        api_group: "core.navique.com",
        subresource: "status",
        name: "l1",
        ..in_namespace(request(&alice, "patch", "locks"), "team-a")
    };
    assert!(store.allows(&patch));
    assert!(!store.allows(&Request {
        subresource: "",
        ..patch
    }));
    assert!(!store.allows(&Request {
        subresource: "finalize",
        ..patch
    }));
    let scale = Request {
        subresource: "scale",
        ..in_namespace(request(&alice, "get", "replicationcontrollers"), "team-a")
    };
    assert!(store.allows(&scale), "*/scale matches any resource's scale");
    assert!(!store.allows(&Request {
        subresource: "",
        ..scale
    }));
}

#[test]
fn an_aggregated_cluster_role_grants_the_rules_of_the_roles_its_selectors_match() {
    let mut store = Store::new();
    store.cluster_roles.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "navique-view"},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            {"matchExpressions": [{"key": "navique.com/aggregate", "operator": "In", "values": ["view", "all"]}]},
        ]},
        "rules": null,
    }));
    store.cluster_roles.push(cluster_role_object(
        "navique-locks-view",
        json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
        json!([{"apiGroups": ["core.navique.com"], "resources": ["locks"], "verbs": ["get", "list", "watch"]}]),
    ));
    store.cluster_roles.push(cluster_role_object(
        "navique-leases-view",
        json!({"navique.com/aggregate": "all"}),
        json!([{"apiGroups": ["core.navique.com"], "resources": ["leases"], "verbs": ["get"]}]),
    ));
    store.cluster_roles.push(cluster_role_object(
        "unlabelled",
        json!({"rbac.authorization.k8s.io/aggregate-to-view": "false"}),
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "alice-views",
        "ClusterRole",
        "navique-view",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let locks = Request {
        api_group: "core.navique.com",
        ..in_namespace(request(&alice, "list", "locks"), "team-a")
    };
    assert_eq!(
        store.reason(&locks),
        "RBAC: allowed by RoleBinding \"alice-views/team-a\" of ClusterRole \"navique-view\" to User \"alice\""
    );
    assert!(store.allows(&Request {
        resource: "leases",
        verb: "get",
        ..locks
    }));
    assert!(!store.allows(&Request {
        api_group: "",
        resource: "secrets",
        verb: "get",
        ..locks
    }));

    // The first selector also matches the bootstrap
    // system:aggregate-to-view, as on a real cluster; matches come
    // sorted by name, selector by selector.
    let updates = aggregate(&store.cluster_roles);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].0, "navique-view");
    let rules = updates[0].1.as_array().unwrap();
    let builtin_view = list(
        bootstrap()
            .cluster_roles
            .iter()
            .find(|r| str_at(r, "/metadata/name") == "system:aggregate-to-view")
            .unwrap(),
        "rules",
    );
    assert_eq!(rules.len(), 2 + builtin_view.len());
    assert_eq!(
        rules[0],
        json!({"verbs": ["get", "list", "watch"], "apiGroups": ["core.navique.com"], "resources": ["locks"]})
    );
    assert_eq!(&rules[1..=builtin_view.len()], builtin_view);
    assert_eq!(
        rules[rules.len() - 1],
        json!({"verbs": ["get"], "apiGroups": ["core.navique.com"], "resources": ["leases"]})
    );
    store.cluster_roles[0]["rules"] = updates[0].1.clone();
    assert_eq!(
        aggregate(&store.cluster_roles),
        vec![],
        "nothing left to write"
    );
}

#[test]
fn the_bootstrap_view_role_aggregates_navique_roles_and_nests_into_edit_and_admin() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "navique-view",
        json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
        json!([{"apiGroups": ["core.navique.com"], "resources": ["locks"], "verbs": ["get", "list", "watch"]}]),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "alice-admin",
        "ClusterRole",
        "admin",
        user_subject("alice"),
    ));
    store.role_bindings.push(binding(
        "team-a",
        "bob-views",
        "ClusterRole",
        "view",
        user_subject("bob"),
    ));
    let alice = user("alice", &[]);
    let bob = user("bob", &[]);
    let locks = |user| Request {
        api_group: "core.navique.com",
        ..in_namespace(request(user, "watch", "locks"), "team-a")
    };
    assert!(store.allows(&locks(&alice)), "admin ⊇ edit ⊇ view");
    assert!(store.allows(&locks(&bob)));
    let pods = |user| in_namespace(request(user, "list", "pods"), "team-a");
    assert!(store.allows(&pods(&bob)));
    let create_role = |user| Request {
        api_group: RBAC_GROUP,
        ..in_namespace(request(user, "create", "roles"), "team-a")
    };
    assert!(store.allows(&create_role(&alice)));
    assert!(!store.allows(&create_role(&bob)));
    assert!(!store.allows(&in_namespace(request(&bob, "get", "secrets"), "team-a")));
}

#[test]
fn every_authenticated_user_may_discover_and_ask_what_it_may_do() {
    let store = Store::new();
    let alice = user("alice", &[]);
    for url in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/core.navique.com/v1",
        "/version",
        "/openapi/v3",
        "/healthz",
    ] {
        assert!(store.allows(&path(&alice, url)), "{url}");
    }
    assert!(!store.allows(&path(&alice, "/metrics")));
    assert!(!store.allows(&Request {
        verb: "post",
        ..path(&alice, "/api")
    }));
    let review = Request {
        api_group: "authorization.k8s.io",
        ..request(&alice, "create", "selfsubjectaccessreviews")
    };
    assert_eq!(
        store.reason(&review),
        "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
    );
    let anonymous = UserInfo {
        username: "system:anonymous".to_owned(),
        groups: vec![UNAUTHENTICATED.to_owned()],
        ..UserInfo::default()
    };
    assert!(store.allows(&path(&anonymous, "/healthz")));
    assert!(!store.allows(&path(&anonymous, "/api")));
}

#[test]
fn a_stored_bootstrap_binding_replaces_the_implied_one() {
    let mut store = Store::new();
    store.cluster_role_bindings.push(binding(
        "",
        "system:discovery",
        "ClusterRole",
        "system:discovery",
        json!([]),
    ));
    let alice = user("alice", &[]);
    assert!(!store.allows(&path(&alice, "/apis")));
    assert!(
        store.allows(&path(&alice, "/version")),
        "system:public-info-viewer"
    );
}

#[test]
fn non_resource_urls_match_exactly_or_by_a_trailing_star() {
    let mut store = Store::new();
    store.cluster_roles.push(cluster_role_object(
        "metrics",
        json!({}),
        json!([{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]),
    ));
    store.cluster_role_bindings.push(binding(
        "",
        "alice-metrics",
        "ClusterRole",
        "metrics",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    assert!(store.allows(&path(&alice, "/metrics")));
    assert!(store.allows(&path(&alice, "/debug/pprof/heap")));
    assert!(!store.allows(&path(&alice, "/metrics/slis")));
    assert!(!store.allows(&path(&alice, "/foo")));
}

#[test]
fn forbidden_messages_read_as_kube_apiservers() {
    let alice = user("alice", &[]);
    let get = Request {
        name: "x",
        ..in_namespace(request(&alice, "get", "configmaps"), "team-a")
    };
    assert_eq!(
        forbidden_message(&get),
        "configmaps \"x\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );
    assert_eq!(
        forbidden_details(&get),
        json!({"name": "x", "kind": "configmaps"})
    );

    let list = in_namespace(request(&alice, "list", "configmaps"), "team-a");
    assert_eq!(
        forbidden_message(&list),
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );

    let cluster = request(&alice, "list", "namespaces");
    assert_eq!(
        forbidden_message(&cluster),
        "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );

    let status = Request {
        api_group: "core.navique.com",
        subresource: "status",
        name: "l1",
        ..in_namespace(request(&alice, "patch", "locks"), "team-a")
    };
    assert_eq!(
        forbidden_message(&status),
        "locks.core.navique.com \"l1\" is forbidden: User \"alice\" cannot patch resource \"locks/status\" in API group \"core.navique.com\" in the namespace \"team-a\""
    );
    assert_eq!(
        forbidden_details(&status),
        json!({"name": "l1", "group": "core.navique.com", "kind": "locks"})
    );

    let foo = path(&alice, "/foo");
    assert_eq!(
        forbidden_message(&foo),
        "forbidden: User \"alice\" cannot get path \"/foo\""
    );
    assert_eq!(forbidden_details(&foo), json!({}));
}

#[test]
fn forbidden_messages_quote_as_go_and_escape_html() {
    let odd = user("eve \"<admin>\"", &[]);
    let get = Request {
        name: "a\"b",
        ..request(&odd, "get", "nodes")
    };
    assert_eq!(
        forbidden_message(&get),
        "nodes \"a\\\"b\" is forbidden: User \"eve \\\"&lt;admin&gt;\\\"\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
    );
}

#[test]
fn an_access_review_answers_allowed_with_kubes_reason() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-a", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "alice-reads",
        "Role",
        "reader",
        user_subject("alice"),
    ));
    let spec = json!({"resourceAttributes": {"namespace": "team-a", "verb": "list", "group": "", "version": "v1", "resource": "configmaps"}});
    let alice = user("alice", &[]);
    assert_eq!(
        store.rbac().access_review_status(&spec, &alice),
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"alice-reads/team-a\" of Role \"reader\" to User \"alice\""})
    );
    let admin = user("dev-admin", &[PRIVILEGED_GROUP]);
    assert_eq!(
        store.rbac().access_review_status(&spec, &admin),
        json!({"allowed": true})
    );
    let discovery = json!({"nonResourceAttributes": {"path": "/apis", "verb": "get"}});
    assert_eq!(
        store.rbac().access_review_status(&discovery, &alice)["allowed"],
        json!(true)
    );
}

#[test]
fn an_access_review_answers_denied_without_a_reason() {
    let mut store = Store::new();
    let sar = json!({
        "resourceAttributes": {"namespace": "team-a", "verb": "delete", "resource": "configmaps", "name": "x"},
        "user": "alice",
        "groups": ["devs", "system:authenticated"],
        "uid": "u-1",
        "extra": {"scopes": ["a", "b"]},
    });
    let alice = access_review_user(&sar);
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.groups, ["devs", "system:authenticated"]);
    assert_eq!(alice.uid, "u-1");
    assert_eq!(alice.extra["scopes"], ["a", "b"]);
    assert_eq!(
        store.rbac().access_review_status(&sar, &alice),
        json!({"allowed": false})
    );
    let foo = json!({"nonResourceAttributes": {"path": "/foo", "verb": "get"}});
    assert_eq!(
        store.rbac().access_review_status(&foo, &alice),
        json!({"allowed": false})
    );

    store.cluster_role_bindings.push(binding(
        "",
        "dangling",
        "ClusterRole",
        "missing",
        json!([{"kind": "Group", "name": "devs"}]),
    ));
    assert_eq!(
        store.rbac().access_review_status(&sar, &alice),
        json!({"allowed": false, "reason": "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found"})
    );
}

#[test]
fn a_rules_review_lists_what_the_bindings_grant() {
    let mut store = Store::new();
    store
        .roles
        .push(role("team-a", "reader", configmap_reader()));
    store.role_bindings.push(binding(
        "team-a",
        "alice-reads",
        "Role",
        "reader",
        user_subject("alice"),
    ));
    let alice = user("alice", &[]);
    let status = store.rbac().rules_review_status(&alice, "team-a");
    let resource_rules = status["resourceRules"].as_array().unwrap();
    assert!(resource_rules.contains(
        &json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]})
    ));
    assert!(resource_rules.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})));
    assert!(
        status["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nonResourceURLs"]
                .as_array()
                .unwrap()
                .contains(&json!("/apis/*")))
    );
    assert_eq!(status["incomplete"], json!(false));
    assert_eq!(status.get("evaluationError"), None);
    let other = store.rbac().rules_review_status(&alice, "team-b");
    assert!(
        !other["resourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["configmaps"]))
    );
}

#[test]
fn the_bootstrap_roles_come_aggregated() {
    let roles = bootstrap_cluster_roles();
    let by_name = |name: &str| {
        roles
            .iter()
            .find(|r| str_at(r, "/metadata/name") == name)
            .unwrap()
    };
    let view = list(by_name("view"), "rules").len();
    let edit = list(by_name("edit"), "rules").len();
    let admin = list(by_name("admin"), "rules").len();
    assert!(
        0 < view && view < edit && edit < admin,
        "{view} {edit} {admin}"
    );
    assert_eq!(aggregate(&roles), vec![]);
    assert_eq!(bootstrap_cluster_role_bindings().len(), 5);
}

#[test]
fn invalid_selectors_leave_an_aggregated_role_alone() {
    let roles = vec![json!({
        "metadata": {"name": "broken"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}]},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
    })];
    assert_eq!(aggregate(&roles), vec![]);
    let store = Store {
        cluster_roles: roles,
        cluster_role_bindings: vec![binding(
            "",
            "b",
            "ClusterRole",
            "broken",
            user_subject("alice"),
        )],
        ..Store::new()
    };
    let alice = user("alice", &[]);
    assert!(
        store.allows(&request(&alice, "get", "pods")),
        "its stored rules still count"
    );
}
