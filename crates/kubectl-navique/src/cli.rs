//! The command line, as `kubectl navique ...` passes it on.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

const EXAMPLES: &str = "Examples:
  kubectl navique locks -A                       # everything locked, by which Lock, why
  kubectl navique approvals -n forge             # what waits for a person
  kubectl navique approve configmap/old-config   # approve one, as yourself
  kubectl navique ui                             # the same on a live page
  kubectl navique version                        # this plugin, Kubernetes and Navique
  source <(kubectl navique completion bash)      # tab completion for kubectl-navique";

/// `kubectl navique`: Locks, pending deletion approvals, and approving them.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-navique",
    bin_name = "kubectl navique",
    version,
    about = "Navique's Locks and deletion approvals, as kubectl sees the cluster",
    after_help = EXAMPLES
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
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
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
    /// The table with more columns.
    Wide,
    /// `kind.group/name` of each object, one per line, as `kubectl get -o name`.
    Name,
}

/// The commands.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Lists Locks: what is locked, by which Locks, and why.
    #[command(after_help = "Examples:
  kubectl navique locks -n forge        # the Locks of one namespace and what they protect
  kubectl navique locks -A -o wide      # every namespace, with each Lock's status message
  kubectl navique locks -o name         # lock.core.navique.com/<name>, one per line")]
    Locks,
    /// Lists the prunes and deletes of Stack resources waiting for an approval.
    #[command(after_help = "Examples:
  kubectl navique approvals -n forge    # what waits, per Stack, in wave order
  kubectl navique approvals -o wide     # ... with since when and who approved so far
  kubectl navique approvals --watch     # follow approvals as they happen (Ctrl-C ends)
  kubectl navique approvals -o name | xargs kubectl navique approve")]
    Approvals(ApprovalsArgs),
    /// Approves pending prunes or deletes: sets `cd.hanzo.ai/deletion-approved: "true"`
    /// on each resource with your own credentials.
    #[command(after_help = "Examples:
  kubectl navique approve configmap/old-config -n forge
  kubectl navique approve deployment.apps/web configmap/settings
  kubectl navique approve --all --stack forge -n forge   # every pending resource of a Stack")]
    Approve(ApproveArgs),
    /// Serves a page on 127.0.0.1 that lists pending approvals live, approves
    /// them with your own credentials, and shows Locks and services being
    /// deleted; opens it in the browser.
    #[command(after_help = "Examples:
  kubectl navique ui -A                 # every namespace you may see
  kubectl navique ui --no-open          # print the one-time URL instead of opening it")]
    Ui(UiArgs),
    /// Prints the plugin's version, and the Kubernetes and Navique versions
    /// of the cluster.
    #[command(after_help = "Examples:
  kubectl navique version               # client, Kubernetes and Navique
  kubectl navique version --client      # without contacting the cluster
  kubectl navique version -o json")]
    Version(VersionArgs),
    /// Prints a shell completion script for `kubectl-navique`.
    #[command(after_help = "Examples:
  source <(kubectl-navique completion bash)
  kubectl-navique completion zsh > \"${fpath[1]}/_kubectl-navique\"
  kubectl-navique completion fish > ~/.config/fish/completions/kubectl-navique.fish

For `kubectl navique <TAB>` (kubectl 1.26 and later), put the release's
`kubectl_complete-navique` script on PATH next to kubectl-navique.")]
    Completion(CompletionArgs),
    /// Break-glass: suspends a Lock for a while, in your own name, so that
    /// its target may be deleted; it re-locks by itself at the deadline.
    /// Needs the `suspend` verb on Locks.
    Suspend(SuspendArgs),
    /// Ends a Lock's suspension before its deadline.
    Resume(ResumeArgs),
    /// Shows what a delete, or a new version of a Stack, would remove and
    /// what would stop it, changing nothing.
    Preview(crate::preview::PreviewArgs),
}

/// `version`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct VersionArgs {
    /// Only the plugin's own version: no request to the cluster.
    #[arg(long)]
    pub client: bool,
}

/// `completion`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `suspend`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct SuspendArgs {
    /// The Lock's name.
    #[arg(value_name = "LOCK")]
    pub lock: String,
    /// How long, as `30m`, `1h` or `90s` (at most the chart's
    /// lockGuard.maxSuspension, or the lock-controller refuses it).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_length)]
    pub length: std::time::Duration,
    /// Why (required).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

fn parse_length(text: &str) -> Result<std::time::Duration, String> {
    navique_api::duration::parse("--for", text).map_err(|e| e.to_string())
}

/// `resume`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ResumeArgs {
    /// The Lock's name.
    #[arg(value_name = "LOCK")]
    pub lock: String,
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
    #[arg(
        long,
        env = "NAVIQUE_APPROVALS_CA_FILE",
        value_name = "FILE",
        value_hint = clap::ValueHint::FilePath
    )]
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
    fn wide_and_name_outputs_version_and_completion() {
        assert_eq!(
            parse(&["locks", "-o", "wide"]).unwrap().global.output,
            Output::Wide
        );
        assert_eq!(
            parse(&["approvals", "-o", "name"]).unwrap().global.output,
            Output::Name
        );
        assert_eq!(
            parse(&["version", "--client"]).unwrap().command,
            Command::Version(VersionArgs { client: true })
        );
        assert_eq!(
            parse(&["completion", "zsh"]).unwrap().command,
            Command::Completion(CompletionArgs { shell: Shell::Zsh })
        );
    }

    #[test]
    fn suspend_takes_a_lock_a_length_and_a_reason() {
        let cli = parse(&[
            "suspend", "keep", "--for", "30m", "--reason", "drill", "-n", "shop",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::Suspend(SuspendArgs {
                lock: "keep".into(),
                length: std::time::Duration::from_secs(1800),
                reason: "drill".into(),
            })
        );
        assert!(parse(&["suspend", "keep", "--for", "30m"]).is_err());
        let error = parse(&["suspend", "keep", "--for", "soon", "--reason", "x"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--for: \"soon\" is not a duration"),
            "{error}"
        );
        assert_eq!(
            parse(&["resume", "keep"]).unwrap().command,
            Command::Resume(ResumeArgs {
                lock: "keep".into()
            })
        );
    }

    #[test]
    fn approve_refuses_incomplete_or_mixed_forms() {
        for args in [
            &["approve"][..],
            &["approve", "--all"],
            &["approve", "--stack", "app"],
            &["approve", "--all", "--stack", "app", "configmap/a"],
            &["locks", "-o", "short"],
            &["completion"],
            &["completion", "tcsh"],
        ] {
            assert!(parse(args).is_err(), "{args:?} parsed");
        }
    }
}
