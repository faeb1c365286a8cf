//! The checks kube-apiserver's registry makes on a write: built-in
//! defaults; custom resources pruned, defaulted and validated against their
//! CRD's schema (CEL rules included); CRDs checked and established. As in
//! kube-apiserver, an object is prepared when decoded and again after
//! mutating admission, and checked only after it.

use serde_json::{Value, json};

use crate::resources::{ResourceType, kind_group};
use crate::status::ApiError;
use crate::{crds, defaults, schema};

/// Defaults and prunes a created or updated `object` (a custom resource by
/// its CRD's schema, a built-in by its kind's fields), collecting warnings
/// for pruned fields. `field_validation` is the request's `fieldValidation`
/// parameter (`Strict` refuses unknown fields).
pub fn prepare(
    rt: &ResourceType,
    field_validation: Option<&str>,
    object: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    defaults::apply(rt, object);
    let pruned = match &rt.schema {
        Some(schema) => schema.prune(object),
        None => schema::prune(object),
    };
    match field_validation {
        Some("Ignore") => {}
        Some("Strict") if !pruned.is_empty() => {
            return Err(ApiError::bad_request(
                navique_crd_validation::strict_decoding_message(&rt.kind, &rt.version, &pruned),
            ));
        }
        _ => warnings.extend(
            pruned
                .iter()
                .map(|p| navique_crd_validation::unknown_field_warning(p)),
        ),
    }
    if let Some(schema) = &rt.schema {
        schema.apply_defaults(object);
    }
    Ok(())
}

/// Validates a prepared create (`old` is None) or update of `object`; a
/// CRD gets the status of an established one.
pub fn check(rt: &ResourceType, old: Option<&Value>, object: &mut Value) -> Result<(), ApiError> {
    if let Some(schema) = &rt.schema {
        let mut errors = schema.validate(object);
        // As kube-apiserver: CEL rules run only on objects whose structure
        // is sound.
        let structural = errors.iter().any(|e| {
            use navique_crd_validation::FieldErrorKind::*;
            matches!(
                e.kind,
                Required | TypeInvalid | NotSupported | TooLong | TooMany
            )
        });
        if !structural {
            errors.extend(schema.validate_rules(object, old));
        }
        if !errors.is_empty() {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let message =
                navique_crd_validation::invalid_message(&rt.kind, &rt.group, name, &errors);
            let causes = errors
                .iter()
                .map(|e| {
                    let cause = e.cause();
                    json!({"reason": cause.reason, "message": cause.message, "field": cause.field})
                })
                .collect();
            return Err(ApiError::invalid(rt, name, message, causes));
        }
    }
    if crds::is_crd(rt) {
        crds::establish(object).map_err(|detail| {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            ApiError::invalid(
                rt,
                name,
                format!("{} \"{name}\" is invalid: {detail}", kind_group(rt)),
                Vec::new(),
            )
        })?;
    }
    Ok(())
}
