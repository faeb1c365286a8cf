//! Output: tables a person reads at a glance (kubectl's layout: upper-case
//! headers, columns three spaces apart, `<none>` for a missing value, free
//! text last), JSON and YAML for scripts, and API errors as kubectl words
//! them.

use serde::Serialize;

use crate::Error;
use crate::approvals::{ApproveOutcome, PendingApproval};
use crate::locks::LocksReport;
use crate::preview::Preview;

const NONE: &str = "<none>";

/// Lays out `rows` under `header` in aligned columns, kubectl style.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A Stack's name in the STACK column: a nested Stack under its parent.
fn stack_cell(name: &str, depth: usize) -> String {
    match depth {
        0 => name.to_owned(),
        depth => format!("{}└─ {name}", "   ".repeat(depth - 1)),
    }
}

/// `approvals`: one row per pending resource; a nested Stack's rows come
/// under its parent's, indented, with a line for each parent that has no
/// pending resource of its own.
pub fn approvals(pending: &[PendingApproval]) -> String {
    approvals_table(pending, false)
}

/// `approvals -o wide`: [`approvals`] with since when each waits and who
/// approved it so far (`alice (1/2)`), before the message.
pub fn approvals_wide(pending: &[PendingApproval]) -> String {
    approvals_table(pending, true)
}

fn approvals_table(pending: &[PendingApproval], wide: bool) -> String {
    if pending.is_empty() {
        return "No approvals pending.\n".to_owned();
    }
    let mut shown: Vec<(&str, &str)> = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for p in pending {
        let namespace = p.stack.namespace.as_str();
        for (depth, parent) in p.parents.iter().enumerate() {
            if !shown.contains(&(namespace, parent.as_str())) {
                shown.push((namespace, parent));
                rows.push(vec![namespace.to_owned(), stack_cell(parent, depth)]);
            }
        }
        shown.push((namespace, &p.stack.name));
        rows.push(row(p, wide));
    }
    let mut header = vec!["NAMESPACE", "STACK", "OPERATION", "KIND", "NAME", "WAVE"];
    if wide {
        header.extend(["SINCE", "APPROVED BY"]);
    }
    header.push("MESSAGE");
    table(&header, &rows)
}

fn row(p: &PendingApproval, wide: bool) -> Vec<String> {
    let mut row = vec![
        p.stack.namespace.clone(),
        stack_cell(&p.stack.name, p.parents.len()),
        p.operation.to_string(),
        p.resource.kind.clone(),
        p.resource.name.clone(),
        p.wave.map_or_else(|| NONE.to_owned(), |w| w.to_string()),
    ];
    if wide {
        row.push(p.since.clone().unwrap_or_else(|| NONE.to_owned()));
        row.push(approved_by_cell(p));
    }
    row.push(p.message.clone().unwrap_or_default());
    row
}

/// Who approved so far, and of how many needed when more than one is.
fn approved_by_cell(p: &PendingApproval) -> String {
    let names: Vec<&str> = p.approved_by.iter().map(|a| a.user.as_str()).collect();
    let count = match p.approvals_required {
        Some(n) if n > 1 => format!(" ({}/{n})", names.len()),
        _ => String::new(),
    };
    match (names.is_empty(), count.is_empty()) {
        (true, true) => NONE.to_owned(),
        (true, false) => format!("{NONE}{count}"),
        _ => format!("{}{count}", names.join(",")),
    }
}

/// `approvals -o name`: `kind.group/name` of each pending resource, the
/// form `approve` takes.
pub fn approval_names(pending: &[PendingApproval]) -> String {
    pending
        .iter()
        .map(|p| object_name(&p.resource.kind, &p.resource.group, &p.resource.name) + "\n")
        .collect()
}

/// An object as `kubectl get -o name` prints it: `configmap/settings`,
/// `deployment.apps/web`.
pub fn object_name(kind: &str, group: &str, name: &str) -> String {
    let kind = kind.to_lowercase();
    if group.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}.{group}/{name}")
    }
}

/// `approve`: the line for one outcome, for stdout when approved and
/// stderr when not.
pub fn outcome(outcome: &ApproveOutcome) -> String {
    match (&outcome.error, &outcome.stack, outcome.operation) {
        (Some(error), _, _) => format!("{error}\n"),
        (None, Some(stack), Some(operation)) => format!(
            "approved {}{} ({operation} in Stack {}{})\n",
            outcome.target,
            outcome
                .approver
                .as_ref()
                .map(|user| format!(" as {user}"))
                .unwrap_or_default(),
            stack.name,
            match outcome.approvals_required {
                Some(n) if n > 1 => format!(
                    "; {} of {n} approvers: {}",
                    outcome.approved_by.len(),
                    outcome.approved_by.join(", ")
                ),
                _ => String::new(),
            }
        ),
        (None, _, _) => format!("approved {}\n", outcome.target),
    }
}

/// `locks`: the Locks, then the objects active Locks protect and why.
/// `namespace` is the scope listed (`None` for every namespace), for the
/// message when there is no Lock.
pub fn locks(report: &LocksReport, namespace: Option<&str>) -> String {
    locks_table(report, namespace, false)
}

/// `locks -o wide`: [`locks`] with each target's API version and each
/// Lock's `Ready` message.
pub fn locks_wide(report: &LocksReport, namespace: Option<&str>) -> String {
    locks_table(report, namespace, true)
}

/// `locks -o name`: `lock.core.navique.com/<name>` of each Lock.
pub fn lock_names(report: &LocksReport) -> String {
    report
        .locks
        .iter()
        .map(|l| object_name("Lock", navique_api::constants::CORE_GROUP, &l.name) + "\n")
        .collect()
}

fn locks_table(report: &LocksReport, namespace: Option<&str>, wide: bool) -> String {
    if report.locks.is_empty() {
        return match namespace {
            Some(ns) => format!("No Locks found in {ns} namespace.\n"),
            None => "No Locks found.\n".to_owned(),
        };
    }
    let rows: Vec<Vec<String>> = report
        .locks
        .iter()
        .map(|l| {
            let (ready, status, message) = l.ready.as_ref().map_or_else(
                || (NONE.to_owned(), NONE.to_owned(), NONE.to_owned()),
                |r| (r.status.clone(), r.reason.clone(), r.message.clone()),
            );
            let mut row = vec![
                l.namespace.clone(),
                l.name.clone(),
                format!("{}/{}", l.target.kind, l.target.name),
            ];
            if wide {
                row.push(l.target.api_version.clone());
            }
            row.extend([l.active.to_string(), ready, status]);
            if wide {
                row.push(message);
            }
            row.push(l.reason.clone().unwrap_or_default());
            row
        })
        .collect();
    let mut header = vec!["NAMESPACE", "NAME", "TARGET"];
    if wide {
        header.push("TARGET API VERSION");
    }
    header.extend(["ACTIVE", "READY", "STATUS"]);
    if wide {
        header.push("MESSAGE");
    }
    header.push("REASON");
    let mut out = table(&header, &rows);
    if !report.locked_objects.is_empty() {
        let rows: Vec<Vec<String>> = report
            .locked_objects
            .iter()
            .map(|o| {
                vec![
                    o.namespace.clone(),
                    format!("{}/{}", o.kind, o.name),
                    o.locks
                        .iter()
                        .map(|p| p.lock.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    o.reasons(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &["NAMESPACE", "LOCKED OBJECT", "PROTECTED BY", "WHY"],
            &rows,
        ));
    }
    out
}

/// `preview -o name`: what would be removed, one `kind.group/name` a line.
pub fn preview_names(preview: &Preview) -> String {
    preview
        .removed
        .iter()
        .map(|r| {
            let group = r.object.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            object_name(&r.object.kind, group, &r.object.name) + "\n"
        })
        .collect()
}

/// `preview`: what goes, what stops it, what stays, then the backup
/// records, notes and the one-line outcome.
pub fn preview(preview: &Preview) -> String {
    let wave = |w: Option<i32>| w.map_or_else(String::new, |w| w.to_string());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &preview.removed {
        rows.push(vec![
            r.object.kind.clone(),
            r.object.name.clone(),
            wave(r.wave),
            "removed".into(),
            r.how.clone(),
        ]);
    }
    for s in &preview.stops {
        rows.push(vec![
            s.object.kind.clone(),
            s.object.name.clone(),
            wave(s.wave),
            "stops".into(),
            format!("{}: {}", s.summary, s.message),
        ]);
    }
    for k in &preview.kept {
        rows.push(vec![
            k.object.kind.clone(),
            k.object.name.clone(),
            wave(k.wave),
            "stays".into(),
            k.why.clone(),
        ]);
    }
    let mut out = String::new();
    if !rows.is_empty() {
        out.push_str(&table(&["KIND", "NAME", "WAVE", "FATE", "DETAIL"], &rows));
    }
    if !preview.backups.is_empty() {
        let rows: Vec<Vec<String>> = preview
            .backups
            .iter()
            .map(|b| vec![b.name.clone(), b.origin.clone(), b.fate.clone()])
            .collect();
        out.push('\n');
        out.push_str(&table(&["SERVICEBACKUP", "ORIGIN", "FATE"], &rows));
    }
    for note in &preview.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&preview.outcome.line);
    out.push('\n');
    out
}

/// `value` as indented JSON, with a final newline.
pub fn json<T: Serialize>(value: &T) -> Result<String, Error> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// `value` as one line of JSON (for streams of events).
pub fn json_line<T: Serialize>(value: &T) -> Result<String, Error> {
    Ok(serde_json::to_string(value)? + "\n")
}

/// `value` as a YAML document.
pub fn yaml<T: Serialize>(value: &T) -> Result<String, Error> {
    Ok(serde_yaml::to_string(value)?)
}

/// An API server's refusal, as kubectl prints it:
/// `Error from server (Forbidden): configmaps "x" is forbidden: ...`.
pub fn server_error(status: &kube::core::Status) -> String {
    if status.reason.is_empty() {
        format!("Error from server: {}", status.message)
    } else {
        format!("Error from server ({}): {}", status.reason, status.message)
    }
}

/// Any kube error, as kubectl would print it: the server's refusal
/// verbatim, anything else after `error: ` with its causes on one line.
pub fn kube_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => server_error(status),
        other => format!("error: {}", navique_runtime::one_line(other)),
    }
}

/// A watch failure as kubectl words the API server's answer.
pub fn watch_error(error: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error;
    match error {
        Error::InitialListFailed(e) | Error::WatchStartFailed(e) | Error::WatchFailed(e) => {
            kube_error(e)
        }
        Error::WatchError(status) => kube_error(&kube::Error::Api(status.clone())),
        other => format!("error: {other}"),
    }
}

/// What a kube error means when the cluster cannot serve the command, as
/// the plugin says it: the API server `server` unreachable, or not serving
/// `crd` (Navique is not installed); `None` for any other error.
pub fn unavailable(error: &kube::Error, server: &str, crd: &str) -> Option<String> {
    match error {
        // What an API server answers for a resource type it does not serve.
        kube::Error::Api(status)
            if status.code == 404
                && status.message == "the server could not find the requested resource" =>
        {
            Some(format!(
                "Navique is not installed on {server}: the CustomResourceDefinition {crd} is missing (install Navique: README.md, \"Quick start\")"
            ))
        }
        kube::Error::Api(_) => None,
        kube::Error::HyperError(_) | kube::Error::Service(_) => Some(format!(
            "cannot reach the Kubernetes API server {server}: {}",
            navique_runtime::one_line(error)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::{ApproveReport, pending_approvals, tests::stacks};
    use crate::locks::{report, tests::locks as some_locks};

    #[test]
    fn a_missing_crd_and_an_unreachable_server_are_named() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "NotFound")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert_eq!(
            unavailable(
                &status(404, "the server could not find the requested resource"),
                "https://k8s:6443/",
                "locks.core.navique.com"
            )
            .unwrap(),
            "Navique is not installed on https://k8s:6443/: the CustomResourceDefinition locks.core.navique.com is missing (install Navique: README.md, \"Quick start\")"
        );
        // An object that is not found is the server's answer, printed as is.
        assert_eq!(
            unavailable(
                &status(404, "configmaps \"gone\" not found"),
                "https://k8s:6443/",
                "locks.core.navique.com"
            ),
            None
        );
    }

    #[test]
    fn columns_are_three_spaces_apart_and_lines_have_no_trailing_blanks() {
        let rows = vec![
            vec!["a".to_owned(), "long value".to_owned(), String::new()],
            vec!["longer".to_owned(), "b".to_owned(), "é—x".to_owned()],
        ];
        assert_eq!(
            table(&["ONE", "TWO", "THREE"], &rows),
            "ONE      TWO          THREE\n\
             a        long value\n\
             longer   b            é—x\n"
        );
    }

    #[test]
    fn the_approvals_table() {
        assert_eq!(
            approvals(&pending_approvals(&stacks())),
            "NAMESPACE   STACK   OPERATION   KIND         NAME         WAVE   MESSAGE\n\
             forge       app     Prune       ConfigMap    old-config   1      waiting for cd.hanzo.ai/deletion-approved\n\
             shop        web     Delete      Deployment   web          2\n"
        );
    }

    #[test]
    fn nested_stacks_show_as_a_tree() {
        let mut pending = pending_approvals(&stacks());
        pending.truncate(1);
        pending[0].parents = vec!["platform".into(), "forge-apps".into()];
        assert_eq!(
            approvals(&pending),
            "NAMESPACE   STACK           OPERATION   KIND        NAME         WAVE   MESSAGE\n\
             forge       platform\n\
             forge       └─ forge-apps\n\
             forge          └─ app       Prune       ConfigMap   old-config   1      waiting for cd.hanzo.ai/deletion-approved\n"
        );
    }

    #[test]
    fn no_approvals() {
        assert_eq!(approvals(&[]), "No approvals pending.\n");
    }

    #[test]
    fn a_missing_wave_is_none() {
        let mut pending = pending_approvals(&stacks());
        pending.truncate(1);
        pending[0].wave = None;
        pending[0].message = None;
        assert_eq!(
            approvals(&pending),
            "NAMESPACE   STACK   OPERATION   KIND        NAME         WAVE     MESSAGE\n\
             forge       app     Prune       ConfigMap   old-config   <none>\n"
        );
    }

    #[test]
    fn approve_outcomes() {
        let pending = pending_approvals(&stacks());
        let ok = ApproveOutcome::approved(
            "configmap/old-config".into(),
            Some("forge"),
            &pending[0],
            "alice",
            Some("alice"),
        );
        assert_eq!(
            outcome(&ok),
            "approved configmap/old-config as alice (Prune in Stack app)\n"
        );
        let mut second = pending[0].clone();
        second.approvals_required = Some(2);
        let four_eyes = ApproveOutcome::approved(
            "configmap/old-config".into(),
            Some("forge"),
            &second,
            "bob",
            Some("alice,bob"),
        );
        assert_eq!(
            outcome(&four_eyes),
            "approved configmap/old-config as bob (Prune in Stack app; 2 of 2 approvers: alice, bob)\n"
        );
        let refused = ApproveOutcome::failed(
            "cm/kept".into(),
            None,
            None,
            "error: cm/kept is not waiting for a deletion approval".into(),
        );
        assert_eq!(
            outcome(&refused),
            "error: cm/kept is not waiting for a deletion approval\n"
        );
        assert_eq!(
            serde_json::to_value(ApproveReport {
                results: vec![ok, refused]
            })
            .unwrap(),
            serde_json::json!({"results": [
                {"target": "configmap/old-config", "namespace": "forge", "approved": true,
                 "stack": {"namespace": "forge", "name": "app"}, "operation": "Prune",
                 "approver": "alice", "approvedBy": ["alice"]},
                {"target": "cm/kept", "approved": false,
                 "error": "error: cm/kept is not waiting for a deletion approval"}
            ]})
        );
    }

    #[test]
    fn the_locks_tables() {
        assert_eq!(
            locks(&report(&some_locks()), None),
            "NAMESPACE   NAME                  TARGET              ACTIVE   READY    STATUS             REASON\n\
             apps        fresh                 ManagedService/db   false    <none>   <none>\n\
             forge       audit                 Stack/forge         true     True     Protecting\n\
             forge       later                 Stack/next          false    False    MissingReference   not yet\n\
             forge       protect-forge-stack   Stack/forge         true     True     Protecting         Production environment\n\
             \n\
             NAMESPACE   LOCKED OBJECT   PROTECTED BY                 WHY\n\
             forge       Stack/forge     audit, protect-forge-stack   protect-forge-stack: Production environment\n"
        );
    }

    #[test]
    fn no_locks_says_where_it_looked() {
        let empty = LocksReport::default();
        assert_eq!(
            locks(&empty, Some("forge")),
            "No Locks found in forge namespace.\n"
        );
        assert_eq!(locks(&empty, None), "No Locks found.\n");
    }

    #[test]
    fn inactive_locks_alone_print_no_locked_objects() {
        let only_later: Vec<_> = some_locks()
            .into_iter()
            .filter(|l| l.metadata.name.as_deref() == Some("later"))
            .collect();
        assert!(!locks(&report(&only_later), Some("forge")).contains("LOCKED OBJECT"));
    }

    #[test]
    fn json_and_yaml() {
        let value = serde_json::json!({"a": [1], "b": "x"});
        assert_eq!(
            json(&value).unwrap(),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": \"x\"\n}\n"
        );
        assert_eq!(json_line(&value).unwrap(), "{\"a\":[1],\"b\":\"x\"}\n");
        assert_eq!(yaml(&value).unwrap(), "a:\n- 1\nb: x\n");
    }

    #[test]
    fn server_refusals_read_as_kubectl_prints_them() {
        let status = kube::core::Status::failure(
            "configmaps \"x\" is forbidden: User \"bob\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ns\"",
            "Forbidden",
        )
        .with_code(403);
        assert_eq!(
            kube_error(&kube::Error::Api(status.boxed())),
            "Error from server (Forbidden): configmaps \"x\" is forbidden: User \"bob\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
        let bare = kube::core::Status::failure("boom", "");
        assert_eq!(server_error(&bare), "Error from server: boom");
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(kube_error(&other), "error: Error finding newline character");
    }
}
