//! The Kubernetes objects of a service's engine, built as server-side apply
//! bodies. `InProject`: a PostgreSQL StatefulSet with a data volume per
//! replica, a headless Service for it and a client Service `<service>`.
//! `ProviderShared`: a Service `<service>` of type ExternalName naming the
//! provider's server, so that applications in the Project find it by the
//! same name either way.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use navique_api::constants::labels;
use navique_api::services::{ManagedService, PostgresParameters};
use serde_json::{Value, json};

pub use navique_api::services::{IN_PROJECT_PORT as PORT, in_project_host};
/// The volume claim template of the data volumes: claims are named
/// `data-<service>-<ordinal>` by the StatefulSet controller.
pub const DATA_VOLUME: &str = "data";
/// The data volume's size when `spec.parameters.storage.size` is not given.
pub const DEFAULT_STORAGE: &str = "1Gi";
/// Where the data directory lives on the volume (a subdirectory, because
/// initdb refuses a volume root holding `lost+found`).
const PGDATA: &str = "/var/lib/postgresql/data/pgdata";
/// The `postgres` user of the official image.
const POSTGRES_UID: i64 = 999;

/// The standard labels every engine object carries; also the StatefulSet's
/// selector (without `managed-by`).
pub fn selector(service: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "postgresql".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), service.to_owned()),
        (labels::SERVICE.to_owned(), service.to_owned()),
    ])
}

/// [`selector`] plus `app.kubernetes.io/managed-by: navique`.
pub fn object_labels(service: &str) -> BTreeMap<String, String> {
    let mut labels = selector(service);
    labels.insert(
        labels::MANAGED_BY.to_owned(),
        labels::MANAGED_BY_VALUE.to_owned(),
    );
    labels
}

/// The headless Service that gives the StatefulSet's pods stable names.
pub fn headless_service_name(service: &str) -> String {
    format!("{service}-headless")
}

/// Whether a claim is one of the service's data volumes: the StatefulSet
/// controller names them `data-<service>-<ordinal>`.
pub fn is_data_claim(service: &str, claim: &str) -> bool {
    claim
        .strip_prefix(&format!("{DATA_VOLUME}-{service}-"))
        .is_some_and(|ordinal| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
}

/// What an `InProject` engine is made of, from `spec.parameters`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InProjectShape {
    /// The data volume's size, `storage.size`.
    pub storage: String,
    /// `postgresql.parameters`, passed to the server as `-c key=value`.
    pub server_parameters: BTreeMap<String, String>,
}

impl InProjectShape {
    /// Reads the parameters; a malformed one (a stored object the schema
    /// and the webhook did not check) is an error naming its field.
    pub fn from_parameters(parameters: Option<&PostgresParameters>) -> Result<Self, String> {
        let Some(parameters) = parameters else {
            return Ok(Self {
                storage: DEFAULT_STORAGE.to_owned(),
                server_parameters: BTreeMap::new(),
            });
        };
        parameters.storage_bytes().map_err(|e| e.to_string())?;
        Ok(Self {
            storage: parameters
                .storage_size()
                .map_or(DEFAULT_STORAGE, |size| size.0.as_str())
                .to_owned(),
            server_parameters: parameters.server_settings().map_err(|e| e.to_string())?,
        })
    }
}

/// The StatefulSet running the engine. One replica: PostgreSQL replicas
/// need replication, which this placement does not set up, and two
/// independent primaries would silently diverge. Claims are retained by the
/// StatefulSet controller in every case: only the deletion policy removes
/// data volumes, explicitly.
pub fn stateful_set(
    service: &ManagedService,
    shape: &InProjectShape,
    image: &str,
    credentials_secret: &str,
) -> Value {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let secret_env = |env: &str, key: &str| json!({"name": env, "valueFrom": {"secretKeyRef": {"name": credentials_secret, "key": key}}});
    let args: Vec<String> = shape
        .server_parameters
        .iter()
        .flat_map(|(k, v)| ["-c".to_owned(), format!("{k}={v}")])
        .collect();
    let mut container = json!({
        "name": "postgres",
        "image": image,
        "ports": [{"name": "postgres", "containerPort": PORT}],
        "env": [
            secret_env("POSTGRES_USER", "user"),
            secret_env("POSTGRES_PASSWORD", "password"),
            secret_env("POSTGRES_DB", "database"),
            {"name": "PGDATA", "value": PGDATA},
        ],
        "volumeMounts": [{"name": DATA_VOLUME, "mountPath": "/var/lib/postgresql/data"}],
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", "pg_isready -U \"$POSTGRES_USER\" -d \"$POSTGRES_DB\" -h 127.0.0.1"]},
            "periodSeconds": 5,
        },
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
    });
    if !args.is_empty() {
        container["args"] = json!(
            ["postgres"]
                .into_iter()
                .map(str::to_owned)
                .chain(args)
                .collect::<Vec<_>>()
        );
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": object_labels(name)},
        "spec": {
            "replicas": 1,
            "serviceName": headless_service_name(name),
            "selector": {"matchLabels": selector(name)},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {
                "metadata": {"labels": object_labels(name)},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": POSTGRES_UID,
                        "runAsGroup": POSTGRES_UID,
                        "fsGroup": POSTGRES_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": DATA_VOLUME, "labels": object_labels(name)},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": shape.storage}},
                },
            }],
        },
    })
}

/// The client Service `<service>` of an `InProject` engine.
pub fn client_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": object_labels(name)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector(name),
            "ports": [{"name": "postgres", "port": PORT, "targetPort": "postgres"}],
        },
    })
}

/// The headless Service of the StatefulSet.
pub fn headless_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": headless_service_name(name), "labels": object_labels(name)},
        "spec": {
            "clusterIP": "None",
            "selector": selector(name),
            "publishNotReadyAddresses": true,
            "ports": [{"name": "postgres", "port": PORT, "targetPort": "postgres"}],
        },
    })
}

/// The Service `<service>` of a `ProviderShared` engine: an alias of the
/// provider's host in the Project.
pub fn provider_service(name: &str, provider_host: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": object_labels(name)},
        "spec": {
            "type": "ExternalName",
            "externalName": provider_host,
            "ports": [{"name": "postgres", "port": port}],
        },
    })
}

/// Whether the StatefulSet serves: its controller saw the current spec and
/// every replica is ready. Otherwise, what it waits for.
pub fn readiness(set: &StatefulSet) -> Result<(), String> {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let wanted = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = set.status.clone().unwrap_or_default();
    let ready = status.ready_replicas.unwrap_or(0);
    let current = status.observed_generation >= set.metadata.generation;
    if current && ready >= wanted {
        Ok(())
    } else {
        Err(format!(
            "waiting for StatefulSet {name}: {ready}/{wanted} replicas ready"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetStatus;
    use navique_api::services::ManagedServiceSpec;

    fn parameters(json: Value) -> PostgresParameters {
        serde_json::from_value(json).unwrap()
    }

    fn service(parameters: PostgresParameters) -> ManagedService {
        let mut spec: ManagedServiceSpec = serde_json::from_value(json!({
            "classRef": {"name": "postgresql"},
            "planRef": {"name": "small"},
            "placement": {"mode": "InProject"},
        }))
        .unwrap();
        spec.parameters = Some(parameters);
        ManagedService::new("orders-db", spec)
    }

    #[test]
    fn the_shape_reads_storage_and_server_parameters() {
        let shape = InProjectShape::from_parameters(Some(&parameters(json!({
            "storage": {"size": "10Gi"},
            "postgresql": {"parameters": {"work_mem": "8MB", "max_connections": 50, "jit": "off"}},
        }))))
        .unwrap();
        assert_eq!(shape.storage, "10Gi");
        assert_eq!(
            shape.server_parameters,
            BTreeMap::from([
                ("jit".to_owned(), "off".to_owned()),
                ("max_connections".to_owned(), "50".to_owned()),
                ("work_mem".to_owned(), "8MB".to_owned()),
            ])
        );
        assert_eq!(
            InProjectShape::from_parameters(None).unwrap().storage,
            DEFAULT_STORAGE
        );
    }

    #[test]
    fn malformed_parameters_are_refused_naming_the_field() {
        // Fail open: these sizes were copied into the data volume's claim.
        // (A size that is not a string, or a setting that is neither a
        // string nor an integer, the CRD schema refuses.)
        for size in ["-10Gi", "0", "1e400Gi", "big"] {
            assert_eq!(
                InProjectShape::from_parameters(Some(&parameters(
                    json!({"storage": {"size": size}})
                ))),
                Err(format!(
                    "spec.parameters.storage.size: must be a quantity above zero such as 10Gi, not {size:?}"
                ))
            );
        }
        assert_eq!(
            InProjectShape::from_parameters(Some(&parameters(
                json!({"postgresql": {"parameters": {"a=b -c x": "1"}}})
            ))),
            Err("spec.parameters.postgresql.parameters: \"a=b -c x\" is not a PostgreSQL setting name".to_owned())
        );
    }

    #[test]
    fn the_stateful_set_runs_one_retained_non_root_postgres_from_the_secret() {
        let service = service(parameters(
            json!({"storage": {"size": "10Gi"}, "postgresql": {"parameters": {"work_mem": "8MB"}}}),
        ));
        let shape = InProjectShape::from_parameters(service.spec.parameters.as_ref()).unwrap();
        let set = stateful_set(&service, &shape, "postgres:17", "orders-db-credentials");
        let typed: StatefulSet = serde_json::from_value(set.clone()).unwrap();
        let spec = typed.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.service_name.as_deref(), Some("orders-db-headless"));
        let retention = spec.persistent_volume_claim_retention_policy.unwrap();
        assert_eq!(retention.when_deleted.as_deref(), Some("Retain"));
        assert_eq!(
            set.pointer("/spec/volumeClaimTemplates/0/spec/resources/requests/storage"),
            Some(&json!("10Gi"))
        );
        let container = &spec.template.spec.unwrap().containers[0];
        assert_eq!(
            container.args.as_deref(),
            Some(
                &[
                    "postgres".to_owned(),
                    "-c".to_owned(),
                    "work_mem=8MB".to_owned()
                ][..]
            )
        );
        let password = container
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "POSTGRES_PASSWORD")
            .unwrap();
        let key = password
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("orders-db-credentials", "password")
        );
    }

    #[test]
    fn data_claims_are_recognised_by_the_stateful_set_naming() {
        assert!(is_data_claim("orders-db", "data-orders-db-0"));
        assert!(is_data_claim("orders-db", "data-orders-db-12"));
        assert!(!is_data_claim("orders-db", "data-orders-db-"));
        assert!(!is_data_claim("orders", "data-orders-db-0"));
        assert!(!is_data_claim("orders-db", "logs-orders-db-0"));
    }

    #[test]
    fn a_stateful_set_is_ready_when_current_and_all_replicas_are_ready() {
        let mut set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "orders-db", "generation": 2},
            "spec": {"replicas": 1, "selector": {}, "template": {}, "serviceName": "x"},
        }))
        .unwrap();
        assert_eq!(
            readiness(&set),
            Err("waiting for StatefulSet orders-db: 0/1 replicas ready".to_owned())
        );
        set.status = Some(StatefulSetStatus {
            observed_generation: Some(1),
            ready_replicas: Some(1),
            replicas: 1,
            ..Default::default()
        });
        assert!(readiness(&set).is_err(), "an old generation is not current");
        set.status.as_mut().unwrap().observed_generation = Some(2);
        assert_eq!(readiness(&set), Ok(()));
    }
}
