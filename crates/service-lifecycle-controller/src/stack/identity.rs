//! Who a Stack acts as: a ServiceAccount of its own namespace, by
//! impersonation. Everything a Stack does to its resources (read, apply,
//! take an approval away, let go, prune, delete) is done as that account,
//! so RBAC decides what a Stack may do, and a user allowed only to write
//! Stacks gets nothing through one that the account is not granted
//! ("privileged deputy"). The account is a Project identity, so the
//! webhook's guards hold for it as for any Project user ("trusted group":
//! the controller's own ServiceAccount is one of the provider's). The
//! Stack object itself (its finalizer, its status) and its Events stay the
//! controller's own.
//!
//! Only `Impersonate-User: system:serviceaccount:<ns>:<name>` is sent: the
//! API server then adds the account's groups (`system:serviceaccounts`,
//! `system:serviceaccounts:<ns>`, `system:authenticated`) itself, and the
//! controller needs `impersonate` on `serviceaccounts` alone, never on
//! `groups` or `users`.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use kube::{Client, Config, ResourceExt};
use navique_api::constants::events;
use navique_api::core::{ResourceStatus, Stack};
use navique_api::grpc::approvals::v1::Operation;

use super::Error;
use super::live::Live;
use super::plan::ResourceKey;
use super::{Context, Pass};

/// The ServiceAccount a Stack acts as when it names none
/// (`--stack-default-service-account`, the chart's `stackServiceAccount`).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "navique-stack";

/// Clients built per identity and kept; past this many, the cache starts
/// again (Stacks may name any account, so it must not grow without bound).
const MAX_IDENTITIES: usize = 256;

/// The Kubernetes user name of ServiceAccount `namespace/name`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The clients Stacks act through, one per (namespace, ServiceAccount).
pub struct Identities {
    config: Config,
    default_account: String,
    live: Mutex<HashMap<(String, String), Arc<Live>>>,
}

impl Identities {
    /// Clients built from `config` (the controller's own), impersonating.
    pub fn new(config: Config, default_account: &str) -> Self {
        Self {
            config,
            default_account: default_account.to_owned(),
            live: Mutex::default(),
        }
    }

    /// The ServiceAccount `stack` acts as.
    pub fn account<'a>(&'a self, stack: &'a Stack) -> &'a str {
        stack
            .spec
            .service_account_name
            .as_deref()
            .unwrap_or(&self.default_account)
    }

    /// The cluster as ServiceAccount `namespace/account` sees and changes it.
    pub fn live(&self, namespace: &str, account: &str) -> Result<Arc<Live>, Error> {
        let key = (namespace.to_owned(), account.to_owned());
        let mut cache = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(live) = cache.get(&key) {
            return Ok(live.clone());
        }
        let user = username(namespace, account);
        let client =
            Client::try_from(impersonating(self.config.clone(), &user)).map_err(|source| {
                Error::Impersonation {
                    user: user.clone(),
                    source,
                }
            })?;
        if cache.len() >= MAX_IDENTITIES {
            cache.clear();
        }
        let live = Arc::new(Live::new(client));
        cache.insert(key, live.clone());
        Ok(live)
    }
}

/// `config` acting as `user` and nothing more: whatever impersonation the
/// controller's own configuration carried is replaced.
fn impersonating(mut config: Config, user: &str) -> Config {
    config.auth_info.impersonate = Some(user.to_owned());
    config.auth_info.impersonate_groups = None;
    config.auth_info.impersonate_uid = None;
    config.auth_info.impersonate_user_extra = None;
    config
}

/// One reconcile of a Stack: the controller's context (its own client for
/// the Stack, its status and Events) and the Stack's resources as its
/// ServiceAccount sees and changes them.
pub struct Acting {
    context: Arc<Context>,
    pub(super) live: Arc<Live>,
    /// The Stack reconciled (with its uid and resourceVersion), as its
    /// Events name it.
    pub(super) stack: ObjectReference,
    /// The user name the Stack acts as: its approvals are nobody's.
    pub(super) user: String,
    /// Distinct approvers each confirm-marked removal needs, from the
    /// Stack as read for this reconcile.
    pub(super) required_approvals: u32,
}

impl Acting {
    /// The reconcile of `stack`, acting as its ServiceAccount.
    pub fn new(context: Arc<Context>, stack: &Stack) -> Result<Self, Error> {
        let namespace = stack.namespace().ok_or(Error::Unidentified)?;
        let identities = &context.identities;
        let account = identities.account(stack);
        let live = identities.live(&namespace, account)?;
        Ok(Self {
            user: username(&namespace, account),
            required_approvals: stack.spec.required_approvals(),
            context,
            live,
            stack: navique_runtime::events::regarding(stack),
        })
    }
}

impl Deref for Acting {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.context
    }
}

impl Acting {
    /// [`Acting::remove`], with a request the API server refused (the
    /// account may not read or change the resource, or admission denied
    /// it) reported as a refused delete is, on the row, the operation and a
    /// Warning Event: the removal waits and is looked at again, it is not a
    /// reconcile error seen only in the log.
    pub(super) async fn remove_or_refused(
        &self,
        stack: &str,
        key: &ResourceKey,
        previous_row: &ResourceStatus,
        operation: Operation,
        declared: bool,
        pass: &mut Pass,
    ) -> Result<(), Error> {
        let result = self
            .remove(stack, key, previous_row, operation, declared, pass)
            .await;
        let Some(message) = result.as_ref().err().and_then(refusal) else {
            return result;
        };
        let mut row = super::row(key, previous_row.sync_wave, previous_row.status);
        row.requires_pruning = operation == Operation::Prune;
        self.refused(key, previous_row, &mut row, message, pass)
            .await;
        pass.rows.push(row);
        Ok(())
    }

    /// Reports a removal the API server refused with `message`: on `row`,
    /// in the pass, and, when new, as a Warning Event `DeletionDenied`.
    pub(super) async fn refused(
        &self,
        key: &ResourceKey,
        previous_row: &ResourceStatus,
        row: &mut ResourceStatus,
        message: String,
        pass: &mut Pass,
    ) {
        if previous_row.message.as_deref() != Some(message.as_str()) {
            self.publish(
                Some(key),
                EventType::Warning,
                events::DELETION_DENIED,
                format!("the delete of {} was denied: {message}", key.display()),
            )
            .await;
        }
        pass.denied.push((key.display(), message.clone()));
        row.message = Some(message);
    }
}

/// The API server's message when it refused a request about a Stack's
/// resource (403: RBAC, admission); `None` for any other failure.
fn refusal(error: &Error) -> Option<String> {
    match error {
        Error::StackResource {
            source: kube::Error::Api(status),
            ..
        } if status.code == 403 => Some(status.message.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(account: Option<&str>) -> Stack {
        let mut stack = Stack::new(
            "web",
            navique_api::core::StackSpec {
                resources: Vec::new(),
                service_account_name: account.map(str::to_owned),
                approvals: None,
            },
        );
        stack.metadata.namespace = Some("team-a".to_owned());
        stack
    }

    fn identities() -> Identities {
        let config = Config::new("https://127.0.0.1:6443".parse().unwrap());
        Identities::new(config, DEFAULT_SERVICE_ACCOUNT)
    }

    #[test]
    fn a_stack_acts_as_the_account_it_names_else_the_default() {
        let identities = identities();
        assert_eq!(identities.account(&stack(None)), "navique-stack");
        assert_eq!(identities.account(&stack(Some("deployer"))), "deployer");
    }

    #[test]
    fn the_account_is_always_one_of_the_stacks_own_namespace() {
        assert_eq!(
            username("team-a", "deployer"),
            "system:serviceaccount:team-a:deployer"
        );
    }

    #[test]
    fn impersonation_names_only_the_user_and_drops_any_other() {
        let mut config = Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.auth_info.impersonate = Some("admin".to_owned());
        config.auth_info.impersonate_groups = Some(vec!["system:masters".to_owned()]);
        let config = impersonating(config, "system:serviceaccount:team-a:navique-stack");
        assert_eq!(
            config.auth_info.impersonate.as_deref(),
            Some("system:serviceaccount:team-a:navique-stack")
        );
        assert_eq!(config.auth_info.impersonate_groups, None);
        assert_eq!(config.auth_info.impersonate_uid, None);
        assert_eq!(config.auth_info.impersonate_user_extra, None);
    }

    #[test]
    fn only_a_forbidden_answer_about_a_resource_is_a_refusal() {
        let failed = |code: u16| Error::StackResource {
            action: "delete",
            resource: "PersistentVolumeClaim team-a/data-rdb-0".to_owned(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: "denied".to_owned(),
                ..kube::core::Status::default()
            })),
        };
        assert_eq!(refusal(&failed(403)).as_deref(), Some("denied"));
        assert_eq!(refusal(&failed(500)), None);
        assert_eq!(refusal(&Error::Unidentified), None);
    }

    #[tokio::test]
    async fn clients_are_kept_per_namespace_and_account() {
        let identities = identities();
        let a = identities.live("team-a", "navique-stack").unwrap();
        let again = identities.live("team-a", "navique-stack").unwrap();
        let b = identities.live("team-b", "navique-stack").unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
