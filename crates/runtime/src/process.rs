//! Process metrics read at scrape time: resident and peak memory, so that
//! SREs (and benchmarks) see each component's footprint.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Reads `/proc/self/status` on every scrape.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

/// `VmRSS` and `VmHWM` of `/proc/self/status`, in bytes.
fn memory() -> Option<(i64, i64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<i64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((resident, peak)) = memory() else {
            return Ok(());
        };
        for (name, help, value) in [
            (
                "process_resident_memory",
                "Resident memory of the process",
                resident,
            ),
            (
                "process_peak_resident_memory",
                "Highest resident memory of the process so far",
                peak,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            let metric =
                encoder.encode_descriptor(name, help, Some(&Unit::Bytes), gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_is_read_from_proc() {
        let (resident, peak) = super::memory().expect("/proc/self/status");
        assert!(resident > 0 && peak >= resident, "{resident} {peak}");
    }
}
