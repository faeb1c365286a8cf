//! `locks`.

use std::process::ExitCode;

use anyhow::Result;
use kube::api::ListParams;
use kubectl_navique::{locks, render};
use navique_api::core::Lock;

use super::Session;

pub async fn run(session: &Session) -> Result<ExitCode> {
    let list = session.api::<Lock>().list(&ListParams::default()).await?;
    let report = locks::report(&list.items);
    session.print(&report, || render::locks(&report, session.scope()))?;
    Ok(ExitCode::SUCCESS)
}
