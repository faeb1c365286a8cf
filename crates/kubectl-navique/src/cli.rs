//! The command line, as `kubectl navique ...` passes it on.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `kubectl navique`: Locks, pending deletion approvals, and approving them.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-navique",
    bin_name = "kubectl navique",
    version,
    about = "Navique's Locks and deletion approvals, as kubectl sees the cluster"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes, before or after its name.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<String>,
    /// Every namespace (overrides --namespace).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(
        short = 'o',
        long,
        global = true,
        value_enum,
        default_value_t = Output::Table
    )]
    pub output: Output,
}

/// How results are printed.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Aligned columns, for people.
    Table,
    /// JSON, for scripts (one object per line with `approvals --watch`).
    Json,
    /// YAML, for scripts (one document per event with `approvals --watch`).
    Yaml,
}

/// The commands.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Lists Locks: what is locked, by which Locks, and why.
    Locks,
    /// Lists the prunes and deletes of Stack resources waiting for an approval.
    Approvals(ApprovalsArgs),
    /// Approves pending prunes or deletes: sets `cd.hanzo.ai/deletion-approved: "true"`
    /// on each resource with your own credentials.
    Approve(ApproveArgs),
    /// Serves a page on 127.0.0.1 that lists pending approvals live, approves
    /// them with your own credentials, and shows Locks and services being
    /// deleted; opens it in the browser.
    Ui(UiArgs),
    /// Shows what a delete, or a new version of a Stack, would remove and
    /// what would stop it, changing nothing.
    Preview(crate::preview::PreviewArgs),
}

/// `ui`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct UiArgs {
    /// The port on 127.0.0.1 to serve on (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Print the page's URL without opening a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// `approvals`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ApprovalsArgs {
    /// Follow approval events from the service-lifecycle-controller's
    /// `ApprovalEvents` gRPC service until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Where `ApprovalEvents` is served, e.g. http://127.0.0.1:9091
    /// (https needs --approvals-ca-file).
    #[arg(long, env = "NAVIQUE_APPROVALS_URL", value_name = "URL")]
    pub approvals_url: Option<String>,
    /// PEM CA certificate that signed the `ApprovalEvents` server's certificate.
    #[arg(long, env = "NAVIQUE_APPROVALS_CA_FILE", value_name = "FILE")]
    pub approvals_ca_file: Option<PathBuf>,
}

/// `approve`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ApproveArgs {
    /// Resources to approve, as kubectl names them: `configmap/x`,
    /// `ConfigMap/x`, `deployments.apps/x`, `deploy/x`.
    #[arg(
        value_name = "KIND/NAME",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub targets: Vec<String>,
    /// Approve every pending resource of the Stack named by --stack and of
    /// the Stacks nested under it.
    #[arg(long, requires = "stack")]
    pub all: bool,
    /// The Stack whose pending resources --all approves.
    #[arg(long, requires = "all", value_name = "NAME")]
    pub stack: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-navique").chain(args.iter().copied()))
    }

    #[test]
    fn global_flags_go_before_or_after_the_command() {
        let before = parse(&["-n", "forge", "-o", "json", "locks"]).unwrap();
        let after = parse(&["locks", "-n", "forge", "-o", "json"]).unwrap();
        assert_eq!(before.global, after.global);
        assert_eq!(before.global.namespace.as_deref(), Some("forge"));
        assert_eq!(before.global.output, Output::Json);
        assert_eq!(before.command, Command::Locks);
    }

    #[test]
    fn defaults_are_the_table_and_the_context_namespace() {
        let cli = parse(&["approvals"]).unwrap();
        assert_eq!(cli.global.output, Output::Table);
        assert_eq!(cli.global.namespace, None);
        assert!(!cli.global.all_namespaces);
        assert!(matches!(
            cli.command,
            Command::Approvals(ApprovalsArgs { watch: false, .. })
        ));
    }

    #[test]
    fn kubeconfig_context_and_all_namespaces() {
        let cli = parse(&[
            "locks",
            "--kubeconfig",
            "/tmp/k",
            "--context",
            "kind",
            "-A",
            "-o",
            "yaml",
        ])
        .unwrap();
        assert_eq!(cli.global.kubeconfig, Some(PathBuf::from("/tmp/k")));
        assert_eq!(cli.global.context.as_deref(), Some("kind"));
        assert!(cli.global.all_namespaces);
        assert_eq!(cli.global.output, Output::Yaml);
    }

    #[test]
    fn watch_takes_the_service_address_and_ca() {
        let cli = parse(&[
            "approvals",
            "--watch",
            "--approvals-url",
            "https://navique:9091",
            "--approvals-ca-file",
            "ca.crt",
        ])
        .unwrap();
        let Command::Approvals(args) = cli.command else {
            panic!("not approvals")
        };
        assert!(args.watch);
        assert_eq!(args.approvals_url.as_deref(), Some("https://navique:9091"));
        assert_eq!(args.approvals_ca_file, Some(PathBuf::from("ca.crt")));
    }

    #[test]
    fn approve_takes_resources_or_all_with_a_stack() {
        let cli = parse(&["approve", "configmap/a", "deploy/b"]).unwrap();
        let Command::Approve(args) = cli.command else {
            panic!("not approve")
        };
        assert_eq!(args.targets, ["configmap/a", "deploy/b"]);
        assert!(!args.all);

        let cli = parse(&["approve", "--all", "--stack", "app"]).unwrap();
        let Command::Approve(args) = cli.command else {
            panic!("not approve")
        };
        assert!(args.all);
        assert_eq!(args.stack.as_deref(), Some("app"));
        assert!(args.targets.is_empty());
    }

    #[test]
    fn ui_takes_a_port_and_may_leave_the_browser_closed() {
        let cli = parse(&["ui", "-A"]).unwrap();
        assert_eq!(
            cli.command,
            Command::Ui(UiArgs {
                port: 0,
                no_open: false
            })
        );
        assert!(cli.global.all_namespaces);
        let cli = parse(&["ui", "--port", "8080", "--no-open"]).unwrap();
        assert_eq!(
            cli.command,
            Command::Ui(UiArgs {
                port: 8080,
                no_open: true
            })
        );
        assert!(parse(&["ui", "--port", "70000"]).is_err());
    }

    #[test]
    fn approve_refuses_incomplete_or_mixed_forms() {
        for args in [
            &["approve"][..],
            &["approve", "--all"],
            &["approve", "--stack", "app"],
            &["approve", "--all", "--stack", "app", "configmap/a"],
            &["locks", "-o", "wide"],
        ] {
            assert!(parse(args).is_err(), "{args:?} parsed");
        }
    }
}
