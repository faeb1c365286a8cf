//! webhook: the validating admission webhook. It enforces deletionProtection,
//! plan-allowed deletion policies, the protection of retained objects and
//! backup records, and the Lock rule where ValidatingAdmissionPolicy is
//! unavailable.
#![forbid(unsafe_code)]

use navique_runtime::{CommonArgs, Component};

pub const NAME: &str = "webhook";

/// Validating admission webhook for Navique's deletion-safety rules.
#[derive(clap::Parser, Debug)]
#[command(name = NAME, version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    Component::run(NAME, &args.common, async |component, _client| {
        // The admission server lands with the managed-services issue.
        component.shutdown().cancelled().await;
        Ok(())
    })
    .await?;
    Ok(())
}
