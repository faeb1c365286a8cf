//! The standard `process_*` metrics of Prometheus' client libraries, read
//! from `/proc` at scrape time and unprefixed, as the conventions say
//! (the scrape's job and instance labels tell the components apart): CPU,
//! memory, open and maximum file descriptors, start time. Plus the peak
//! resident memory, which benchmarks read, under Navique's own name.

use procfs::WithCurrentSystemInfo;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Reads `/proc/self` on every scrape.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

/// One scrape's reading of the process.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    cpu_seconds: f64,
    resident_bytes: i64,
    peak_resident_bytes: Option<i64>,
    virtual_bytes: i64,
    virtual_max_bytes: Option<i64>,
    open_fds: Option<i64>,
    max_fds: Option<i64>,
    start_time_seconds: f64,
    threads: i64,
}

/// A `/proc` limit as a gauge value; unlimited is -1, as the Go client reports it.
fn limit_value(limit: procfs::process::LimitValue) -> i64 {
    match limit {
        procfs::process::LimitValue::Value(value) => i64::try_from(value).unwrap_or(i64::MAX),
        procfs::process::LimitValue::Unlimited => -1,
    }
}

fn read() -> procfs::ProcResult<Reading> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let boot = procfs::boot_time_secs()? as f64;
    let limits = me.limits().ok();
    Ok(Reading {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: stat.rss_bytes().get() as i64,
        peak_resident_bytes: me
            .status()
            .ok()
            .and_then(|s| s.vmhwm)
            .map(|kib| kib as i64 * 1024),
        virtual_bytes: stat.vsize as i64,
        virtual_max_bytes: limits
            .as_ref()
            .map(|l| limit_value(l.max_address_space.soft_limit)),
        open_fds: me.fd_count().ok().map(|n| n as i64),
        max_fds: limits.map(|l| limit_value(l.max_open_files.soft_limit)),
        start_time_seconds: boot + stat.starttime as f64 / ticks,
        threads: stat.num_threads,
    })
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    value: impl Into<Option<i64>>,
) -> Result<(), std::fmt::Error> {
    let Some(value) = value.into() else {
        return Ok(());
    };
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
    gauge.encode(metric)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // An unreadable /proc (not Linux) leaves the metrics out rather
        // than failing the whole scrape.
        let Ok(reading) = read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(reading.cpu_seconds);
        let metric = encoder.encode_descriptor(
            "process_cpu",
            "Total user and system CPU time spent",
            Some(&Unit::Seconds),
            cpu.metric_type(),
        )?;
        cpu.encode(metric)?;
        let start = ConstGauge::new(reading.start_time_seconds);
        let metric = encoder.encode_descriptor(
            "process_start_time",
            "Start time of the process since the Unix epoch",
            Some(&Unit::Seconds),
            start.metric_type(),
        )?;
        start.encode(metric)?;
        gauge(
            &mut encoder,
            "process_resident_memory",
            "Resident memory size",
            Some(Unit::Bytes),
            reading.resident_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory",
            "Virtual memory size",
            Some(Unit::Bytes),
            reading.virtual_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_max",
            "Maximum amount of virtual memory available (-1: unlimited)",
            Some(Unit::Bytes),
            reading.virtual_max_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors",
            None,
            reading.open_fds,
        )?;
        gauge(
            &mut encoder,
            "process_max_fds",
            "Maximum number of open file descriptors (-1: unlimited)",
            None,
            reading.max_fds,
        )?;
        gauge(
            &mut encoder,
            "process_threads",
            "Number of OS threads in the process",
            None,
            reading.threads,
        )?;
        gauge(
            &mut encoder,
            "navique_process_peak_resident_memory",
            "Highest resident memory of the process so far",
            Some(Unit::Bytes),
            reading.peak_resident_bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_is_read_from_proc() {
        let reading = read().expect("/proc/self");
        assert!(reading.resident_bytes > 0, "{reading:?}");
        // VmHWM and the stat's rss are separate counters, synced lazily
        // while other test threads allocate: compare neither to the other.
        assert!(reading.peak_resident_bytes.unwrap() > 0);
        assert!(reading.virtual_bytes >= reading.resident_bytes);
        assert!(reading.open_fds.unwrap() >= 3, "stdin, stdout, stderr");
        assert!(reading.max_fds.unwrap() != 0);
        assert!(reading.threads >= 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and not before this test binary was built.
        assert!(
            reading.start_time_seconds <= now + 1.0 && reading.start_time_seconds > now - 3600.0,
            "{reading:?}"
        );
    }

    #[test]
    fn the_standard_names_are_encoded_unprefixed() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_start_time_seconds ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_virtual_memory_max_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_threads ",
            "navique_process_peak_resident_memory_bytes ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} missing:\n{text}"
            );
        }
        assert!(
            text.contains("# TYPE process_cpu_seconds counter\n"),
            "{text}"
        );
    }
}
