//! Bounds on what a request may carry, checked before any work: an
//! idempotency key, a name or a uid longer than any real one is refused
//! with `InvalidArgument` naming the field, so that a caller cannot make
//! the server hold, log or hash arbitrary amounts of text.

use navique_api::grpc::snapshot::v1::{
    GetSnapshotRequest, RequestSnapshotRequest, RestoreSnapshotRequest, ServiceRef,
    WatchSnapshotRequest,
};

use crate::Error;

/// Largest request the server decodes (each is a few fields of text).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// Idempotency keys: the lifecycle controller's are `<uid>/final`.
pub const MAX_KEY: usize = 256;
/// Kubernetes object names (DNS subdomains).
pub const MAX_NAME: usize = 253;
/// Namespaces (DNS labels).
pub const MAX_NAMESPACE: usize = 63;
/// Object uids (36 in practice).
pub const MAX_UID: usize = 64;

fn at_most(field: &str, value: &str, max: usize) -> Result<(), Error> {
    if value.len() > max {
        return Err(Error::InvalidRequest(format!(
            "{field} is {} bytes long; at most {max} are allowed",
            value.len()
        )));
    }
    Ok(())
}

fn service(field: &str, service: Option<&ServiceRef>) -> Result<(), Error> {
    let Some(service) = service else {
        return Ok(());
    };
    at_most(
        &format!("{field}.namespace"),
        &service.namespace,
        MAX_NAMESPACE,
    )?;
    at_most(&format!("{field}.name"), &service.name, MAX_NAME)?;
    at_most(&format!("{field}.uid"), &service.uid, MAX_UID)
}

pub fn request_snapshot(request: &RequestSnapshotRequest) -> Result<(), Error> {
    at_most("idempotency_key", &request.idempotency_key, MAX_KEY)?;
    service("service", request.service.as_ref())?;
    at_most("backup_name", &request.backup_name, MAX_NAME)
}

pub fn watch_snapshot(request: &WatchSnapshotRequest) -> Result<(), Error> {
    at_most("idempotency_key", &request.idempotency_key, MAX_KEY)
}

pub fn get_snapshot(request: &GetSnapshotRequest) -> Result<(), Error> {
    at_most("idempotency_key", &request.idempotency_key, MAX_KEY)
}

pub fn restore_snapshot(request: &RestoreSnapshotRequest) -> Result<(), Error> {
    service("source_service", request.source_service.as_ref())?;
    at_most("backup_name", &request.backup_name, MAX_NAME)?;
    service("target", request.target.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_fields_are_refused_by_name_and_real_ones_pass() {
        let uid = "0b6f5d5e-6a3c-4d2e-9f1a-2b3c4d5e6f70";
        let real = RequestSnapshotRequest {
            idempotency_key: format!("{uid}/final"),
            service: Some(ServiceRef {
                namespace: "my-project".into(),
                name: "orders-db".into(),
                uid: uid.into(),
            }),
            origin: 3,
            backup_name: "orders-db-final-0b6f5d5e".into(),
            ..Default::default()
        };
        request_snapshot(&real).unwrap();
        let long = |n: usize| "k".repeat(n);
        let cases: [(RequestSnapshotRequest, &str); 5] = [
            (
                RequestSnapshotRequest {
                    idempotency_key: long(100_000),
                    ..real.clone()
                },
                "idempotency_key is 100000 bytes long; at most 256 are allowed",
            ),
            (
                RequestSnapshotRequest {
                    backup_name: long(254),
                    ..real.clone()
                },
                "backup_name is 254 bytes long; at most 253",
            ),
            (
                RequestSnapshotRequest {
                    service: Some(ServiceRef {
                        uid: long(65),
                        ..real.service.clone().unwrap()
                    }),
                    ..real.clone()
                },
                "service.uid is 65 bytes long",
            ),
            (
                RequestSnapshotRequest {
                    service: Some(ServiceRef {
                        namespace: long(64),
                        ..real.service.clone().unwrap()
                    }),
                    ..real.clone()
                },
                "service.namespace is 64 bytes long",
            ),
            (
                RequestSnapshotRequest {
                    service: Some(ServiceRef {
                        name: long(254),
                        ..real.service.clone().unwrap()
                    }),
                    ..real.clone()
                },
                "service.name is 254 bytes long",
            ),
        ];
        for (request, message) in cases {
            let error = request_snapshot(&request).unwrap_err();
            assert!(matches!(error, Error::InvalidRequest(_)));
            assert!(error.to_string().contains(message), "{error}");
        }
        let restore = RestoreSnapshotRequest {
            source_service: real.service.clone(),
            backup_name: "b".into(),
            target: Some(ServiceRef {
                name: long(300),
                ..ServiceRef::default()
            }),
            jobs: 0,
        };
        assert!(
            restore_snapshot(&restore)
                .unwrap_err()
                .to_string()
                .contains("target.name is 300 bytes long")
        );
        let get = GetSnapshotRequest {
            idempotency_key: long(257),
        };
        assert!(get_snapshot(&get).is_err());
        let watch = WatchSnapshotRequest {
            idempotency_key: long(257),
        };
        assert!(watch_snapshot(&watch).is_err());
    }
}
