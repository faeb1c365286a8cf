//! `SnapshotService` over gRPC: mutual TLS (or plaintext, explicitly
//! configured), every RPC authorised on the caller's certificate identity
//! and its fields bounded ([`crate::bounds`]) before any work, continuing
//! the caller's trace from its W3C `traceparent` metadata.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use navique_api::grpc::snapshot::v1::snapshot_service_server::{
    SnapshotService, SnapshotServiceServer,
};
use navique_api::grpc::snapshot::v1::{
    GetSnapshotRequest, RequestSnapshotRequest, RestoreResult, RestoreSnapshotRequest, Snapshot,
    SnapshotProgress, WatchSnapshotRequest,
};
use navique_runtime::grpc_tls::{self, ClientCertificates, GrpcTls};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataMap;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::Error;
use crate::bounds::{self, MAX_REQUEST_BYTES};
use crate::engine::{RestoreRequest, SnapshotRequest};
use crate::snapshots::{Snapshots, State};

/// Serves `api` on `listener` until `shutdown`: with TLS, only to the
/// components of `allowed_clients`, checked on every RPC by their
/// certificate's identity (no certificate: `Unauthenticated`; another
/// identity: `PermissionDenied`); in plaintext, explicitly configured, to
/// anyone.
pub async fn serve(
    listener: TcpListener,
    tls: &GrpcTls,
    api: Api,
    allowed_clients: Vec<String>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let service = SnapshotServiceServer::new(api).max_decoding_message_size(MAX_REQUEST_BYTES);
    let router = match tls {
        GrpcTls::Tls(_) => Server::builder().add_service(InterceptedService::new(
            service,
            grpc_tls::authorize(allowed_clients),
        )),
        GrpcTls::Plaintext => Server::builder().add_service(service),
    };
    grpc_tls::serve(
        router,
        listener,
        tls,
        ClientCertificates::Verified,
        shutdown,
    )
    .await
    .map_err(|e| Error::Serve {
        addr,
        reason: navique_runtime::one_line(&e),
    })
}

/// Reads `traceparent`/`tracestate` from gRPC metadata.
struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|key| match key {
                tonic::metadata::KeyRef::Ascii(key) => Some(key.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// The caller's trace context (empty when it sent none).
pub fn remote_context(metadata: &MetadataMap) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&MetadataExtractor(metadata))
}

/// A server span for `method`, child of the caller's span, naming the
/// caller's identity (none in plaintext).
fn server_span<T>(method: &'static str, request: &Request<T>) -> tracing::Span {
    let caller = request
        .extensions()
        .get::<grpc_tls::Caller>()
        .map(|caller| caller.0.as_str())
        .unwrap_or_default();
    let span = tracing::info_span!("grpc", otel.kind = "server", rpc.method = method, caller);
    // Fails only when no OpenTelemetry layer is installed (traces off).
    let _ = span.set_parent(remote_context(request.metadata()));
    span
}

/// The SnapshotService implementation.
#[derive(Clone)]
pub struct Api {
    snapshots: Arc<Snapshots>,
}

impl Api {
    pub fn new(snapshots: Arc<Snapshots>) -> Self {
        Self { snapshots }
    }
}

fn progress(state: &State) -> SnapshotProgress {
    SnapshotProgress {
        phase: state.snapshot.phase,
        bytes_written: state.bytes_written,
        message: state.message.clone(),
        snapshot: state.is_terminal().then(|| state.snapshot.clone()),
    }
}

type ProgressStream = Pin<Box<dyn Stream<Item = Result<SnapshotProgress, Status>> + Send>>;

#[tonic::async_trait]
impl SnapshotService for Api {
    async fn request_snapshot(
        &self,
        request: Request<RequestSnapshotRequest>,
    ) -> Result<Response<Snapshot>, Status> {
        let span = server_span("RequestSnapshot", &request);
        async {
            bounds::request_snapshot(request.get_ref())?;
            let request = SnapshotRequest::from_proto(request.into_inner())?;
            // Refused now, not as a failed snapshot: no record, no archive.
            self.snapshots
                .engine()
                .check_record(&request.backup, request.origin)
                .await?;
            tracing::info!(idempotency_key = %request.idempotency_key, backup = %request.backup.archive(), "snapshot requested");
            Ok(Response::new(self.snapshots.request(request, true)?))
        }
        .instrument(span)
        .await
        .map_err(|e: Error| e.into())
    }

    type WatchSnapshotStream = ProgressStream;

    async fn watch_snapshot(
        &self,
        request: Request<WatchSnapshotRequest>,
    ) -> Result<Response<Self::WatchSnapshotStream>, Status> {
        let span = server_span("WatchSnapshot", &request);
        let _entered = span.enter();
        bounds::watch_snapshot(request.get_ref())?;
        let receiver = self.snapshots.watch(&request.get_ref().idempotency_key)?;
        let shutdown = self.snapshots.shutdown().clone();
        // Each message is the latest state; intermediate byte counts may be
        // skipped. Ends after the COMPLETED or FAILED message, or on shutdown.
        let stream = futures::stream::unfold(Some((receiver, true)), move |next| {
            let shutdown = shutdown.clone();
            async move {
                let (mut receiver, first) = next?;
                if !first {
                    tokio::select! {
                        changed = receiver.changed() => changed.ok()?,
                        () = shutdown.cancelled() => {
                            // UNAVAILABLE: the client asks again after the restart.
                            return Some((Err(Status::from(Error::ShuttingDown)), None));
                        }
                    }
                }
                let state = receiver.borrow_and_update().clone();
                let next = (!state.is_terminal()).then_some((receiver, false));
                Some((Ok(progress(&state)), next))
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_snapshot(
        &self,
        request: Request<GetSnapshotRequest>,
    ) -> Result<Response<Snapshot>, Status> {
        let span = server_span("GetSnapshot", &request);
        let _entered = span.enter();
        bounds::get_snapshot(request.get_ref())?;
        Ok(Response::new(
            self.snapshots.get(&request.get_ref().idempotency_key)?,
        ))
    }

    async fn restore_snapshot(
        &self,
        request: Request<RestoreSnapshotRequest>,
    ) -> Result<Response<RestoreResult>, Status> {
        let span = server_span("RestoreSnapshot", &request);
        let engine = self.snapshots.engine().clone();
        let cancel = self.snapshots.shutdown().clone();
        async move {
            bounds::restore_snapshot(request.get_ref())?;
            let request = RestoreRequest::from_proto(request.into_inner())?;
            engine.metrics().restores.inc();
            tracing::info!(archive = %request.source.archive(), target = %request.target_name, "restore requested");
            let restored = engine.restore(&request, &cancel).await.inspect_err(|e| {
                engine.metrics().restore_failures.inc();
                tracing::warn!(error = %navique_runtime::one_line(e), "restore failed");
            })?;
            let timestamp = |at: k8s_openapi::jiff::Timestamp| prost_types::Timestamp {
                seconds: at.as_second(),
                nanos: at.subsec_nanosecond(),
            };
            Ok(Response::new(RestoreResult {
                location: restored.location,
                size_bytes: restored.digested.size,
                sha256: restored.digested.sha256,
                database: restored.database,
                started_at: Some(timestamp(restored.started_at)),
                completed_at: Some(timestamp(restored.completed_at)),
            }))
        }
        .instrument(span)
        .await
        .map_err(|e: Error| e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    #[test]
    fn the_callers_traceparent_becomes_the_parent() {
        let mut metadata = MetadataMap::new();
        metadata.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let context = remote_context(&metadata);
        let span = context.span();
        let parent = span.span_context();
        assert!(parent.is_remote());
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(parent.span_id().to_string(), "00f067aa0ba902b7");
    }

    #[test]
    fn without_a_traceparent_there_is_no_parent() {
        let context = remote_context(&MetadataMap::new());
        assert!(!context.span().span_context().is_valid());
    }
}
