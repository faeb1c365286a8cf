//! Core v1 and events.k8s.io/v1 Events are one storage in kube-apiserver:
//! an event recorded through either API is listed by both. Events are stored
//! in the core form and converted for events.k8s.io readers and writers.

use serde_json::{Map, Value, json};

/// Field renames between the two forms: (events.k8s.io/v1, core/v1).
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedSource", "source"),
    ("reportingController", "reportingComponent"),
];

/// Fields with the same name in both forms.
const SHARED: [&str; 7] = [
    "metadata",
    "reason",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
];

fn convert(
    object: &Value,
    api_version: &str,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    for field in SHARED {
        if let Some(value) = object.get(field) {
            out.insert(field.into(), value.clone());
        }
    }
    for (from, to) in pairs {
        if let Some(value) = object.get(from) {
            out.insert(to.into(), value.clone());
        }
    }
    Value::Object(out)
}

/// The events.k8s.io/v1 form of a stored core event.
pub fn to_events_v1(core: &Value) -> Value {
    let mut event = convert(
        core,
        "events.k8s.io/v1",
        RENAMED.iter().map(|(v1, core)| (*core, *v1)),
    );
    if let Some(instance) = core.get("reportingInstance") {
        event["reportingInstance"] = instance.clone();
    }
    event
}

/// The stored core form of an events.k8s.io/v1 event.
pub fn from_events_v1(event: &Value) -> Value {
    let mut core = convert(event, "v1", RENAMED.iter().copied());
    if let Some(instance) = event.get("reportingInstance") {
        core["reportingInstance"] = instance.clone();
    }
    if core.get("source").is_none()
        && let Some(controller) = event.get("reportingController")
    {
        core["source"] = json!({"component": controller});
    }
    core
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_v1_event_reads_back_through_core_with_its_fields_renamed() {
        let event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "orders-db.1", "namespace": "my-project"},
            "regarding": {"kind": "ManagedService", "name": "orders-db"},
            "note": "deleting under Retain", "reason": "DeletionPolicyDowngraded", "type": "Warning",
            "reportingController": "service-lifecycle-controller", "reportingInstance": "pod-1",
            "eventTime": "2026-11-30T10:00:00.000000Z", "action": "Delete",
        });
        let core = from_events_v1(&event);
        assert_eq!(core["involvedObject"]["name"], "orders-db");
        assert_eq!(core["message"], "deleting under Retain");
        assert_eq!(core["reportingComponent"], "service-lifecycle-controller");
        assert_eq!(core["source"]["component"], "service-lifecycle-controller");
        assert_eq!(core["apiVersion"], "v1");
        let mut back = to_events_v1(&core);
        back.as_object_mut().unwrap().remove("deprecatedSource");
        assert_eq!(back, event);
    }
}
