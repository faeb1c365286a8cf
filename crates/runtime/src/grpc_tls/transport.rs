//! Serving and dialling with the current [`Credentials`]: each new
//! connection's TLS handshake takes the certificate current then, so a
//! renewed certificate is used without a restart.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;
use tonic::transport::{Channel, Endpoint, Uri};

use super::{Credentials, Error, GrpcTls};

/// How long a client has to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const ACCEPTED_BACKLOG: usize = 64;

/// Whether a TLS server asks its clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCertificates {
    /// Asked for, and verified against the CAs when presented; the service
    /// decides per RPC whether it needs one (see
    /// [`super::identity::authorize`]), so a caller without one gets a gRPC
    /// `Unauthenticated` rather than a failed handshake.
    Verified,
    /// Not asked for: the clients are people, authenticated otherwise.
    NotAsked,
}

/// Serves `router` on `listener` until `shutdown`, with TLS unless
/// plaintext was configured.
pub async fn serve(
    router: Router,
    listener: TcpListener,
    tls: &GrpcTls,
    clients: ClientCertificates,
    shutdown: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    match tls {
        GrpcTls::Plaintext => {
            router
                .serve_with_incoming_shutdown(
                    TcpListenerStream::new(listener),
                    shutdown.cancelled_owned(),
                )
                .await
        }
        GrpcTls::Tls(credentials) => {
            let incoming = handshaken(listener, credentials.clone(), clients, shutdown.clone());
            router
                .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                .await
        }
    }
}

/// The connections of `listener` whose TLS handshake succeeded. Each
/// handshake runs on its own task, so that a slow or silent client delays
/// no other; a failed one (plaintext, a certificate of another CA) closes
/// the connection.
fn handshaken(
    listener: TcpListener,
    credentials: Arc<Credentials>,
    clients: ClientCertificates,
    shutdown: CancellationToken,
) -> ReceiverStream<Result<tokio_rustls::server::TlsStream<TcpStream>, std::io::Error>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(ACCEPTED_BACKLOG);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: pause.
                        tracing::warn!(error = %e, "cannot accept a gRPC connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let acceptor = TlsAcceptor::from(credentials.server_config(clients));
            let sender = sender.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = sender.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => {
                        tracing::info!(%peer, error = %e, "refused a gRPC connection: TLS handshake failed");
                    }
                    Err(_) => {
                        tracing::info!(%peer, "refused a gRPC connection: no TLS handshake within 10 s");
                    }
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}

/// A channel to `url` (given by `flag`), connected on first use: `https://`
/// with this component's certificate, verifying the server's against the
/// CAs and its name against the URL's host; `http://` only in plaintext
/// mode.
pub fn channel(
    flag: &'static str,
    url: &str,
    tls: &GrpcTls,
    connect_timeout: Duration,
) -> Result<Channel, Error> {
    let invalid = |reason: String| Error::Url {
        flag,
        url: url.to_owned(),
        reason,
    };
    let uri: Uri = url.parse().map_err(|e| invalid(format!("{e}")))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    let credentials = match (tls, scheme) {
        (GrpcTls::Plaintext, "http") => {
            return Ok(Endpoint::from_shared(url.to_owned())
                .map_err(|e| invalid(e.to_string()))?
                .connect_timeout(connect_timeout)
                .connect_lazy());
        }
        (GrpcTls::Tls(credentials), "https") => credentials.clone(),
        (GrpcTls::Plaintext, _) => {
            return Err(invalid(
                "with --grpc-insecure-plaintext the URL must be http://".to_owned(),
            ));
        }
        (GrpcTls::Tls(_), _) => {
            return Err(invalid(
                "gRPC is TLS: use an https:// URL (or --grpc-insecure-plaintext with http://)"
                    .to_owned(),
            ));
        }
    };
    let host = uri
        .host()
        .ok_or_else(|| invalid("no host".to_owned()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let server_name =
        ServerName::try_from(host.clone()).map_err(|e| invalid(format!("host: {e}")))?;
    // TLS is done here, with the credentials current at each connection;
    // tonic sees a plain connection to the same authority.
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default();
    let endpoint = Endpoint::from_shared(format!("http://{authority}"))
        .map_err(|e| invalid(e.to_string()))?
        .connect_timeout(connect_timeout);
    Ok(
        endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let connector = TlsConnector::from(credentials.client_config());
            let (host, server_name) = (host.clone(), server_name.clone());
            async move {
                let tcp = TcpStream::connect((host.as_str(), port)).await?;
                tcp.set_nodelay(true)?;
                let stream = connector.connect(server_name, tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        })),
    )
}
