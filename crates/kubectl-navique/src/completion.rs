//! Completion of `kubectl navique <TAB>`, in the protocol kubectl (1.26 and
//! later) speaks with a plugin: kubectl runs `kubectl_complete-navique`
//! with the words after `navique` (the last one being the word under the
//! cursor, maybe empty), which runs `kubectl-navique __complete ...`; the
//! answer is one candidate per line (`value\tdescription`), then
//! `:<directive>`, Cobra's format, which kubectl passes on to the shell.
//!
//! Candidates come from the command line's own definition ([`crate::cli`]),
//! so they cannot drift from what parses.

use clap::{Arg, ArgAction, Command, ValueHint};

/// The word that asks for completions, after the binary's name.
pub const REQUEST: &str = "__complete";

/// Cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
const FILES: u32 = 0;
/// Cobra's `ShellCompDirectiveNoFileComp`: only the candidates given.
const NO_FILES: u32 = 4;

/// What to offer for the last of `words`, the words typed after
/// `kubectl navique` (the last one possibly empty), against `cli`.
pub fn complete(cli: &Command, words: &[String]) -> String {
    let (current, before) = match words.split_last() {
        Some((current, before)) => (current.as_str(), before),
        None => ("", &[][..]),
    };
    let mut command = cli;
    // The flag whose value the next word is.
    let mut expecting: Option<&Arg> = None;
    for word in before {
        if expecting.take().is_some() {
            continue;
        }
        if let Some(flag) = word.strip_prefix("--") {
            if !flag.contains('=') {
                expecting = find(cli, command, |a| a.get_long() == Some(flag));
            }
        } else if let Some(short) = word.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            expecting = find(cli, command, |a| a.get_short() == short.chars().next());
        } else if let Some(sub) = command.find_subcommand(word) {
            command = sub;
        }
        expecting = expecting.filter(|a| takes_value(a));
    }

    let mut lines = Vec::new();
    let directive = if let Some(arg) = expecting {
        values(arg, current, &mut lines)
    } else if current.starts_with('-') {
        for arg in flags(cli, command) {
            if let Some(long) = arg.get_long() {
                let flag = format!("--{long}");
                if flag.starts_with(current) {
                    lines.push(candidate(&flag, arg.get_help().map(ToString::to_string)));
                }
            }
        }
        NO_FILES
    } else if command.has_subcommands() {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name().starts_with(current) && sub.get_name() != "help" {
                lines.push(candidate(
                    sub.get_name(),
                    sub.get_about().map(ToString::to_string),
                ));
            }
        }
        NO_FILES
    } else {
        // The command's first argument (`completion <shell>`); resource
        // names are not looked up.
        match command.get_positionals().next() {
            Some(arg) => values(arg, current, &mut lines),
            None => NO_FILES,
        }
    };
    lines.push(format!(":{directive}"));
    lines.join("\n") + "\n"
}

/// The values of `arg` that start with `current`, pushed to `lines`; the
/// directive: files for a path, nothing for a free value.
fn values(arg: &Arg, current: &str, lines: &mut Vec<String>) -> u32 {
    let values = arg.get_possible_values();
    if values.is_empty() {
        return if arg.get_value_hint() == ValueHint::FilePath {
            FILES
        } else {
            NO_FILES
        };
    }
    for value in values.iter().filter(|v| !v.is_hide_set()) {
        if value.get_name().starts_with(current) {
            lines.push(candidate(
                value.get_name(),
                value.get_help().map(ToString::to_string),
            ));
        }
    }
    NO_FILES
}

/// `value`, with the first line of its help as the description.
fn candidate(value: &str, help: Option<String>) -> String {
    match help.as_deref().and_then(|h| h.lines().next()) {
        Some(first) if !first.is_empty() => format!("{value}\t{}", first.trim_end_matches('.')),
        _ => value.to_owned(),
    }
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

/// The flags `command` takes: its own, and the global ones of `cli`.
fn flags<'a>(cli: &'a Command, command: &'a Command) -> impl Iterator<Item = &'a Arg> {
    let own = command.get_arguments().filter(|a| !a.is_positional());
    let global = (!std::ptr::eq(cli, command))
        .then(|| cli.get_arguments().filter(|a| a.is_global_set()))
        .into_iter()
        .flatten();
    own.chain(global).filter(|a| !a.is_hide_set())
}

fn find<'a>(
    cli: &'a Command,
    command: &'a Command,
    matches: impl Fn(&Arg) -> bool,
) -> Option<&'a Arg> {
    flags(cli, command).find(|a| matches(a))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    fn complete_words(words: &[&str]) -> String {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        complete(&Cli::command(), &words)
    }

    #[test]
    fn commands_are_offered_by_prefix_with_their_summary() {
        assert_eq!(
            complete_words(&["ap"]),
            "approvals\tLists the prunes and deletes of Stack resources waiting for an approval\n\
             approve\tApproves pending prunes or deletes: sets `cd.hanzo.ai/deletion-approved: \"true\"` on each resource with your own credentials\n\
             :4\n"
        );
        let all = complete_words(&[""]);
        for command in [
            "locks",
            "approvals",
            "approve",
            "ui",
            "version",
            "completion",
        ] {
            assert!(
                all.lines().any(|l| l.split('\t').next() == Some(command)),
                "{command}: {all}"
            );
        }
        assert!(!all.contains("help"), "{all}");
    }

    #[test]
    fn flags_of_the_command_and_the_global_ones() {
        let out = complete_words(&["approvals", "--w"]);
        assert_eq!(
            out.lines().next().unwrap().split('\t').next(),
            Some("--watch")
        );
        let out = complete_words(&["-n", "forge", "ui", "--"]);
        for flag in [
            "--port",
            "--no-open",
            "--namespace",
            "--output",
            "--kubeconfig",
        ] {
            assert!(
                out.lines().any(|l| l.split('\t').next() == Some(flag)),
                "{flag}: {out}"
            );
        }
    }

    #[test]
    fn flag_values_are_offered_and_files_left_to_the_shell() {
        let out = complete_words(&["locks", "-o", ""]);
        let values: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
        assert_eq!(values, ["table", "json", "yaml", "wide", "name", ":4"]);
        assert_eq!(complete_words(&["completion", "z"]), "zsh\n:4\n");
        assert_eq!(complete_words(&["locks", "--kubeconfig", ""]), ":0\n");
        // A value already given is not completed again.
        assert_eq!(
            complete_words(&["-n", "lo"]),
            ":4\n",
            "the namespace's value is free text"
        );
        assert_eq!(
            complete_words(&["-n", "forge", "lo"]),
            "locks\tLists Locks: what is locked, by which Locks, and why\n:4\n"
        );
    }
}
