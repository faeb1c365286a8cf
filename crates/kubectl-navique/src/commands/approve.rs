//! `approve <kind>/<name>...` and `approve --all --stack <name>`.

use std::process::ExitCode;

use anyhow::Result;
use kube::api::ListParams;
use kube::{Api, Client};
use kubectl_navique::approvals::{
    ApproveOutcome, ApproveReport, PendingApproval, of_stack, pending_approvals, resolve_target,
};
use kubectl_navique::cli::{ApproveArgs, Output};
use kubectl_navique::render;
use kubectl_navique::resources::{ResourceIndex, ResourceType, Target};
use navique_api::core::Stack;

use super::{Session, stdout};

/// A pending resource about to be approved, or why it will not be.
enum Plan {
    Patch(Box<(PendingApproval, ResourceType)>),
    Refused(ApproveOutcome),
}

pub async fn run(session: &Session, args: &ApproveArgs) -> Result<ExitCode> {
    let namespace = session.one_namespace("approve")?;
    let stacks: Api<Stack> = Api::namespaced(session.client.clone(), namespace);
    let index = discover(&session.client).await?;
    let plans = match (&args.stack, args.all) {
        (Some(stack), true) => {
            // The Stack must exist; the namespace's Stacks tell which are nested under it.
            stacks.get(stack).await?;
            let all = stacks.list(&ListParams::default()).await?.items;
            let pending = of_stack(&pending_approvals(&all), stack);
            if pending.is_empty() && matches!(session.output, Output::Table | Output::Wide) {
                stdout(&format!("No approvals pending in Stack {stack}.\n"))?;
                return Ok(ExitCode::SUCCESS);
            }
            pending
                .into_iter()
                .map(|p| plan_pending(&index, p))
                .collect()
        }
        _ => {
            let pending = pending_approvals(&stacks.list(&ListParams::default()).await?.items);
            args.targets
                .iter()
                .map(|arg| plan_target(&index, &pending, arg))
                .collect::<Vec<_>>()
        }
    };

    // Who the API server says the user is: the name the approval records.
    let user = kubectl_navique::approve::whoami(&session.client).await?;
    let mut results = Vec::new();
    for plan in plans {
        let outcome = match plan {
            Plan::Patch(patch) => {
                kubectl_navique::approve::approve(&session.client, &user, &patch.0, &patch.1).await
            }
            Plan::Refused(outcome) => outcome,
        };
        match session.output {
            Output::Table | Output::Wide if outcome.approved => {
                stdout(&render::outcome(&outcome))?;
            }
            Output::Name if outcome.approved => stdout(&format!("{}\n", outcome.target))?,
            Output::Table | Output::Wide | Output::Name => {
                eprint!("{}", render::outcome(&outcome));
            }
            Output::Json | Output::Yaml => {}
        }
        results.push(outcome);
    }
    let failed = results.iter().any(|r| !r.approved);
    if matches!(session.output, Output::Json | Output::Yaml) {
        for error in results.iter().filter_map(|r| r.error.as_deref()) {
            eprintln!("{error}");
        }
        session.print(&ApproveReport { results }, |_| String::new())?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The server's resource types, from aggregated discovery.
pub(super) async fn discover(client: &Client) -> Result<ResourceIndex> {
    let (core, groups) = tokio::try_join!(
        client.list_core_api_versions_aggregated(),
        client.list_api_groups_aggregated()
    )?;
    Ok(ResourceIndex::from_discovery(&[core, groups]))
}

/// What `approve <arg>` will patch: only a resource pending in a Stack of
/// the namespace.
fn plan_target(index: &ResourceIndex, pending: &[PendingApproval], arg: &str) -> Plan {
    match Target::parse(arg).and_then(|target| resolve_target(index, pending, &target)) {
        Ok((pending, resource_type)) => {
            Plan::Patch(Box::new((pending.clone(), resource_type.clone())))
        }
        Err(e) => Plan::Refused(ApproveOutcome::failed(
            arg.to_owned(),
            None,
            None,
            format!("error: {e}"),
        )),
    }
}

/// What `approve --all` will patch for one pending resource.
fn plan_pending(index: &ResourceIndex, pending: PendingApproval) -> Plan {
    let Some(resource_type) = index.find(&pending.resource.group, &pending.resource.kind) else {
        let kind = pending.resource.qualified_kind();
        let error = kubectl_navique::Error::UnknownResourceType(kind.clone());
        return Plan::Refused(ApproveOutcome::failed(
            format!("{kind}/{}", pending.resource.name),
            None,
            Some(&pending),
            format!("error: {error}"),
        ));
    };
    Plan::Patch(Box::new((pending, resource_type.clone())))
}

/// Approves one pending resource as `user` (the name
/// [`kubectl_navique::approve::whoami`] gave for `client`), as `approve
/// --all` does: the page's Approve and Approve all.
pub(super) async fn approve_pending(
    client: &Client,
    user: &str,
    index: &ResourceIndex,
    pending: PendingApproval,
) -> ApproveOutcome {
    match plan_pending(index, pending) {
        Plan::Patch(patch) => {
            kubectl_navique::approve::approve(client, user, &patch.0, &patch.1).await
        }
        Plan::Refused(outcome) => outcome,
    }
}
