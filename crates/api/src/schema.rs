//! Schema fragments schemars cannot derive: Kubernetes' structural-schema
//! extensions for free-form objects, embedded manifests and condition lists.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// An object whose fields the API server keeps as given (`parameters`).
pub fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A Kubernetes quantity such as `10Gi`, as a string of at most
/// [`crate::quantity::MAX_LENGTH`] characters (k8s-openapi's schema also
/// takes an integer, a number of bytes nobody means). What it must hold is
/// checked by [`crate::quantity::storage_bytes`].
pub fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": crate::quantity::MAX_LENGTH,
    })
}

/// A list of complete Kubernetes manifests: each item must name its
/// apiVersion, kind and metadata.name, the rest is kept as given.
pub fn embedded_manifests(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["apiVersion", "kind", "metadata"],
            "x-kubernetes-validations": [{
                "rule": "has(self.metadata.name) && self.metadata.name != ''",
                "message": "metadata.name is required",
                "reason": "FieldValueRequired",
            }],
        },
    })
}

/// Standard `status.conditions`: a list map keyed by `type`, so server-side
/// apply merges one condition without clobbering the others.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item = Condition::json_schema(generator);
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}
