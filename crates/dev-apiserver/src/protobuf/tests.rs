use super::*;
use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

/// An envelope around a prost-encoded object, as a Go client sends it.
fn body_of(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC.as_slice(), &unknown.encode_to_vec()].concat()
}

fn round_trip(object: &Value) -> Value {
    decode(&encode(object).expect("encodes")).expect("decodes")
}

/// The `runtime.Unknown` inside an encoded body.
fn envelope(body: &[u8]) -> Unknown {
    Unknown::decode(body.strip_prefix(&MAGIC).expect("has the magic")).expect("is an Unknown")
}

/// A protobuf field header and length for a length-delimited field.
fn field(number: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![
        number << 3 | 2,
        u8::try_from(payload.len()).expect("short payload"),
    ];
    out.extend_from_slice(payload);
    out
}

#[test]
fn a_token_review_decodes_to_its_spec() {
    let review = authentication::TokenReview {
        metadata: None,
        spec: Some(authentication::TokenReviewSpec {
            token: Some("alice-token".into()),
            audiences: vec!["https://kubernetes.default.svc.cluster.local".into()],
        }),
        status: None,
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("authentication.k8s.io/v1".into()),
            kind: Some("TokenReview".into()),
        }),
        raw: Some(review.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let body = [MAGIC.as_slice(), &unknown.encode_to_vec()].concat();
    assert_eq!(
        decode(&body).unwrap(),
        json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": {},
            "spec": {
                "token": "alice-token",
                "audiences": ["https://kubernetes.default.svc.cluster.local"]
            }
        })
    );
    assert!(supports("authentication.k8s.io/v1", "TokenReview"));
    assert!(!supports("authentication.k8s.io/v1", "TokenRequest"));
}

#[test]
fn a_hand_built_namespace_envelope_decodes_to_the_json_kube_apiserver_shows() {
    // What kubectl's Go marshaller writes: every non-pointer string (here generateName) even
    // when empty, and an empty creationTimestamp message for the zero time.
    let label = [field(1, b"app"), field(2, b"web")].concat();
    let object_meta = [
        field(1, b"demo"),
        field(2, b""),
        field(8, b""),
        field(11, &label),
    ]
    .concat();
    let status = field(1, b"");
    let namespace = [field(1, &object_meta), field(2, b""), field(3, &status)].concat();
    let type_meta = [field(1, b"v1"), field(2, b"Namespace")].concat();
    let unknown = [
        field(1, &type_meta),
        field(2, &namespace),
        field(3, b""),
        field(4, b""),
    ]
    .concat();
    let body = [b"k8s\0".as_slice(), &unknown].concat();

    assert_eq!(
        decode(&body).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "demo", "labels": {"app": "web"}},
            "spec": {},
            "status": {}
        })
    );
}

#[test]
fn the_encoded_envelope_names_the_type_and_carries_the_object_bytes() {
    let body =
        encode(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}))
            .expect("encodes");

    assert_eq!(&body[..4], b"k8s\0");
    let unknown = envelope(&body);
    assert_eq!(
        unknown.type_meta,
        Some(TypeMeta {
            api_version: Some("v1".to_owned()),
            kind: Some("Namespace".to_owned())
        })
    );
    assert_eq!(unknown.content_encoding.as_deref(), Some(""));
    assert_eq!(unknown.content_type.as_deref(), Some(""));
    let namespace =
        core::Namespace::decode(unknown.raw.expect("has raw").as_slice()).expect("is a Namespace");
    assert_eq!(
        namespace.metadata.and_then(|m| m.name).as_deref(),
        Some("demo")
    );
}

#[test]
fn a_config_map_with_data_and_binary_data_round_trips() {
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "uid": "0f9a3b1e-5c2d-4e8f-9a7b-1c2d3e4f5a6b",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "annotations": {"note": "hello"}
        },
        "immutable": false,
        "data": {"greeting": "hello", "empty": ""},
        "binaryData": {"blob": "AAEC/w=="}
    });

    assert_eq!(round_trip(&config_map), config_map);
}

#[test]
fn a_secret_with_data_and_type_round_trips_with_raw_bytes_on_the_wire() {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token", "namespace": "apps", "labels": {"owner": "helm"}},
        "data": {"token": "AP9iaW5hcnk=", "user": "YWRtaW4="},
        "type": "Opaque"
    });

    let body = encode(&secret).expect("encodes");
    let wire = core::Secret::decode(envelope(&body).raw.expect("has raw").as_slice())
        .expect("is a Secret");
    assert_eq!(
        wire.data.get("token").map(Vec::as_slice),
        Some(b"\x00\xffbinary".as_slice())
    );
    assert_eq!(
        wire.data.get("user").map(Vec::as_slice),
        Some(b"admin".as_slice())
    );
    assert_eq!(decode(&body).expect("decodes"), secret);
}

#[test]
fn secret_string_data_is_carried_through_decode_as_is() {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "plain"},
        "stringData": {"password": "s3cret"},
        "type": "kubernetes.io/basic-auth"
    });

    assert_eq!(round_trip(&secret), secret);
}

#[test]
fn a_secret_list_with_two_items_and_list_meta_round_trips() {
    let list = json!({
        "apiVersion": "v1",
        "kind": "SecretList",
        "metadata": {"resourceVersion": "1234", "continue": "next-page", "remainingItemCount": 3},
        "items": [
            {
                "metadata": {
                    "name": "sh.helm.release.v1.demo.v1",
                    "namespace": "apps",
                    "labels": {"name": "demo", "owner": "helm", "version": "1"}
                },
                "data": {"release": "H4sIAAAAAAAA"},
                "type": "helm.sh/release.v1"
            },
            {
                "metadata": {
                    "name": "sh.helm.release.v1.demo.v2",
                    "namespace": "apps",
                    "labels": {"name": "demo", "owner": "helm", "version": "2"}
                },
                "data": {"release": "H4sIAAAAAAAB"},
                "type": "helm.sh/release.v1"
            }
        ]
    });

    assert_eq!(round_trip(&list), list);
}

#[test]
fn an_empty_list_decodes_with_empty_metadata_and_items() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList"});

    assert_eq!(
        round_trip(&list),
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": []})
    );
}

#[test]
fn a_not_found_status_round_trips() {
    let status = json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": "secrets \"missing\" not found",
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "secrets"},
        "code": 404
    });

    assert_eq!(round_trip(&status), status);
}

#[test]
fn a_status_with_causes_round_trips() {
    let status = json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": "ConfigMap \"x\" is invalid",
        "reason": "Invalid",
        "details": {
            "name": "x",
            "kind": "ConfigMap",
            "causes": [{"reason": "FieldValueInvalid", "message": "bad key", "field": "data"}]
        },
        "code": 422
    });

    assert_eq!(round_trip(&status), status);
}

#[test]
fn a_custom_resource_body_is_rejected_naming_its_api_version_and_kind() {
    let type_meta = [field(1, b"example.com/v1"), field(2, b"Widget")].concat();
    let body = [b"k8s\0".as_slice(), &field(1, &type_meta), &field(2, b"")].concat();

    assert_eq!(
        decode(&body).expect_err("is unsupported").to_string(),
        "protobuf body for example.com/v1/Widget is not supported; send JSON"
    );
}

#[test]
fn encoding_a_custom_resource_is_rejected_naming_its_api_version_and_kind() {
    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});

    assert_eq!(
        encode(&widget).expect_err("is unsupported").to_string(),
        "example.com/v1/Widget cannot be encoded as protobuf; serve it as JSON"
    );
}

#[test]
fn a_body_without_the_magic_prefix_is_rejected() {
    let error = decode(br#"{"apiVersion":"v1","kind":"Namespace"}"#).expect_err("has no magic");

    assert_eq!(
        error.to_string(),
        "body is not Kubernetes protobuf: it does not start with the magic prefix `k8s\\0`; \
         send JSON, or protobuf as written by a Kubernetes client"
    );
}

#[test]
fn an_envelope_without_type_meta_is_rejected() {
    let error = decode(b"k8s\0").expect_err("names no kind");

    assert_eq!(
        error.to_string(),
        "protobuf envelope does not name the object's apiVersion and kind; send JSON"
    );
}

#[test]
fn a_gzip_content_encoding_is_rejected() {
    let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
    let body = [
        b"k8s\0".as_slice(),
        &field(1, &type_meta),
        &field(3, b"gzip"),
    ]
    .concat();

    assert_eq!(
        decode(&body).expect_err("is encoded").to_string(),
        "protobuf body uses content encoding \"gzip\", which is not supported; \
         send it unencoded, or send JSON"
    );
}

#[test]
fn truncated_object_bytes_are_rejected_naming_the_kind() {
    let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
    // Field 1 (metadata) claims 5 bytes but none follow.
    let body = [
        b"k8s\0".as_slice(),
        &field(1, &type_meta),
        &field(2, &[0x0a, 0x05]),
    ]
    .concat();

    assert_eq!(
        decode(&body).expect_err("is truncated").to_string(),
        "protobuf body for v1/Secret is malformed at `metadata`: \
         a field says it has 5 bytes, but 0 are left"
    );
}

#[test]
fn a_field_of_the_wrong_json_type_is_reported_by_its_path() {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "SecretList",
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"labels": {"owner": 7}}}]
    });

    assert_eq!(
        encode(&secret).expect_err("label is a number").to_string(),
        "field `items[1].metadata.labels.owner` must be a string"
    );
}

#[test]
fn invalid_base64_in_secret_data_is_reported_by_its_path() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"key": "not base64!"}});

    assert_eq!(
        encode(&secret).expect_err("bad base64").to_string(),
        "field `data.key` is not valid base64: Invalid symbol 32, offset 3."
    );
}

#[test]
fn an_object_without_kind_cannot_be_encoded() {
    assert_eq!(
        encode(&json!({"apiVersion": "v1"}))
            .expect_err("has no kind")
            .to_string(),
        "object cannot be encoded as protobuf: it must be a JSON object with string \
         `apiVersion` and `kind` fields"
    );
}

#[test]
fn full_object_meta_round_trips() {
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "demo",
            "generateName": "demo-",
            "uid": "6b1f2a9c-3d4e-4f50-8a1b-2c3d4e5f6a7b",
            "resourceVersion": "17",
            "generation": 2,
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "deletionTimestamp": "2026-11-30T10:05:00Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"kubernetes.io/metadata.name": "demo"},
            "annotations": {"a": "b"},
            "ownerReferences": [{
                "apiVersion": "navique.io/v1",
                "kind": "Service",
                "name": "owner",
                "uid": "0a0b0c0d-0000-4000-8000-000000000001",
                "controller": true,
                "blockOwnerDeletion": false
            }],
            "finalizers": ["kubernetes"],
            "managedFields": [{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-30T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}
            }]
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Terminating",
            "conditions": [{
                "type": "NamespaceDeletionContentFailure",
                "status": "False",
                "lastTransitionTime": "2026-11-30T10:05:01Z",
                "reason": "ContentDeleted",
                "message": "All content successfully deleted"
            }]
        }
    });

    assert_eq!(round_trip(&namespace), namespace);
}

#[test]
fn creation_timestamp_round_trips_and_is_normalised_to_utc_seconds() {
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "creationTimestamp": "2026-11-30T11:00:00.75+01:00"}
    });

    let body = encode(&config_map).expect("encodes");
    let wire = core::ConfigMap::decode(envelope(&body).raw.expect("has raw").as_slice())
        .expect("is a ConfigMap");
    assert_eq!(
        wire.metadata.and_then(|m| m.creation_timestamp),
        Some(meta::Time {
            seconds: Some(1_796_032_800),
            nanos: Some(0)
        })
    );
    assert_eq!(
        decode(&body).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "creationTimestamp": "2026-11-30T10:00:00Z"}
        })
    );
}

#[test]
fn an_event_time_keeps_its_microseconds() {
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": "web.187c3a",
            "namespace": "apps",
            "creationTimestamp": "2026-11-30T10:00:00Z"
        },
        "involvedObject": {"kind": "Pod", "namespace": "apps", "name": "web", "apiVersion": "v1"},
        "reason": "Started",
        "message": "Started container web",
        "source": {},
        "type": "Normal",
        "eventTime": "2026-11-30T10:00:00.123456Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-30T10:00:05.000001Z"},
        "action": "Start",
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1"
    });

    let body = encode(&event).expect("encodes");
    let wire =
        core::Event::decode(envelope(&body).raw.expect("has raw").as_slice()).expect("is an Event");
    assert_eq!(
        wire.event_time,
        Some(meta::MicroTime {
            seconds: Some(1_796_032_800),
            nanos: Some(123_456_000)
        })
    );
    assert_eq!(decode(&body).expect("decodes"), event);
}

#[test]
fn a_micro_time_on_the_wire_is_truncated_to_microseconds_with_six_digits() {
    let event = core::Event {
        event_time: Some(meta::MicroTime {
            seconds: Some(1_796_032_800),
            nanos: Some(999),
        }),
        last_timestamp: Some(meta::Time {
            seconds: Some(1_796_032_801),
            nanos: Some(500_000_000),
        }),
        ..Default::default()
    };
    let fields = decode(&body_of("v1", "Event", event.encode_to_vec())).expect("decodes");

    assert_eq!(fields["eventTime"], json!("2026-11-30T10:00:00.000000Z"));
    assert_eq!(fields["lastTimestamp"], json!("2026-11-30T10:00:01Z"));
}

#[test]
fn an_event_without_fields_decodes_with_the_fields_go_always_writes() {
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}});

    assert_eq!(
        round_trip(&event),
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "e"},
            "involvedObject": {}
        })
    );
}

#[test]
fn a_service_round_trips_with_named_and_numbered_target_ports() {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "metrics", "protocol": "TCP", "appProtocol": "http", "port": 9090, "targetPort": "metrics", "nodePort": 30090}
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "type": "NodePort",
            "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Cluster",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        },
        "status": {
            "loadBalancer": {
                "ingress": [{"ip": "192.0.2.1", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]}]
            },
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-11-30T10:00:00Z",
                "reason": "Ok",
                "message": ""
            }]
        }
    });

    assert_eq!(round_trip(&service), service);
}

#[test]
fn a_service_account_list_round_trips() {
    let list = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccountList",
        "metadata": {"resourceVersion": "9"},
        "items": [{
            "metadata": {"name": "default", "namespace": "apps"},
            "secrets": [{"name": "default-token"}],
            "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": false
        }]
    });

    assert_eq!(round_trip(&list), list);
}

#[test]
fn every_built_in_kind_its_list_and_status_are_supported_and_custom_kinds_are_not() {
    let answers = [
        ("v1", "Namespace"),
        ("v1", "NamespaceList"),
        ("v1", "Pod"),
        ("v1", "Status"),
        ("meta.k8s.io/v1", "Status"),
        ("events.k8s.io/v1", "Event"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJobList"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("policy/v1", "PodDisruptionBudget"),
        ("v1", "List"),
        ("apps/v1beta1", "Deployment"),
        ("example.com/v1", "Widget"),
    ]
    .map(|(api_version, kind)| supports(api_version, kind));

    assert_eq!(
        answers,
        [
            true, true, true, true, true, true, true, true, true, true, false, false, false
        ]
    );
}

/// What `kubectl create deployment web --image=nginx` sends: Go writes every non-pointer field,
/// so the wire holds zeros that JSON leaves out; `replicas` is a pointer and stays.
#[test]
fn a_kubectl_deployment_decodes_without_go_zero_values() {
    use k8s_pb::api::apps::v1 as apps;
    let labels = std::collections::BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            labels: labels.clone(),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            paused: Some(false),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                match_expressions: Vec::new(),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels,
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx".into()),
                        working_dir: Some(String::new()),
                        stdin: Some(false),
                        tty: Some(false),
                        resources: Some(core::ResourceRequirements::default()),
                        ..Default::default()
                    }],
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy::default()),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            replicas: Some(0),
            ..Default::default()
        }),
    };
    let body = body_of("apps/v1", "Deployment", deployment.encode_to_vec());

    assert_eq!(
        decode(&body).expect("decodes"),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

/// A Volume's source is inlined in Go's JSON, and a nested message in protobuf.
#[test]
fn an_inlined_volume_source_round_trips_through_its_nested_message() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "500m"}}}],
            "volumes": [{"name": "config", "configMap": {"name": "settings", "defaultMode": 420}}]
        }
    });
    let body = encode(&pod).expect("encodes");
    let wire =
        core::Pod::decode(envelope(&body).raw.expect("has raw").as_slice()).expect("is a Pod");
    let volume = &wire.spec.as_ref().expect("has a spec").volumes[0];
    let source = volume.volume_source.as_ref().expect("has a source");
    assert_eq!(
        source
            .config_map
            .as_ref()
            .and_then(|c| c.local_object_reference.as_ref())
            .and_then(|r| r.name.as_deref()),
        Some("settings")
    );

    assert_eq!(decode(&body).expect("decodes"), pod);
}

/// kubectl sends its own objects for create: a RoleBinding, a PodDisruptionBudget with an
/// IntOrString, a Job with a pointer zero.
#[test]
fn rbac_policy_and_batch_objects_round_trip() {
    let objects = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "readers", "namespace": "apps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
        }),
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}
        }),
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": "25%"}
        }),
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "once"},
            "spec": {
                "parallelism": 0,
                "template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}], "restartPolicy": "Never"}}
            }
        }),
    ];
    for object in objects {
        assert_eq!(round_trip(&object), object);
    }
}
