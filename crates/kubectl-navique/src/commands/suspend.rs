//! `suspend <lock> --for <duration> --reason <text>` and `resume <lock>`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kubectl_navique::approve::{FIELD_MANAGER, whoami};
use kubectl_navique::cli::{ResumeArgs, SuspendArgs};
use kubectl_navique::suspend;
use navique_api::core::Lock;

use super::{Session, stdout};

pub async fn suspend(session: &Session, args: &SuspendArgs) -> Result<ExitCode> {
    let namespace = session.one_namespace("suspend")?;
    // Who the API server says the user is: the only name admission takes.
    let user = whoami(&session.client).await?;
    if user.is_empty() {
        bail!("the API server names no user for these credentials: nobody to suspend the Lock as");
    }
    let until = suspend::until(Timestamp::now(), args.length);
    let patch = suspend::suspend_patch(&until, &args.reason, &user);
    patch_lock(session, namespace, &args.lock, patch).await?;
    stdout(&suspend::suspended(
        namespace,
        &args.lock,
        &until,
        &user,
        &args.reason,
    ))?;
    Ok(ExitCode::SUCCESS)
}

pub async fn resume(session: &Session, args: &ResumeArgs) -> Result<ExitCode> {
    let namespace = session.one_namespace("resume")?;
    patch_lock(session, namespace, &args.lock, suspend::resume_patch()).await?;
    stdout(&suspend::resumed(namespace, &args.lock))?;
    Ok(ExitCode::SUCCESS)
}

async fn patch_lock(
    session: &Session,
    namespace: &str,
    lock: &str,
    patch: serde_json::Value,
) -> Result<()> {
    let api: Api<Lock> = Api::namespaced(session.client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(lock, &params, &Patch::Merge(patch)).await?;
    Ok(())
}
