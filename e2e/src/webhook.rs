//! A validating admission webhook served by a test over TLS: it records the
//! AdmissionReviews it receives and answers with what the test decides.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

type Decide = dyn Fn(&Value) -> Value + Send + Sync;

/// A running webhook server.
pub struct WebhookServer {
    pub addr: SocketAddr,
    /// The CA that signed its certificate, base64 PEM, for `caBundle`.
    pub ca_bundle: String,
    /// Every AdmissionReview request received.
    pub received: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookServer {
    /// Serves on 127.0.0.1; `decide` turns a request (the review's
    /// `request`) into the `response` fields besides `uid`
    /// (`{"allowed": false, "status": {...}}`).
    pub async fn start(decide: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("params");
        let cert = params.signed_by(&key, &issuer).expect("certificate");
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("TLS config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let decide: Arc<Decide> = Arc::new(decide);
        let log = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, decide, log) = (acceptor.clone(), decide.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let (decide, log) = (decide.clone(), log.clone());
                            async move {
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let review: Value =
                                    serde_json::from_slice(&body).unwrap_or_default();
                                log.lock().unwrap().push(review["request"].clone());
                                let mut response = decide(&review["request"]);
                                response["uid"] = review["request"]["uid"].clone();
                                let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
                                Ok::<_, Infallible>(
                                    hyper::Response::builder()
                                        .header("content-type", "application/json")
                                        .body(Full::new(Bytes::from(answer.to_string())))
                                        .expect("response"),
                                )
                            }
                        },
                    );
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca.pem()),
            received,
            task,
        }
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
