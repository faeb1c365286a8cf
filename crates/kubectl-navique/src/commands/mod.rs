//! The commands, against the cluster the kubeconfig names.

mod approvals;
mod approve;
mod completion;
mod locks;
mod preview;
mod suspend;
mod ui;
mod version;
mod watch;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use kubectl_navique::cli::{Cli, Command, GlobalArgs, Output};
use kubectl_navique::render;

/// Runs the command line's command; the exit code says whether all of it
/// succeeded.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    // What needs no cluster.
    match &cli.command {
        Command::Completion(args) => return completion::run(args),
        Command::Version(args) if args.client => return version::client(cli.global.output),
        _ => {}
    }
    let session = Session::connect(&cli.global).await?;
    let outcome = match &cli.command {
        Command::Locks => locks::run(&session).await,
        Command::Approvals(args) if args.watch => watch::run(&session, args).await,
        Command::Approvals(_) => approvals::run(&session).await,
        Command::Approve(args) => approve::run(&session, args).await,
        Command::Ui(args) => ui::run(&session, args).await,
        Command::Version(_) => version::run(&session).await,
        Command::Completion(_) => unreachable!("answered above"),
        Command::Suspend(args) => suspend::suspend(&session, args).await,
        Command::Resume(args) => suspend::resume(&session, args).await,
        Command::Preview(args) => preview::run(&session, args).await,
    };
    // The CRD each command lists first.
    let crd = match &cli.command {
        Command::Locks | Command::Suspend(_) | Command::Resume(_) => "locks.core.navique.com",
        _ => "stacks.core.navique.com",
    };
    outcome.map_err(|error| {
        let server = session.config.cluster_url.to_string();
        match error
            .downcast_ref::<kube::Error>()
            .and_then(|e| render::unavailable(e, &server, crd))
        {
            Some(explained) => anyhow::Error::msg(explained),
            None => error,
        }
    })
}

/// An error as the plugin prints it: the API server's refusal as kubectl
/// prints it, anything else after `error: ` with its causes on one line.
pub fn describe(error: &anyhow::Error) -> String {
    match error.downcast_ref::<kube::Error>() {
        Some(e) => render::kube_error(e),
        None => format!("error: {}", navique_runtime::one_line(error.as_ref())),
    }
}

/// The client and the scope of one invocation.
pub struct Session {
    client: Client,
    /// What the client was built from: the user's credentials.
    config: Config,
    /// `-n`, else the context's namespace, else `default`.
    namespace: String,
    all_namespaces: bool,
    output: Output,
}

impl Session {
    /// Loads the kubeconfig as kubectl does: `--kubeconfig`, else
    /// `$KUBECONFIG` (every file it lists), else `~/.kube/config`, else the
    /// in-cluster service account; `--context` picks the context.
    async fn connect(args: &GlobalArgs) -> Result<Self> {
        let options = KubeConfigOptions {
            context: args.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&args.kubeconfig, &args.context) {
            (Some(path), _) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            (None, Some(_)) => Config::from_kubeconfig(&options).await?,
            (None, None) => Config::infer()
                .await
                .context("no cluster to talk to: give --kubeconfig or set KUBECONFIG")?,
        };
        let namespace = args
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config.clone())?;
        Ok(Self {
            client,
            config,
            namespace,
            all_namespaces: args.all_namespaces,
            output: args.output,
        })
    }

    /// The namespace listed, `None` for every namespace (`-A`).
    fn scope(&self) -> Option<&str> {
        (!self.all_namespaces).then_some(self.namespace.as_str())
    }

    /// The namespace of a command that changes objects, which `-A` cannot
    /// name.
    fn one_namespace(&self, command: &str) -> Result<&str> {
        if self.all_namespaces {
            bail!("{command} works in one namespace: use -n instead of -A");
        }
        Ok(&self.namespace)
    }

    /// Objects of `K` in scope.
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.scope() {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// Prints `value` as `-o` says; `table`, `wide` and `name` print what
    /// `human` makes of them.
    fn print<T: serde::Serialize>(
        &self,
        value: &T,
        human: impl FnOnce(Output) -> String,
    ) -> Result<()> {
        stdout(&printed(self.output, value, human)?)
    }
}

/// `value` as `output` says.
fn printed<T: serde::Serialize>(
    output: Output,
    value: &T,
    human: impl FnOnce(Output) -> String,
) -> Result<String> {
    Ok(match output {
        Output::Json => render::json(value)?,
        Output::Yaml => render::yaml(value)?,
        human_output => human(human_output),
    })
}

/// Writes `text` to stdout at once (watch lines must not wait in a buffer).
fn stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}
