use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use hyper::body::Incoming;
use hyper::service::service_fn;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::*;

const HOOK: &str = "locks.navique.com";
const SERVICE_HOST: &str = "webhook.navique-system.svc";

type Reply = Arc<dyn Fn(&Value) -> (Duration, Value) + Send + Sync>;

/// A CA (PEM) and a server configuration for `host`, signed by it.
fn certificates(host: &str, alpn: &[u8]) -> (String, Arc<rustls::ServerConfig>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![host.to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = vec![alpn.to_vec()];
    (ca.pem(), Arc::new(config))
}

struct Server {
    addr: SocketAddr,
    ca_pem: String,
    reviews: Arc<Mutex<Vec<Value>>>,
    /// The TLS connections accepted.
    accepted: Arc<AtomicUsize>,
    /// The tasks serving them, to break them off.
    serving: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Server {
    /// Breaks off every open connection, as a restarted webhook does.
    fn drop_connections(&self) {
        for task in self.serving.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// An HTTPS webhook on loopback answering each review with `reply`
/// (after its delay), over HTTP/2 when `alpn` is `h2`.
async fn serve(alpn: &'static [u8], reply: Reply) -> Server {
    serve_as(SERVICE_HOST, alpn, reply).await
}

/// [`serve`] with a certificate for `host`.
async fn serve_as(host: &str, alpn: &'static [u8], reply: Reply) -> Server {
    let (ca_pem, config) = certificates(host, alpn);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let seen = reviews.clone();
    let accepted = Arc::new(AtomicUsize::new(0));
    let serving = Arc::new(Mutex::new(Vec::new()));
    let (count, tasks) = (accepted.clone(), serving.clone());
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let reply = reply.clone();
            let seen = seen.clone();
            let count = count.clone();
            let task = tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let service = service_fn(move |request: http::Request<Incoming>| {
                    let reply = reply.clone();
                    let seen = seen.clone();
                    async move {
                        assert_eq!(request.uri().path(), "/validate");
                        let body = request.into_body().collect().await?.to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap();
                        seen.lock().unwrap().push(review.clone());
                        let (delay, answer) = reply(&review);
                        tokio::time::sleep(delay).await;
                        Ok::<_, hyper::Error>(
                            http::Response::builder()
                                .header(http::header::CONTENT_TYPE, "application/json")
                                .body(Full::new(Bytes::from(answer.to_string())))
                                .unwrap(),
                        )
                    }
                });
                let io = TokioIo::new(tls);
                if alpn == b"h2" {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                }
            });
            tasks.lock().unwrap().push(task);
        }
    });
    Server {
        addr,
        ca_pem,
        reviews,
        accepted,
        serving,
    }
}

/// An answer echoing the review's uid.
fn answer(review: &Value, response: Value) -> Value {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

fn replying(response: Value) -> Reply {
    Arc::new(move |review| (Duration::ZERO, answer(review, response.clone())))
}

fn old_object() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "db", "namespace": "team-a", "labels": {"app": "db"}},
        "data": {"size": "3"},
    })
}

fn delete() -> Attributes {
    crate::attributes::testing::configmap_delete(old_object(), true)
}

/// A configuration with one webhook calling the service with `ca_pem`.
fn configuration(ca_pem: &str, extra: Value) -> Value {
    let mut hook = json!({
        "name": HOOK,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "clientConfig": {
            "service": {"namespace": "navique-system", "name": "webhook", "port": 443, "path": "/validate"},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        },
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["configmaps"]}],
    });
    if let (Some(hook), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        hook.extend(extra.clone());
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "navique"},
        "webhooks": [hook],
    })
}

async fn run(
    configuration: Value,
    addr: SocketAddr,
    attributes: &Attributes,
) -> Result<Vec<String>, Rejection> {
    run_on(&Connections::default(), configuration, addr, attributes).await
}

/// [`run`] with the connections `connections` keeps.
async fn run_on(
    connections: &Connections,
    configuration: Value,
    addr: SocketAddr,
    attributes: &Attributes,
) -> Result<Vec<String>, Rejection> {
    let resolve = move |namespace: &str, name: &str, port: u16| {
        (namespace == "navique-system" && name == "webhook" && port == 443).then_some(addr)
    };
    let namespace = json!({"metadata": {"name": "team-a", "labels": {"env": "prod"}}});
    let ctx = WebhookContext {
        configurations: &[configuration],
        namespace_object: Some(&namespace),
        resolve_service: &resolve,
        connections,
    };
    validate(&ctx, attributes).await
}

/// A loopback address nothing listens on.
async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

fn internal(message: &str) -> Rejection {
    let message = format!("failed calling webhook \"{HOOK}\": {message}");
    Rejection {
        code: 500,
        status: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("Internal error occurred: {message}"),
            "reason": "InternalError",
            "details": {"causes": [{"message": message}]},
            "code": 500,
        }),
    }
}

#[tokio::test]
async fn a_denying_webhook_gets_the_delete_review_and_its_status_is_answered() {
    let server = serve(
        b"http/1.1",
        replying(json!({
            "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": "configmap db is locked"},
        })),
    )
    .await;
    let result = run(
        configuration(&server.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    assert_eq!(
        result,
        Err(Rejection {
            code: 403,
            status: json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "admission webhook \"locks.navique.com\" denied the request: configmap db is locked",
                "reason": "Forbidden",
                "code": 403,
            }),
        })
    );
    let reviews = server.reviews.lock().unwrap();
    assert_eq!(reviews.len(), 1);
    let review = &reviews[0];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let request = &review["request"];
    assert_eq!(request["uid"].as_str().map(str::len), Some(36));
    assert_eq!(request["operation"], "DELETE");
    assert_eq!(request["oldObject"], old_object());
    assert_eq!(request["object"], Value::Null);
    assert_eq!(
        request["userInfo"],
        json!({"username": "alice", "groups": ["system:authenticated"]})
    );
    assert_eq!(request["dryRun"], true);
    assert_eq!(request["name"], "db");
    assert_eq!(request["namespace"], "team-a");
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(request["options"]["kind"], "DeleteOptions");
}

#[tokio::test]
async fn an_allowing_webhook_returns_its_warnings_over_http2() {
    let server = serve(
        b"h2",
        replying(json!({"allowed": true, "warnings": ["db is old", "db is big"]})),
    )
    .await;
    let result = run(
        configuration(&server.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    assert_eq!(
        result,
        Ok(vec!["db is old".to_string(), "db is big".to_string()])
    );
}

#[tokio::test]
async fn a_refusal_without_status_is_a_400_without_explanation() {
    let server = serve(b"http/1.1", replying(json!({"allowed": false}))).await;
    let result = run(
        configuration(&server.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    let rejection = result.unwrap_err();
    assert_eq!(rejection.code, 400);
    assert_eq!(
        rejection.status["message"],
        "admission webhook \"locks.navique.com\" denied the request without explanation"
    );
    assert_eq!(rejection.status["status"], "Failure");
}

#[tokio::test]
async fn a_server_that_is_down_fails_closed_with_fail_and_open_with_ignore() {
    let (ca_pem, _) = certificates(SERVICE_HOST, b"http/1.1");
    let addr = closed_port().await;
    let result = run(configuration(&ca_pem, json!({})), addr, &delete()).await;
    assert_eq!(
        result,
        Err(internal(&format!(
            "failed to call webhook: Post \"https://webhook.navique-system.svc:443/validate?timeout=5s\": dial tcp {addr}: connect: connection refused"
        )))
    );
    let ignoring = configuration(&ca_pem, json!({"failurePolicy": "Ignore"}));
    assert_eq!(run(ignoring, addr, &delete()).await, Ok(Vec::new()));
}

#[tokio::test]
async fn an_unresolvable_service_fails_as_not_found() {
    let (ca_pem, _) = certificates(SERVICE_HOST, b"http/1.1");
    let mut config = configuration(&ca_pem, json!({}));
    config["webhooks"][0]["clientConfig"]["service"]["name"] = json!("gone");
    let result = run(config, closed_port().await, &delete()).await;
    assert_eq!(
        result,
        Err(internal(
            "failed to call webhook: Post \"https://gone.navique-system.svc:443/validate?timeout=5s\": service \"gone\" not found"
        ))
    );
}

#[tokio::test]
async fn a_wrong_ca_bundle_fails_verification() {
    let server = serve(b"http/1.1", replying(json!({"allowed": true}))).await;
    let (other_ca, _) = certificates(SERVICE_HOST, b"http/1.1");
    let result = run(configuration(&other_ca, json!({})), server.addr, &delete()).await;
    assert_eq!(
        result,
        Err(internal(
            "failed to call webhook: Post \"https://webhook.navique-system.svc:443/validate?timeout=5s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ))
    );
    assert!(server.reviews.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_url_is_verified_against_its_host() {
    let server = serve(b"http/1.1", replying(json!({"allowed": true}))).await;
    let url = format!("https://127.0.0.1:{}/validate", server.addr.port());
    let mut config = configuration(&server.ca_pem, json!({}));
    config["webhooks"][0]["clientConfig"] = json!({"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(&server.ca_pem)});
    let result = run(config, server.addr, &delete()).await;
    assert_eq!(
        result,
        Err(internal(&format!(
            "failed to call webhook: Post \"{url}?timeout=5s\": tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"
        )))
    );
}

#[tokio::test]
async fn a_url_webhook_is_called_at_its_host() {
    let server = serve_as(
        "localhost",
        b"http/1.1",
        replying(json!({"allowed": true, "warnings": ["via url"]})),
    )
    .await;
    let mut config = configuration(&server.ca_pem, json!({}));
    config["webhooks"][0]["clientConfig"] = json!({
        "url": format!("https://localhost:{}/validate", server.addr.port()),
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&server.ca_pem),
    });
    let result = run(config, closed_port().await, &delete()).await;
    assert_eq!(result, Ok(vec!["via url".to_string()]));
}

#[tokio::test]
async fn an_object_selector_that_excludes_the_old_object_skips_the_webhook() {
    let server = serve(b"http/1.1", replying(json!({"allowed": false}))).await;
    let selecting = |app: &str| {
        configuration(
            &server.ca_pem,
            json!({"objectSelector": {"matchLabels": {"app": app}}}),
        )
    };
    assert_eq!(
        run(selecting("web"), server.addr, &delete()).await,
        Ok(Vec::new())
    );
    assert!(server.reviews.lock().unwrap().is_empty());
    let result = run(selecting("db"), server.addr, &delete()).await;
    assert_eq!(result.map_err(|r| r.code), Err(400));
}

#[tokio::test]
async fn match_conditions_skip_or_forbid() {
    let server = serve(b"http/1.1", replying(json!({"allowed": false}))).await;
    let conditions = |expression: &str| {
        configuration(
            &server.ca_pem,
            json!({"matchConditions": [{"name": "c", "expression": expression}]}),
        )
    };
    let skipped = run(
        conditions("request.userInfo.username == 'bob'"),
        server.addr,
        &delete(),
    )
    .await;
    assert_eq!(skipped, Ok(Vec::new()));
    let result = run(
        conditions("object.metadata.name == 'db'"),
        server.addr,
        &delete(),
    )
    .await;
    assert_eq!(
        result,
        Err(Rejection {
            code: 403,
            status: json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "configmaps \"db\" is forbidden: expression 'object.metadata.name == 'db'' resulted in error: no such overload",
                "reason": "Forbidden",
                "details": {"name": "db", "kind": "configmaps"},
                "code": 403,
            }),
        })
    );
    assert!(server.reviews.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_webhook_slower_than_its_timeout_fails() {
    let slow: Reply = Arc::new(|review| {
        (
            Duration::from_secs(3),
            answer(review, json!({"allowed": true})),
        )
    });
    let server = serve(b"http/1.1", slow).await;
    let started = std::time::Instant::now();
    let config = configuration(&server.ca_pem, json!({"timeoutSeconds": 1}));
    let result = run(config, server.addr, &delete()).await;
    assert_eq!(
        result,
        Err(internal(
            "failed to call webhook: Post \"https://webhook.navique-system.svc:443/validate?timeout=1s\": context deadline exceeded"
        ))
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_millis(2500),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn a_dry_run_is_refused_by_a_webhook_with_side_effects() {
    let server = serve(b"http/1.1", replying(json!({"allowed": true}))).await;
    let config = configuration(&server.ca_pem, json!({"sideEffects": "Some"}));
    let result = run(config, server.addr, &delete()).await;
    assert_eq!(
        result,
        Err(Rejection {
            code: 400,
            status: json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "admission webhook \"locks.navique.com\" does not support dry run",
                "reason": "BadRequest",
                "code": 400,
            }),
        })
    );
    assert!(server.reviews.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_response_for_another_request_is_a_call_failure() {
    let wrong: Reply = Arc::new(|_| {
        (
            Duration::ZERO,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "other", "allowed": true}}),
        )
    });
    let server = serve(b"http/1.1", wrong).await;
    let result = run(
        configuration(&server.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    let uid = server.reviews.lock().unwrap()[0]["request"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        result,
        Err(internal(&format!(
            "received invalid webhook response: expected response.uid=\"{uid}\", got \"other\""
        )))
    );
}

/// alice creating ConfigMap team-a/db.
fn create() -> Attributes {
    let mut attributes = delete();
    attributes.operation = crate::attributes::Operation::Create;
    attributes.object = Some(old_object().into());
    attributes.old_object = None;
    attributes.options = Some(json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}));
    attributes
}

/// A MutatingWebhookConfiguration with one webhook per `(name, server,
/// extra fields)`, each called at its server's URL on creates and
/// deletes of ConfigMaps.
fn mutating(name: &str, hooks: &[(&str, &Server, Value)]) -> Value {
    let webhooks: Vec<Value> = hooks
        .iter()
        .map(|(hook, server, extra)| {
            let mut webhook = json!({
                "name": hook,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": format!("https://localhost:{}/validate", server.addr.port()),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(&server.ca_pem),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "DELETE"], "resources": ["configmaps"]}],
            });
            if let (Some(webhook), Some(extra)) = (webhook.as_object_mut(), extra.as_object()) {
                webhook.extend(extra.clone());
            }
            webhook
        })
        .collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    })
}

async fn run_mutating(
    configurations: &[Value],
    attributes: &Attributes,
) -> Result<Mutation, Rejection> {
    let resolve = |_: &str, _: &str, _: u16| None;
    let namespace = json!({"metadata": {"name": "team-a"}});
    let ctx = WebhookContext {
        configurations,
        namespace_object: Some(&namespace),
        resolve_service: &resolve,
        connections: &Connections::default(),
    };
    mutate(&ctx, attributes).await
}

/// Allows with `patch` as a JSONPatch.
fn patching(patch: Value) -> Reply {
    replying(json!({
        "allowed": true,
        "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string()),
    }))
}

async fn webhook(reply: Reply) -> Server {
    serve_as("localhost", b"http/1.1", reply).await
}

fn labelled(labels: Value) -> Value {
    let mut object = old_object();
    object["metadata"]["labels"] = labels;
    object
}

#[tokio::test]
async fn mutating_webhooks_run_in_name_order_each_on_the_object_left_before_it() {
    let first = webhook(Arc::new(|review| {
        let patch = json!([{"op": "add", "path": "/metadata/labels/first", "value": "yes"}]);
        let mut answer = answer(
            review,
            json!({"allowed": true, "patchType": "JSONPatch", "warnings": ["first was here"]}),
        );
        answer["response"]["patch"] =
            json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        (Duration::ZERO, answer)
    }))
    .await;
    let second = webhook(patching(
        json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}]),
    ))
    .await;
    let configurations = [
        mutating("b", &[("second.navique.test", &second, json!({}))]),
        mutating("a", &[("first.navique.test", &first, json!({}))]),
    ];
    let result = run_mutating(&configurations, &create()).await;
    assert_eq!(
        result,
        Ok(Mutation {
            object: Some(labelled(
                json!({"app": "db", "first": "yes", "second": "yes"})
            )),
            warnings: vec!["first was here".to_string()],
        })
    );
    let seen = second.reviews.lock().unwrap()[0]["request"].clone();
    assert_eq!(seen["object"]["metadata"]["labels"]["first"], "yes");
    assert_eq!(seen["operation"], "CREATE");
    assert_eq!(seen["options"]["kind"], "CreateOptions");
}

#[tokio::test]
async fn an_if_needed_webhook_is_called_again_after_a_later_change() {
    let watcher = webhook(replying(json!({"allowed": true}))).await;
    let bystander = webhook(replying(json!({"allowed": true}))).await;
    let labeller = webhook(patching(
        json!([{"op": "add", "path": "/metadata/labels/team", "value": "a"}]),
    ))
    .await;
    let configurations = [mutating(
        "navique",
        &[
            (
                "watcher.navique.test",
                &watcher,
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
            ("bystander.navique.test", &bystander, json!({})),
            (
                "labeller.navique.test",
                &labeller,
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
        ],
    )];
    let result = run_mutating(&configurations, &create()).await;
    let expected = labelled(json!({"app": "db", "team": "a"}));
    assert_eq!(result.map(|m| m.object), Ok(Some(expected.clone())));
    let watched = watcher.reviews.lock().unwrap().clone();
    assert_eq!(watched.len(), 2);
    assert_eq!(watched[0]["request"]["object"], old_object());
    assert_eq!(watched[1]["request"]["object"], expected);
    assert_eq!(bystander.reviews.lock().unwrap().len(), 1);
    // Its own change does not call the labeller again.
    assert_eq!(labeller.reviews.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_patch_on_delete_or_one_that_does_not_apply_is_an_internal_error() {
    let server = webhook(patching(
        json!([{"op": "replace", "path": "/data/missing", "value": "x"}]),
    ))
    .await;
    let configurations = [mutating("navique", &[(HOOK, &server, json!({}))])];
    let internal = |message: &str| {
        Err::<Mutation, _>(Rejection {
            code: 500,
            status: json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": format!("Internal error occurred: {message}"),
                "reason": "InternalError",
                "details": {"causes": [{"message": message}]},
                "code": 500,
            }),
        })
    };
    assert_eq!(
        run_mutating(&configurations, &delete()).await,
        internal(
            "admission webhook \"locks.navique.com\" attempted to modify the object, which is not supported for this operation"
        )
    );
    assert_eq!(
        run_mutating(&configurations, &create()).await,
        internal("operation '/0' failed at path '/data/missing': path is invalid")
    );
}

#[tokio::test]
async fn a_v1_patch_without_its_type_is_an_invalid_response_under_the_failure_policy() {
    let server = webhook(replying(json!({
        "allowed": true,
        "patch": base64::engine::general_purpose::STANDARD.encode("[]"),
    })))
    .await;
    let failing = [mutating("navique", &[(HOOK, &server, json!({}))])];
    assert_eq!(
        run_mutating(&failing, &create()).await,
        Err(internal(
            "received invalid webhook response: webhook returned response.patch but not response.patchType"
        ))
    );
    let ignoring = [mutating(
        "navique",
        &[(HOOK, &server, json!({"failurePolicy": "Ignore"}))],
    )];
    assert_eq!(
        run_mutating(&ignoring, &create()).await,
        Ok(Mutation::default())
    );
}

#[tokio::test]
async fn a_validating_webhook_may_not_return_a_patch() {
    let server = serve(
        b"http/1.1",
        patching(json!([{"op": "add", "path": "/data/x", "value": "y"}])),
    )
    .await;
    let result = run(
        configuration(&server.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    assert_eq!(
        result,
        Err(internal(
            "received invalid webhook response: validating webhook may not return response.patch"
        ))
    );
}

#[test]
fn validation_can_run_on_a_multithreaded_server() {
    fn send<T: Send>(_: &T) {}
    let resolve = |_: &str, _: &str, _: u16| None;
    let ctx = WebhookContext {
        configurations: &[],
        namespace_object: None,
        resolve_service: &resolve,
        connections: &Connections::default(),
    };
    let attributes = delete();
    send(&validate(&ctx, &attributes));
}

#[tokio::test]
async fn calls_to_an_http2_webhook_share_one_connection_until_it_breaks_off() {
    let server = serve(b"h2", replying(json!({"allowed": true}))).await;
    let connections = Connections::default();
    let configuration = configuration(&server.ca_pem, json!({}));
    for _ in 0..3 {
        let result = run_on(&connections, configuration.clone(), server.addr, &delete()).await;
        assert_eq!(result, Ok(vec![]));
    }
    assert_eq!(server.reviews.lock().unwrap().len(), 3);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);

    // The webhook restarts: the kept connection is closed, and the next
    // call dials afresh rather than failing.
    server.drop_connections();
    let key = connections::Key {
        service: true,
        authority: format!("{SERVICE_HOST}:443"),
        ca_bundle: Some(base64::engine::general_purpose::STANDARD.encode(&server.ca_pem)),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while connections.get(&key).is_some() {
        assert!(
            Instant::now() < deadline,
            "the broken connection is still kept"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let result = run_on(&connections, configuration, server.addr, &delete()).await;
    assert_eq!(result, Ok(vec![]));
    assert_eq!(server.reviews.lock().unwrap().len(), 4);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_kept_connection_is_not_reused_for_another_ca_bundle() {
    let server = serve(b"h2", replying(json!({"allowed": true}))).await;
    let other = serve(b"h2", replying(json!({"allowed": true}))).await;
    let connections = Connections::default();
    let trusted = configuration(&server.ca_pem, json!({}));
    assert_eq!(
        run_on(&connections, trusted, server.addr, &delete()).await,
        Ok(vec![])
    );
    // The same service, now trusting another CA only: the connection kept
    // for the first bundle must not answer for it.
    let result = run_on(
        &connections,
        configuration(&other.ca_pem, json!({})),
        server.addr,
        &delete(),
    )
    .await;
    let message = result.expect_err("a certificate of an untrusted CA").status["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("x509: certificate signed by unknown authority"),
        "{message}"
    );
    assert_eq!(server.reviews.lock().unwrap().len(), 1);
}
