//! Admission metrics: how many requests each validator answered and how, and
//! how long answering took, so that a webhook slowing down the API server or
//! denying more than usual shows before users report it.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

// Static labels: looking a series up allocates nothing per request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    path: &'static str,
    operation: &'static str,
    allowed: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    path: &'static str,
}

type HistogramFamily = Family<PathLabels, Histogram, fn() -> Histogram>;

/// The webhook's admission metrics; cheap to clone, clones share values.
#[derive(Clone)]
pub struct AdmissionMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: HistogramFamily,
}

impl Default for AdmissionMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 0.25 ms to about 1 s: a validator answers from memory.
                Histogram::new(exponential_buckets(0.000_25, 2.0, 13))
            }),
        }
    }
}

impl AdmissionMetrics {
    /// Registers `admission_requests_total` and `admission_duration_seconds`
    /// (prefixed with the component's name by the registry).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "admission_requests",
            "Admission requests answered, by path, operation and whether allowed",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "admission_duration",
            "Time to read, decide and answer an admission request, by path",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    /// Records one answered request.
    pub fn observe(
        &self,
        path: &'static str,
        operation: &'static str,
        allowed: bool,
        elapsed: Duration,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                path,
                operation,
                allowed: if allowed { "true" } else { "false" },
            })
            .inc();
        self.duration
            .get_or_create(&PathLabels { path })
            .observe(elapsed.as_secs_f64());
    }
}
