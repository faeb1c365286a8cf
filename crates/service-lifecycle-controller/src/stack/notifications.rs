//! The approval notification catalogue: three triggers (approval required,
//! approved, removed), each rendered by one template (Slack, Microsoft
//! Teams, generic JSON, or the user's own) and POSTed once, in the
//! background, retried with backoff, counted in
//! `approval_notifications_total{trigger,outcome}`.
//!
//! Templates are minijinja with JSON auto-escaping: `{{ text }}` prints a
//! JSON string, `{{ resources }}` a JSON array, so a template cannot be
//! broken by a resource or user name. The rendered body must be JSON.

use std::sync::Arc;
use std::time::Duration;

use minijinja::{AutoEscape, Environment};
use navique_api::grpc::approvals::v1::{Operation, PendingApproval};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde_json::{Value, json};

/// How often a notification is tried before it is given up.
const ATTEMPTS: u32 = 4;
/// The first retry's delay; each next one doubles it.
const FIRST_RETRY: Duration = Duration::from_millis(500);

/// The built-in templates, also a starting point for one's own.
const SLACK: &str = include_str!("../../templates/slack.json.j2");
const TEAMS: &str = include_str!("../../templates/teams.json.j2");
const JSON: &str = include_str!("../../templates/json.json.j2");

/// What a notification is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Resources of a Stack started to wait for approval.
    ApprovalRequired,
    /// A person's approval of a waiting removal was counted.
    Approved,
    /// An approved removal ran.
    Removed,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApprovalRequired => "approval-required",
            Self::Approved => "approved",
            Self::Removed => "removed",
        }
    }
}

/// Errors of the catalogue.
#[derive(Debug, thiserror::Error)]
pub enum NotificationError {
    #[error("cannot read the notification template {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the notification template does not compile: {0}")]
    Compile(#[source] minijinja::Error),
    #[error("the notification template does not render: {0}")]
    Render(#[source] minijinja::Error),
    #[error("the notification template rendered no JSON ({0}): {1}")]
    NotJson(serde_json::Error, String),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The template notifications are rendered with.
#[derive(Clone)]
pub struct Template(Arc<Environment<'static>>);

impl Template {
    /// `slack`, `teams`, `json` (the default), or the path of a template
    /// file of one's own.
    pub fn from_arg(arg: &str) -> Result<Self, NotificationError> {
        let source = match arg {
            "slack" => SLACK.to_owned(),
            "teams" => TEAMS.to_owned(),
            "json" => JSON.to_owned(),
            path => std::fs::read_to_string(path).map_err(|source| NotificationError::Read {
                path: path.to_owned(),
                source,
            })?,
        };
        Self::compile(source)
    }

    fn compile(source: String) -> Result<Self, NotificationError> {
        let mut env = Environment::new();
        env.set_auto_escape_callback(|_| AutoEscape::Json);
        env.add_template_owned("notification", source)
            .map_err(NotificationError::Compile)?;
        Ok(Self(Arc::new(env)))
    }

    /// The body for `notice`: the rendered template, which must be JSON.
    pub fn render(&self, notice: &Notice) -> Result<Value, NotificationError> {
        let text = self
            .0
            .get_template("notification")
            .and_then(|t| t.render(notice))
            .map_err(NotificationError::Render)?;
        serde_json::from_str(&text).map_err(|e| NotificationError::NotJson(e, cut(&text)))
    }
}

fn cut(text: &str) -> String {
    text.chars().take(120).collect()
}

/// A resource named in a notification.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NoticeResource {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `prune` or `delete`.
    pub operation: &'static str,
}

/// An approver named in a notification.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NoticeApprover {
    pub user: String,
    /// RFC 3339.
    pub time: String,
}

/// What every template may use: the fields below, by their JSON names.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// `approval-required`, `approved` or `removed`.
    pub trigger: &'static str,
    /// One line for a title.
    pub title: String,
    /// The message, several lines.
    pub text: String,
    /// `text`'s lines.
    pub lines: Vec<String>,
    /// `{"namespace", "name"}`.
    pub stack: Value,
    pub resources: Vec<NoticeResource>,
    /// Who approved so far (approved, removed), in order.
    pub approved_by: Vec<NoticeApprover>,
    /// Distinct approvers each removal needs.
    pub approvals_required: u32,
    /// `kubectl navique approve --all --stack <stack> -n <namespace>`.
    pub approve_command: String,
    /// `kubectl navique ui`: the page where the approvals can be reviewed.
    pub ui_command: &'static str,
}

fn operation_name(operation: i32) -> &'static str {
    match Operation::try_from(operation) {
        Ok(Operation::Prune) => "prune",
        Ok(Operation::Delete) => "delete",
        _ => "removal",
    }
}

fn resource(pending: &PendingApproval) -> Option<NoticeResource> {
    let r = pending.resource.as_ref()?;
    Some(NoticeResource {
        api_version: if r.group.is_empty() {
            r.version.clone()
        } else {
            format!("{}/{}", r.group, r.version)
        },
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        operation: operation_name(pending.operation),
    })
}

fn approvers(pending: &PendingApproval) -> Vec<NoticeApprover> {
    pending
        .approved_by
        .iter()
        .map(|a| NoticeApprover {
            user: a.user.clone(),
            time: a.time.map(|t| t.to_string()).unwrap_or_default(),
        })
        .collect()
}

fn who_and_when(approvers: &[NoticeApprover]) -> String {
    if approvers.is_empty() {
        return "the Stack's manifest (cd.hanzo.ai/deletion-approved declared)".to_owned();
    }
    approvers
        .iter()
        .map(|a| format!("{} at {}", a.user, a.time))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Notice {
    fn new(
        trigger: Trigger,
        (namespace, stack): (&str, &str),
        title: String,
        lines: Vec<String>,
        pending: &[PendingApproval],
    ) -> Self {
        Self {
            trigger: trigger.as_str(),
            title,
            text: lines.join("\n"),
            lines,
            stack: json!({"namespace": namespace, "name": stack}),
            resources: pending.iter().filter_map(resource).collect(),
            approved_by: pending.first().map(approvers).unwrap_or_default(),
            approvals_required: pending.first().map_or(1, |p| p.approvals_required.max(1)),
            approve_command: format!(
                "kubectl navique approve --all --stack {stack} -n {namespace}"
            ),
            ui_command: "kubectl navique ui",
        }
    }

    /// Resources of Stack `namespace/stack` wait for approval: `waiting`,
    /// all of them.
    pub fn approval_required(namespace: &str, stack: &str, waiting: &[PendingApproval]) -> Self {
        let mut lines = vec![format!(
            "Stack {namespace}/{stack} waits for deletion approval of {} resource(s):",
            waiting.len()
        )];
        for r in waiting.iter().filter_map(resource) {
            lines.push(format!("• {} {}/{}", r.operation, r.kind, r.name));
        }
        let required = waiting.first().map_or(1, |p| p.approvals_required.max(1));
        if required > 1 {
            lines.push(format!("Each needs {required} distinct approvers."));
        }
        lines.push(format!(
            "Approve with: kubectl navique approve --all --stack {stack} -n {namespace}"
        ));
        lines.push("Or review and approve them one by one in: kubectl navique ui".to_owned());
        let title = format!("Deletion approval required: Stack {namespace}/{stack}");
        Self::new(
            Trigger::ApprovalRequired,
            (namespace, stack),
            title,
            lines,
            waiting,
        )
    }

    /// `pending`'s latest approver was counted (`pending.approved_by`: all
    /// so far).
    pub fn approved(namespace: &str, stack: &str, pending: &PendingApproval) -> Self {
        let all = approvers(pending);
        let latest = all.last().map(|a| a.user.clone()).unwrap_or_default();
        let r = resource(pending);
        let what = r
            .as_ref()
            .map(|r| format!("the {} of {}/{}", r.operation, r.kind, r.name))
            .unwrap_or_default();
        let line = format!(
            "{latest} approved {what} in Stack {namespace}/{stack} at {} ({} of {} distinct approvers)",
            all.last().map(|a| a.time.as_str()).unwrap_or_default(),
            all.len(),
            pending.approvals_required.max(1)
        );
        let title = format!("Deletion approved by {latest}: Stack {namespace}/{stack}");
        Self::new(
            Trigger::Approved,
            (namespace, stack),
            title,
            vec![line],
            std::slice::from_ref(pending),
        )
    }

    /// `removed`'s approved removal ran.
    pub fn removed(namespace: &str, stack: &str, removed: &PendingApproval) -> Self {
        let done = match Operation::try_from(removed.operation) {
            Ok(Operation::Delete) => "deleted",
            _ => "pruned",
        };
        let r = resource(removed);
        let line = format!(
            "Stack {namespace}/{stack} {done} {}, approved by {}",
            r.as_ref()
                .map(|r| format!("{}/{}", r.kind, r.name))
                .unwrap_or_default(),
            who_and_when(&approvers(removed))
        );
        let title = format!("Removed after approval: Stack {namespace}/{stack}");
        Self::new(
            Trigger::Removed,
            (namespace, stack),
            title,
            vec![line],
            std::slice::from_ref(removed),
        )
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Labels {
    trigger: &'static str,
    /// `sent`, `retried` (one failed attempt that is tried again),
    /// `failed` (given up) or `invalid` (the template rendered no JSON).
    outcome: &'static str,
}

/// Posts each notice to one URL, rendered by one template.
#[derive(Clone)]
pub struct Notifier {
    url: String,
    template: Template,
    http: reqwest::Client,
    counts: Family<Labels, Counter>,
}

impl Notifier {
    pub fn new(url: &str, template: Template) -> Result<Self, NotificationError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(NotificationError::Client)?;
        Ok(Self {
            url: url.to_owned(),
            template,
            http,
            counts: Family::default(),
        })
    }

    /// `approval_notifications_total`, for the metrics registry.
    pub fn counts(&self) -> Family<Labels, Counter> {
        self.counts.clone()
    }

    fn count(&self, trigger: &'static str, outcome: &'static str) {
        self.counts
            .get_or_create(&Labels { trigger, outcome })
            .inc();
    }

    /// Sends `notice` in the background, retrying with backoff; never
    /// blocks the reconcile that raised it.
    pub fn notify(&self, notice: &Notice) {
        let trigger = notice.trigger;
        let body = match self.template.render(notice) {
            Ok(body) => body,
            Err(e) => {
                self.count(trigger, "invalid");
                tracing::warn!(trigger, error = %navique_runtime::one_line(&e), "cannot render the approval notification");
                return;
            }
        };
        let notifier = self.clone();
        tokio::spawn(async move {
            let mut attempt = 1;
            loop {
                let sent = notifier.http.post(&notifier.url).json(&body).send().await;
                let Err(e) = sent.and_then(reqwest::Response::error_for_status) else {
                    return notifier.count(trigger, "sent");
                };
                let Some(delay) = retry_delay(attempt) else {
                    notifier.count(trigger, "failed");
                    tracing::warn!(url = %notifier.url, trigger, attempts = attempt, error = %navique_runtime::one_line(&e), "cannot post the approval notification");
                    return;
                };
                notifier.count(trigger, "retried");
                tracing::info!(url = %notifier.url, trigger, attempt, error = %navique_runtime::one_line(&e), ?delay, "cannot post the approval notification yet; trying again");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        });
    }
}

/// How long to wait after failed attempt `attempt` (from 1) before the
/// next; none after the last.
fn retry_delay(attempt: u32) -> Option<Duration> {
    (attempt < ATTEMPTS).then(|| FIRST_RETRY * 2u32.pow(attempt - 1))
}

#[cfg(test)]
mod tests {
    use navique_api::grpc::approvals::v1::{Approver, ResourceRef, StackRef};

    use super::*;

    fn pending(name: &str, operation: Operation, by: &[&str], required: u32) -> PendingApproval {
        PendingApproval {
            stack: Some(StackRef {
                namespace: "team".into(),
                name: "web".into(),
            }),
            resource: Some(ResourceRef {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "team".into(),
                name: name.into(),
                uid: format!("uid-{name}"),
            }),
            operation: operation as i32,
            since: None,
            approved_by: by
                .iter()
                .zip(0..)
                .map(|(user, i)| Approver {
                    user: (*user).into(),
                    time: Some(prost_types::Timestamp {
                        seconds: 1_796_137_200 + i * 60,
                        nanos: 0,
                    }),
                })
                .collect(),
            approvals_required: required,
        }
    }

    fn render(template: &str, notice: &Notice) -> String {
        Template::from_arg(template)
            .unwrap()
            .render(notice)
            .unwrap()
            .to_string()
    }

    fn required() -> Notice {
        Notice::approval_required(
            "team",
            "web",
            &[
                pending("a", Operation::Delete, &[], 2),
                pending("b", Operation::Delete, &[], 2),
            ],
        )
    }

    fn approved() -> Notice {
        Notice::approved(
            "team",
            "web",
            &pending("a", Operation::Prune, &["alice", "bob"], 2),
        )
    }

    fn removed() -> Notice {
        Notice::removed(
            "team",
            "web",
            &pending("a", Operation::Delete, &["alice", "bob"], 2),
        )
    }

    const REQUIRED_TITLE: &str = "Deletion approval required: Stack team/web";
    const REQUIRED_LINES: [&str; 6] = [
        "Stack team/web waits for deletion approval of 2 resource(s):",
        "• delete ConfigMap/a",
        "• delete ConfigMap/b",
        "Each needs 2 distinct approvers.",
        "Approve with: kubectl navique approve --all --stack web -n team",
        "Or review and approve them one by one in: kubectl navique ui",
    ];
    const REQUIRED_TEXT: &str = "Stack team/web waits for deletion approval of 2 resource(s):\n• delete ConfigMap/a\n• delete ConfigMap/b\nEach needs 2 distinct approvers.\nApprove with: kubectl navique approve --all --stack web -n team\nOr review and approve them one by one in: kubectl navique ui";
    const APPROVED_TITLE: &str = "Deletion approved by bob: Stack team/web";
    const APPROVED_TEXT: &str = "bob approved the prune of ConfigMap/a in Stack team/web at 2026-12-01T15:01:00Z (2 of 2 distinct approvers)";
    const REMOVED_TITLE: &str = "Removed after approval: Stack team/web";
    const REMOVED_TEXT: &str = "Stack team/web deleted ConfigMap/a, approved by alice at 2026-12-01T15:00:00Z, bob at 2026-12-01T15:01:00Z";

    fn config_map(name: &str, operation: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team", "name": name, "operation": operation})
    }

    fn alice_and_bob() -> Value {
        json!([
            {"user": "alice", "time": "2026-12-01T15:00:00Z"},
            {"user": "bob", "time": "2026-12-01T15:01:00Z"}
        ])
    }

    #[test]
    fn the_notices_text_lists_the_resources_the_command_and_the_page_or_says_who_approved() {
        let notice = required();
        assert_eq!(notice.title, REQUIRED_TITLE);
        assert_eq!(notice.lines, REQUIRED_LINES);
        assert_eq!(notice.text, REQUIRED_TEXT);
        assert_eq!(approved().title, APPROVED_TITLE);
        assert_eq!(approved().lines, [APPROVED_TEXT]);
        assert_eq!(removed().title, REMOVED_TITLE);
        assert_eq!(removed().lines, [REMOVED_TEXT]);
    }

    #[test]
    fn the_json_template_renders_each_trigger_exactly() {
        let body = |trigger: &str, text: &str, resources: Value, by: Value| {
            json!({
                "trigger": trigger,
                "text": text,
                "stack": {"namespace": "team", "name": "web"},
                "resources": resources,
                "approvedBy": by,
                "approvalsRequired": 2,
                "approveCommand": "kubectl navique approve --all --stack web -n team"
            })
            .to_string()
        };
        assert_eq!(
            render("json", &required()),
            body(
                "approval-required",
                REQUIRED_TEXT,
                json!([config_map("a", "delete"), config_map("b", "delete")]),
                json!([])
            )
        );
        assert_eq!(
            render("json", &approved()),
            body(
                "approved",
                APPROVED_TEXT,
                json!([config_map("a", "prune")]),
                alice_and_bob()
            )
        );
        assert_eq!(
            render("json", &removed()),
            body(
                "removed",
                REMOVED_TEXT,
                json!([config_map("a", "delete")]),
                alice_and_bob()
            )
        );
    }

    #[test]
    fn the_slack_template_renders_each_trigger_as_a_header_and_the_text() {
        let message = |title: &str, text: &str| {
            json!({
                "text": text,
                "blocks": [
                    {"type": "header", "text": {"type": "plain_text", "text": title}},
                    {"type": "section", "text": {"type": "mrkdwn", "text": text}}
                ]
            })
            .to_string()
        };
        assert_eq!(
            render("slack", &required()),
            message(REQUIRED_TITLE, REQUIRED_TEXT)
        );
        assert_eq!(
            render("slack", &approved()),
            message(APPROVED_TITLE, APPROVED_TEXT)
        );
        assert_eq!(
            render("slack", &removed()),
            message(REMOVED_TITLE, REMOVED_TEXT)
        );
    }

    #[test]
    fn the_teams_template_renders_each_trigger_as_an_adaptive_card_with_a_block_per_line() {
        let card = |title: &str, lines: &[&str]| {
            let mut body = vec![
                json!({"type": "TextBlock", "text": title, "weight": "Bolder", "size": "Medium", "wrap": true}),
            ];
            body.extend(
                lines
                    .iter()
                    .map(|l| json!({"type": "TextBlock", "text": l, "wrap": true})),
            );
            json!({"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard", "version": "1.4", "body": body}}]})
            .to_string()
        };
        assert_eq!(
            render("teams", &required()),
            card(REQUIRED_TITLE, &REQUIRED_LINES)
        );
        assert_eq!(
            render("teams", &approved()),
            card(APPROVED_TITLE, &[APPROVED_TEXT])
        );
        assert_eq!(
            render("teams", &removed()),
            card(REMOVED_TITLE, &[REMOVED_TEXT])
        );
    }

    /// A template of one's own, as docs/stacks.md shows it: loops over the
    /// resources and approvers, string concatenation, a number.
    const USER_TEMPLATE: &str = r#"{"event": {{ trigger }}, "summary": {{ title }}, "stack": {{ stack.namespace ~ "/" ~ stack.name }}, "resources": [{% for r in resources %}{{ r.operation ~ " " ~ r.kind ~ "/" ~ r.name }}{% if not loop.last %}, {% endif %}{% endfor %}], "approvedBy": [{% for a in approvedBy %}{{ a.user }}{% if not loop.last %}, {% endif %}{% endfor %}], "needs": {{ approvalsRequired }}, "approve": {{ approveCommand }}, "review": {{ uiCommand }}, "details": {{ lines }}}"#;

    #[test]
    fn a_users_template_renders_each_trigger_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.json.j2");
        std::fs::write(&path, USER_TEMPLATE).unwrap();
        let path = path.to_str().unwrap();
        let body =
            |event: &str, summary: &str, resources: &[&str], by: &[&str], details: &[&str]| {
                json!({
                    "event": event,
                    "summary": summary,
                    "stack": "team/web",
                    "resources": resources,
                    "approvedBy": by,
                    "needs": 2,
                    "approve": "kubectl navique approve --all --stack web -n team",
                    "review": "kubectl navique ui",
                    "details": details
                })
                .to_string()
            };
        assert_eq!(
            render(path, &required()),
            body(
                "approval-required",
                REQUIRED_TITLE,
                &["delete ConfigMap/a", "delete ConfigMap/b"],
                &[],
                &REQUIRED_LINES
            )
        );
        assert_eq!(
            render(path, &approved()),
            body(
                "approved",
                APPROVED_TITLE,
                &["prune ConfigMap/a"],
                &["alice", "bob"],
                &[APPROVED_TEXT]
            )
        );
        assert_eq!(
            render(path, &removed()),
            body(
                "removed",
                REMOVED_TITLE,
                &["delete ConfigMap/a"],
                &["alice", "bob"],
                &[REMOVED_TEXT]
            )
        );
    }

    /// No hot loop: four attempts in all, 0.5 s, 1 s, then 2 s apart.
    #[test]
    fn a_failed_notification_is_retried_three_times_each_wait_doubling() {
        let delays: Vec<Option<Duration>> = (1..=ATTEMPTS + 1).map(retry_delay).collect();
        assert_eq!(
            delays,
            [
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                None,
                None
            ]
        );
    }

    #[test]
    fn a_removal_approved_in_the_manifest_says_so() {
        let declared = Notice::removed("team", "web", &pending("a", Operation::Delete, &[], 1));
        assert_eq!(
            declared.text,
            "Stack team/web deleted ConfigMap/a, approved by the Stack's manifest (cd.hanzo.ai/deletion-approved declared)"
        );
        assert_eq!(declared.approvals_required, 1);
        assert!(declared.approved_by.is_empty());
    }

    /// A user's own template: every field, JSON-escaped, so a name with
    /// quotes cannot break (or inject into) the body.
    #[test]
    fn a_users_template_renders_every_field_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.json.j2");
        std::fs::write(
            &path,
            r#"{"event": {{ trigger }}, "summary": {{ title }}, "who": [{% for a in approvedBy %}{{ a.user }}{% if not loop.last %}, {% endif %}{% endfor %}], "first": {{ resources[0].name }}, "hint": {{ uiCommand }}}"#,
        )
        .unwrap();
        let mut odd = pending("a\"b", Operation::Prune, &["alice", "bob\"}"], 2);
        odd.approvals_required = 2;
        let notice = Notice::approved("team", "web", &odd);
        assert_eq!(
            render(path.to_str().unwrap(), &notice),
            json!({
                "event": "approved",
                "summary": "Deletion approved by bob\"}: Stack team/web",
                "who": ["alice", "bob\"}"],
                "first": "a\"b",
                "hint": "kubectl navique ui"
            })
            .to_string()
        );
    }

    #[test]
    fn a_template_that_renders_no_json_or_cannot_be_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.j2");
        std::fs::write(&path, "text: {{ text }}").unwrap();
        let error = Template::from_arg(path.to_str().unwrap())
            .unwrap()
            .render(&required())
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the notification template rendered no JSON"),
            "{error}"
        );
        let missing = Template::from_arg("/nonexistent/template.j2")
            .err()
            .unwrap();
        assert!(
            missing
                .to_string()
                .starts_with("cannot read the notification template /nonexistent/template.j2:"),
            "{missing}"
        );
        assert!(matches!(
            Template::from_arg(path.with_file_name("x").to_str().unwrap()),
            Err(NotificationError::Read { .. })
        ));
    }
}
