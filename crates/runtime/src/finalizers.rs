//! Writing an object's finalizers safely.

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Writes `finalizers` on object `name` as a merge patch carrying the
/// `resource_version` they were read at, so that a concurrent change of the
/// list fails (409) instead of losing another controller's finalizer. A
/// stale copy (the object is gone, or a newer version of it is queued for a
/// reconcile of its own) is not an error.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<String>,
    finalizers: Vec<String>,
) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    write_finalizers(api, name, resource_version, finalizers)
        .await
        .map(drop)
}

/// [`set_finalizers`], returning the object as written, or `None` when the
/// copy was stale and nothing was written: a caller that goes on from the
/// written object needs no second reconcile.
pub async fn write_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<String>,
    finalizers: Vec<String>,
) -> Result<Option<K>, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": resource_version,
    }});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(status)) if status.is_not_found() || status.is_conflict() => Ok(None),
        Err(e) => Err(e),
    }
}
