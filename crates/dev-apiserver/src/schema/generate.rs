//! Writes `generated.rs` from the sources of the k8s-pb and k8s-openapi
//! crates this workspace builds with, found through `cargo metadata`:
//!
//! - k8s-pb's prost structs give each message's fields in Go's order (as
//!   go-to-protobuf wrote `generated.proto`), their numbers and types;
//! - k8s-openapi's structs give each field's JSON name, whether it is
//!   required (Go writes it even when empty) and its documentation, and its
//!   `Resource` impls the served resources.
//!
//! `cargo test -p dev-apiserver generated_schema_is_current` fails when the
//! file is stale; with `NAVIQUE_REGENERATE=1` it rewrites it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The k8s-openapi version module the workspace enables.
const OPENAPI_VERSION: &str = "v1_33";

/// apimachinery messages with a JSON form of their own, by OpenAPI name.
const SPECIAL: &[(&str, &str)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "Time"),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
        "MicroTime",
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", "RawJson"),
    ("io.k8s.apimachinery.pkg.runtime.RawExtension", "RawJson"),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
        "RawJson",
    ),
    (
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        "IntOrString",
    ),
    ("io.k8s.apimachinery.pkg.api.resource.Quantity", "Quantity"),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "SchemaOrArray",
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "SchemaOrBool",
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
        "SchemaOrStringArray",
    ),
];

/// Messages reached from outside the served resources: what clients send
/// or are answered besides objects and lists.
const ROOTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.api.autoscaling.v1.Scale",
];

/// Go pointers whose zero means something other than unset and whose
/// documentation does not say so (see [`keeps_zero`]): k8s-openapi cannot
/// tell `*int64` from `int64`, so these are named.
const POINTERS: &[&str] = &[
    "io.k8s.api.core.v1.ServiceAccount.automountServiceAccountToken",
    "io.k8s.api.core.v1.ConfigMap.immutable",
    "io.k8s.api.core.v1.Secret.immutable",
    "io.k8s.api.core.v1.PodSpec.automountServiceAccountToken",
    "io.k8s.api.core.v1.SecurityContext.allowPrivilegeEscalation",
    "io.k8s.api.core.v1.SecurityContext.runAsUser",
    "io.k8s.api.core.v1.SecurityContext.runAsGroup",
    "io.k8s.api.core.v1.PodSecurityContext.runAsUser",
    "io.k8s.api.core.v1.PodSecurityContext.runAsGroup",
    "io.k8s.api.core.v1.PodSecurityContext.fsGroup",
    "io.k8s.api.batch.v1.JobSpec.parallelism",
    "io.k8s.api.batch.v1.JobSpec.completions",
    "io.k8s.api.batch.v1.JobSpec.ttlSecondsAfterFinished",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.deletionGracePeriodSeconds",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference.controller",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference.blockOwnerDeletion",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions.gracePeriodSeconds",
];

/// One prost field.
#[derive(Debug)]
struct PbField {
    rust: String,
    tag: u32,
    /// `string`, `bool`, `int32`, `int64`, `double`, `bytes` or `message`.
    ty: String,
    /// The message's full OpenAPI-style name, for message fields.
    message: Option<String>,
    card: &'static str,
}

/// One prost message: its name as the OpenAPI package plus the prost struct
/// name (whose case prost changed: `JsonSchemaProps`).
#[derive(Debug)]
struct PbMessage {
    package: String,
    rust: String,
    fields: Vec<PbField>,
}

/// One k8s-openapi definition.
#[derive(Debug, Default)]
struct OpenapiType {
    name: String,
    /// `k8s_openapi::...::Job`.
    path: String,
    /// (rust name, JSON name, required, documentation).
    fields: Vec<(String, String, bool, String)>,
    resource: Option<OpenapiResource>,
}

#[derive(Debug, Default)]
struct OpenapiResource {
    group: String,
    kind: String,
    version: String,
    plural: String,
    scope: String,
    list_kind: Option<String>,
}

/// The target triple of the machine, as rustc names it.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn source_dir(package: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    // Filtered to the host: unfiltered, cargo resolves every platform's
    // dependencies, and offline it fails on those no build here downloaded
    // (android_system_properties, on a fresh Linux machine).
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host_triple(),
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == package)
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{package} is not a dependency"));
    Path::new(manifest)
        .parent()
        .expect("a manifest has a folder")
        .join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `api/batch/v1` -> `io.k8s.api.batch.v1`.
fn package_of(module: &[String]) -> String {
    let parts: Vec<String> = module.iter().map(|m| m.replace('_', "-")).collect();
    format!("io.k8s.{}", parts.join("."))
}

/// The message a prost type path names, seen from `module`.
fn resolve(module: &[String], ty: &str) -> String {
    // The innermost type argument: Option<T>, Vec<T>, Box<T>, BTreeMap<String, T>.
    let inner = ty
        .trim_end_matches([',', '>', ' '])
        .rsplit(['<', ','])
        .next()
        .unwrap_or_default()
        .trim();
    let mut here = module.to_vec();
    let mut rest = inner;
    while let Some(r) = rest.strip_prefix("super::") {
        here.pop();
        rest = r;
    }
    let mut parts: Vec<&str> = rest.split("::").collect();
    let name = parts.pop().expect("a type path has a name");
    here.extend(parts.into_iter().map(str::to_owned));
    format!("{}.{name}", package_of(&here))
}

fn parse_pb(src: &Path) -> Vec<PbMessage> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut messages = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read k8s-pb source");
        let relative = file.parent().unwrap().strip_prefix(src).unwrap();
        let module: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let mut current: Option<PbMessage> = None;
        let mut attribute: Option<String> = None;
        // A field declaration may wrap: `pub name:` on one line, its type on the next.
        let mut declaration = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(name) = line
                .strip_prefix("pub struct ")
                .and_then(|l| l.strip_suffix(" {}"))
            {
                messages.push(PbMessage {
                    package: package_of(&module),
                    rust: name.to_owned(),
                    fields: Vec::new(),
                });
            } else if let Some(name) = line
                .strip_prefix("pub struct ")
                .and_then(|l| l.strip_suffix(" {"))
            {
                current = Some(PbMessage {
                    package: package_of(&module),
                    rust: name.to_owned(),
                    fields: Vec::new(),
                });
            } else if line == "}" {
                messages.extend(current.take());
            } else if let Some(attr) = trimmed
                .strip_prefix("#[prost(")
                .and_then(|l| l.strip_suffix(")]"))
            {
                attribute = Some(attr.to_owned());
            } else if let Some(message) = current.as_mut()
                && attribute.is_some()
                && (trimmed.starts_with("pub ") || !declaration.is_empty())
            {
                declaration.push_str(trimmed);
                let open = declaration.matches('<').count() > declaration.matches('>').count();
                if open || !declaration.ends_with(',') {
                    continue;
                }
                let attr = attribute.take().expect("checked above");
                let decl = std::mem::take(&mut declaration);
                let decl = decl.trim_start_matches("pub ").trim_end_matches(',');
                let (rust, ty) = decl.split_once(':').expect("a field declaration");
                message
                    .fields
                    .push(pb_field(&module, &attr, rust, ty.trim()));
            }
        }
    }
    messages
}

fn pb_field(module: &[String], attr: &str, rust: &str, ty: &str) -> PbField {
    let tag = attr
        .split("tag = \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .and_then(|t| t.parse().ok())
        .expect("a prost field has a tag");
    let first = attr.split([',', ' ']).next().unwrap_or_default();
    let (kind, card) = if let Some(map) = attr.strip_prefix("btree_map = \"") {
        let value = map
            .split('"')
            .next()
            .and_then(|kv| kv.split(", ").nth(1))
            .expect("a map's value type");
        (value, "Map")
    } else if attr.contains("repeated") {
        (first, "Repeated")
    } else {
        (first, "One")
    };
    PbField {
        rust: rust.trim_start_matches("r#").to_owned(),
        tag,
        ty: kind.to_owned(),
        message: (kind == "message").then(|| resolve(module, ty)),
        card,
    }
}

fn parse_openapi(src: &Path) -> BTreeMap<String, OpenapiType> {
    let root = src.join(OPENAPI_VERSION);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut types = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read k8s-openapi source");
        let Some(name) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// Generated from definition "))
        else {
            continue;
        };
        let module = file
            .strip_prefix(&root)
            .unwrap()
            .parent()
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("::");
        let mut ty = OpenapiType {
            name: name.to_owned(),
            ..OpenapiType::default()
        };
        // Struct fields: documentation, then `pub rust_name: Type,`.
        let mut in_struct = false;
        let mut doc = String::new();
        let mut required = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("pub struct ") {
                let rust_name = rest.split([' ', '(', '{']).next().unwrap_or_default();
                ty.path = format!("k8s_openapi::{module}::{rust_name}");
                in_struct = rest.ends_with('{');
            } else if let Some(rest) = line.strip_prefix("pub enum ") {
                let rust_name = rest.split([' ', '{']).next().unwrap_or_default();
                ty.path = format!("k8s_openapi::{module}::{rust_name}");
            } else if in_struct && line == "}" {
                in_struct = false;
            } else if in_struct && let Some(text) = line.trim().strip_prefix("///") {
                doc.push_str(text.trim());
                doc.push(' ');
            } else if in_struct && let Some(decl) = line.trim().strip_prefix("pub ") {
                let (rust, rust_ty) = decl.split_once(": ").expect("a field declaration");
                required.insert(
                    rust.to_owned(),
                    (!rust_ty.starts_with("Option<"), std::mem::take(&mut doc)),
                );
            }
        }
        // JSON names: the Deserialize impl's `"json" => Field::Key_rust,`.
        for line in text.lines() {
            let Some((json, rust)) = line.trim().split_once("\" => Field::Key_") else {
                continue;
            };
            let json = json.trim_start_matches('"');
            let rust = rust.trim_end_matches(',');
            if let Some((req, doc)) = required.get(rust) {
                ty.fields
                    .push((rust.to_owned(), json.to_owned(), *req, doc.clone()));
            }
        }
        if text.contains("impl crate::Resource for ") {
            let constant = |key: &str| {
                text.lines()
                    .find_map(|l| {
                        l.trim()
                            .strip_prefix(&format!("const {key}: &'static str = \""))
                    })
                    .map(|v| v.trim_end_matches("\";").to_owned())
                    .unwrap_or_default()
            };
            ty.resource = Some(OpenapiResource {
                group: constant("GROUP"),
                kind: constant("KIND"),
                version: constant("VERSION"),
                plural: constant("URL_PATH_SEGMENT"),
                scope: text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("type Scope = crate::"))
                    .map(|s| s.trim_end_matches(';').to_owned())
                    .unwrap_or_default(),
                list_kind: text
                    .contains("impl crate::ListableResource for ")
                    .then(|| constant("LIST_KIND")),
            });
        }
        types.insert(name.to_owned(), ty);
    }
    types
}

/// `fooBar` and `foo_bar` alike: how prost's and k8s-openapi's snake cases
/// of one JSON name meet.
fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-' && *c != '$')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether Go's field is a pointer, by what its documentation says: the
/// API conventions' "a pointer to distinguish", or a default that a Go zero
/// could not mean (true, or a number other than 0).
fn keeps_zero(doc: &str) -> bool {
    let doc = doc.to_lowercase();
    if doc.contains("pointer to distinguish") {
        return true;
    }
    [
        "defaults to ",
        "default to ",
        "default is ",
        "default value is ",
    ]
    .iter()
    .any(|phrase| {
        doc.split(phrase).skip(1).any(|after| {
            let word = after.trim_start_matches(['"', '`', '\'']);
            word.starts_with("true") || word.starts_with(|c: char| c.is_ascii_digit() && c != '0')
        })
    })
}

/// Whether every field of `nested` is one of `parent`'s, through nested
/// inlined structs too (`RuleWithOperations` inlines `Rule`).
fn inlines_into<'a>(
    nested: &PbMessage,
    parent: &BTreeSet<String>,
    lookup: &dyn Fn(&str) -> Option<&'a PbMessage>,
) -> bool {
    nested.fields.iter().all(|f| {
        parent.contains(&normalized(&f.rust))
            || f.message
                .as_deref()
                .and_then(lookup)
                .is_some_and(|m| inlines_into(m, parent, lookup))
    })
}

fn is_served(resource: &OpenapiResource) -> bool {
    let version = resource.version.strip_prefix('v').unwrap_or_default();
    let ga = !version.is_empty() && version.chars().all(|c| c.is_ascii_digit());
    let top_level = resource.scope != "SubResourceScope" && !resource.plural.is_empty();
    // Listable resources, and the create-only reviews.
    ga && top_level && (resource.list_kind.is_some() || resource.kind.ends_with("Review"))
}

/// The text of `generated.rs`.
pub fn generate() -> String {
    let pb = parse_pb(&source_dir("k8s-pb"));
    let openapi = parse_openapi(&source_dir("k8s-openapi"));
    // prost changed the case of some names: match them case-blind.
    let by_lowercase: BTreeMap<String, &OpenapiType> = openapi
        .values()
        .map(|t| (t.name.to_lowercase(), t))
        .collect();
    let mut pb_by_name: BTreeMap<String, &PbMessage> = BTreeMap::new();
    for message in &pb {
        let full = format!("{}.{}", message.package, message.rust).to_lowercase();
        let name = by_lowercase.get(&full).map_or_else(
            || format!("{}.{}", message.package, message.rust),
            |t| t.name.clone(),
        );
        pb_by_name.insert(name, message);
    }
    // The pb name of a field's message, matched to OpenAPI's spelling.
    let canonical = |name: &str| -> String {
        by_lowercase
            .get(&name.to_lowercase())
            .map_or_else(|| name.to_owned(), |t| t.name.clone())
    };

    // Every JSON name, for the structs k8s-openapi has no definition of.
    let mut json_names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for t in openapi.values() {
        for (_, json, ..) in &t.fields {
            json_names
                .entry(normalized(json))
                .or_default()
                .insert(json.clone());
        }
    }
    let resources: Vec<&OpenapiType> = openapi
        .values()
        .filter(|t| t.resource.as_ref().is_some_and(is_served))
        .collect();
    let mut wanted: Vec<String> = ROOTS.iter().map(|r| (*r).to_owned()).collect();
    for t in &resources {
        wanted.push(t.name.clone());
        if let Some(list) = &t.resource.as_ref().unwrap().list_kind {
            wanted.push(format!("{}.{list}", t.name.rsplit_once('.').unwrap().0));
        }
    }
    let mut out = String::new();
    out.push_str(
        "//! @generated by `generate.rs` from k8s-pb and k8s-openapi (v1_33); do not edit.\n\
         //! `NAVIQUE_REGENERATE=1 cargo test -p dev-apiserver generated_schema_is_current`\n\
         //! rewrites it.\n\n\
         use super::Card::{Map, One, Repeated};\n\
         use super::Shape::*;\n\
         use super::Ty::{Bool, Bytes, Double, Int32, Int64, Message as M, String as S};\n\
         use super::{Field, INLINE, KEEP_ZERO, Message, REQUIRED, Resource, openapi_of};\n\n\
         const fn f(json: &'static str, tag: u32, ty: super::Ty, card: super::Card, flags: u8) -> Field {\n    \
         Field { json, tag, ty, card, flags }\n}\n\n\
         pub static MESSAGES: &[Message] = &[\n",
    );
    // Each message reached from the roots, through the fields 1.33 has.
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    while let Some(name) = wanted.pop() {
        if texts.contains_key(&name) {
            continue;
        }
        let mut out = String::new();
        let name = &name;
        let message = pb_by_name
            .get(name)
            .unwrap_or_else(|| panic!("k8s-pb has no message {name}"));
        // No served 1.33 kind holds one; the codec would need Go's duration strings.
        assert!(
            !name.ends_with("meta.v1.Duration"),
            "{name} is reached: support it"
        );
        let definition = openapi.get(name);
        let shape = SPECIAL
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, shape)| *shape)
            .unwrap_or_else(|| match definition {
                Some(_) => "Struct",
                None if message.fields.len() == 1 && message.fields[0].rust == "items" => "Items",
                // k8s-openapi has one generic List: `metadata`, then `items`;
                // and no definition for structs only ever inlined (`Rule`).
                None => "Struct",
            });
        writeln!(
            out,
            "    Message {{\n        name: {name:?},\n        shape: {shape},\n        fields: &["
        )
        .unwrap();
        for field in &message.fields {
            let (json, flags) = match definition.filter(|_| shape == "Struct") {
                Some(definition) => {
                    let found = definition.fields.iter().find(|(rust, json, ..)| {
                        normalized(rust) == normalized(&field.rust)
                            || normalized(json) == normalized(&field.rust)
                    });
                    let Some((_, json, required, doc)) = found else {
                        // Go's `json:",inline"`: the nested struct's fields are the parent's.
                        let nested = field
                            .message
                            .as_ref()
                            .and_then(|m| pb_by_name.get(&canonical(m)));
                        let parent: BTreeSet<String> = definition
                            .fields
                            .iter()
                            .map(|(_, json, ..)| normalized(json))
                            .collect();
                        let inline = nested.is_some_and(|nested| {
                            inlines_into(nested, &parent, &|m| {
                                pb_by_name.get(&canonical(m)).copied()
                            })
                        });
                        // k8s-pb follows a newer Kubernetes: fields 1.33 lacks are left out.
                        if !inline {
                            continue;
                        }
                        let nested = canonical(field.message.as_ref().unwrap());
                        writeln!(
                            out,
                            "            f(\"\", {}, M({nested:?}), One, INLINE),",
                            field.tag
                        )
                        .unwrap();
                        wanted.push(nested);
                        continue;
                    };
                    let mut flags = Vec::new();
                    if *required {
                        flags.push("REQUIRED");
                    }
                    if field.card == "One"
                        && matches!(field.ty.as_str(), "bool" | "int32" | "int64" | "double")
                        && (keeps_zero(doc)
                            || POINTERS.contains(&format!("{name}.{json}").as_str()))
                    {
                        flags.push("KEEP_ZERO");
                    }
                    (json.clone(), flags)
                }
                // A list's `metadata` and `items` are written even when empty.
                None if shape == "Struct"
                    && matches!(field.rust.as_str(), "metadata" | "items") =>
                {
                    (field.rust.clone(), vec!["REQUIRED"])
                }
                None if shape == "Struct" => {
                    let spellings = json_names.get(&normalized(&field.rust));
                    match spellings.map(|s| s.iter().collect::<Vec<_>>()).as_deref() {
                        Some([json]) => ((*json).clone(), Vec::new()),
                        other => panic!(
                            "{name}.{}: no single JSON name in k8s-openapi: {other:?}",
                            field.rust
                        ),
                    }
                }
                None => (field.rust.clone(), Vec::new()),
            };
            let ty = match field.ty.as_str() {
                "string" => "S".to_owned(),
                "bool" => "Bool".to_owned(),
                "int32" => "Int32".to_owned(),
                "int64" => "Int64".to_owned(),
                "double" => "Double".to_owned(),
                "bytes" => "Bytes".to_owned(),
                "message" => {
                    let nested = canonical(field.message.as_ref().unwrap());
                    let ty = format!("M({nested:?})");
                    wanted.push(nested);
                    ty
                }
                other => panic!("{name}.{}: unknown protobuf type {other}", field.rust),
            };
            let flags = if flags.is_empty() {
                "0".to_owned()
            } else {
                flags.join(" | ")
            };
            writeln!(
                out,
                "            f({json:?}, {}, {ty}, {}, {flags}),",
                field.tag, field.card
            )
            .unwrap();
        }
        out.push_str("        ],\n    },\n");
        texts.insert(name.clone(), out);
    }
    out.extend(texts.into_values());
    out.push_str("];\n\npub static RESOURCES: &[Resource] = &[\n");
    for t in &resources {
        let r = t.resource.as_ref().unwrap();
        let package = t.name.rsplit_once('.').unwrap().0;
        let list = match &r.list_kind {
            Some(list) => format!("Some({:?})", format!("{package}.{list}")),
            None => "None".to_owned(),
        };
        writeln!(
            out,
            "    Resource {{\n        group: {:?},\n        version: {:?},\n        kind: {:?},\n        plural: {:?},\n        namespaced: {},\n        message: {:?},\n        list: {list},\n        openapi: openapi_of::<{}>,\n    }},",
            r.group,
            r.version,
            r.kind,
            r.plural,
            r.scope == "NamespaceResourceScope",
            t.name,
            t.path,
        )
        .unwrap();
    }
    out.push_str("];\n");
    out
}

#[test]
fn generated_schema_is_current() {
    let generated = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/schema/generated.rs");
    if std::env::var_os("NAVIQUE_REGENERATE").is_some() {
        std::fs::write(&path, &generated).expect("write generated.rs");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == generated,
        "src/schema/generated.rs is stale: run NAVIQUE_REGENERATE=1 cargo test -p dev-apiserver generated_schema_is_current"
    );
}
