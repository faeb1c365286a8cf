//! The manifests of the seed documents (in `deploy/examples`, and the seed's
//! orders-db verbatim in `e2e/fixtures/seeds`) read into the API types
//! unchanged, the generated CRD schemas accept them, and the schemas reject
//! bad manifests naming the field, as the API server will.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use navique_api::core::{Lock, Stack};
use navique_api::services::{
    BackupOrigin, DeletionPolicy, ManagedService, PlacementMode, ServiceBackup, ServiceClass,
    ServicePlan,
};
use navique_crd_validation::{Schema, invalid_message};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn example(name: &str) -> Vec<Value> {
    read(&format!("deploy/examples/{name}"))
}

/// A seed's manifest as the seed prints it.
fn seed(name: &str) -> Vec<Value> {
    read(&format!("e2e/fixtures/seeds/{name}"))
}

fn read(file: &str) -> Vec<Value> {
    let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            serde_yaml::from_value::<Value>(serde_yaml::Value::deserialize(doc).unwrap()).unwrap()
        })
        .collect()
}

use serde::Deserialize;

/// Reads `manifest` as `K` and writes it back: nothing may be lost or added.
fn round_trip<K: DeserializeOwned + Serialize>(manifest: &Value) -> K {
    let typed: K = serde_json::from_value(manifest.clone()).expect("manifest reads into the type");
    assert_eq!(
        &serde_json::to_value(&typed).unwrap(),
        manifest,
        "round trip changed the manifest"
    );
    typed
}

/// The schema the CRD of `K` installs.
fn schema<K: Resource<DynamicType = ()>>() -> Schema {
    let crd = navique_api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == K::kind(&()))
        .expect("a CRD for the kind");
    let openapi = &crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema;
    Schema::from_value(&serde_json::to_value(openapi).unwrap()).expect("structural schema")
}

/// What the API server does to a create: prune, default, validate. Returns
/// the stored object, or the Invalid message it would answer.
fn admit<K: Resource<DynamicType = ()>>(mut manifest: Value) -> Result<Value, String> {
    let schema = schema::<K>();
    let pruned = schema.prune(&mut manifest);
    assert!(pruned.is_empty(), "unknown fields pruned: {pruned:?}");
    schema.apply_defaults(&mut manifest);
    let errors = schema.validate(&manifest);
    if errors.is_empty() {
        Ok(manifest)
    } else {
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
        Err(invalid_message(
            &K::kind(&()),
            &K::group(&()),
            name,
            &errors,
        ))
    }
}

#[test]
fn the_seed_lock_reads_unchanged_and_is_accepted() {
    let manifest = &example("lock.yaml")[0];
    let lock: Lock = round_trip(manifest);
    assert_eq!(lock.spec.target_ref.kind, "Stack");
    assert_eq!(lock.spec.target_ref.group(), "core.navique.com");
    assert_eq!(admit::<Lock>(manifest.clone()), Ok(manifest.clone()));
}

#[test]
fn the_seed_orders_db_reads_unchanged_and_is_accepted() {
    let manifest = &seed("orders-db.yaml")[0];
    let service: ManagedService = round_trip(manifest);
    assert_eq!(service.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(service.spec.placement.mode, PlacementMode::ProviderShared);
    let parameters = service.spec.parameters.as_ref().unwrap();
    assert_eq!(
        parameters.postgresql.as_ref().unwrap().parameters["work_mem"],
        IntOrString::String("8MB".to_owned())
    );
    assert_eq!(parameters.instances, Some(2));
    assert_eq!(
        admit::<ManagedService>(manifest.clone()),
        Ok(manifest.clone())
    );
}

#[test]
fn the_example_orders_db_is_the_seed_s_without_what_is_not_applied() {
    let example = &example("orders-db.yaml")[0];
    let service: ManagedService = round_trip(example);
    assert_eq!(
        admit::<ManagedService>(example.clone()),
        Ok(example.clone())
    );
    let seed = &seed("orders-db.yaml")[0];
    assert_eq!(example["metadata"], seed["metadata"]);
    for field in [
        "classRef",
        "planRef",
        "placement",
        "deletionPolicy",
        "deletionProtection",
    ] {
        assert_eq!(example["spec"][field], seed["spec"][field], "{field}");
    }
    let parameters = service.spec.parameters.unwrap();
    assert_eq!(
        (parameters.database.as_deref(), parameters.owner.as_deref()),
        (Some("orders"), Some("orders"))
    );
    assert!(example["spec"]["connectivity"].is_null());
    assert_eq!(
        example["spec"]["parameters"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["database", "owner"]
    );
}

#[test]
fn the_example_stack_and_catalogue_are_accepted() {
    let stack = &example("forge-stack.yaml")[0];
    let typed: Stack = round_trip(stack);
    assert_eq!(typed.spec.resources.len(), 2);
    // Embedded manifests are kept whole, their unknown fields included.
    assert_eq!(admit::<Stack>(stack.clone()), Ok(stack.clone()));

    let catalogue = example("catalogue.yaml");
    round_trip::<ServiceClass>(&catalogue[0]);
    admit::<ServiceClass>(catalogue[0].clone()).unwrap();
    let plan: ServicePlan = round_trip(&catalogue[1]);
    assert!(plan.spec.backup.enabled);
    admit::<ServicePlan>(catalogue[1].clone()).unwrap();
}

#[test]
fn a_lock_without_target_kind_is_rejected_naming_the_field() {
    let mut lock = example("lock.yaml").remove(0);
    lock["spec"]["targetRef"]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    assert_eq!(
        admit::<Lock>(lock),
        Err(r#"Lock.core.navique.com "protect-forge-stack" is invalid: spec.targetRef.kind: Required value"#.to_owned())
    );
}

#[test]
fn a_lock_target_api_version_defaults_to_the_core_group() {
    let mut lock = example("lock.yaml").remove(0);
    lock["spec"]["targetRef"]
        .as_object_mut()
        .unwrap()
        .remove("apiVersion");
    let stored = admit::<Lock>(lock).unwrap();
    assert_eq!(
        stored["spec"]["targetRef"]["apiVersion"],
        "core.navique.com/v1alpha1"
    );
}

#[test]
fn a_service_with_deletion_policy_destroy_is_rejected_naming_the_field() {
    let mut service = seed("orders-db.yaml").remove(0);
    service["spec"]["deletionPolicy"] = json!("Destroy");
    assert_eq!(
        admit::<ManagedService>(service),
        Err(r#"ManagedService.services.kube-dc.com "orders-db" is invalid: spec.deletionPolicy: Unsupported value: "Destroy": supported values: "Retain", "SnapshotAndDelete", "Delete""#.to_owned())
    );
}

#[test]
fn a_service_without_deletion_policy_defaults_to_retain_and_leaves_protection_to_the_plan() {
    let mut service = seed("orders-db.yaml").remove(0);
    let spec = service["spec"].as_object_mut().unwrap();
    spec.remove("deletionPolicy");
    spec.remove("deletionProtection");
    let stored = admit::<ManagedService>(service).unwrap();
    assert_eq!(stored["spec"]["deletionPolicy"], "Retain");
    // No schema default: the webhook sets the plan's default, so the stored
    // object must still tell "left out" from "false".
    assert!(stored["spec"].get("deletionProtection").is_none());
    let typed: ManagedService = serde_json::from_value(stored).unwrap();
    assert_eq!(typed.spec.deletion_policy, DeletionPolicy::Retain);
    assert_eq!(typed.spec.deletion_protection, None);
}

#[test]
fn a_backup_with_an_unknown_origin_is_rejected_naming_the_field() {
    let backup = json!({
        "apiVersion": "services.kube-dc.com/v1alpha1",
        "kind": "ServiceBackup",
        "metadata": {"name": "orders-db-weekly", "namespace": "my-project"},
        "spec": {"serviceRef": {"name": "orders-db"}, "origin": "Weekly"},
    });
    assert_eq!(
        admit::<ServiceBackup>(backup),
        Err(r#"ServiceBackup.services.kube-dc.com "orders-db-weekly" is invalid: spec.origin: Unsupported value: "Weekly": supported values: "Manual", "Scheduled", "Final""#.to_owned())
    );
}

#[test]
fn a_backup_without_origin_is_manual() {
    let backup = json!({
        "apiVersion": "services.kube-dc.com/v1alpha1",
        "kind": "ServiceBackup",
        "metadata": {"name": "before-migration", "namespace": "my-project"},
        "spec": {"serviceRef": {"name": "orders-db"}},
    });
    let stored: ServiceBackup =
        serde_json::from_value(admit::<ServiceBackup>(backup).unwrap()).unwrap();
    assert_eq!(stored.spec.origin, BackupOrigin::Manual);
}

#[test]
fn several_errors_are_reported_together() {
    let mut service = seed("orders-db.yaml").remove(0);
    service["spec"].as_object_mut().unwrap().remove("planRef");
    service["spec"]["placement"]["mode"] = json!("Elsewhere");
    assert_eq!(
        admit::<ManagedService>(service),
        Err(r#"ManagedService.services.kube-dc.com "orders-db" is invalid: [spec.placement.mode: Unsupported value: "Elsewhere": supported values: "InProject", "ProviderShared", spec.planRef: Required value]"#.to_owned())
    );
}

#[test]
fn a_stack_resource_without_kind_is_rejected() {
    let mut stack = example("forge-stack.yaml").remove(0);
    stack["spec"]["resources"][1]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    assert_eq!(
        admit::<Stack>(stack),
        Err(
            r#"Stack.core.navique.com "forge" is invalid: spec.resources[1].kind: Required value"#
                .to_owned()
        )
    );
}

/// The seed's orders-db with `edit` applied, as the API server answers it.
fn admit_orders_db(edit: impl FnOnce(&mut Value)) -> Result<Value, String> {
    let mut manifest = seed("orders-db.yaml").remove(0);
    edit(&mut manifest);
    admit::<ManagedService>(manifest)
}

fn invalid(detail: &str) -> Result<Value, String> {
    Err(format!(
        r#"ManagedService.services.kube-dc.com "orders-db" is invalid: {detail}"#
    ))
}

#[test]
fn malformed_parameters_are_rejected_naming_the_field() {
    // Fail open: what a careless user typed became a default or went
    // through unread.
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["storage"] = json!("big")),
        invalid(
            r#"spec.parameters.storage: Invalid value: "string": spec.parameters.storage in body must be of type object: "string""#
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["instances"] = json!(-3)),
        invalid(
            "spec.parameters.instances: Invalid value: -3: spec.parameters.instances in body should be greater than or equal to 1"
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["instances"] = json!("2")),
        invalid(
            r#"spec.parameters.instances: Invalid value: "string": spec.parameters.instances in body must be of type integer: "string""#
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["storage"]["size"] = json!(10)),
        invalid(
            r#"spec.parameters.storage.size: Invalid value: "integer": spec.parameters.storage.size in body must be of type string: "integer""#
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["readonlyRole"] = json!("yes")),
        invalid(
            r#"spec.parameters.readonlyRole: Invalid value: "string": spec.parameters.readonlyRole in body must be of type boolean: "string""#
        )
    );
    assert_eq!(
        admit_orders_db(
            |m| m["spec"]["parameters"]["postgresql"]["parameters"]["jit"] = json!(false)
        ),
        invalid(
            r#"spec.parameters.postgresql.parameters.jit: Invalid value: "boolean": spec.parameters.postgresql.parameters.jit in body must be of type integer,string: "boolean""#
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["parameters"]["owner"] = json!(7)),
        invalid(
            r#"spec.parameters.owner: Invalid value: "integer": spec.parameters.owner in body must be of type string: "integer""#
        )
    );
    assert_eq!(
        admit_orders_db(
            |m| m["spec"]["parameters"]["postgresql"]["parameters"]["work_mem"] = json!(["8MB"])
        ),
        invalid(
            r#"spec.parameters.postgresql.parameters.work_mem: Invalid value: "array": spec.parameters.postgresql.parameters.work_mem in body must be of type integer,string: "array""#
        )
    );
    assert_eq!(
        admit_orders_db(|m| m["spec"]["deletionProtection"] = json!("true")),
        invalid(
            r#"spec.deletionProtection: Invalid value: "string": spec.deletionProtection in body must be of type boolean: "string""#
        )
    );
}

#[test]
fn unknown_parameters_are_not_kept() {
    let schema = schema::<ManagedService>();
    let mut manifest = seed("orders-db.yaml").remove(0);
    manifest["spec"]["parameters"]["storgae"] = json!({"size": "10Gi"});
    manifest["spec"]["parameters"]["postgresql"]["version"] = json!("17");
    assert_eq!(
        schema.prune(&mut manifest),
        [
            "spec.parameters.postgresql.version",
            "spec.parameters.storgae"
        ]
    );
}

#[test]
fn names_that_go_into_urls_must_be_object_names() {
    let mut lock = example("lock.yaml").remove(0);
    lock["spec"]["targetRef"]["name"] = json!("Forge Ü");
    lock["spec"]["targetRef"]["kind"] = json!("Stack x");
    let pattern = navique_api::names::OBJECT_NAME_PATTERN;
    let kind_pattern = navique_api::names::KIND_PATTERN;
    assert_eq!(
        admit::<Lock>(lock),
        Err(format!(
            r#"Lock.core.navique.com "protect-forge-stack" is invalid: [spec.targetRef.kind: Invalid value: "Stack x": spec.targetRef.kind in body should match '{kind_pattern}', spec.targetRef.name: Invalid value: "Forge Ü": spec.targetRef.name in body should match '{pattern}']"#
        ))
    );
    for (pointer, bad) in [
        ("/spec/restoreFrom/backupName", "../orders"),
        ("/spec/finalBackup/name", "Final Backup"),
        ("/spec/planRef/name", "ha plan"),
    ] {
        let field = pointer[1..].replace('/', ".");
        let message = admit_orders_db(|m| {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let (grand, child) = parent.rsplit_once('/').unwrap();
            let spec = m.pointer_mut(grand).unwrap();
            if spec.get(child).is_none() {
                spec[child] = json!({});
            }
            spec[child][key] = json!(bad);
            if child == "restoreFrom" {
                spec[child]["namespace"] = json!("my-project");
            }
        });
        assert_eq!(
            message,
            invalid(&format!(
                r#"{field}: Invalid value: "{bad}": {field} in body should match '{pattern}'"#
            )),
            "{pointer}"
        );
    }
}
