//! `approvals` (without `--watch`).

use std::process::ExitCode;

use anyhow::Result;
use kube::api::ListParams;
use kubectl_navique::approvals::{ApprovalList, pending_approvals};
use kubectl_navique::cli::Output;
use kubectl_navique::render;
use navique_api::core::Stack;

use super::Session;

pub async fn run(session: &Session) -> Result<ExitCode> {
    let stacks = session.api::<Stack>().list(&ListParams::default()).await?;
    let list = ApprovalList {
        approvals: pending_approvals(&stacks.items),
    };
    session.print(&list, |output| match output {
        Output::Wide => render::approvals_wide(&list.approvals),
        Output::Name => render::approval_names(&list.approvals),
        _ => render::approvals(&list.approvals),
    })?;
    Ok(ExitCode::SUCCESS)
}
