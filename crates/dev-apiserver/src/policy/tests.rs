use super::*;

fn configmap(annotations: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "db", "namespace": "team-a", "annotations": annotations, "labels": labels},
        "data": {"size": "3"},
    })
}

fn delete(old: Value) -> Attributes {
    crate::attributes::testing::configmap_delete(old, false)
}

fn locked() -> Attributes {
    delete(configmap(
        json!({"core.navique.com/locked": "by alice"}),
        json!({"app": "db"}),
    ))
}

fn unlocked() -> Attributes {
    delete(configmap(json!({"note": "x"}), json!({"app": "db"})))
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["DELETE"],
            "resources": ["configmaps"],
        }]});
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn lock_policy() -> Value {
    policy(
        "navique-locks",
        json!({
            "failurePolicy": "Fail",
            "validations": [{
                "expression": "!has(oldObject.metadata.annotations) || !('core.navique.com/locked' in oldObject.metadata.annotations)",
                "reason": "Forbidden",
                "messageExpression": "'locked: ' + oldObject.metadata.annotations['core.navique.com/locked']",
            }],
        }),
    )
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn no_params(_: &str, _: &str, _: Option<&str>, _: Option<&str>, _: Option<&Value>) -> Vec<Value> {
    Vec::new()
}

fn run(policies: &[Value], bindings: &[Value], attributes: &Attributes) -> Verdict {
    let namespace = json!({"metadata": {"name": "team-a", "labels": {"env": "prod"}}});
    let ctx = PolicyContext {
        policies,
        bindings,
        namespace_object: Some(&namespace),
        reads: &object_reads(policies),
        params: &no_params,
        authorizer: None,
    };
    evaluate(&ctx, attributes)
}

fn denial(code: u16, reason: &str, message: &str) -> Option<Denial> {
    Some(Denial {
        code,
        reason: reason.into(),
        message: message.into(),
    })
}

#[test]
fn a_locked_object_cannot_be_deleted() {
    let verdict = run(
        &[lock_policy()],
        &[binding("navique-locks-binding", "navique-locks", json!({}))],
        &locked(),
    );
    let expected = "ValidatingAdmissionPolicy 'navique-locks' with binding 'navique-locks-binding' denied request: locked: by alice";
    assert_eq!(verdict.denial, denial(403, "Forbidden", expected));
    assert!(verdict.warnings.is_empty());
    assert_eq!(
        verdict.denial.unwrap().status(&locked()),
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("configmaps \"db\" is forbidden: {expected}"),
            "reason": "Forbidden",
            "details": {"name": "db", "kind": "configmaps", "causes": [{"message": expected}]},
            "code": 403,
        })
    );
}

#[test]
fn an_object_without_the_lock_annotation_can_be_deleted() {
    let verdict = run(
        &[lock_policy()],
        &[binding("navique-locks-binding", "navique-locks", json!({}))],
        &unlocked(),
    );
    assert_eq!(verdict, Verdict::default());
}

#[test]
fn a_policy_without_a_binding_does_nothing() {
    let verdict = run(
        &[lock_policy()],
        &[binding("other", "another-policy", json!({}))],
        &locked(),
    );
    assert_eq!(verdict, Verdict::default());
}

#[test]
fn a_binding_whose_namespace_selector_does_not_match_lets_the_request_through() {
    let select = |env: &str| {
        binding(
            "b",
            "navique-locks",
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": env}}}}),
        )
    };
    let verdict = run(&[lock_policy()], &[select("dev")], &locked());
    assert_eq!(verdict.denial, None);
    let verdict = run(&[lock_policy()], &[select("prod")], &locked());
    assert_eq!(verdict.denial.map(|d| d.code), Some(403));
}

#[test]
fn the_warn_action_warns_without_denying() {
    let verdict = run(
        &[lock_policy()],
        &[binding(
            "warn-binding",
            "navique-locks",
            json!({"validationActions": ["Warn"]}),
        )],
        &locked(),
    );
    assert_eq!(verdict.denial, None);
    assert_eq!(
        verdict.warnings,
        vec![
            "Validation failed for ValidatingAdmissionPolicy 'navique-locks' with binding 'warn-binding': locked: by alice"
                .to_string()
        ]
    );
}

#[test]
fn the_audit_action_records_an_annotation() {
    let verdict = run(
        &[lock_policy()],
        &[binding(
            "audit-binding",
            "navique-locks",
            json!({"validationActions": ["Audit"]}),
        )],
        &locked(),
    );
    assert_eq!(verdict.denial, None);
    assert_eq!(
        verdict.audit_annotations[VALIDATION_FAILURE_KEY],
        r#"[{"message":"locked: by alice","policy":"navique-locks","binding":"audit-binding","expressionIndex":0,"validationActions":["Audit"]}]"#
    );
}

#[test]
fn a_missing_param_with_the_deny_action_denies_with_kubes_message() {
    let p = policy(
        "limits",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "oldObject.data.size <= params.data.max"}],
        }),
    );
    let with_action = |action: Value| {
        binding(
            "limits-binding",
            "limits",
            json!({"paramRef": {"name": "limits", "parameterNotFoundAction": action}}),
        )
    };
    let verdict = run(
        std::slice::from_ref(&p),
        &[with_action(json!("Deny"))],
        &locked(),
    );
    assert_eq!(
        verdict.denial,
        denial(
            422,
            "Invalid",
            "ValidatingAdmissionPolicy 'limits' with binding 'limits-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    // Deny is the default.
    let verdict = run(
        std::slice::from_ref(&p),
        &[with_action(Value::Null)],
        &locked(),
    );
    assert_eq!(verdict.denial.map(|d| d.code), Some(422));
    let verdict = run(&[p], &[with_action(json!("Allow"))], &locked());
    assert_eq!(verdict, Verdict::default());
}

#[test]
fn params_are_looked_up_and_visible_to_validations() {
    let p = policy(
        "limits",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "int(oldObject.data.size) <= int(params.data.max)", "message": "too big"}],
        }),
    );
    let b = binding(
        "limits-binding",
        "limits",
        json!({"paramRef": {"name": "limits"}}),
    );
    let lookup = |api_version: &str,
                  kind: &str,
                  namespace: Option<&str>,
                  name: Option<&str>,
                  selector: Option<&Value>| {
        assert_eq!(
            (api_version, kind, namespace, name, selector),
            ("v1", "ConfigMap", Some("team-a"), Some("limits"), None)
        );
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"max": "2"}})]
    };
    let policies = [p];
    let ctx = PolicyContext {
        policies: &policies,
        bindings: &[b],
        namespace_object: None,
        reads: &object_reads(&policies),
        params: &lookup,
        authorizer: None,
    };
    assert_eq!(
        evaluate(&ctx, &locked()).denial,
        denial(
            422,
            "Invalid",
            "ValidatingAdmissionPolicy 'limits' with binding 'limits-binding' denied request: too big"
        )
    );
}

#[test]
fn false_match_conditions_skip_the_policy() {
    let mut p = lock_policy();
    p["spec"]["matchConditions"] =
        json!([{"name": "not-alice", "expression": "request.userInfo.username != 'alice'"}]);
    let b = binding("b", "navique-locks", json!({}));
    assert_eq!(
        run(
            std::slice::from_ref(&p),
            std::slice::from_ref(&b),
            &locked()
        ),
        Verdict::default()
    );
    p["spec"]["matchConditions"] =
        json!([{"name": "alice", "expression": "request.userInfo.username == 'alice'"}]);
    assert_eq!(run(&[p], &[b], &locked()).denial.map(|d| d.code), Some(403));
}

#[test]
fn a_runtime_error_denies_with_fail_and_is_ignored_with_ignore() {
    let failing = |failure_policy: &str| {
        policy(
            "sizes",
            json!({
                "failurePolicy": failure_policy,
                "validations": [{"expression": "oldObject.spec.size > 1"}],
            }),
        )
    };
    let b = binding("sizes-binding", "sizes", json!({}));
    assert_eq!(
        run(&[failing("Fail")], std::slice::from_ref(&b), &locked()).denial,
        denial(
            422,
            "Invalid",
            "ValidatingAdmissionPolicy 'sizes' with binding 'sizes-binding' denied request: expression 'oldObject.spec.size > 1' resulted in error: no such key: spec"
        )
    );
    assert_eq!(
        run(&[failing("Ignore")], &[b], &locked()),
        Verdict::default()
    );
}

#[test]
fn the_message_defaults_to_the_failed_expression() {
    let p = policy(
        "names",
        json!({"validations": [{"expression": " oldObject.metadata.name != 'db' "}]}),
    );
    assert_eq!(
        run(
            &[p],
            &[binding("names-binding", "names", json!({}))],
            &locked()
        )
        .denial,
        denial(
            422,
            "Invalid",
            "ValidatingAdmissionPolicy 'names' with binding 'names-binding' denied request: failed expression: oldObject.metadata.name != 'db'"
        )
    );
}

#[test]
fn validations_can_use_variables() {
    let p = policy(
        "owners",
        json!({
            "variables": [
                {"name": "owner", "expression": "oldObject.metadata.annotations['core.navique.com/locked']"},
                {"name": "isAlice", "expression": "variables.owner == 'by alice'"},
            ],
            "validations": [{
                "expression": "!variables.isAlice",
                "messageExpression": "'owned ' + variables.owner",
            }],
        }),
    );
    assert_eq!(
        run(&[p], &[binding("owners-binding", "owners", json!({}))], &locked())
            .denial
            .map(|d| d.message),
        Some(
            "ValidatingAdmissionPolicy 'owners' with binding 'owners-binding' denied request: owned by alice"
                .to_string()
        )
    );
}

#[test]
fn the_request_variable_carries_user_info_and_dry_run() {
    let p = policy(
        "who",
        json!({"validations": [{
            "expression": "false",
            "messageExpression": "request.userInfo.username + ' ' + string(request.dryRun) + ' ' + request.operation + ' ' + request.namespace + '/' + request.name + ' ' + request.resource.resource + ' ' + request.options.kind",
        }]}),
    );
    let mut attributes = locked();
    attributes.dry_run = true;
    assert_eq!(
        run(&[p], &[binding("who-binding", "who", json!({}))], &attributes)
            .denial
            .map(|d| d.message),
        Some(
            "ValidatingAdmissionPolicy 'who' with binding 'who-binding' denied request: alice true DELETE team-a/db configmaps DeleteOptions"
                .to_string()
        )
    );
}

#[test]
fn resource_rules_match_subresources_exclusions_and_old_labels() {
    let mut attributes = locked();
    let constraints = |c: Value| {
        let mut p = lock_policy();
        p["spec"]["matchConstraints"] = c;
        p
    };
    let b = binding("b", "navique-locks", json!({}));
    let rule = |resources: Value| json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": resources});
    let denied = |p: Value, a: &Attributes| run(&[p], std::slice::from_ref(&b), a).denial.is_some();

    assert!(denied(
        constraints(json!({"resourceRules": [rule(json!(["*"]))]})),
        &attributes
    ));
    assert!(!denied(
        constraints(
            json!({"resourceRules": [rule(json!(["*"]))], "excludeResourceRules": [rule(json!(["configmaps"]))]})
        ),
        &attributes
    ));
    assert!(denied(
        constraints(
            json!({"resourceRules": [rule(json!(["*"]))], "objectSelector": {"matchLabels": {"app": "db"}}})
        ),
        &attributes
    ));
    assert!(!denied(
        constraints(
            json!({"resourceRules": [rule(json!(["*"]))], "objectSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}})
        ),
        &attributes
    ));
    attributes.sub_resource = "status".into();
    assert!(!denied(
        constraints(json!({"resourceRules": [rule(json!(["configmaps"]))]})),
        &attributes
    ));
    assert!(denied(
        constraints(json!({"resourceRules": [rule(json!(["configmaps/status"]))]})),
        &attributes
    ));
    assert!(denied(
        constraints(json!({"resourceRules": [rule(json!(["*/*"]))]})),
        &attributes
    ));
}

/// A policy that denies deletes in a namespace whose Namespace carries
/// `core.navique.com/namespace-locked`, read from `namespaceObject`, as the
/// chart's namespace-wide Lock guard does.
fn namespace_lock_policy() -> Value {
    policy(
        "namespace-locks",
        json!({
            "failurePolicy": "Fail",
            "variables": [{
                "name": "locked",
                "expression": "namespaceObject == null ? 'no namespace' : has(namespaceObject.metadata.annotations) && 'core.navique.com/namespace-locked' in namespaceObject.metadata.annotations ? namespaceObject.metadata.annotations['core.navique.com/namespace-locked'] : ''",
            }],
            "validations": [{
                "expression": "variables.locked == ''",
                "reason": "Forbidden",
                "messageExpression": "'locked by ' + variables.locked",
            }],
        }),
    )
}

fn run_in(namespace: Option<&Value>, attributes: &Attributes) -> Verdict {
    let mut policy = namespace_lock_policy();
    // Every kind the tests send: ConfigMaps, Namespaces, CRDs.
    policy["spec"]["matchConstraints"]["resourceRules"] = json!([{
        "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*"],
    }]);
    let policies = [policy];
    let ctx = PolicyContext {
        policies: &policies,
        bindings: &[binding("b", "namespace-locks", json!({}))],
        namespace_object: namespace,
        reads: &object_reads(&policies),
        params: &no_params,
        authorizer: None,
    };
    evaluate(&ctx, attributes)
}

#[test]
fn namespace_object_carries_the_namespace_annotations() {
    let stamped = json!({"metadata": {
        "name": "team-a",
        "annotations": {"core.navique.com/namespace-locked": "freeze"},
        "managedFields": [{"manager": "lock-controller"}],
    }});
    assert_eq!(
        run_in(Some(&stamped), &unlocked()).denial,
        denial(
            403,
            "Forbidden",
            "ValidatingAdmissionPolicy 'namespace-locks' with binding 'b' denied request: locked by freeze"
        )
    );
    let plain = json!({"metadata": {"name": "team-a", "labels": {"env": "prod"}}});
    assert_eq!(run_in(Some(&plain), &unlocked()), Verdict::default());
}

#[test]
fn namespace_object_keeps_only_what_kube_apiserver_keeps() {
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-a",
            "annotations": {"a": "b"},
            "managedFields": [{"manager": "x"}],
            "ownerReferences": [{"name": "y"}],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    assert_eq!(
        cel_namespace(&unlocked(), Some(&namespace)),
        Some(json!({
            "metadata": {"name": "team-a", "annotations": {"a": "b"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }))
    );
}

#[test]
fn namespace_object_is_null_for_namespaces_and_cluster_scoped_objects() {
    // kube-apiserver: "The value is null for cluster-scoped resources", a
    // Namespace included (its request has no namespace).
    let stamped = json!({"metadata": {
        "name": "team-a",
        "annotations": {"core.navique.com/namespace-locked": "freeze"},
    }});
    let mut namespace_delete = unlocked();
    namespace_delete.kind.name = "Namespace".into();
    namespace_delete.resource.name = "namespaces".into();
    namespace_delete.name = "team-a".into();
    namespace_delete.namespace = String::new();
    let mut crd_delete = unlocked();
    crd_delete.kind = crate::attributes::GroupVersion {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        name: "CustomResourceDefinition".into(),
    };
    crd_delete.namespace = String::new();
    for attributes in [&namespace_delete, &crd_delete] {
        assert_eq!(cel_namespace(attributes, Some(&stamped)), None);
        assert_eq!(
            run_in(Some(&stamped), attributes).denial,
            denial(
                403,
                "Forbidden",
                "ValidatingAdmissionPolicy 'namespace-locks' with binding 'b' denied request: locked by no namespace"
            )
        );
    }
    // Even a Namespace request that names a namespace (kube-apiserver sets
    // none for Namespaces) sees null.
    namespace_delete.namespace = "team-a".into();
    assert_eq!(cel_namespace(&namespace_delete, Some(&stamped)), None);
}

#[test]
fn a_variable_compared_with_null_only_is_null_exactly_when_it_would_be() {
    // Nothing of them is read, so they are not built; whether they are
    // null must still be what the whole values would give.
    let policies = [policy(
        "nulls",
        json!({
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*"],
            }]},
            "validations": [{
                "expression": "namespaceObject == null && request != null",
                "messageExpression": "'namespaceObject is ' + (namespaceObject == null ? 'null' : 'set')",
            }],
        }),
    )];
    let reads = object_reads(&policies);
    assert!(reads.namespace_object.is_nothing() && reads.request.is_nothing());
    let verdict = |namespace: Option<&Value>, attributes: &Attributes| {
        let ctx = PolicyContext {
            policies: &policies,
            bindings: &[binding("b", "nulls", json!({}))],
            namespace_object: namespace,
            reads: &reads,
            params: &no_params,
            authorizer: None,
        };
        evaluate(&ctx, attributes).denial.map(|d| d.message)
    };
    let namespace = json!({"metadata": {"name": "team-a"}});
    let set = Some(
        "ValidatingAdmissionPolicy 'nulls' with binding 'b' denied request: namespaceObject is set"
            .to_owned(),
    );
    assert_eq!(verdict(Some(&namespace), &unlocked()), set);
    assert_eq!(verdict(None, &unlocked()), None);
    let mut cluster_scoped = unlocked();
    cluster_scoped.namespace = String::new();
    assert_eq!(verdict(Some(&namespace), &cluster_scoped), None);
}

#[test]
fn the_authorizer_answers_custom_verbs_for_the_requests_user() {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let authorizer: crate::authorizer::Authorize = std::sync::Arc::new(move |check| {
        seen.lock().unwrap().push(check.clone());
        crate::authorizer::Verdict {
            allowed: check.verb == "suspend" && check.name == "db",
            reason: "RBAC: allowed by RoleBinding \"x\"".into(),
        }
    });
    let p = policy(
        "suspend-needs-verb",
        json!({"validations": [{
            "expression": "authorizer.group('core.navique.com').resource('locks').namespace(oldObject.metadata.namespace).name(oldObject.metadata.name).check('suspend').allowed() && !authorizer.path('/healthz').check('get').allowed()",
            "messageExpression": "authorizer.group('').resource('configmaps').name('other').check('suspend').reason()",
        }]}),
    );
    let b = binding("b", "suspend-needs-verb", json!({}));
    let run_with = |authorizer| {
        evaluate(
            &PolicyContext {
                policies: std::slice::from_ref(&p),
                bindings: std::slice::from_ref(&b),
                namespace_object: None,
                reads: &object_reads(std::slice::from_ref(&p)),
                params: &no_params,
                authorizer,
            },
            &locked(),
        )
    };
    assert_eq!(run_with(Some(authorizer)), Verdict::default());
    let checks = asked.lock().unwrap().clone();
    assert_eq!(
        checks[0],
        crate::authorizer::Check {
            verb: "suspend".into(),
            group: Some("core.navique.com".into()),
            resource: "locks".into(),
            namespace: "team-a".into(),
            name: "db".into(),
            ..Default::default()
        }
    );
    assert_eq!(checks[1].group, None);
    assert_eq!(checks[1].path, "/healthz");
    // Without an authorizer the expression fails, and Fail denies.
    assert!(run_with(None).denial.is_some());
}

#[test]
fn variables_are_not_evaluated_for_a_request_the_match_conditions_skip() {
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    let authorizer: crate::authorizer::Authorize = std::sync::Arc::new(move |_| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        crate::authorizer::Verdict {
            allowed: false,
            reason: String::new(),
        }
    });
    let spec = |condition: &str| {
        json!({
            "matchConditions": [{"name": "only", "expression": condition}],
            "variables": [{"name": "may", "expression": "authorizer.group('').resource('configmaps').check('get').allowed()"}],
            "validations": [{"expression": "variables.may"}],
        })
    };
    let run_with = |condition: &str| {
        let p = policy("p", spec(condition));
        let b = binding("b", "p", json!({}));
        evaluate(
            &PolicyContext {
                policies: std::slice::from_ref(&p),
                bindings: std::slice::from_ref(&b),
                namespace_object: None,
                reads: &object_reads(std::slice::from_ref(&p)),
                params: &no_params,
                authorizer: Some(authorizer.clone()),
            },
            &locked(),
        )
    };
    let count = || asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(run_with("false"), Verdict::default());
    assert_eq!(count(), 0, "a skipped request asks nothing");
    assert!(run_with("true").denial.is_some());
    assert_eq!(count(), 1);
    // A condition reading a variable sees it, as before.
    assert!(run_with("variables.may == false").denial.is_some());
    assert_eq!(count(), 2);
}
