//! `preview delete KIND/NAME` and `preview sync stack/NAME -f FILE`: gathers
//! the live objects with the user's credentials (reads only: get and list),
//! then lets `kubectl_navique::preview` decide.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use kubectl_navique::cli::Output;
use kubectl_navique::preview::service::{self, ServiceFacts};
use kubectl_navique::preview::stack::{self, Live, Member};
use kubectl_navique::preview::tree::{self, Node};
use kubectl_navique::preview::{Cascade, Object, Preview, PreviewArgs, PreviewCommand};
use kubectl_navique::render;
use kubectl_navique::resources::{ResourceIndex, ResourceType, Target};
use navique_api::constants::labels;
use navique_api::core::Stack;
use navique_api::services::{ManagedService, ServiceBackup, ServicePlan};

use super::Session;
use super::approve::discover;

pub async fn run(session: &Session, args: &PreviewArgs) -> Result<ExitCode> {
    let namespace = session.one_namespace("preview")?.to_owned();
    let preview = match &args.what {
        PreviewCommand::Delete(delete) => {
            let index = discover(&session.client).await?;
            let target = Target::parse(&delete.target)?;
            let kind = resolve(&index, &target)?;
            delete_preview(
                &session.client,
                &index,
                &kind,
                &namespace,
                &target.name,
                delete.cascade,
            )
            .await?
        }
        PreviewCommand::Sync(sync) => {
            let index = discover(&session.client).await?;
            let target = Target::parse(&sync.target)?;
            let kind = resolve(&index, &target)?;
            if kind.kind != "Stack" || kind.group != navique_api::constants::CORE_GROUP {
                bail!(
                    "preview sync takes a Stack (stack/NAME), not {}",
                    sync.target
                );
            }
            let text = if sync.file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
                    .context("cannot read the new Stack from stdin")?
            } else {
                std::fs::read_to_string(&sync.file)
                    .with_context(|| format!("cannot read {}", sync.file.display()))?
            };
            let new: Stack = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not a Stack manifest", sync.file.display()))?;
            if new.name_any() != target.name {
                bail!(
                    "{} describes Stack {}, not {}",
                    sync.file.display(),
                    new.name_any(),
                    target.name
                );
            }
            let live: Stack = Api::namespaced(session.client.clone(), &namespace)
                .get(&target.name)
                .await?;
            let members = members(&session.client, &index, &live, &namespace).await?;
            let plan = stack::prune(&live, &new, &members);
            Preview::of("sync", stack_object(&namespace, &target.name), None, plan)
        }
    };
    session.print(&preview, |output| match output {
        Output::Name => render::preview_names(&preview),
        _ => render::preview(&preview),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The type `target` names (the first group that serves the name).
fn resolve(index: &ResourceIndex, target: &Target) -> Result<ResourceType> {
    Ok(index.resolve(&target.resource)?[0].clone())
}

fn stack_object(namespace: &str, name: &str) -> Object {
    Object::new("core.navique.com/v1alpha1", "Stack", Some(namespace), name)
}

/// The preview of one delete, as the page shows it too.
pub(super) async fn delete_preview(
    client: &Client,
    index: &ResourceIndex,
    kind: &ResourceType,
    namespace: &str,
    name: &str,
    cascade: Cascade,
) -> Result<Preview> {
    let api_version = kind.api_resource().api_version;
    let ar = kind.api_resource();
    let api: Api<DynamicObject> = if kind.namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let object = api.get(name).await?;
    let node = Node::of(&api_version, &kind.kind, &object.metadata);
    let target = node.object.clone();
    Ok(match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Namespace") => {
            let objects = every_object(client, index, Some(name)).await?;
            let mut plan = tree::namespace(&node, &objects);
            let backups: Vec<ServiceBackup> = Api::namespaced(client.clone(), name)
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            for backup in backups {
                plan.backups.push(kubectl_navique::preview::BackupFate {
                    name: backup.name_any(),
                    origin: backup.spec.origin.as_str().to_owned(),
                    fate: "removed with the Project".to_owned(),
                });
            }
            Preview::of("delete", target, Some(cascade), plan)
        }
        (navique_api::constants::CORE_GROUP, "Stack") => {
            let stack: Stack = Api::namespaced(client.clone(), namespace).get(name).await?;
            let members = members(client, index, &stack, namespace).await?;
            let project = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
                .get_opt(namespace)
                .await
                .ok()
                .flatten();
            let deleting = project.is_some_and(|ns| ns.metadata.deletion_timestamp.is_some());
            Preview::of(
                "delete",
                target,
                Some(cascade),
                stack::teardown(&stack, &members, deleting),
            )
        }
        (navique_api::constants::SERVICES_GROUP, "ManagedService") => {
            let service: ManagedService =
                Api::namespaced(client.clone(), namespace).get(name).await?;
            let plan = Api::<ServicePlan>::all(client.clone())
                .get_opt(&service.spec.plan_ref.name)
                .await
                .map_err(|e| render::kube_error(&e));
            let objects = engine_objects(client, index, &service).await?;
            let backups: Vec<ServiceBackup> = Api::namespaced(client.clone(), namespace)
                .list(&ListParams::default())
                .await?
                .items;
            let plan = service::delete(&ServiceFacts {
                service: &service,
                plan: plan.as_ref().map(Option::as_ref).map_err(Clone::clone),
                objects: &objects,
                backups: &backups,
            });
            Preview::of("delete", target, Some(cascade), plan)
        }
        _ => {
            let scope = kind.namespaced.then_some(namespace);
            let objects = every_object(client, index, scope).await?;
            Preview::of(
                "delete",
                target,
                Some(cascade),
                tree::cascade(&node, &objects, cascade),
            )
        }
    })
}

/// How deep nested Stacks are followed (a Stack listing itself, through
/// others, would otherwise never end).
const NESTING: usize = 8;

/// The Stack's inventory rows with what is live for each; a nested Stack
/// with its own teardown.
fn members<'a>(
    client: &'a Client,
    index: &'a ResourceIndex,
    stack: &'a Stack,
    namespace: &'a str,
) -> futures::future::BoxFuture<'a, Result<Vec<Member>>> {
    members_within(client, index, stack, namespace, NESTING)
}

fn members_within<'a>(
    client: &'a Client,
    index: &'a ResourceIndex,
    stack: &'a Stack,
    namespace: &'a str,
    depth: usize,
) -> futures::future::BoxFuture<'a, Result<Vec<Member>>> {
    Box::pin(async move {
        let rows = stack
            .status
            .as_ref()
            .map(|s| s.resources.clone())
            .unwrap_or_default();
        let mut members = Vec::new();
        for row in rows {
            let ns = row
                .namespace
                .clone()
                .unwrap_or_else(|| namespace.to_owned());
            let live = match index.find(&row.group, &row.kind) {
                None => Live::NotServed,
                Some(kind) => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), &ns, &kind.api_resource());
                    match api.get_opt(&row.name).await {
                        Ok(Some(object)) => Live::Present(Box::new(object.metadata)),
                        Ok(None) => Live::Gone,
                        Err(e) => Live::Unreadable(render::kube_error(&e)),
                    }
                }
            };
            let nested_stack = matches!(live, Live::Present(_))
                && row.group == navique_api::constants::CORE_GROUP
                && row.kind == "Stack"
                && depth > 0;
            let nested = if nested_stack {
                let inner: Stack = Api::namespaced(client.clone(), &ns).get(&row.name).await?;
                let inner_members = members_within(client, index, &inner, &ns, depth - 1).await?;
                Some(Box::new(stack::teardown(&inner, &inner_members, false)))
            } else {
                None
            };
            members.push(Member { row, live, nested });
        }
        Ok(members)
    })
}

/// The service's own objects in its Project: labelled with its name and
/// owned by its uid (what the controller removes or retains).
async fn engine_objects(
    client: &Client,
    index: &ResourceIndex,
    service: &ManagedService,
) -> Result<Vec<Node>> {
    let namespace = service.namespace().unwrap_or_default();
    let selector = format!("{}={}", labels::SERVICE, service.name_any());
    let uid = service.uid().unwrap_or_default();
    let mut nodes = Vec::new();
    for (group, kind) in [
        ("apps", "StatefulSet"),
        ("", "PersistentVolumeClaim"),
        ("", "Secret"),
        ("", "Service"),
    ] {
        let Some(kind) = index.find(group, kind) else {
            continue;
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &kind.api_resource());
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        for object in list.items {
            let owned = object.owner_references().iter().any(|o| o.uid == uid);
            if owned {
                nodes.push(Node::of(
                    &kind.api_resource().api_version,
                    &kind.kind,
                    &object.metadata,
                ));
            }
        }
    }
    Ok(nodes)
}

/// Every object of every listable type in `namespace` (`None`: of every
/// type, namespaced or not, everywhere). Events are left out: they are no
/// owner or dependent of anything the preview shows. A type the user may
/// not list fails the preview rather than hide what it holds.
async fn every_object(
    client: &Client,
    index: &ResourceIndex,
    namespace: Option<&str>,
) -> Result<Vec<Node>> {
    let mut nodes = Vec::new();
    for kind in index.preferred() {
        if kind.kind == "Event" || !kind.listable || (namespace.is_some() && !kind.namespaced) {
            continue;
        }
        let ar = kind.api_resource();
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        match api.list(&ListParams::default()).await {
            Ok(list) => nodes.extend(
                list.items
                    .iter()
                    .map(|o| Node::of(&ar.api_version, &kind.kind, &o.metadata)),
            ),
            // Not listable (reviews, bindings, subresource-only types).
            Err(kube::Error::Api(status)) if [404, 405].contains(&status.code) => {}
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("cannot list {}", kind.plural)));
            }
        }
    }
    Ok(nodes)
}
