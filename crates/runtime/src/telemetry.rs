//! Logs (text or JSON) and, when an OTLP endpoint is configured, traces.

use std::io::IsTerminal;

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::{CommonArgs, Error, LogFormat};

/// Flushes and stops the trace exporter when dropped.
pub(crate) struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: cannot flush traces: {e}");
        }
    }
}

/// Installs the global subscriber for `component`.
pub(crate) fn init(component: &'static str, args: &CommonArgs) -> Result<TelemetryGuard, Error> {
    let filter = EnvFilter::try_new(&args.log_level)
        .map_err(|e| Error::Logging(format!("invalid log filter {:?}: {e}", args.log_level)))?;
    let fmt = match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stdout().is_terminal())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .boxed(),
    };

    let provider = args
        .otlp_endpoint
        .as_deref()
        .map(|endpoint| tracer_provider(component, endpoint))
        .transpose()?;
    let otel = provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer(component)));

    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(|e| Error::Logging(e.to_string()))?;
    Ok(TelemetryGuard { provider })
}

fn tracer_provider(component: &'static str, endpoint: &str) -> Result<SdkTracerProvider, Error> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|source| Error::Tracing {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(component).build())
        .build())
}

/// The W3C trace context (`traceparent`, `tracestate`) of the current span,
/// as headers to send with a request to another component, so that its
/// spans continue this trace (backup-runner reads them back from gRPC
/// metadata). Empty when traces are off.
pub fn trace_headers() -> HashMap<String, String> {
    let mut headers = HashMap::new();
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut headers);
    headers
}
