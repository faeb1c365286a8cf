//! `locks`.

use std::process::ExitCode;

use anyhow::Result;
use kube::api::ListParams;
use kubectl_navique::cli::Output;
use kubectl_navique::{locks, render};
use navique_api::core::Lock;

use super::Session;

pub async fn run(session: &Session) -> Result<ExitCode> {
    let list = session.api::<Lock>().list(&ListParams::default()).await?;
    let report = locks::report(&list.items);
    session.print(&report, |output| match output {
        Output::Wide => render::locks_wide(&report, session.scope()),
        Output::Name => render::lock_names(&report),
        _ => render::locks(&report, session.scope()),
    })?;
    Ok(ExitCode::SUCCESS)
}
