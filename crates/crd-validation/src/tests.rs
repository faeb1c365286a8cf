use super::*;

/// A Lock-like CRD schema used by several tests.
const LOCK: &str = r#"{"type": "object", "properties": {"spec": {"type": "object", "required": ["targetRef"], "properties": {
    "targetRef": {"type": "object", "required": ["kind", "name"],
        "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}},
    "deletionPolicy": {"type": "string", "enum": ["Retain", "SnapshotAndDelete", "Delete"]},
    "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
    "resources": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"}}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}}}}}"#;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("test JSON parses")
}

fn schema(text: &str) -> Schema {
    Schema::from_value(&json(text)).expect("schema parses")
}

/// A Lock object with a valid `targetRef` and the given further spec members.
fn spec(members: &str) -> String {
    format!(r#"{{"spec": {{"targetRef": {{"kind": "Service", "name": "db"}}, {members}}}}}"#)
}

/// Asserts the exact messages of validating the JSON `obj` against `s`.
#[track_caller]
fn expect(s: &Schema, obj: &str, want: &[&str]) {
    let got: Vec<String> = s
        .validate(&json(obj))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_valid_object_has_no_errors() {
    expect(
        &schema(LOCK),
        &spec(r#""replicas": 3, "labels": {"a": "b"}"#),
        &[],
    );
}

#[test]
fn a_missing_required_field_is_reported_with_its_path() {
    let lock = schema(LOCK);
    expect(
        &lock,
        r#"{"spec": {"targetRef": {"name": "db"}}}"#,
        &["spec.targetRef.kind: Required value"],
    );
    expect(
        &lock,
        r#"{"spec": {}}"#,
        &["spec.targetRef: Required value"],
    );
}

#[test]
fn a_value_outside_the_enum_lists_the_supported_values() {
    let msg = r#"spec.deletionPolicy: Unsupported value: "Destroy": supported values: "Retain", "SnapshotAndDelete", "Delete""#;
    expect(
        &schema(LOCK),
        &spec(r#""deletionPolicy": "Destroy""#),
        &[msg],
    );
    let numbers = schema(r#"{"properties": {"n": {"enum": [1, 2.5, "x"]}}}"#);
    expect(&numbers, r#"{"n": 1.0}"#, &[]);
    expect(
        &numbers,
        r#"{"n": 3}"#,
        &[r#"n: Unsupported value: 3: supported values: "1", "2.5", "x""#],
    );
}

#[test]
fn a_value_of_the_wrong_type_names_the_expected_and_actual_types() {
    let lock = schema(LOCK);
    let msg = r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#;
    expect(&lock, &spec(r#""replicas": "3""#), &[msg]);
    let msg = r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#;
    expect(&lock, &spec(r#""replicas": 2.5"#), &[msg]);
    expect(&lock, &spec(r#""replicas": 2.0"#), &[]);
}

#[test]
fn errors_inside_arrays_of_objects_carry_the_index() {
    let lock = schema(LOCK);
    let want = [
        r#"spec.resources[0].name: Invalid value: "ABC": spec.resources[0].name in body should match '^[a-z]+$'"#,
        "spec.resources[1].name: Required value",
        "spec.resources[2].name: Too long: may not be more than 5 bytes",
        "spec.resources: Too many: 3: must have at most 2 items",
    ];
    expect(
        &lock,
        &spec(r#""resources": [{"name": "ABC"}, {}, {"name": "toolong"}]"#),
        &want,
    );
    let msg = r#"spec.resources[0].name: Invalid value: "": spec.resources[0].name in body should be at least 1 chars long"#;
    expect(&lock, &spec(r#""resources": [{"name": ""}]"#), &[msg]);
}

#[test]
fn map_values_are_validated_by_additional_properties_with_dotted_paths() {
    let lock = schema(LOCK);
    let msg = "spec.labels.foo: Too long: may not be more than 3 bytes";
    expect(
        &lock,
        &spec(r#""labels": {"ok": "a", "foo": "long"}"#),
        &[msg],
    );
    let msg = r#"spec.labels.foo: Invalid value: "integer": spec.labels.foo in body must be of type string: "integer""#;
    expect(&lock, &spec(r#""labels": {"foo": 1}"#), &[msg]);
}

#[test]
fn numeric_bounds_are_worded_like_kube_openapi() {
    let lock = schema(LOCK);
    let msg = "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1";
    expect(&lock, &spec(r#""replicas": 0"#), &[msg]);
    let msg =
        "spec.replicas: Invalid value: 6: spec.replicas in body should be less than or equal to 5";
    expect(&lock, &spec(r#""replicas": 6"#), &[msg]);
    let x = schema(
        r#"{"properties": {"x": {"type": "number",
            "minimum": 0.5, "exclusiveMinimum": true, "maximum": 1000000, "multipleOf": 0.25}}}"#,
    );
    expect(
        &x,
        r#"{"x": 0.5}"#,
        &["x: Invalid value: 0.5: x in body should be greater than 0.5"],
    );
    expect(
        &x,
        r#"{"x": 0.6}"#,
        &["x: Invalid value: 0.6: x in body should be a multiple of 0.25"],
    );
    let msg = "x: Invalid value: 2.0000005e+06: x in body should be less than or equal to 1e+06";
    expect(&x, r#"{"x": 2000000.5}"#, &[msg]);
}

#[test]
fn item_and_property_counts_are_worded_like_kube_apiserver() {
    let s = schema(
        r#"{"properties": {"list": {"type": "array", "minItems": 1, "maxItems": 1},
            "map": {"type": "object", "minProperties": 2, "maxProperties": 2}}}"#,
    );
    let want = [
        "list: Invalid value: 0: list in body should have at least 1 items",
        "map: Invalid value: 1: map in body should have at least 2 properties",
    ];
    expect(&s, r#"{"list": [], "map": {"a": 1}}"#, &want);
    let want = [
        "list: Too many: 2: must have at most 1 item",
        "map: Too many: 3: must have at most 2 items",
    ];
    expect(
        &s,
        r#"{"list": [1, 2], "map": {"a": 1, "b": 2, "c": 3}}"#,
        &want,
    );
}

#[test]
fn int_or_string_accepts_both_and_names_both_types() {
    let s = schema(r#"{"properties": {"port": {"x-kubernetes-int-or-string": true}}}"#);
    expect(&s, r#"{"port": 80}"#, &[]);
    expect(&s, r#"{"port": "http"}"#, &[]);
    let msg =
        r#"port: Invalid value: "boolean": port in body must be of type integer,string: "boolean""#;
    expect(&s, r#"{"port": true}"#, &[msg]);
}

#[test]
fn a_format_changes_the_type_error_for_non_strings() {
    let s = schema(r#"{"properties": {"n": {"type": "integer", "format": "int32"}}}"#);
    expect(
        &s,
        r#"{"n": true}"#,
        &[r#"n: Invalid value: "": n in body must be of type int32: """#],
    );
    expect(
        &s,
        r#"{"n": "1"}"#,
        &[r#"n: Invalid value: "string": n in body must be of type integer: "string""#],
    );
}

#[test]
fn nulls_are_pruned_defaulted_or_rejected_by_nullability() {
    let s = schema(
        r#"{"properties": {"spec": {"type": "object", "properties": {
            "note": {"type": "string", "nullable": true}, "owner": {"type": "string"},
            "mode": {"type": "string", "default": "fast"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}"#,
    );
    let mut obj =
        json(r#"{"spec": {"note": null, "owner": null, "mode": null, "tags": ["a", null]}}"#);
    assert_eq!(s.prune(&mut obj), Vec::<String>::new());
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json(r#"{"spec": {"note": null, "mode": "fast", "tags": ["a", null]}}"#)
    );
    let msg = r#"spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of type string: "null""#;
    expect(&s, &obj.to_string(), &[msg]);
}

#[test]
fn pruning_drops_unknown_fields_and_reports_their_sorted_paths() {
    let mut obj = json(
        r#"{"apiVersion": "core.navique.com/v1", "kind": "Lock", "metadata": {"name": "x", "anything": 1},
            "spec": {"foo": 1, "targetRef": {"kind": "Service", "name": "db", "zzz": true},
                     "resources": [{"name": "a", "bogus": 1}]},
            "status": {"phase": "Ready"}}"#,
    );
    let pruned = schema(LOCK).prune(&mut obj);
    assert_eq!(
        pruned,
        [
            "spec.foo",
            "spec.resources[0].bogus",
            "spec.targetRef.zzz",
            "status"
        ]
    );
    let want = r#"{"apiVersion": "core.navique.com/v1", "kind": "Lock", "metadata": {"name": "x", "anything": 1},
        "spec": {"targetRef": {"kind": "Service", "name": "db"}, "resources": [{"name": "a"}]}}"#;
    assert_eq!(obj, json(want));
    assert_eq!(
        unknown_field_warning(&pruned[0]),
        r#"unknown field "spec.foo""#
    );
    assert_eq!(
        strict_decoding_message("Lock", "v1alpha1", &pruned[..2]),
        r#"Lock in version "v1alpha1" cannot be handled as a Lock: strict decoding error: unknown field "spec.foo", unknown field "spec.resources[0].bogus""#
    );
}

#[test]
fn preserve_unknown_fields_and_embedded_resources_keep_their_data() {
    let s = schema(
        r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object"}}}}}}}"#,
    );
    let mut obj = json(
        r#"{"spec": {"config": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "x", "b": 2}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "other": 1}}}"#,
    );
    let pruned = s.prune(&mut obj);
    assert_eq!(
        pruned,
        [
            "spec.config.known.b",
            "spec.template.other",
            "spec.template.spec.x"
        ]
    );
    let want = r#"{"spec": {"config": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "x"}},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}}"#;
    assert_eq!(obj, json(want));
}

#[test]
fn defaults_apply_recursively_including_array_items_and_defaulted_objects() {
    let s = schema(
        r#"{"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "deletionPolicy": {"type": "string", "default": "Retain"},
            "backup": {"type": "object", "default": {}, "properties": {
                "schedule": {"type": "string", "default": "@daily"},
                "retention": {"type": "object", "default": {}, "properties": {"days": {"type": "integer", "default": 7}}}}},
            "resources": {"type": "array", "items": {"type": "object",
                "properties": {"size": {"type": "integer", "default": 1}}}}}}}}"#,
    );
    let mut obj = json(r#"{"spec": {"resources": [{"name": "a"}, {"name": "b", "size": 3}]}}"#);
    s.apply_defaults(&mut obj);
    let want = r#"{"spec": {"deletionPolicy": "Retain", "backup": {"schedule": "@daily", "retention": {"days": 7}},
        "resources": [{"name": "a", "size": 1}, {"name": "b", "size": 3}]}}"#;
    assert_eq!(obj, json(want));
}

#[test]
fn list_type_sets_and_maps_report_duplicates() {
    let s = schema(
        r#"{"properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "groups": {"type": "object", "additionalProperties": {
                "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}}}}}}"#,
    );
    let obj = r#"{"spec": {"tags": ["a", "b", "a", "a"], "groups": {"g1": [1, 1]},
        "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}, {"port": 2}]}}"#;
    let want = [
        "spec.groups[g1][1]: Duplicate value: 1",
        r#"spec.ports[1]: Duplicate value: {"name":"http"}"#,
        "spec.ports[3]: Duplicate value: {}",
        r#"spec.tags[2]: Duplicate value: "a""#,
    ];
    expect(&s, obj, &want);
    let want = [
        r#"spec.ports[0]: Invalid value: "integer": spec.ports[0] in body must be of type object: "integer""#,
        "spec.ports[0]: Invalid value: 1: must be an object for an array of list-type map",
    ];
    expect(&s, r#"{"spec": {"ports": [1]}}"#, &want);
}

#[test]
fn one_of_failures_have_kube_apiservers_nil_path() {
    let s = schema(
        r#"{"properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}}"#,
    );
    expect(&s, r#"{"spec": {"a": "x"}}"#, &[]);
    let none = r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid"#;
    expect(&s, r#"{"spec": {}}"#, &[none, "spec.a: Required value"]);
    let two = r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#;
    expect(&s, r#"{"spec": {"a": "x", "b": "y"}}"#, &[two]);
}

#[test]
fn root_api_version_kind_and_metadata_are_not_validated() {
    let s = schema(
        r#"{"type": "object", "required": ["apiVersion", "metadata", "spec"], "properties": {
            "apiVersion": {"type": "string"}, "metadata": {"type": "object"}, "spec": {"type": "object"}}}"#,
    );
    expect(
        &s,
        r#"{"apiVersion": 5, "metadata": "x"}"#,
        &["spec: Required value"],
    );
}

#[test]
fn the_invalid_message_aggregates_distinct_errors() {
    let lock = schema(LOCK);
    let one = lock.validate(&json(r#"{"spec": {"targetRef": {"name": "db"}}}"#));
    let want = r#"Lock.core.navique.com "x" is invalid: spec.targetRef.kind: Required value"#;
    assert_eq!(invalid_message("Lock", "core.navique.com", "x", &one), want);
    assert_eq!(
        invalid_message("Pod", "", "p", &one),
        r#"Pod "p" is invalid: spec.targetRef.kind: Required value"#
    );
    let two = lock.validate(&json(
        r#"{"spec": {"targetRef": {"name": "db"}, "replicas": 0}}"#,
    ));
    let doubled: Vec<FieldError> = two.iter().chain(&two).cloned().collect();
    let want = "Lock.core.navique.com \"x\" is invalid: [spec.replicas: Invalid value: 0: spec.replicas in body \
                should be greater than or equal to 1, spec.targetRef.kind: Required value]";
    assert_eq!(
        invalid_message("Lock", "core.navique.com", "x", &doubled),
        want
    );
    let cause = StatusCause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: "spec.targetRef.kind".into(),
    };
    assert_eq!(one[0].cause(), cause);
    assert_eq!(two[0].cause().reason, "FieldValueInvalid");
}

#[test]
fn bad_values_are_rendered_the_way_go_prints_them() {
    let body = |value: &str| FieldError {
        path: "p".into(),
        kind: FieldErrorKind::Duplicate,
        value: json(value),
        detail: String::new(),
    };
    assert_eq!(
        body(r#"{"b": "<x>", "a": 1.5e-7}"#).to_string(),
        r#"p: Duplicate value: {"a":1.5e-7,"b":"\u003cx\u003e"}"#
    );
    assert_eq!(
        body(r#""é\n\u0001\"""#).body(),
        r#"Duplicate value: "é\n\x01\"""#
    );
    assert_eq!(
        body("[1e21, null, true]").body(),
        "Duplicate value: [1e+21,null,true]"
    );
    assert_eq!(body("1e21").body(), "Duplicate value: 1e+21");
    assert_eq!(body("100000.0").body(), "Duplicate value: 100000");
    assert_eq!(body("0.00001").body(), "Duplicate value: 1e-05");
}

#[test]
fn malformed_schemas_are_rejected() {
    let err = |text: &str| Schema::from_value(&json(text)).unwrap_err().to_string();
    assert_eq!(
        err(r#"{"type": "strng"}"#),
        r#"openAPIV3Schema: unknown type "strng""#
    );
    assert_eq!(
        err(r#"{"properties": {"spec": 5}}"#),
        "openAPIV3Schema.properties[spec]: schema must be an object"
    );
    let msg = "openAPIV3Schema.properties[s].maxLength: has the wrong type";
    assert_eq!(
        err(r#"{"properties": {"s": {"type": "string", "maxLength": -1}}}"#),
        msg
    );
    assert!(err(r#"{"pattern": "("}"#).starts_with("openAPIV3Schema.pattern: regex parse error"));
}
