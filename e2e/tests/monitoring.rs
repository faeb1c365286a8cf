//! The chart's PrometheusRule and Grafana dashboard: rendered only when
//! asked for; every expression parses as PromQL (promql-parser, the parser
//! GreptimeDB ports from Prometheus); and every metric they name is one the
//! components register (read from their source, the same calls that name
//! the metrics at run time), Prometheus' standard `process_*` set, or one
//! of the few that Prometheus (`up`) or kube-apiserver export.

use std::collections::BTreeSet;
use std::path::Path;

use navique_e2e::locks::helm_template;
use navique_e2e::repo_root;
use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_yaml::Value;

/// Series that do not come from Navique's registries.
const EXTERNAL: [&str; 2] = [
    // Prometheus' own, per scrape target.
    "up",
    // kube-apiserver's, per webhook it calls.
    "apiserver_admission_webhook_rejection_count",
];

/// The standard process collector's series (crates/runtime/src/process.rs).
const PROCESS: [&str; 9] = [
    "process_cpu_seconds_total",
    "process_start_time_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_virtual_memory_max_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_threads",
    "navique_process_peak_resident_memory_bytes",
];

/// The string literal that starts `text` (after whitespace), if any.
fn leading_literal(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('"')?;
    rest.split_once('"').map(|(literal, _)| literal)
}

/// The metric families a crate registers: `(name, unit)` of every
/// `register("name", ...)` and `register_with_unit("name", ..., Unit::X, ...)`,
/// and the three of every `ReconcileMetrics::register(component, "prefix", ...)`.
fn registered(dir: &Path, out: &mut Vec<(String, Option<&'static str>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            registered(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        // A family registered with its unit, or a collector's descriptor.
        for (at, call) in ["register_with_unit(", "encode_descriptor("]
            .iter()
            .flat_map(|call| source.match_indices(call))
        {
            let call = &source[at + call.len()..];
            let Some(name) = leading_literal(call) else {
                continue;
            };
            let args = &call[..call.find(");").unwrap_or(call.len())];
            let unit = if args.contains("Unit::Seconds") {
                "seconds"
            } else if args.contains("Unit::Bytes") {
                "bytes"
            } else if args.contains("None") {
                ""
            } else {
                panic!("{}: unit of {name}", path.display())
            };
            out.push((name.to_owned(), Some(unit).filter(|u| !u.is_empty())));
        }
        for (at, _) in source.match_indices(".register(") {
            if let Some(name) = leading_literal(&source[at + ".register(".len()..]) {
                out.push((name.to_owned(), None));
            }
        }
        for (at, _) in source.match_indices("ReconcileMetrics::register(") {
            let call = &source[at + "ReconcileMetrics::register(".len()..];
            let Some((_, rest)) = call.split_once(',') else {
                continue;
            };
            if let Some(prefix) = leading_literal(rest) {
                let name = |metric: &str| {
                    if prefix.is_empty() {
                        metric.to_owned()
                    } else {
                        format!("{prefix}_{metric}")
                    }
                };
                out.push((name("reconciles"), None));
                out.push((name("reconcile_errors"), None));
                out.push((name("reconcile_duration"), Some("seconds")));
            }
        }
    }
}

/// Every series name the components can export: each family under its
/// component's prefix, with its unit and each suffix its type may add.
fn exported() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = PROCESS.iter().map(|s| (*s).to_owned()).collect();
    names.insert("navique_build_info".to_owned());
    let crates = repo_root().join("crates");
    // Shared families (kube_connect_failures, leader) are registered by the
    // runtime under every component's prefix.
    let mut shared = Vec::new();
    registered(&crates.join("runtime/src"), &mut shared);
    for component in navique_e2e::COMPONENTS {
        let mut families = shared.clone();
        registered(&crates.join(component).join("src"), &mut families);
        let prefix = format!("navique_{}", component.replace('-', "_"));
        for (name, unit) in families {
            if name.starts_with("navique_") || name.starts_with("process_") {
                continue; // the unprefixed registry's, listed above
            }
            let base = match unit {
                Some(unit) => format!("{prefix}_{name}_{unit}"),
                None => format!("{prefix}_{name}"),
            };
            for suffix in ["", "_total", "_bucket", "_sum", "_count"] {
                names.insert(format!("{base}{suffix}"));
            }
        }
    }
    names
}

/// The metric names an expression selects.
#[derive(Default)]
struct Selected(BTreeSet<String>);

impl Selected {
    fn add(&mut self, selector: &parser::VectorSelector) {
        let name = selector.name.clone().or_else(|| {
            selector
                .matchers
                .matchers
                .iter()
                .find(|m| m.name == "__name__")
                .map(|m| m.value.clone())
        });
        self.0
            .insert(name.expect("a selector without a metric name"));
    }
}

impl ExprVisitor for Selected {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        match expr {
            Expr::VectorSelector(selector) => self.add(selector),
            Expr::MatrixSelector(matrix) => self.add(&matrix.vs),
            _ => {}
        }
        Ok(true)
    }
}

/// Parses `expr` (failing the test with the parser's message) and returns
/// the metrics it names.
fn metrics_of(what: &str, expr: &str) -> BTreeSet<String> {
    let parsed = parser::parse(expr).unwrap_or_else(|e| panic!("{what}: {e}\n{expr}"));
    let mut selected = Selected::default();
    walk_expr(&mut selected, &parsed).unwrap();
    selected.0
}

fn render(args: &[&str]) -> Vec<Value> {
    helm_template(args)
        .split("\n---\n")
        .map(|document| serde_yaml::from_str::<Value>(document).expect("rendered YAML"))
        .filter(|object| {
            !object.is_null() && object["kind"] == "PrometheusRule" || object["kind"] == "ConfigMap"
        })
        .collect()
}

#[test]
fn the_registered_names_are_read_from_the_source() {
    // The reader must find what a scrape of a running component shows
    // (e2e/tests/components.rs checks those lines), or the check below
    // proves nothing.
    let names = exported();
    for name in [
        "navique_lock_controller_leader",
        "navique_lock_controller_locks_active",
        "navique_lock_controller_reconcile_duration_seconds_bucket",
        "navique_webhook_admission_requests_total",
        "navique_webhook_admission_duration_seconds_bucket",
        "navique_webhook_kube_connect_failures_total",
        "navique_service_lifecycle_controller_stack_reconciles_total",
        "navique_service_lifecycle_controller_deletions_blocked",
        "navique_backup_runner_uploaded_bytes_total",
        "navique_backup_runner_last_successful_backup_timestamp_seconds",
        "navique_service_lifecycle_controller_oldest_pending_approval_seconds",
    ] {
        assert!(names.contains(name), "{name} not found in the source");
    }
    assert!(!names.contains("navique_webhook_locks_active"));
}

#[test]
fn the_rules_and_dashboard_render_only_when_enabled() {
    assert!(render(&[]).is_empty());
    let objects = render(&[
        "--set",
        "metrics.prometheusRule.enabled=true,metrics.prometheusRule.labels.release=kube-prometheus-stack",
        "--set",
        "metrics.dashboard.enabled=true,metrics.dashboard.annotations.grafana_folder=Navique",
    ]);
    assert_eq!(objects.len(), 2, "{objects:?}");
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap();
    assert_eq!(rule["metadata"]["namespace"], "navique-system");
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let dashboard = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(dashboard["metadata"]["name"], "navique-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        dashboard["metadata"]["annotations"]["grafana_folder"],
        "Navique"
    );
}

#[test]
fn every_rule_parses_and_names_only_exported_metrics() {
    let exported = exported();
    let objects = render(&[
        "--set",
        "metrics.prometheusRule.enabled=true,metrics.prometheusRule.deletionBlockedFor=2h",
        "--set-json",
        "metrics.prometheusRule.webhookLatencySeconds=0.25",
    ]);
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap();
    let mut alerts = BTreeSet::new();
    for group in rule["spec"]["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            let expr = rule["expr"].as_str().unwrap();
            // Each selector of Navique's own metrics is the release's namespace.
            assert!(
                expr.contains(r#"namespace="navique-system""#) || expr.contains("apiserver_"),
                "{alert}: {expr}"
            );
            for metric in metrics_of(alert, expr) {
                assert!(
                    exported.contains(&metric) || EXTERNAL.contains(&metric.as_str()),
                    "{alert} names {metric}, which no component exports"
                );
            }
            assert!(!rule["annotations"]["summary"].is_null(), "{alert}");
            assert!(!rule["labels"]["severity"].is_null(), "{alert}");
            alerts.insert(alert.to_owned());
        }
    }
    assert_eq!(
        alerts.into_iter().collect::<Vec<_>>(),
        [
            "NaviqueApprovalWaiting",
            "NaviqueBackupTooOld",
            "NaviqueBackupsFailing",
            "NaviqueDeletionBlocked",
            "NaviqueFinalBackupsFailing",
            "NaviqueLeaderMissing",
            "NaviqueWebhookDown",
            "NaviqueWebhookErrors",
            "NaviqueWebhookSlow",
        ]
    );
    // The thresholds come from the values.
    let text = serde_yaml::to_string(rule).unwrap();
    assert!(text.contains("for: 2h"), "{text}");
    assert!(text.contains("[5m]))) > 0.25"), "{text}");

    // A broken expression fails the parser, so the check above can fail.
    assert!(parser::parse("sum by (namespace) (rate(x[5m])").is_err());
}

#[test]
fn every_dashboard_query_parses_and_names_only_exported_metrics() {
    let exported = exported();
    let objects = render(&["--set", "metrics.dashboard.enabled=true"]);
    let configmap = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    let dashboard: serde_json::Value =
        serde_json::from_str(configmap["data"]["navique.json"].as_str().unwrap()).unwrap();
    let mut queries = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for metric in metrics_of(title, expr) {
                assert!(
                    exported.contains(&metric),
                    "panel {title} names {metric}, which no component exports"
                );
            }
            queries += 1;
        }
    }
    assert!(queries >= 10, "{queries} queries");
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["query"]
            .as_str()
            .and_then(|q| q.strip_prefix("label_values("))
        {
            let selector = query.rsplit_once(',').unwrap().0;
            metrics_of("variable", selector);
        }
    }
}
