//! The Helm chart (charts/navique) with the pinned helm: it lints without
//! warnings and renders for its defaults, every TLS mode and Lock guard
//! setting; each component gets exactly the RBAC its code uses; mistyped
//! values fail with a message naming them; the Deployments are hardened,
//! probed on the admin server, and pass flags their binaries accept.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use navique_e2e::locks::helm_template;
use navique_e2e::{binary, repo_root};
use serde_yaml::Value;

/// The TLS settings the chart supports: webhook serving certificates and
/// internal gRPC (selfManaged by default, certManager, existingSecret,
/// disabled).
const TLS_MODES: [&[&str]; 4] = [
    &[],
    &[
        "--set",
        "webhook.tls.mode=certManager,grpc.tls.mode=certManager",
    ],
    &[
        "--set",
        "webhook.tls.mode=existingSecret,webhook.caBundle=QUJD,grpc.tls.mode=existingSecret",
    ],
    &[
        "--set",
        "webhook.tls.mode=selfManaged,grpc.tls.mode=disabled",
    ],
];

/// The objects `helm template <release>` renders into `namespace` with `args`.
fn render_release(release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    let output = helm(
        &[
            &["template", release, "charts/navique", "-n", namespace],
            args,
        ]
        .concat(),
    );
    assert!(
        output.status.success(),
        "helm template {release} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .split("\n---\n")
        .map(|document| serde_yaml::from_str::<Value>(document).expect("rendered YAML"))
        .filter(|object| !object.is_null())
        .collect()
}

/// helm with `args`, isolated from the user's helm settings and clusters.
fn helm(args: &[&str]) -> Output {
    let helm = repo_root().join(".tools/bin/helm");
    assert!(
        helm.exists(),
        "{} is missing: run scripts/tools.sh (make test does)",
        helm.display()
    );
    let home = std::env::temp_dir().join("navique-e2e-chart-helm");
    Command::new(helm)
        .args(args)
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .current_dir(repo_root())
        .output()
        .expect("run helm")
}

/// The objects `helm template` renders with `args`.
fn render(args: &[&str]) -> Vec<Value> {
    helm_template(args)
        .split("\n---\n")
        .map(|document| serde_yaml::from_str::<Value>(document).expect("rendered YAML"))
        .filter(|object| !object.is_null())
        .collect()
}

/// `helm template` of the chart, as [`assert_fails`] runs it.
const TEMPLATE: &[&str] = &["template", "navique", "charts/navique"];

/// Asserts that `helm <command> --set <value>` fails, saying `message`.
fn assert_fails(command: &[&str], value: &str, message: &str) {
    let output = helm(&[command, &["--set", value]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "{command:?} --set {value} succeeded"
    );
    assert!(
        stderr.contains(message),
        "{command:?} --set {value}:\n{stderr}"
    );
}

fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| kind_of(o) == kind).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind_of(o) == kind && name_of(o) == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// One RBAC rule: API groups, resources, resource names, verbs.
type Rule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

fn rules_of(role: &Value) -> Vec<Rule> {
    role["rules"]
        .as_sequence()
        .expect("rules")
        .iter()
        .map(|rule| {
            (
                strings(&rule["apiGroups"]),
                strings(&rule["resources"]),
                strings(&rule["resourceNames"]),
                strings(&rule["verbs"]),
            )
        })
        .collect()
}

fn rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Rule {
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    (owned(groups), owned(resources), owned(names), owned(verbs))
}

/// The (Cluster)Roles bound to the ServiceAccount `account`, as
/// `<kind>/<name>`.
fn roles_bound_to(objects: &[Value], account: &str) -> BTreeSet<String> {
    objects
        .iter()
        .filter(|o| matches!(kind_of(o), "ClusterRoleBinding" | "RoleBinding"))
        .filter(|binding| {
            binding["subjects"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"].as_str() == Some(account))
        })
        .map(|binding| {
            format!(
                "{}/{}",
                binding["roleRef"]["kind"].as_str().unwrap(),
                binding["roleRef"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn deployment_container<'a>(objects: &'a [Value], component: &str) -> &'a Value {
    &find(objects, "Deployment", &format!("navique-{component}"))["spec"]["template"]["spec"]["containers"]
        [0]
}

fn args_of(objects: &[Value], component: &str) -> Vec<String> {
    strings(&deployment_container(objects, component)["args"])
}

#[test]
fn the_chart_lints_without_warnings_for_every_tls_mode() {
    let guard_webhook: &[&str] = &["--set", "lockGuard.mode=webhook"];
    for args in TLS_MODES.iter().chain([&guard_webhook]) {
        let output = helm(&[&["lint", "--strict", "charts/navique"], *args].concat());
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "helm lint {args:?}:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"),
            "helm lint {args:?}:\n{stdout}"
        );
    }
}

#[test]
fn every_tls_mode_renders_its_certificates_and_ca_bundles() {
    let configurations = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| kind_of(o).ends_with("WebhookConfiguration"))
            .cloned()
            .collect()
    };

    // selfManaged (the default): no Certificate; the webhook creates its
    // Secret through the API, serves from memory and keeps the bundles
    // current, so nothing is mounted.
    let objects = render(&[]);
    assert!(of_kind(&objects, "Certificate").is_empty());
    let webhook = find(&objects, "Deployment", "navique-webhook");
    let volumes = &webhook["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_sequence()
            .into_iter()
            .flatten()
            .all(|v| v["name"] != "tls"),
        "selfManaged serves from memory"
    );
    assert!(
        !args_of(&objects, "webhook")
            .iter()
            .any(|a| a.starts_with("--tls-")),
        "{:?}",
        args_of(&objects, "webhook")
    );
    let env = &deployment_container(&objects, "webhook")["env"];
    let variable = |name: &str| {
        env.as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        variable("NAVIQUE_WEBHOOK_TLS_SECRET"),
        "navique-webhook-tls"
    );
    assert_eq!(
        variable("NAVIQUE_WEBHOOK_CA_BUNDLE_CONFIGURATIONS"),
        "validatingwebhookconfigurations/navique-services,mutatingwebhookconfigurations/navique-services-defaults,mutatingwebhookconfigurations/navique-lock-finalizer"
    );
    assert!(
        variable("NAVIQUE_WEBHOOK_TLS_DNS_NAMES")
            .split(',')
            .any(|n| n == "navique-webhook.navique-system.svc")
    );
    for configuration in configurations(&objects) {
        assert!(configuration["metadata"]["annotations"].is_null());
        for hook in configuration["webhooks"].as_sequence().unwrap() {
            assert!(hook["clientConfig"]["caBundle"].is_null());
        }
    }
    // gRPC is self-managed mutual TLS: each component issues itself a
    // certificate from the CA Secret, for the names it is dialled at;
    // nothing is mounted, nothing is plaintext.
    let controller = args_of(&objects, "service-lifecycle-controller");
    let runner = args_of(&objects, "backup-runner");
    for flag in [
        "--backup-runner-url=https://navique-backup-runner.navique-system.svc:9090",
        "--grpc-ca-secret=navique-system/navique-grpc-ca",
        "--grpc-dns-names=navique-approvals,navique-approvals.navique-system,navique-approvals.navique-system.svc,navique-approvals.navique-system.svc.cluster.local",
        "--grpc-cert-validity-days=30",
    ] {
        assert!(
            controller.contains(&flag.to_owned()),
            "{flag}: {controller:?}"
        );
    }
    for flag in [
        "--grpc-ca-secret=navique-system/navique-grpc-ca",
        "--grpc-dns-names=navique-backup-runner,navique-backup-runner.navique-system,navique-backup-runner.navique-system.svc,navique-backup-runner.navique-system.svc.cluster.local",
    ] {
        assert!(runner.contains(&flag.to_owned()), "{flag}: {runner:?}");
    }
    for args in [&controller, &runner] {
        assert!(
            !args
                .iter()
                .any(|a| a.starts_with("--grpc-tls-") || a == "--grpc-insecure-plaintext"),
            "{args:?}"
        );
    }
    find(&objects, "NetworkPolicy", "navique-backup-runner");

    // certManager: the chart's CA, the Certificates, CA injection.
    let objects = render(TLS_MODES[1]);
    for name in [
        "navique-ca",
        "navique-webhook",
        "navique-backup-runner",
        "navique-service-lifecycle-controller",
    ] {
        find(&objects, "Certificate", name);
    }
    assert_eq!(
        find(&objects, "Certificate", "navique-webhook")["spec"]["secretName"],
        "navique-webhook-tls"
    );
    for configuration in configurations(&objects) {
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "navique-system/navique-webhook",
            "{}",
            name_of(&configuration)
        );
    }
    assert!(
        of_kind(&objects, "Role")
            .iter()
            .all(|r| name_of(r) != "navique-webhook-tls"),
        "the webhook writes no Secret when cert-manager issues it"
    );
    // Each gRPC Certificate carries its component's identity as a URI SAN
    // and is both a server and a client certificate.
    for (name, identity) in [
        ("navique-backup-runner", "backup-runner"),
        (
            "navique-service-lifecycle-controller",
            "service-lifecycle-controller",
        ),
    ] {
        let spec = &find(&objects, "Certificate", name)["spec"];
        assert_eq!(
            strings(&spec["uris"]),
            [format!("spiffe://navique/component/{identity}")]
        );
        assert_eq!(strings(&spec["usages"]), ["server auth", "client auth"]);
    }
    assert!(
        strings(
            &find(
                &objects,
                "Certificate",
                "navique-service-lifecycle-controller"
            )["spec"]["dnsNames"]
        )
        .contains(&"navique-approvals.navique-system.svc".to_owned())
    );
    assert!(
        of_kind(&objects, "Role")
            .iter()
            .all(|r| !name_of(r).ends_with("grpc-ca")),
        "no component reads a CA Secret when cert-manager issues"
    );
    let grpc_files = [
        "--grpc-tls-cert-file=/etc/navique/grpc-tls/tls.crt",
        "--grpc-tls-key-file=/etc/navique/grpc-tls/tls.key",
        "--grpc-tls-ca-file=/etc/navique/grpc-tls/ca.crt",
    ];
    let controller = args_of(&objects, "service-lifecycle-controller");
    let runner = args_of(&objects, "backup-runner");
    for flag in grpc_files
        .iter()
        .chain(&["--backup-runner-url=https://navique-backup-runner.navique-system.svc:9090"])
    {
        assert!(
            controller.contains(&(*flag).to_owned()),
            "{flag}: {controller:?}"
        );
    }
    for flag in grpc_files {
        assert!(runner.contains(&flag.to_owned()), "{flag}: {runner:?}");
    }

    // existingSecret: no Certificate, the given bundle in every webhook,
    // the gRPC Secrets mounted.
    let objects = render(TLS_MODES[2]);
    assert!(of_kind(&objects, "Certificate").is_empty());
    assert!(args_of(&objects, "backup-runner").contains(&grpc_files[0].to_owned()));
    for configuration in configurations(&objects) {
        for hook in configuration["webhooks"].as_sequence().unwrap() {
            assert_eq!(hook["clientConfig"]["caBundle"], "QUJD");
        }
    }
    // ...and it is required.
    assert_fails(
        TEMPLATE,
        "webhook.tls.mode=existingSecret",
        "webhook.caBundle is required when webhook.tls.mode is existingSecret",
    );

    // disabled: plaintext only because it is asked for, in both components.
    let objects = render(TLS_MODES[3]);
    assert!(args_of(&objects, "service-lifecycle-controller").contains(
        &"--backup-runner-url=http://navique-backup-runner.navique-system.svc:9090".to_owned()
    ));
    for component in ["service-lifecycle-controller", "backup-runner"] {
        assert!(
            args_of(&objects, component).contains(&"--grpc-insecure-plaintext".to_owned()),
            "{component}"
        );
    }
    assert_fails(
        TEMPLATE,
        "grpc.tls.selfManaged.renewBeforeDays=30",
        "grpc.tls.selfManaged.renewBeforeDays (30) must be less than certificateValidityDays (30)",
    );
}

#[test]
fn the_lock_guard_renders_as_policies_as_a_webhook_or_not_at_all() {
    let policies = |objects: &[Value]| {
        let lock = |o: &&&Value| name_of(o).starts_with("navique-lock");
        of_kind(objects, "ValidatingAdmissionPolicy")
            .iter()
            .filter(lock)
            .count()
            + of_kind(objects, "ValidatingAdmissionPolicyBinding")
                .iter()
                .filter(lock)
                .count()
    };
    let guard_webhook = |objects: &[Value]| {
        objects.iter().any(|o| {
            kind_of(o) == "ValidatingWebhookConfiguration" && name_of(o) == "navique-lock-guard"
        })
    };

    let objects = render(&[]);
    // Four guards (delete, CRDs, namespaces, marker), the namespace-wide
    // marker guard, the Lock target warning and the break-glass rule, each
    // with its binding.
    assert_eq!(policies(&objects), 14);
    let suspension = find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "navique-lock-suspension",
    );
    assert_eq!(
        suspension["spec"]["validationActions"][0].as_str(),
        Some("Deny")
    );
    let namespace_wide = |objects: &[Value]| {
        of_kind(objects, "ValidatingAdmissionPolicy")
            .iter()
            .any(|o| name_of(o) == "navique-lock-guard-namespace-wide")
    };
    assert!(!namespace_wide(&objects), "namespace-wide Locks are opt-in");
    assert!(!args_of(&objects, "lock-controller").contains(&"--namespace-locks=true".to_owned()));
    assert!(args_of(&objects, "webhook").contains(&"--namespace-locks=false".to_owned()));

    // The opt-in adds the namespace-wide delete guard and tells both
    // components.
    let opted_in = render(&["--set", "lockGuard.namespaceLocks=true"]);
    assert_eq!(policies(&opted_in), 16);
    assert!(namespace_wide(&opted_in));
    assert!(args_of(&opted_in, "lock-controller").contains(&"--namespace-locks=true".to_owned()));
    assert!(args_of(&opted_in, "webhook").contains(&"--namespace-locks=true".to_owned()));
    let warning = find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "navique-lock-target",
    );
    assert_eq!(
        warning["spec"]["validationActions"][0].as_str(),
        Some("Warn")
    );
    assert!(!guard_webhook(&objects));

    let objects = render(&["--set", "lockGuard.enabled=false"]);
    assert_eq!(
        policies(&objects),
        0,
        "lockGuard.enabled=false renders no policy"
    );
    assert!(!guard_webhook(&objects));

    let objects = render(&["--set", "lockGuard.mode=webhook"]);
    assert_eq!(policies(&objects), 0);
    assert!(guard_webhook(&objects));
    find(
        &objects,
        "ValidatingWebhookConfiguration",
        "navique-lock-suspension",
    );
    // The self-managed CA keeps the guard's bundles current too.
    let webhook = rules_of(find(&objects, "ClusterRole", "navique-webhook"));
    assert!(webhook.contains(&rule(
        &["admissionregistration.k8s.io"],
        &["validatingwebhookconfigurations"],
        &[
            "navique-services",
            "navique-lock-guard",
            "navique-lock-suspension"
        ],
        &["get", "patch"],
    )));
    // Break-glass: whether a suspender holds the suspend verb.
    assert!(webhook.contains(&rule(
        &["authorization.k8s.io"],
        &["subjectaccessreviews"],
        &[],
        &["create"],
    )));
}

/// Who approved is checked at admission unless turned off.
#[test]
fn the_approval_identity_policy_renders_unless_turned_off() {
    let named = |objects: &[Value], kind: &str| {
        objects
            .iter()
            .any(|o| kind_of(o) == kind && name_of(o) == "navique-approval-identity")
    };
    let objects = render(&[]);
    assert!(named(&objects, "ValidatingAdmissionPolicy"));
    let binding = find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "navique-approval-identity",
    );
    assert_eq!(
        binding["spec"]["validationActions"][0].as_str(),
        Some("Deny")
    );
    let objects = render(&["--set", "approvalIdentity.enabled=false"]);
    assert!(!named(&objects, "ValidatingAdmissionPolicy"));
    assert!(!named(&objects, "ValidatingAdmissionPolicyBinding"));
}

#[test]
fn webhook_configurations_exclude_the_release_namespace() {
    let objects = render(&["--set", "lockGuard.mode=webhook"]);
    let mut hooks = 0;
    for configuration in objects
        .iter()
        .filter(|o| kind_of(o).ends_with("WebhookConfiguration"))
    {
        for hook in configuration["webhooks"].as_sequence().unwrap() {
            hooks += 1;
            let expression = &hook["namespaceSelector"]["matchExpressions"][0];
            assert_eq!(expression["key"], "kubernetes.io/metadata.name");
            assert_eq!(expression["operator"], "NotIn");
            assert_eq!(strings(&expression["values"]), ["navique-system"]);
            if hook["name"] == "finalizer.locks.navique.com" {
                // Nothing relies on it: the lock-controller adds the
                // finalizer itself to a Lock stored without it.
                assert_eq!(
                    hook["failurePolicy"], "Ignore",
                    "an optimisation fails open"
                );
                assert_eq!(hook["timeoutSeconds"], 2);
            } else {
                assert_eq!(
                    hook["failurePolicy"], "Fail",
                    "protection rules fail closed"
                );
            }
            assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        }
    }
    assert_eq!(hooks, 6);
}

#[test]
fn each_component_is_granted_exactly_what_it_uses() {
    let objects = render(&[]);
    let leases = |component: &str| {
        vec![
            rule(&["coordination.k8s.io"], &["leases"], &[], &["create"]),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &[component],
                &["get", "list", "watch", "patch"],
            ),
        ]
    };
    let bound = |account: &str, roles: &[&str]| {
        assert_eq!(
            roles_bound_to(&objects, account),
            roles
                .iter()
                .map(|r| (*r).to_owned())
                .collect::<BTreeSet<_>>(),
            "{account}"
        );
    };

    bound(
        "navique-lock-controller",
        &[
            "ClusterRole/navique-lock-controller",
            "Role/navique-lock-controller-leader-election",
        ],
    );
    let watch_patch = ["get", "list", "watch", "patch"];
    assert_eq!(
        rules_of(find(&objects, "ClusterRole", "navique-lock-controller")),
        [
            rule(
                &["core.navique.com"],
                &["locks"],
                &[],
                &["list", "watch", "patch"]
            ),
            rule(&["core.navique.com"], &["locks/status"], &[], &["patch"]),
            rule(&["core.navique.com"], &["stacks"], &[], &watch_patch),
            rule(
                &["services.kube-dc.com"],
                &[
                    "managedservices",
                    "servicebackups",
                    "servicebindings",
                    "servicecredentialpolicies",
                ],
                &[],
                &watch_patch,
            ),
            rule(
                &[""],
                &["namespaces"],
                &[],
                &["get", "list", "watch", "patch"]
            ),
            rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &[],
                &["list", "watch", "patch"],
            ),
            rule(&["events.k8s.io"], &["events"], &[], &["create", "patch"]),
        ]
    );
    assert_eq!(
        rules_of(find(
            &objects,
            "Role",
            "navique-lock-controller-leader-election"
        )),
        leases("lock-controller")
    );

    bound(
        "navique-webhook",
        &["ClusterRole/navique-webhook", "Role/navique-webhook-tls"],
    );
    assert_eq!(
        rules_of(find(&objects, "ClusterRole", "navique-webhook")),
        [
            rule(&[""], &["namespaces"], &[], &["list", "watch"]),
            rule(
                &["services.kube-dc.com"],
                &["serviceplans"],
                &[],
                &["list", "watch"]
            ),
            rule(
                &["admissionregistration.k8s.io"],
                &["validatingwebhookconfigurations"],
                &["navique-services"],
                &["get", "patch"],
            ),
            rule(
                &["admissionregistration.k8s.io"],
                &["mutatingwebhookconfigurations"],
                &["navique-services-defaults", "navique-lock-finalizer"],
                &["get", "patch"],
            ),
        ]
    );
    assert_eq!(
        rules_of(find(&objects, "Role", "navique-webhook-tls")),
        [
            rule(&[""], &["secrets"], &[], &["create"]),
            rule(
                &[""],
                &["secrets"],
                &["navique-webhook-tls"],
                &["get", "patch"]
            ),
        ]
    );

    // selfManaged gRPC TLS: the two gRPC components, and only they, may
    // create the CA Secret and read and rotate it, and no other Secret of
    // the release namespace by name.
    let grpc_ca = [
        rule(&[""], &["secrets"], &[], &["create"]),
        rule(&[""], &["secrets"], &["navique-grpc-ca"], &["get", "patch"]),
    ];
    for component in ["service-lifecycle-controller", "backup-runner"] {
        assert_eq!(
            rules_of(find(
                &objects,
                "Role",
                &format!("navique-{component}-grpc-ca")
            )),
            grpc_ca,
            "{component}"
        );
    }
    assert_eq!(
        of_kind(&objects, "Role")
            .iter()
            .filter(|r| name_of(r).ends_with("grpc-ca"))
            .count(),
        2
    );

    bound(
        "navique-service-lifecycle-controller",
        &[
            "ClusterRole/navique-service-lifecycle-controller",
            "Role/navique-service-lifecycle-controller-grpc-ca",
            "Role/navique-service-lifecycle-controller-leader-election",
        ],
    );
    let services = "services.kube-dc.com";
    assert_eq!(
        rules_of(find(
            &objects,
            "ClusterRole",
            "navique-service-lifecycle-controller"
        )),
        [
            rule(&[services], &["managedservices"], &[], &watch_patch),
            rule(
                &[services],
                &["servicebindings", "servicecredentialpolicies"],
                &[],
                &["list", "watch"],
            ),
            rule(
                &[services],
                &[
                    "managedservices/status",
                    "servicebindings/status",
                    "servicecredentialpolicies/status",
                ],
                &[],
                &["patch"],
            ),
            rule(&[services], &["servicebackups"], &[], &["get", "create"]),
            rule(&[services], &["serviceclasses"], &[], &["get"]),
            rule(
                &[services],
                &["serviceplans"],
                &[],
                &["get", "list", "watch"]
            ),
            rule(&[services], &["serviceplans/status"], &[], &["patch"]),
            rule(
                &[""],
                &["secrets"],
                &[],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
            rule(
                &[""],
                &["services"],
                &[],
                &["get", "list", "watch", "create", "patch"],
            ),
            rule(
                &["apps"],
                &["statefulsets"],
                &[],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
            rule(
                &[""],
                &["persistentvolumeclaims"],
                &[],
                &["list", "patch", "delete"],
            ),
            rule(&[""], &["namespaces"], &[], &["get"]),
            rule(
                &["core.navique.com"],
                &["stacks"],
                &[],
                &["list", "watch", "patch"]
            ),
            rule(&["core.navique.com"], &["stacks/status"], &[], &["patch"]),
            rule(&["events.k8s.io"], &["events"], &[], &["create", "patch"]),
            // ApprovalEvents: the caller's TokenReview and SubjectAccessReviews.
            rule(
                &["authentication.k8s.io"],
                &["tokenreviews"],
                &[],
                &["create"]
            ),
            rule(
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
                &[],
                &["create"]
            ),
            // Stacks act as a ServiceAccount of their namespace: no rule
            // on any kind a Stack manages (privileged deputy).
            rule(&[""], &["serviceaccounts"], &[], &["impersonate"]),
        ]
    );
    assert_eq!(
        rules_of(find(
            &objects,
            "Role",
            "navique-service-lifecycle-controller-leader-election"
        )),
        leases("service-lifecycle-controller")
    );

    bound(
        "navique-backup-runner",
        &[
            "ClusterRole/navique-backup-runner",
            "Role/navique-backup-runner-grpc-ca",
        ],
    );
    assert_eq!(
        rules_of(find(&objects, "ClusterRole", "navique-backup-runner")),
        [
            rule(&[services], &["managedservices"], &[], &["get"]),
            rule(
                &[services],
                &["servicebackups"],
                &[],
                &["get", "list", "watch", "delete"],
            ),
            rule(&[services], &["servicebackups/status"], &[], &["patch"]),
            rule(&[services], &["serviceclasses"], &[], &["get"]),
            rule(&[""], &["secrets"], &[], &["get"]),
            rule(&[""], &["namespaces"], &[], &["get"]),
            rule(&["events.k8s.io"], &["events"], &[], &["create", "patch"]),
        ]
    );

    // Without leader election the controllers get no Role at all; a group
    // whose CRDs the chart does not ship is watched as a whole.
    let objects = render(&[
        "--set",
        "leaderElection.enabled=false",
        "--set",
        "lockGuard.groups={core.navique.com,example.com}",
    ]);
    assert!(
        of_kind(&objects, "Role")
            .iter()
            .all(|r| !name_of(r).ends_with("leader-election"))
    );
    assert!(
        rules_of(find(&objects, "ClusterRole", "navique-lock-controller")).contains(&rule(
            &["example.com"],
            &["*"],
            &[],
            &watch_patch
        ))
    );
    assert!(
        args_of(&objects, "lock-controller")
            .contains(&"--enforceable-groups=core.navique.com,example.com".to_owned())
    );
}

/// Break-glass: the chart's limit is the lock-controller's.
#[test]
fn the_suspension_limit_reaches_the_lock_controller() {
    let args = |set: &[&str]| args_of(&render(set), "lock-controller");
    assert!(args(&[]).contains(&"--max-suspension=1h".to_owned()));
    assert!(
        args(&["--set", "lockGuard.maxSuspension=20m"])
            .contains(&"--max-suspension=20m".to_owned())
    );
}

#[test]
fn mistyped_values_fail_naming_the_value() {
    for (value, message) in [
        (
            "lockGuard.enabled=yes",
            "at '/lockGuard/enabled': got string, want boolean",
        ),
        (
            "lockGuard.mode=bogus",
            "at '/lockGuard/mode': value must be one of 'policy', 'webhook'",
        ),
        (
            "webhook.tls.mode=selfSigned",
            "at '/webhook/tls/mode': value must be one of",
        ),
        (
            "webhook.failurePolicy=fail",
            "at '/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'",
        ),
        (
            "lockController.replica=3",
            "at '/lockController': additional properties 'replica' not allowed",
        ),
        (
            "podAntiAffinity=preferred",
            "at '/podAntiAffinity': value must be one of 'soft', 'hard', 'none'",
        ),
        (
            "webhook.extraArgs[0]=debug",
            "at '/webhook/extraArgs/0': 'debug' does not match pattern",
        ),
        ("crds.keep=yes", "at '/crds/keep': got string, want boolean"),
        (
            "lockGuard.maxSuspension=1 hour",
            "at '/lockGuard/maxSuspension': '1 hour' does not match pattern",
        ),
        (
            "namespaceOverride=Other",
            "at '/namespaceOverride': 'Other' does not match pattern",
        ),
        (
            "image.registry=ghcr.io/a b",
            "at '/image/registry': 'ghcr.io/a b' does not match pattern",
        ),
        (
            "commonLabels.team=a b",
            "at '/commonLabels/team': 'a b' does not match pattern",
        ),
    ] {
        assert_fails(TEMPLATE, value, message);
        assert_fails(
            &["install", "navique", "charts/navique", "--dry-run=client"],
            value,
            message,
        );
    }
}

#[test]
fn a_service_monitor_is_rendered_only_when_enabled() {
    assert!(of_kind(&render(&[]), "ServiceMonitor").is_empty());
    let objects = render(&["--set", "metrics.serviceMonitor.enabled=true"]);
    let monitor = find(&objects, "ServiceMonitor", "navique");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    // Each component has a metrics Service with that port.
    for component in navique_e2e::COMPONENTS {
        let service = find(&objects, "Service", &format!("navique-{component}-metrics"));
        assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
        assert_eq!(
            service["spec"]["selector"]["app.kubernetes.io/component"],
            component
        );
    }
}

#[test]
fn deployments_are_hardened_and_probed_on_the_admin_server() {
    let objects = render(&[]);
    assert_eq!(of_kind(&objects, "Deployment").len(), 4);
    for component in navique_e2e::COMPONENTS {
        let deployment = find(&objects, "Deployment", &format!("navique-{component}"));
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{component}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let security = &container["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true, "{component}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{component}");
        assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(container["livenessProbe"]["httpGet"]["port"], "admin");
        assert_eq!(container["ports"][0]["name"], "admin");
        assert_eq!(container["ports"][0]["containerPort"], 8080);
        assert!(args_of(&objects, component).contains(&"--admin-addr=0.0.0.0:8080".to_owned()));
        assert_eq!(
            container["image"],
            format!("navique/{component}:0.1.0").as_str(),
            "the image make images builds"
        );
        assert_eq!(
            pod["serviceAccountName"],
            format!("navique-{component}").as_str()
        );
        find(
            &objects,
            "PodDisruptionBudget",
            &format!("navique-{component}"),
        );
    }
    let runner = find(&objects, "Deployment", "navique-backup-runner");
    assert_eq!(runner["spec"]["replicas"], 1);
    assert_eq!(runner["spec"]["strategy"]["type"], "Recreate");
    assert!(
        args_of(&objects, "backup-runner")
            .contains(&"--store-url=file:///var/lib/navique/backups".to_owned())
    );
    // The webhook and the gRPC servers behind their Services.
    for (service, port, target) in [
        ("navique-webhook", 443, "webhook"),
        ("navique-backup-runner", 9090, "grpc"),
        ("navique-approvals", 9091, "approvals"),
    ] {
        let ports = &find(&objects, "Service", service)["spec"]["ports"][0];
        assert_eq!(ports["port"], port, "{service}");
        assert_eq!(ports["targetPort"], target, "{service}");
    }

    // Per-component scheduling values reach the pod.
    let objects = render(&[
        "--set",
        "webhook.priorityClassName=system-cluster-critical,webhook.nodeSelector.pool=infra,webhook.replicas=3",
    ]);
    let webhook = find(&objects, "Deployment", "navique-webhook");
    assert_eq!(webhook["spec"]["replicas"], 3);
    let pod = &webhook["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"]["pool"], "infra");
}

#[test]
fn backup_storage_maps_to_the_store_url_and_its_variables() {
    let objects = render(&[
        "--set",
        "backupStorage.provider=s3,backupStorage.bucket=backups,backupStorage.prefix=navique",
        "--set",
        "backupStorage.endpoint=http://minio.storage:9000,backupStorage.allowHttp=true",
        "--set",
        "backupStorage.credentialsSecret.name=store,backupStorage.credentialsSecret.keys.AWS_ACCESS_KEY_ID=access-key",
    ]);
    assert!(of_kind(&objects, "PersistentVolumeClaim").is_empty());
    assert!(
        args_of(&objects, "backup-runner").contains(&"--store-url=s3://backups/navique".to_owned())
    );
    let env = &deployment_container(&objects, "backup-runner")["env"];
    let env = env.as_sequence().unwrap();
    let value = |name: &str| env.iter().find(|e| e["name"] == name).cloned();
    assert_eq!(
        value("AWS_ENDPOINT").unwrap()["value"],
        "http://minio.storage:9000"
    );
    assert_eq!(value("AWS_ALLOW_HTTP").unwrap()["value"], "true");
    // Memory stays bounded: two malloc arenas, big blocks mapped
    // (docs/backups.md, memory).
    assert_eq!(value("MALLOC_ARENA_MAX").unwrap()["value"], "2");
    assert_eq!(value("MALLOC_MMAP_THRESHOLD_").unwrap()["value"], "131072");
    let key = value("AWS_ACCESS_KEY_ID").unwrap();
    assert_eq!(key["valueFrom"]["secretKeyRef"]["name"], "store");
    assert_eq!(key["valueFrom"]["secretKeyRef"]["key"], "access-key");

    assert_fails(
        TEMPLATE,
        "backupStorage.provider=gcs",
        "backupStorage.bucket is required when backupStorage.provider is gcs",
    );
}

/// backupRunner.jobs and workDir reach backup-runner's flags, the work
/// folder is an emptyDir (the root filesystem is read-only), and jobs out
/// of 1..16 are refused naming the value.
#[test]
fn backup_runner_jobs_and_work_dir_render_as_flags_and_an_empty_dir() {
    let objects = render(&[
        "--set",
        "backupRunner.jobs=4,backupRunner.workDir.sizeLimit=50Gi",
    ]);
    let args = args_of(&objects, "backup-runner");
    assert!(args.contains(&"--jobs=4".to_owned()), "{args:?}");
    assert!(
        args.contains(&"--work-dir=/var/lib/navique/work".to_owned()),
        "{args:?}"
    );
    let mounts = &deployment_container(&objects, "backup-runner")["volumeMounts"];
    assert!(
        mounts
            .as_sequence()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "work" && m["mountPath"] == "/var/lib/navique/work"),
        "{mounts:?}"
    );
    let volumes = &pod_of(&objects, "backup-runner")["spec"]["volumes"];
    let work = volumes
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "work")
        .unwrap();
    assert_eq!(work["emptyDir"]["sizeLimit"], "50Gi");
    assert_fails(TEMPLATE, "backupRunner.jobs=17", "at '/backupRunner/jobs'");
}

/// The binaries parse every flag the chart passes (`--help` after them
/// stops before running): a renamed or removed flag fails here.
#[test]
fn every_deployment_passes_flags_its_binary_accepts() {
    for args in TLS_MODES
        .iter()
        .chain([&&["--set", "otlpEndpoint=http://otel:4317"][..]])
    {
        let objects = render(args);
        for component in navique_e2e::COMPONENTS {
            let flags = args_of(&objects, component);
            let output = Command::new(binary(component))
                .args(&flags)
                .arg("--help")
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{component} {flags:?}:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// helm against `cluster`, isolated from the user's helm settings.
fn helm_on(cluster: &navique_e2e::Cluster, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(repo_root().join(".tools/bin/helm"))
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .current_dir(repo_root())
        .output()
        .expect("run helm")
}

#[test]
fn helm_installs_the_chart_into_the_dev_api_server_and_refuses_a_mistyped_value() {
    let cluster = navique_e2e::Cluster::dev(&["--authorization", "rbac"]);
    let install = |extra: &[&str]| {
        helm_on(
            &cluster,
            &[
                &[
                    "install",
                    "navique",
                    "charts/navique",
                    "--namespace",
                    "navique-system",
                    "--create-namespace",
                    // The dev API server does not serve NetworkPolicies.
                    "--set",
                    "backupRunner.networkPolicy.enabled=false",
                ],
                extra,
            ]
            .concat(),
        )
    };
    // A mistyped value fails the install, naming the value; nothing is installed.
    let refused = install(&["--set", "lockGuard.enabled=yes"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("at '/lockGuard/enabled': got string, want boolean"),
        "{stderr}"
    );
    // (helm installs the chart's crds/ before it checks the values.)
    for kind in ["clusterroles", "validatingadmissionpolicies"] {
        let found = cluster.kubectl_ok(&["get", kind, "-o", "name"]);
        assert!(!found.contains("navique"), "installed anyway: {found}");
    }

    let installed = install(&[]);
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    cluster.wait_for_crds();
    let names = |what: &str, ns: Option<&str>| {
        let mut args = vec!["get", what, "-o", "name"];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        cluster.kubectl_ok(&args)
    };
    let crds = names("crd", None);
    for crd in [
        "locks.core.navique.com",
        "stacks.core.navique.com",
        "managedservices.services.kube-dc.com",
    ] {
        assert!(crds.contains(crd), "{crds}");
    }
    let policies = names("validatingadmissionpolicies", None);
    assert!(policies.contains("navique-lock-guard"), "{policies}");
    let accounts = names("serviceaccounts", Some("navique-system"));
    for component in [
        "lock-controller",
        "webhook",
        "service-lifecycle-controller",
        "backup-runner",
    ] {
        assert!(
            accounts.contains(&format!("serviceaccount/navique-{component}")),
            "{accounts}"
        );
    }
    let deployments = names("deployments", Some("navique-system"));
    assert!(
        deployments.contains("deployment.apps/navique-service-lifecycle-controller"),
        "{deployments}"
    );
    let webhooks = names("validatingwebhookconfigurations", None);
    assert!(webhooks.contains("navique-services"), "{webhooks}");

    // The plugin names the installed release (this plugin's own version:
    // the chart's appVersion follows the workspace's).
    let version = navique_e2e::plugin::kubectl_navique_ok(&cluster, &["version"]);
    let client = format!("v{}", env!("CARGO_PKG_VERSION"));
    let server = cluster.kubectl_ok(&["version", "-o", "json"]);
    let server: Value = serde_json::from_str(&server).unwrap();
    assert_eq!(
        version,
        format!(
            "Client Version: {client}\nServer Version: {}\nNavique Version: {client}\n",
            server["serverVersion"]["gitVersion"].as_str().unwrap()
        )
    );
}

/// The pod template of a component's Deployment.
fn pod_of<'a>(objects: &'a [Value], component: &str) -> &'a Value {
    &find(objects, "Deployment", &format!("navique-{component}"))["spec"]["template"]
}

/// The labels that select a component's pods, as the chart renders them.
fn selector_of(component: &str) -> Value {
    serde_yaml::from_str(&format!(
        "{{app.kubernetes.io/name: navique, app.kubernetes.io/instance: navique, app.kubernetes.io/component: {component}}}"
    ))
    .unwrap()
}

#[test]
fn each_components_replicas_prefer_different_nodes_and_follow_spread_constraints() {
    // By default each component's pods prefer nodes without another of its pods.
    let objects = render(&[]);
    for component in navique_e2e::COMPONENTS {
        let anti = &pod_of(&objects, component)["spec"]["affinity"]["podAntiAffinity"];
        let preferred = &anti["preferredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(preferred["weight"], 100, "{component}");
        let term = &preferred["podAffinityTerm"];
        assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
        assert_eq!(term["labelSelector"]["matchLabels"], selector_of(component));
        assert!(anti["requiredDuringSchedulingIgnoredDuringExecution"].is_null());
        assert!(pod_of(&objects, component)["spec"]["topologySpreadConstraints"].is_null());
    }

    // hard requires it; none adds nothing; a component's own affinity replaces it.
    let objects = render(&["--set", "podAntiAffinity=hard"]);
    let required = &pod_of(&objects, "webhook")["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert_eq!(required["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        required["labelSelector"]["matchLabels"],
        selector_of("webhook")
    );
    let objects = render(&["--set", "podAntiAffinity=none"]);
    for component in navique_e2e::COMPONENTS {
        assert!(
            pod_of(&objects, component)["spec"]["affinity"].is_null(),
            "{component}"
        );
    }
    let objects = render(&[
        "--set",
        "webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
        "--set",
        "webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
    ]);
    let affinity = &pod_of(&objects, "webhook")["spec"]["affinity"];
    assert!(affinity["podAntiAffinity"].is_null(), "{affinity:?}");
    assert!(!affinity["nodeAffinity"].is_null());
    assert!(!pod_of(&objects, "lock-controller")["spec"]["affinity"]["podAntiAffinity"].is_null());

    // A spread constraint without a labelSelector spreads the component's
    // pods; one with a labelSelector keeps it.
    let objects = render(&[
        "--set",
        "lockController.topologySpreadConstraints[0].maxSkew=1,lockController.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,lockController.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "--set",
        "lockController.topologySpreadConstraints[1].maxSkew=2,lockController.topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname,lockController.topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule,lockController.topologySpreadConstraints[1].labelSelector.matchLabels.tier=control",
    ]);
    let spread = &pod_of(&objects, "lock-controller")["spec"]["topologySpreadConstraints"];
    assert_eq!(spread[0]["maxSkew"], 1);
    assert_eq!(spread[0]["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(spread[0]["whenUnsatisfiable"], "ScheduleAnyway");
    assert_eq!(
        spread[0]["labelSelector"]["matchLabels"],
        selector_of("lock-controller")
    );
    assert_eq!(spread[1]["labelSelector"]["matchLabels"]["tier"], "control");
    assert!(spread[1]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"].is_null());
    assert!(pod_of(&objects, "webhook")["spec"]["topologySpreadConstraints"].is_null());
    assert_fails(
        TEMPLATE,
        "webhook.topologySpreadConstraints[0].maxSkew=1",
        "at '/webhook/topologySpreadConstraints/0': missing properties 'topologyKey', 'whenUnsatisfiable'",
    );
}

#[test]
fn extra_args_env_volumes_and_labels_reach_the_pods() {
    let objects = render(&[
        "--set",
        "webhook.extraArgs[0]=--log-level=debug",
        "--set",
        "webhook.extraEnv[0].name=HTTPS_PROXY,webhook.extraEnv[0].value=http://proxy:3128",
        "--set",
        "webhook.extraVolumes[0].name=trust,webhook.extraVolumes[0].configMap.name=corporate-ca",
        "--set",
        "webhook.extraVolumeMounts[0].name=trust,webhook.extraVolumeMounts[0].mountPath=/etc/ssl/corporate",
        "--set",
        "webhook.podLabels.tier=admission,commonLabels.team=platform",
    ]);
    let container = deployment_container(&objects, "webhook");
    let args = strings(&container["args"]);
    // Appended after the chart's own flags: the last --log-level wins.
    assert_eq!(args.last().unwrap(), "--log-level=debug");
    assert!(args.contains(&"--log-level=info".to_owned()));
    let env = container["env"].as_sequence().unwrap();
    let proxy = env.iter().find(|e| e["name"] == "HTTPS_PROXY").unwrap();
    assert_eq!(proxy["value"], "http://proxy:3128");
    // The chart's own variables stay.
    assert!(
        env.iter()
            .any(|e| e["name"] == "NAVIQUE_WEBHOOK_TLS_SECRET")
    );
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    assert!(mounts.iter().any(|m| m["name"] == "tmp"));
    let trust = mounts.iter().find(|m| m["name"] == "trust").unwrap();
    assert_eq!(trust["mountPath"], "/etc/ssl/corporate");
    let pod = pod_of(&objects, "webhook");
    let volume = pod["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "trust")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "corporate-ca");
    // podLabels on the webhook's pods only, never in the selector (which
    // cannot change after install).
    assert_eq!(pod["metadata"]["labels"]["tier"], "admission");
    assert!(pod_of(&objects, "lock-controller")["metadata"]["labels"]["tier"].is_null());
    let selector =
        &find(&objects, "Deployment", "navique-webhook")["spec"]["selector"]["matchLabels"];
    assert_eq!(*selector, selector_of("webhook"));
    // commonLabels on every object and every pod.
    for object in &objects {
        assert_eq!(
            object["metadata"]["labels"]["team"],
            "platform",
            "{} {}",
            kind_of(object),
            name_of(object)
        );
    }
    for component in navique_e2e::COMPONENTS {
        assert_eq!(
            pod_of(&objects, component)["metadata"]["labels"]["team"],
            "platform"
        );
    }
    // Without them, nothing is added.
    let objects = render(&[]);
    let container = deployment_container(&objects, "webhook");
    assert_eq!(container["volumeMounts"].as_sequence().unwrap().len(), 1);
    assert!(
        deployment_container(&objects, "lock-controller")["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "HTTPS_PROXY")
    );
}

#[test]
fn the_global_registry_and_tag_prefix_every_image() {
    let image = |objects: &[Value], component: &str| {
        deployment_container(objects, component)["image"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let objects = render(&["--set", "image.registry=registry.example.com:5000/mirror"]);
    for component in navique_e2e::COMPONENTS {
        assert_eq!(
            image(&objects, component),
            format!("registry.example.com:5000/mirror/navique/{component}:0.1.0")
        );
    }
    let objects = render(&[
        "--set",
        "image.registry=ghcr.io/acme/,image.tag=0.2.0,backupRunner.image.tag=0.2.1",
    ]);
    assert_eq!(
        image(&objects, "webhook"),
        "ghcr.io/acme/navique/webhook:0.2.0"
    );
    assert_eq!(
        image(&objects, "backup-runner"),
        "ghcr.io/acme/navique/backup-runner:0.2.1",
        "a component's own tag wins"
    );
}

#[test]
fn namespace_override_moves_every_namespaced_object_and_identity() {
    let objects = render(&["--set", "namespaceOverride=platform-navique"]);
    let mut namespaced = 0;
    for object in &objects {
        if let Some(namespace) = object["metadata"]["namespace"].as_str() {
            namespaced += 1;
            assert_eq!(
                namespace,
                "platform-navique",
                "{} {}",
                kind_of(object),
                name_of(object)
            );
        }
        for subject in object["subjects"].as_sequence().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" {
                assert_eq!(subject["namespace"], "platform-navique");
            }
        }
    }
    assert!(namespaced > 20, "{namespaced} namespaced objects");
    let text = helm_template(&["--set", "namespaceOverride=platform-navique"]);
    assert!(
        !text.contains("navique-system"),
        "the release namespace leaks"
    );
    assert!(text.contains(
        "request.userInfo.username != 'system:serviceaccount:platform-navique:navique-lock-controller'"
    ));
    assert!(
        args_of(&objects, "webhook").contains(
            &"--lock-controller-username=system:serviceaccount:platform-navique:navique-lock-controller"
                .to_owned()
        )
    );
    let services = find(
        &objects,
        "ValidatingWebhookConfiguration",
        "navique-services",
    );
    let client = &services["webhooks"][0]["clientConfig"]["service"];
    assert_eq!(client["namespace"], "platform-navique");
    assert_eq!(client["name"], "navique-webhook");
}

#[test]
fn crds_are_installed_and_kept_unless_told_otherwise() {
    let crds = |objects: &[Value]| -> Vec<Value> {
        of_kind(objects, "CustomResourceDefinition")
            .into_iter()
            .cloned()
            .collect()
    };
    let shipped = std::fs::read_dir(repo_root().join("charts/navique/files/crds"))
        .unwrap()
        .count();
    let objects = render(&[]);
    assert_eq!(crds(&objects).len(), shipped);
    for crd in crds(&objects) {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
        assert_eq!(
            crd["metadata"]["labels"]["app.kubernetes.io/instance"],
            "navique"
        );
        // What `kubectl navique version` reports as installed.
        assert_eq!(
            crd["metadata"]["labels"]["app.kubernetes.io/version"],
            env!("CARGO_PKG_VERSION")
        );
    }
    let lock = find(
        &objects,
        "CustomResourceDefinition",
        "locks.core.navique.com",
    );
    assert_eq!(lock["spec"]["names"]["kind"], "Lock");

    let objects = render(&["--set", "crds.keep=false"]);
    assert_eq!(crds(&objects).len(), shipped);
    for crd in crds(&objects) {
        assert!(crd["metadata"]["annotations"]["helm.sh/resource-policy"].is_null());
    }
    let objects = render(&["--set", "crds.install=false"]);
    assert!(crds(&objects).is_empty());
    // Everything else still renders.
    assert_eq!(of_kind(&objects, "Deployment").len(), 4);
}

#[test]
fn every_object_name_follows_the_release_name() {
    for mode in TLS_MODES
        .iter()
        .chain([&&["--set", "lockGuard.mode=webhook"][..]])
    {
        let objects = render_release("acme", "acme-system", mode);
        for object in &objects {
            let name = name_of(object);
            if kind_of(object) == "CustomResourceDefinition" {
                continue; // named after their kinds
            }
            assert!(
                name.starts_with("acme-"),
                "{} {name} ({mode:?})",
                kind_of(object)
            );
        }
        for component in navique_e2e::COMPONENTS {
            let deployment = find(&objects, "Deployment", &format!("acme-{component}"));
            let account = format!("acme-{component}");
            assert_eq!(
                deployment["spec"]["template"]["spec"]["serviceAccountName"],
                account.as_str()
            );
            find(&objects, "ServiceAccount", &account);
        }
        // The Secrets the components read and write, through their flags and variables.
        let text = objects
            .iter()
            .map(|o| serde_yaml::to_string(o).unwrap())
            .collect::<String>();
        assert!(!text.contains("navique-webhook"), "{mode:?}");
        assert!(!text.contains("navique-grpc"), "{mode:?}");
        assert!(!text.contains("navique-backup-runner"), "{mode:?}");
        assert!(!text.contains("navique-lock"), "{mode:?}");
    }
    let objects = render_release("acme", "acme-system", &[]);
    let container = |component: &str| {
        find(&objects, "Deployment", &format!("acme-{component}"))["spec"]["template"]["spec"]
            ["containers"][0]
            .clone()
    };
    let webhook = container("webhook");
    let secret = webhook["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NAVIQUE_WEBHOOK_TLS_SECRET")
        .unwrap()["value"]
        .clone();
    assert_eq!(secret, "acme-webhook-tls");
    assert!(
        strings(&container("service-lifecycle-controller")["args"])
            .contains(&"--grpc-ca-secret=acme-system/acme-grpc-ca".to_owned())
    );
}

#[test]
fn lock_guard_groups_can_name_the_core_group_with_its_resources() {
    // "core" and "" both name the core group; its resources are required.
    for core in ["core", ""] {
        let groups = format!(r#"lockGuard.groups=["core.navique.com","{core}","apps"]"#);
        let objects = render(&[
            "--set-json",
            &groups,
            "--set",
            "lockGuard.resources.core={persistentvolumeclaims,secrets}",
            "--set",
            "lockGuard.resources.apps={deployments}",
        ]);
        let rules = rules_of(find(&objects, "ClusterRole", "navique-lock-controller"));
        let watch_patch = ["get", "list", "watch", "patch"];
        assert!(rules.contains(&rule(
            &[""],
            &["persistentvolumeclaims", "secrets"],
            &[],
            &watch_patch
        )));
        assert!(rules.contains(&rule(&["apps"], &["deployments"], &[], &watch_patch)));
        assert!(rules.contains(&rule(&["core.navique.com"], &["stacks"], &[], &watch_patch)));
        assert!(
            !rules.iter().any(|r| r.1.contains(&"*".to_owned())),
            "no wildcard: {rules:?}"
        );
        let args = args_of(&objects, "lock-controller");
        assert!(args.contains(&"--enforceable-groups=core.navique.com,core,apps".to_owned()));
        assert!(args.contains(
            &"--enforceable-resources=core/persistentvolumeclaims,core/secrets,apps/deployments"
                .to_owned()
        ));
        let guard = find(&objects, "ValidatingAdmissionPolicy", "navique-lock-guard");
        let matched = &guard["spec"]["matchConstraints"]["resourceRules"];
        assert_eq!(strings(&matched[1]["apiGroups"]), [""]);
        assert_eq!(
            strings(&matched[1]["resources"]),
            ["persistentvolumeclaims", "secrets"]
        );
        assert_eq!(strings(&matched[2]["resources"]), ["deployments"]);
    }
    assert_fails(
        TEMPLATE,
        "lockGuard.groups={core}",
        "lockGuard.resources.core must list the core resources Locks may protect",
    );
    assert_fails(
        TEMPLATE,
        "lockGuard.resources.apps={deployments}",
        "lockGuard.resources.apps: apps is not in lockGuard.groups",
    );
    // The default stays the seed's: the operator's groups, no resource list.
    let objects = render(&[]);
    let args = args_of(&objects, "lock-controller");
    assert!(
        args.contains(&"--enforceable-groups=core.navique.com,services.kube-dc.com".to_owned())
    );
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--enforceable-resources"))
    );
}

/// The controller started with `flags` (its kubeconfig missing): its
/// standard error once it stops.
fn controller_start_error(flags: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary("service-lifecycle-controller"))
        .args(flags)
        .args([
            "--approval-notification-url=http://127.0.0.1:9/hooks",
            "--approvals-listen-addr=127.0.0.1:0",
            "--admin-addr=127.0.0.1:0",
            "--grpc-insecure-plaintext",
        ])
        .arg(format!(
            "--kubeconfig={}",
            dir.path().join("no-kubeconfig").display()
        ))
        .output()
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A notification template of one's own goes through the chart into a
/// ConfigMap, mounted into the controller's pods and named by its flag; a
/// changed template rolls the pods. The controller reads what the chart
/// mounts: a template that does not compile stops it at start, naming the
/// flag. Fail closed: `custom` without a template, or a template the chosen
/// one ignores, fails the render naming the value.
#[test]
fn a_users_notification_template_is_mounted_from_a_config_map_and_named_by_the_flag() {
    const MOUNT: &str = "/etc/navique/approval-notifications";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.json.j2");
    let template = "{\"event\": {{ trigger }}, \"summary\": {{ title }},\n \"resources\": [{% for r in resources %}{{ r.kind ~ \"/\" ~ r.name }}{% if not loop.last %}, {% endif %}{% endfor %}]}\n";
    std::fs::write(&file, template).unwrap();
    let set_file = format!(
        "serviceLifecycleController.approvals.notifications.customTemplate={}",
        file.display()
    );
    let custom = [
        "--set",
        "serviceLifecycleController.approvals.notifications.template=custom",
        "--set-file",
        &set_file,
        "--set",
        "serviceLifecycleController.podAnnotations.team=platform",
        // Its gRPC certificate from a volume too.
        "--set",
        "grpc.tls.mode=certManager",
    ];
    let objects = render(&custom);
    let config_map = find(
        &objects,
        "ConfigMap",
        "navique-approval-notification-template",
    );
    let component = "service-lifecycle-controller";
    // Beside the pods that mount it.
    assert_eq!(
        config_map["metadata"]["namespace"],
        find(&objects, "Deployment", &format!("navique-{component}"))["metadata"]["namespace"]
    );
    assert_eq!(config_map["data"]["template.json.j2"], template);
    let args = args_of(&objects, component);
    let flag = format!("--approval-notification-template={MOUNT}/template.json.j2");
    assert!(args.contains(&flag), "{args:?}");
    assert_eq!(
        args.iter()
            .filter(|a| a.starts_with("--approval-notification-template="))
            .count(),
        1
    );
    let mount = deployment_container(&objects, component)["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "approval-notifications")
        .unwrap()
        .clone();
    assert_eq!(mount["mountPath"], MOUNT);
    assert_eq!(mount["readOnly"], true);
    let pod = pod_of(&objects, component);
    let volume = pod["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "approval-notifications")
        .unwrap()
        .clone();
    assert_eq!(
        volume["configMap"]["name"],
        "navique-approval-notification-template"
    );
    // The gRPC certificate's volume stays beside it.
    assert!(
        pod["spec"]["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "grpc-tls")
    );
    // The user's pod annotations stay; the checksum follows the template.
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["team"], "platform");
    let checksum = annotations["checksum/approval-notification-template"].clone();
    assert_eq!(checksum.as_str().map(str::len), Some(64));
    std::fs::write(&file, "{\"event\": {{ trigger }}}").unwrap();
    let changed = render(&custom);
    assert_ne!(
        pod_of(&changed, component)["metadata"]["annotations"]["checksum/approval-notification-template"],
        checksum
    );
    // Without it: the built-in template by name, no ConfigMap, no volume.
    let objects = render(&[
        "--set",
        "serviceLifecycleController.approvals.notifications.template=teams",
    ]);
    assert!(
        args_of(&objects, component).contains(&"--approval-notification-template=teams".to_owned())
    );
    assert!(
        of_kind(&objects, "ConfigMap")
            .iter()
            .all(|c| name_of(c) != "navique-approval-notification-template")
    );
    assert!(pod_of(&objects, component)["metadata"]["annotations"].is_null());

    // The binary reads the file the flag names: one that does not compile
    // stops it, naming the flag; one that does gets past the template.
    let mounted = dir.path().join("template.json.j2");
    std::fs::write(&mounted, "{\"event\": {{ trigger }").unwrap();
    let named = |path: &std::path::Path| {
        vec![format!(
            "--approval-notification-template={}",
            path.display()
        )]
    };
    let error = controller_start_error(&named(&mounted));
    assert!(
        error.contains(
            "--approval-notification-template: the notification template does not compile"
        ),
        "{error}"
    );
    std::fs::write(&mounted, template).unwrap();
    let error = controller_start_error(&named(&mounted));
    assert!(
        !error.contains("--approval-notification-template"),
        "{error}"
    );

    // Fail closed, naming the value.
    assert_fails(
        TEMPLATE,
        "serviceLifecycleController.approvals.notifications.template=custom",
        "at '/serviceLifecycleController/approvals/notifications/customTemplate': minLength: got 0, want 1",
    );
    assert_fails(
        TEMPLATE,
        "serviceLifecycleController.approvals.notifications.customTemplate=mine",
        "serviceLifecycleController.approvals.notifications.customTemplate is set but template is json, which ignores it",
    );
    assert_fails(
        TEMPLATE,
        "serviceLifecycleController.approvals.notifications.template=Slack",
        "at '/serviceLifecycleController/approvals/notifications/template': value must be one of 'json', 'slack', 'teams', 'custom'",
    );
}
