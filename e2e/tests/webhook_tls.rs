//! The webhook's self-managed CA (`webhook.tls.mode: selfManaged`, the
//! chart's default) end to end on the dev API server: the webhook started
//! with the variables the chart gives its Deployment creates its Secret,
//! writes the CA bundle into the chart's webhook configurations (rendered
//! with no caBundle), and the API server then calls it over TLS; a restart
//! changes nothing; a short certificate validity renews the serving
//! certificate under the same CA while the API server keeps calling; a
//! shorter CA validity replaces the CA, the old one staying in the bundle;
//! and two replicas starting at once agree on one Secret.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use navique_e2e::locks::helm_template;
use navique_e2e::{Cluster, Process, eventually, free_port, http_get, repo_root};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use serde_yaml::Value as Yaml;

const NAMESPACE: &str = "navique-system";
const SECRET: &str = "navique-webhook-tls";
/// The name the API server verifies the webhook's certificate against.
const SERVICE_HOST: &str = "navique-webhook.navique-system.svc";
const WAIT: Duration = Duration::from_secs(30);
const DAY: f64 = 86_400.0;

/// The chart's webhook configurations, as `kind/name`.
const CONFIGURATIONS: [&str; 5] = [
    "validatingwebhookconfiguration/navique-services",
    "mutatingwebhookconfiguration/navique-services-defaults",
    "validatingwebhookconfiguration/navique-lock-guard",
    "validatingwebhookconfiguration/navique-lock-suspension",
    "mutatingwebhookconfiguration/navique-lock-finalizer",
];

/// The webhook's identity: its ServiceAccount.
const WEBHOOK_USER: &str = "system:serviceaccount:navique-system:navique-webhook";

/// The chart's `templates/webhook.yaml` in its default `selfManaged` mode,
/// with the Lock guard as a webhook: each document, parsed and as text.
fn webhook_manifests() -> Vec<(Yaml, String)> {
    let rendered = helm_template(&[
        "--set",
        "lockGuard.mode=webhook",
        "--show-only",
        "templates/webhook.yaml",
    ]);
    rendered
        .split("\n---\n")
        .map(|d| {
            (
                serde_yaml::from_str(d).expect("rendered YAML"),
                d.to_owned(),
            )
        })
        .filter(|(object, _): &(Yaml, String)| !object.is_null())
        .collect()
}

/// A dev API server with RBAC that calls the webhook Service at `port`,
/// with the CRDs, the provider catalogue, the webhook's ServiceAccount and
/// the chart's RBAC for it, and the chart's webhook configurations
/// (services, the Lock guard and the Lock finalizer), rendered with the default `selfManaged`
/// mode and so without a caBundle.
fn cluster(port: u16) -> Cluster {
    let cluster = Cluster::dev(&[
        &format!("--webhook-service={NAMESPACE}/navique-webhook=127.0.0.1:{port}"),
        "--authorization",
        "rbac",
    ]);
    let path = |p: &str| repo_root().join(p).to_str().unwrap().to_owned();
    cluster.install_crds();
    cluster.kubectl_ok(&["create", "namespace", NAMESPACE]);
    cluster.kubectl_ok(&["apply", "-f", &path("deploy/examples/catalogue.yaml")]);
    let rbac: Vec<String> = webhook_manifests()
        .into_iter()
        .filter(|(object, _)| {
            let kind = object["kind"].as_str().unwrap_or_default();
            kind == "ServiceAccount" || kind.ends_with("Role") || kind.ends_with("RoleBinding")
        })
        .map(|(_, text)| text)
        .collect();
    assert_eq!(rbac.len(), 5, "ServiceAccount, (Cluster)Role and bindings");
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&rbac.join("\n---\n")));
    cluster.add_user(
        WEBHOOK_USER,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:navique-system",
            "system:authenticated",
        ],
    );
    let configurations = helm_template(&[
        "--set",
        "lockGuard.mode=webhook",
        "--show-only",
        "templates/services-webhook.yaml",
        "--show-only",
        "templates/lock-guard-webhook.yaml",
        "--show-only",
        "templates/lock-suspension-webhook.yaml",
        "--show-only",
        "templates/lock-finalizer-webhook.yaml",
    ]);
    assert!(!configurations.contains("caBundle"), "{configurations}");
    cluster.kubectl_in(&["apply", "-f", "-"], Some(&configurations));
    cluster
}

/// The environment the chart gives the webhook's container, the pod's
/// namespace in place of the downward API's.
fn chart_env() -> Vec<(String, String)> {
    let (deployment, _) = webhook_manifests()
        .into_iter()
        .find(|(o, _)| o["kind"] == "Deployment")
        .expect("the webhook's Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .all(|m| m["name"] != "tls"),
        "the self-managed CA serves from memory, not from a volume"
    );
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .expect("env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = match e["value"].as_str() {
                Some(value) => value.to_owned(),
                None => {
                    assert_eq!(
                        e["valueFrom"]["fieldRef"]["fieldPath"],
                        "metadata.namespace"
                    );
                    NAMESPACE.to_owned()
                }
            };
            (name, value)
        })
        .collect();
    let value = |name: &str| {
        env.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(value("NAVIQUE_WEBHOOK_TLS_SECRET"), SECRET);
    assert!(value("NAVIQUE_WEBHOOK_TLS_DNS_NAMES").contains(SERVICE_HOST));
    assert_eq!(
        value("NAVIQUE_WEBHOOK_CA_BUNDLE_CONFIGURATIONS"),
        "validatingwebhookconfigurations/navique-services,mutatingwebhookconfigurations/navique-services-defaults,validatingwebhookconfigurations/navique-lock-guard,validatingwebhookconfigurations/navique-lock-suspension,mutatingwebhookconfigurations/navique-lock-finalizer"
    );
    env
}

/// A webhook replica with the chart's environment and `extra` flags,
/// serving on `port`, once it is ready.
async fn start_webhook(cluster: &Cluster, port: u16, extra: &[&str]) -> Process {
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (admin_addr, listen_addr) = (admin.to_string(), format!("127.0.0.1:{port}"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig_for(&format!("{WEBHOOK_USER}-token"), dir.path());
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--admin-addr",
        &admin_addr,
        "--listen-addr",
        &listen_addr,
    ];
    args.extend_from_slice(extra);
    let webhook = Process::spawn_tied_env("webhook", &args, &chart_env());
    let deadline = std::time::Instant::now() + WAIT;
    while !http_get(admin, "/readyz")
        .await
        .is_ok_and(|r| r.status == 200)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the webhook did not get ready:\n{}",
            webhook.stdout() + &webhook.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    webhook
}

/// The Secret's data, decoded.
#[derive(Debug, PartialEq, Eq)]
struct Material {
    ca_bundle: String,
    ca_key: String,
    certificate: String,
    key: String,
}

fn secret(cluster: &Cluster) -> Option<Material> {
    let output = cluster.kubectl(
        &["get", "secret", SECRET, "-n", NAMESPACE, "-o", "json"],
        None,
    );
    if !output.status.success() {
        return None;
    }
    let secret: Value = serde_json::from_slice(&output.stdout).expect("Secret JSON");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let data = |key: &str| {
        let encoded = secret["data"][key].as_str().unwrap_or_default();
        String::from_utf8(BASE64.decode(encoded).expect("base64")).expect("PEM")
    };
    Some(Material {
        ca_bundle: data("ca.crt"),
        ca_key: data("ca.key"),
        certificate: data("tls.crt"),
        key: data("tls.key"),
    })
}

fn certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

/// Every webhook's caBundle in the chart's configurations, decoded.
fn ca_bundles(cluster: &Cluster) -> Vec<String> {
    CONFIGURATIONS
        .iter()
        .flat_map(|configuration| {
            let json = cluster.kubectl_ok(&["get", configuration, "-o", "json"]);
            let object: Value = serde_json::from_str(&json).expect("configuration JSON");
            object["webhooks"]
                .as_array()
                .expect("webhooks")
                .iter()
                .map(|hook| {
                    let bundle = hook["clientConfig"]["caBundle"]
                        .as_str()
                        .unwrap_or_default();
                    String::from_utf8(BASE64.decode(bundle).expect("base64")).expect("PEM")
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The certificate the webhook at `port` presents to a client that trusts
/// only `ca_bundle` and expects the Service's name, as the API server does.
async fn served_certificate(port: u16, ca_bundle: &str) -> Result<CertificateDer<'static>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates(ca_bundle) {
        roots.add(certificate).map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(SERVICE_HOST.to_owned()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let certificate = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
    certificate
        .map(|c| c.clone().into_owned())
        .ok_or_else(|| "no certificate".to_owned())
}

/// Waits until the webhook serves the Secret's certificate, trusted
/// through the Secret's CA bundle, which every configuration carries (a
/// renewal may come between reading one and the other); returns the
/// Secret's material.
async fn assert_consistent(cluster: &Cluster, port: u16) -> Material {
    let consistent = || async {
        let material = secret(cluster)?;
        let bundles = ca_bundles(cluster);
        if bundles.iter().any(|b| *b != material.ca_bundle) {
            return None;
        }
        let served = served_certificate(port, &material.ca_bundle).await.ok()?;
        (served == certificates(&material.certificate)[0]).then_some(material)
    };
    let material = eventually(
        WAIT,
        "the Secret, the webhook configurations and the served certificate to agree",
        consistent,
    )
    .await;
    assert!(!material.ca_key.is_empty() && !material.key.is_empty());
    assert_eq!(ca_bundles(cluster).len(), 6, "every webhook has a bundle");
    material
}

fn protected_service(ns: &str) -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples/orders-db.yaml"))
        .unwrap()
        .replace("namespace: my-project", &format!("namespace: {ns}"))
        .replace("deletionProtection: false", "deletionProtection: true")
}

/// The API server asks the webhook over TLS, which denies deleting a
/// protected ManagedService.
fn assert_delete_denied(cluster: &Cluster, ns: &str) {
    let err = cluster.kubectl_err(&["delete", "managedservice", "orders-db", "-n", ns], None);
    assert_eq!(
        err,
        "Error from server (Forbidden): admission webhook \"managedservices.navique.com\" denied the request: deletionProtection is enabled on this ManagedService; set spec.deletionProtection=false first\n"
    );
}

fn days(seconds: f64) -> String {
    format!("{}", seconds / DAY)
}

/// Flags for serving certificates valid `validity` seconds, renewed
/// `renew_before` seconds before they expire, checked every `interval`.
fn short_lifetimes(validity: f64, renew_before: f64, interval: u32) -> Vec<String> {
    vec![
        "--cert-validity-days".to_owned(),
        days(validity),
        "--cert-renew-before-days".to_owned(),
        days(renew_before),
        "--tls-check-interval".to_owned(),
        interval.to_string(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_runs_its_own_ca_keeps_it_across_restarts_and_renews_its_certificate() {
    let port = free_port();
    let cluster = cluster(port);
    assert!(secret(&cluster).is_none());

    // First start: a CA and a certificate, the bundle in every
    // configuration, and the API server trusts the webhook.
    let mut webhook = start_webhook(&cluster, port, &[]).await;
    let first = assert_consistent(&cluster, port).await;
    assert_eq!(certificates(&first.ca_bundle).len(), 1);
    let ns = cluster.namespace("tls");
    let service = protected_service(&ns);
    eventually(WAIT, "the webhook to admit the ManagedService", || async {
        let applied = cluster.kubectl(&["apply", "-f", "-"], Some(&service));
        applied.status.success().then_some(())
    })
    .await;
    assert_delete_denied(&cluster, &ns);

    // A restart finds everything in place and changes nothing.
    assert!(webhook.terminate(WAIT).success());
    let mut webhook = start_webhook(&cluster, port, &[]).await;
    let again = assert_consistent(&cluster, port).await;
    assert_eq!(again, first, "a restart must not reissue anything");
    assert_delete_denied(&cluster, &ns);

    // A 30-second certificate renewed 20 seconds before expiry: one at
    // start (the one in place is valid for longer than that), another ten
    // seconds later; the same CA, and the API server keeps calling.
    assert!(webhook.terminate(WAIT).success());
    let short = short_lifetimes(30.0, 20.0, 1);
    let short: Vec<&str> = short.iter().map(String::as_str).collect();
    let mut webhook = start_webhook(&cluster, port, &short).await;
    let renewed = assert_consistent(&cluster, port).await;
    assert_eq!(renewed.ca_bundle, first.ca_bundle);
    assert_eq!(renewed.ca_key, first.ca_key);
    assert_ne!(renewed.certificate, first.certificate);
    assert_delete_denied(&cluster, &ns);
    let again = eventually(WAIT, "the next renewal, served", || async {
        let material = secret(&cluster)?;
        if material.certificate == renewed.certificate {
            return None;
        }
        let served = served_certificate(port, &material.ca_bundle).await.ok()?;
        (served == certificates(&material.certificate)[0]).then_some(material)
    })
    .await;
    assert_eq!(again.ca_bundle, first.ca_bundle);
    assert_delete_denied(&cluster, &ns);

    // A CA validity shorter than the CA's: a new CA, the old one kept in
    // the bundle (replicas may still serve certificates it signed).
    assert!(webhook.terminate(WAIT).success());
    let ca_validity = days(120.0);
    let mut shorter_ca = vec!["--ca-validity-days", ca_validity.as_str()];
    shorter_ca.extend_from_slice(&short);
    let mut webhook = start_webhook(&cluster, port, &shorter_ca).await;
    let rotated = assert_consistent(&cluster, port).await;
    assert_ne!(rotated.ca_key, first.ca_key);
    let bundle = certificates(&rotated.ca_bundle);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1], certificates(&first.ca_bundle)[0]);
    assert_delete_denied(&cluster, &ns);
    assert!(webhook.terminate(WAIT).success());
}

/// Delays the API server's answers to `verb` on the webhook's Secret, so
/// that two replicas starting together both write it.
fn delay_secret_writes(cluster: &Cluster, verb: &str) {
    let fault = serde_json::json!({"faults": [{
        "verb": verb, "group": "", "resource": "secrets", "namespace": NAMESPACE, "delayMs": 1500,
    }]});
    cluster.post_raw("/debug/faults", &fault.to_string());
}

/// Two replicas with `extra` flags, started together; checks that both
/// serve the Secret's certificate and that one lost the race to write it.
async fn start_two(cluster: &Cluster, ports: (u16, u16), extra: &[&str]) -> (Process, Process) {
    let (one, two) = tokio::join!(
        start_webhook(cluster, ports.0, extra),
        start_webhook(cluster, ports.1, extra),
    );
    let material = assert_consistent(cluster, ports.0).await;
    let served = served_certificate(ports.1, &material.ca_bundle)
        .await
        .unwrap();
    assert_eq!(served, certificates(&material.certificate)[0]);
    let log = one.stdout() + &two.stdout();
    assert_eq!(
        log.matches("another replica wrote the Secret first")
            .count(),
        1,
        "{log}"
    );
    (one, two)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_agree_on_one_secret() {
    let ports = (free_port(), free_port());
    let cluster = cluster(ports.0);

    // Both find no Secret and create one: the second create fails (409),
    // and that replica serves the first one's.
    delay_secret_writes(&cluster, "create");
    let (mut one, mut two) = start_two(&cluster, ports, &[]).await;
    let created = secret(&cluster).unwrap();
    assert_eq!(certificates(&created.ca_bundle).len(), 1);
    let log = one.stdout() + &two.stdout();
    assert_eq!(
        log.matches("created a CA and issued a serving certificate")
            .count(),
        1,
        "{log}"
    );
    assert!(one.terminate(WAIT).success() && two.terminate(WAIT).success());

    // Both renew it (a shorter validity) from the same resourceVersion: the
    // second update fails (409), and that replica serves the first one's.
    cluster.kubectl_ok(&["delete", "--raw", "/debug/faults"]);
    delay_secret_writes(&cluster, "patch");
    let short = short_lifetimes(300.0, 200.0, 10);
    let short: Vec<&str> = short.iter().map(String::as_str).collect();
    let (mut one, mut two) = start_two(&cluster, ports, &short).await;
    let renewed = secret(&cluster).unwrap();
    assert_eq!(renewed.ca_bundle, created.ca_bundle);
    assert_ne!(renewed.certificate, created.certificate);
    assert!(one.terminate(WAIT).success() && two.terminate(WAIT).success());
}
