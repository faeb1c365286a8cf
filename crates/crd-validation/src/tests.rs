use super::*;
use serde_json::json;

fn schema(v: Value) -> Schema {
    Schema::from_value(&v).expect("schema parses")
}

fn messages(s: &Schema, obj: Value) -> Vec<String> {
    s.validate(&obj).iter().map(ToString::to_string).collect()
}

/// A Lock-like CRD schema used by several tests.
fn lock() -> Schema {
    schema(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["targetRef"],
                "properties": {
                    "targetRef": {
                        "type": "object",
                        "required": ["kind", "name"],
                        "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}
                    },
                    "deletionPolicy": {"type": "string", "enum": ["Retain", "SnapshotAndDelete", "Delete"], "default": "Retain"},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
                    "resources": {
                        "type": "array",
                        "maxItems": 2,
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                                "size": {"type": "integer", "default": 1}
                            }
                        }
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}
                }
            }
        }
    }))
}

fn lock_with(spec: Value) -> Value {
    let mut obj = json!({"apiVersion": "core.navique.com/v1", "kind": "Lock", "spec": {"targetRef": {"kind": "Service", "name": "db"}}});
    for (k, v) in spec.as_object().unwrap() {
        obj["spec"][k] = v.clone();
    }
    obj
}

#[test]
fn a_valid_object_has_no_errors() {
    assert_eq!(messages(&lock(), lock_with(json!({"replicas": 3, "labels": {"a": "b"}}))), Vec::<String>::new());
}

#[test]
fn a_missing_required_field_is_reported_with_its_path() {
    let obj = json!({"spec": {"targetRef": {"name": "db"}}});
    assert_eq!(messages(&lock(), obj), ["spec.targetRef.kind: Required value"]);
    assert_eq!(messages(&lock(), json!({"spec": {}})), ["spec.targetRef: Required value"]);
}

#[test]
fn a_value_outside_the_enum_lists_the_supported_values() {
    assert_eq!(
        messages(&lock(), lock_with(json!({"deletionPolicy": "Destroy"}))),
        [r#"spec.deletionPolicy: Unsupported value: "Destroy": supported values: "Retain", "SnapshotAndDelete", "Delete""#]
    );
    let numbers = schema(json!({"properties": {"n": {"enum": [1, 2.5, "x"]}}}));
    assert_eq!(messages(&numbers, json!({"n": 1.0})), Vec::<String>::new());
    assert_eq!(messages(&numbers, json!({"n": 3})), [r#"n: Unsupported value: 3: supported values: "1", "2.5", "x""#]);
}

#[test]
fn a_value_of_the_wrong_type_names_the_expected_and_actual_types() {
    assert_eq!(
        messages(&lock(), lock_with(json!({"replicas": "3"}))),
        [r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#]
    );
    assert_eq!(
        messages(&lock(), lock_with(json!({"replicas": 2.5}))),
        [r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#]
    );
    assert_eq!(messages(&lock(), lock_with(json!({"replicas": 2.0}))), Vec::<String>::new());
}

#[test]
fn errors_inside_arrays_of_objects_carry_the_index() {
    let obj = lock_with(json!({"resources": [{"name": "ABC"}, {"size": 2}, {"name": "toolong"}]}));
    assert_eq!(
        messages(&lock(), obj),
        [
            "spec.resources[0].name: Invalid value: \"ABC\": spec.resources[0].name in body should match '^[a-z]+$'",
            "spec.resources[1].name: Required value",
            "spec.resources[2].name: Too long: may not be more than 5 bytes",
            "spec.resources: Too many: 3: must have at most 2 items",
        ]
    );
    assert_eq!(
        messages(&lock(), lock_with(json!({"resources": [{"name": ""}]}))),
        [r#"spec.resources[0].name: Invalid value: "": spec.resources[0].name in body should be at least 1 chars long"#]
    );
}

#[test]
fn map_values_are_validated_by_additional_properties_with_dotted_paths() {
    assert_eq!(
        messages(&lock(), lock_with(json!({"labels": {"ok": "a", "foo": "long"}}))),
        ["spec.labels.foo: Too long: may not be more than 3 bytes"]
    );
    assert_eq!(
        messages(&lock(), lock_with(json!({"labels": {"foo": 1}}))),
        [r#"spec.labels.foo: Invalid value: "integer": spec.labels.foo in body must be of type string: "integer""#]
    );
}

#[test]
fn numeric_bounds_are_worded_like_kube_openapi() {
    assert_eq!(
        messages(&lock(), lock_with(json!({"replicas": 0}))),
        ["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]
    );
    assert_eq!(
        messages(&lock(), lock_with(json!({"replicas": 6}))),
        ["spec.replicas: Invalid value: 6: spec.replicas in body should be less than or equal to 5"]
    );
    let x = schema(json!({"properties": {"x": {
        "type": "number", "minimum": 0.5, "exclusiveMinimum": true, "maximum": 1000000, "multipleOf": 0.25
    }}}));
    assert_eq!(messages(&x, json!({"x": 0.5})), ["x: Invalid value: 0.5: x in body should be greater than 0.5"]);
    assert_eq!(messages(&x, json!({"x": 0.6})), ["x: Invalid value: 0.6: x in body should be a multiple of 0.25"]);
    assert_eq!(
        messages(&x, json!({"x": 2000000.5})),
        ["x: Invalid value: 2.0000005e+06: x in body should be less than or equal to 1e+06"]
    );
}

#[test]
fn item_and_property_counts_are_worded_like_kube_apiserver() {
    let s = schema(json!({"properties": {
        "list": {"type": "array", "minItems": 1, "maxItems": 1},
        "map": {"type": "object", "minProperties": 2, "maxProperties": 2}
    }}));
    assert_eq!(
        messages(&s, json!({"list": [], "map": {"a": 1}})),
        [
            "list: Invalid value: 0: list in body should have at least 1 items",
            "map: Invalid value: 1: map in body should have at least 2 properties",
        ]
    );
    assert_eq!(
        messages(&s, json!({"list": [1, 2], "map": {"a": 1, "b": 2, "c": 3}})),
        ["list: Too many: 2: must have at most 1 item", "map: Too many: 3: must have at most 2 items"]
    );
}

#[test]
fn int_or_string_accepts_both_and_names_both_types() {
    let s = schema(json!({"properties": {"port": {"x-kubernetes-int-or-string": true}}}));
    assert_eq!(messages(&s, json!({"port": 80})), Vec::<String>::new());
    assert_eq!(messages(&s, json!({"port": "http"})), Vec::<String>::new());
    assert_eq!(
        messages(&s, json!({"port": true})),
        [r#"port: Invalid value: "boolean": port in body must be of type integer,string: "boolean""#]
    );
}

#[test]
fn formats_are_checked_for_strings() {
    let s = schema(json!({"properties": {"id": {"type": "string", "format": "uuid"}}}));
    assert_eq!(messages(&s, json!({"id": "8d1f6b2a-3c4e-4f5a-9b6c-7d8e9f0a1b2c"})), Vec::<String>::new());
    assert_eq!(messages(&s, json!({"id": "x"})), [r#"id: Invalid value: "x": id in body must be of type uuid: "x""#]);
}

#[test]
fn nulls_are_pruned_defaulted_or_rejected_by_nullability() {
    let s = schema(json!({"properties": {"spec": {"type": "object", "properties": {
        "note": {"type": "string", "nullable": true},
        "owner": {"type": "string"},
        "mode": {"type": "string", "default": "fast"},
        "tags": {"type": "array", "items": {"type": "string"}}
    }}}}));
    let mut obj = json!({"spec": {"note": null, "owner": null, "mode": null, "tags": ["a", null]}});
    assert_eq!(s.prune(&mut obj), Vec::<String>::new());
    s.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"spec": {"note": null, "mode": "fast", "tags": ["a", null]}}));
    assert_eq!(
        messages(&s, obj),
        [r#"spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of type string: "null""#]
    );
}

#[test]
fn pruning_drops_unknown_fields_and_reports_their_sorted_paths() {
    let s = lock();
    let mut obj = lock_with(json!({"foo": 1, "resources": [{"name": "a", "bogus": 1}]}));
    obj["metadata"] = json!({"name": "x", "anything": 1});
    obj["status"] = json!({"phase": "Ready"});
    obj["spec"]["targetRef"]["zzz"] = json!(true);
    let pruned = s.prune(&mut obj);
    assert_eq!(pruned, ["spec.foo", "spec.resources[0].bogus", "spec.targetRef.zzz", "status"]);
    assert_eq!(
        obj,
        json!({
            "apiVersion": "core.navique.com/v1", "kind": "Lock", "metadata": {"name": "x", "anything": 1},
            "spec": {"targetRef": {"kind": "Service", "name": "db"}, "resources": [{"name": "a"}]}
        })
    );
    assert_eq!(unknown_field_warning(&pruned[0]), r#"unknown field "spec.foo""#);
    assert_eq!(
        strict_decoding_message("Lock", "v1alpha1", &pruned[..2]),
        r#"Lock in version "v1alpha1" cannot be handled as a Lock: strict decoding error: unknown field "spec.foo", unknown field "spec.resources[0].bogus""#
    );
}

#[test]
fn preserve_unknown_fields_and_embedded_resources_keep_their_data() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "config": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}
        },
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "properties": {"spec": {"type": "object"}}
        }
    }}}}));
    let mut obj = json!({"spec": {
        "config": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "x", "b": 2}},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "other": 1}
    }});
    assert_eq!(s.prune(&mut obj), ["spec.config.known.b", "spec.template.other", "spec.template.spec.x"]);
    assert_eq!(
        obj,
        json!({"spec": {
            "config": {"anything": {"deep": [1, {"x": 2}]}, "known": {"a": "x"}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
        }})
    );
}

#[test]
fn defaults_apply_recursively_including_array_items_and_defaulted_objects() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "deletionPolicy": {"type": "string", "default": "Retain"},
        "backup": {"type": "object", "default": {}, "properties": {
            "schedule": {"type": "string", "default": "@daily"},
            "retention": {"type": "object", "default": {}, "properties": {"days": {"type": "integer", "default": 7}}}
        }},
        "resources": {"type": "array", "items": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}
    }}}}));
    let mut obj = json!({"spec": {"resources": [{"name": "a"}, {"name": "b", "size": 3}]}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {
            "deletionPolicy": "Retain",
            "backup": {"schedule": "@daily", "retention": {"days": 7}},
            "resources": [{"name": "a", "size": 1}, {"name": "b", "size": 3}]
        }})
    );
}

#[test]
fn list_type_sets_and_maps_report_duplicates() {
    let s = schema(json!({"properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}
        },
        "groups": {"type": "object", "additionalProperties": {
            "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}
        }}
    }}}}));
    let obj = json!({"spec": {
        "tags": ["a", "b", "a", "a"],
        "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}, {"port": 2}],
        "groups": {"g1": [1, 1]}
    }});
    assert_eq!(
        messages(&s, obj),
        [
            "spec.groups[g1][1]: Duplicate value: 1",
            r#"spec.ports[1]: Duplicate value: {"name":"http"}"#,
            "spec.ports[3]: Duplicate value: {}",
            r#"spec.tags[2]: Duplicate value: "a""#,
        ]
    );
    assert_eq!(
        messages(&s, json!({"spec": {"ports": [1]}})),
        [
            r#"spec.ports[0]: Invalid value: "integer": spec.ports[0] in body must be of type object: "integer""#,
            "spec.ports[0]: Invalid value: 1: must be an object for an array of list-type map",
        ]
    );
}

#[test]
fn one_of_failures_have_kube_apiservers_nil_path() {
    let s = schema(json!({"properties": {"spec": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}]
    }}}));
    assert_eq!(messages(&s, json!({"spec": {"a": "x"}})), Vec::<String>::new());
    assert_eq!(
        messages(&s, json!({"spec": {}})),
        [
            r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.a: Required value",
        ]
    );
    assert_eq!(
        messages(&s, json!({"spec": {"a": "x", "b": "y"}})),
        [r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#]
    );
}

#[test]
fn root_api_version_kind_and_metadata_are_not_validated() {
    let s = schema(json!({
        "type": "object",
        "required": ["apiVersion", "metadata", "spec"],
        "properties": {"apiVersion": {"type": "string"}, "metadata": {"type": "object"}, "spec": {"type": "object"}}
    }));
    assert_eq!(messages(&s, json!({"apiVersion": 5, "metadata": "x"})), ["spec: Required value"]);
}

#[test]
fn the_invalid_message_aggregates_distinct_errors() {
    let one = lock().validate(&json!({"spec": {"targetRef": {"name": "db"}}}));
    assert_eq!(
        invalid_message("Lock", "core.navique.com", "x", &one),
        r#"Lock.core.navique.com "x" is invalid: spec.targetRef.kind: Required value"#
    );
    let several = lock().validate(&json!({"spec": {"targetRef": {"name": "db"}, "replicas": 0}}));
    let doubled: Vec<FieldError> = several.iter().chain(&several).cloned().collect();
    assert_eq!(
        invalid_message("Lock", "core.navique.com", "x", &doubled),
        "Lock.core.navique.com \"x\" is invalid: [spec.replicas: Invalid value: 0: spec.replicas in body should be \
         greater than or equal to 1, spec.targetRef.kind: Required value]"
    );
    assert_eq!(invalid_message("Pod", "", "p", &one), r#"Pod "p" is invalid: spec.targetRef.kind: Required value"#);
    assert_eq!(
        one[0].cause(),
        StatusCause { reason: "FieldValueRequired", message: "Required value".into(), field: "spec.targetRef.kind".into() }
    );
    assert_eq!(several[0].cause().reason, "FieldValueInvalid");
}

#[test]
fn bad_values_are_rendered_the_way_go_prints_them() {
    let body = |value: Value| FieldError { path: "p".into(), kind: FieldErrorKind::Duplicate, value, detail: String::new() };
    assert_eq!(body(json!({"b": "<x>", "a": 1.5e-7})).to_string(), r#"p: Duplicate value: {"a":1.5e-7,"b":"\u003cx\u003e"}"#);
    assert_eq!(body(json!("é\n\u{1}\"")).body(), r#"Duplicate value: "é\n\x01\"""#);
    assert_eq!(body(json!([1e21, null, true])).body(), "Duplicate value: [1e+21,null,true]");
    assert_eq!(body(json!(1e21)).body(), "Duplicate value: 1e+21");
    assert_eq!(body(json!(100000.0)).body(), "Duplicate value: 100000");
    assert_eq!(body(json!(0.00001)).body(), "Duplicate value: 1e-05");
}

#[test]
fn malformed_schemas_are_rejected() {
    let err = |v: Value| Schema::from_value(&v).unwrap_err().to_string();
    assert_eq!(err(json!({"type": "strng"})), r#"openAPIV3Schema: unknown type "strng""#);
    assert_eq!(err(json!({"properties": {"spec": 5}})), "openAPIV3Schema.properties[spec]: schema must be an object");
    assert_eq!(
        err(json!({"properties": {"s": {"type": "string", "maxLength": -1}}})),
        "openAPIV3Schema.properties[s].maxLength: must be a non-negative integer"
    );
    assert!(err(json!({"pattern": "("})).starts_with("openAPIV3Schema.pattern: regex parse error"));
}
