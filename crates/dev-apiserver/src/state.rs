//! What every request and controller of this server shares: the store, the
//! served types, the users and how they are authorized, and the signals
//! that wake the controllers after a write.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::auth::Users;
use crate::cel::ObjectReads;
use crate::faults::Faults;
use crate::rbac;
use crate::resources::{self, ResourceType};
use crate::status::ApiError;
use crate::store::Store;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// How requests are authorized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Authorization {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// The stored Roles, ClusterRoles and bindings decide.
    Rbac,
}

/// Everything a request may touch.
pub struct State {
    pub store: Store,
    types: RwLock<Vec<Arc<ResourceType>>>,
    pub users: Users,
    pub authorization: Authorization,
    /// Webhook services resolved to local addresses: (namespace, name).
    services: HashMap<(String, String), std::net::SocketAddr>,
    pub bookmark_interval: Duration,
    /// Namespaces whose termination is running.
    pub terminating: Mutex<HashSet<String>>,
    /// Namespaces to terminate, for the namespace controller: a write
    /// queues them rather than calling the controller, which writes too.
    pub terminations: mpsc::UnboundedSender<String>,
    /// Wakes the garbage collector after a write.
    pub gc: Notify,
    pub faults: Faults,
    /// Bumped by `/debug/compact`: open watches end, so that clients resume
    /// from a compacted resourceVersion and must relist.
    pub compactions: tokio::sync::watch::Sender<u64>,
    /// RBAC's decisions, kept until an RBAC object changes: every request
    /// and every policy's `authorizer` asks, and walking every binding was
    /// much of what a write cost.
    decisions: Mutex<Decisions>,
    /// The connections admission keeps open to webhooks.
    pub webhook_connections: crate::webhook::Connections,
    /// What the policies' expressions read of a request's objects, at the
    /// version of the policies it was found for.
    policy_reads: Mutex<(u64, Arc<ObjectReads>)>,
}

/// Decisions by request, made at one version of the RBAC objects.
#[derive(Default)]
struct Decisions {
    version: u64,
    by_request: HashMap<DecisionKey, (rbac::Decision, String)>,
}

/// What [`rbac::Rbac::decide`] reads of a request.
type DecisionKey = (String, Vec<String>, [String; 7], bool);

/// The name under which a decision that holds for every object name is
/// kept; no object is named so.
const EVERY_NAME: &str = "\0";

/// Requests whose decisions are kept; past it they are forgotten, so that
/// requests for ever new names cannot grow the memory without bound.
const DECISIONS_KEPT: usize = 16_384;

/// The RBAC storages, whose changes void every decision.
const RBAC_STORAGES: [&str; 4] = [
    "roles",
    "rolebindings",
    "clusterroles",
    "clusterrolebindings",
];

impl State {
    pub fn new(
        users: Users,
        authorization: Authorization,
        services: HashMap<(String, String), std::net::SocketAddr>,
        bookmark_interval: Duration,
        terminations: mpsc::UnboundedSender<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store: Store::default(),
            types: RwLock::new(resources::builtins()),
            users,
            authorization,
            services,
            bookmark_interval,
            terminating: Default::default(),
            terminations,
            gc: Notify::new(),
            faults: Faults::default(),
            compactions: tokio::sync::watch::Sender::new(0),
            decisions: Mutex::default(),
            webhook_connections: Default::default(),
            policy_reads: Mutex::default(),
        })
    }

    /// What `policies` (the ValidatingAdmissionPolicies as of the change
    /// at `version`) read of a request's objects, found once per change of
    /// them.
    pub fn policy_reads(&self, version: u64, policies: &[serde_json::Value]) -> Arc<ObjectReads> {
        let mut cached = self.policy_reads.lock().unwrap_or_else(|p| p.into_inner());
        if cached.0 != version || version == 0 {
            *cached = (version, Arc::new(crate::policy::object_reads(policies)));
        }
        cached.1.clone()
    }

    /// The local address of a webhook's service, as configured.
    pub fn resolve_service(
        &self,
        namespace: &str,
        name: &str,
        _port: u16,
    ) -> Option<std::net::SocketAddr> {
        self.services
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }

    /// Whether `request` is allowed, per the authorization mode.
    pub fn authorize(&self, request: &rbac::Request<'_>) -> Result<(), ApiError> {
        if self.authorization == Authorization::AlwaysAllow {
            return Ok(());
        }
        match self.decide(request).0 {
            rbac::Decision::Allow { .. } => Ok(()),
            rbac::Decision::Deny => Err(ApiError::rbac_forbidden(request)),
        }
    }

    /// The authorizer's answer to `request`, with kube's reason, for the
    /// CEL `authorizer` of policies.
    pub fn access(&self, request: &rbac::Request<'_>) -> crate::authorizer::Verdict {
        if self.authorization == Authorization::AlwaysAllow {
            return crate::authorizer::Verdict {
                allowed: true,
                reason: String::new(),
            };
        }
        match self.decide(request) {
            (rbac::Decision::Allow { reason }, _) => crate::authorizer::Verdict {
                allowed: true,
                reason,
            },
            (rbac::Decision::Deny, reason) => crate::authorizer::Verdict {
                allowed: false,
                reason,
            },
        }
    }

    /// RBAC's decision on `request`, and its reason (see
    /// [`rbac::Rbac::decide`]), remembered while the RBAC objects stay as
    /// they are.
    fn decide(&self, request: &rbac::Request<'_>) -> (rbac::Decision, String) {
        let version = {
            let txn = self.store.lock();
            RBAC_STORAGES
                .iter()
                .map(|plural| txn.changed_at(&(RBAC_GROUP.to_owned(), (*plural).to_owned())))
                .max()
                .unwrap_or(0)
        };
        // A resource request's path only repeats its other attributes.
        let path = if request.resource_request {
            ""
        } else {
            request.path
        };
        let key = |name: &str| -> DecisionKey {
            (
                request.user.username.clone(),
                request.user.groups.clone(),
                [
                    request.verb,
                    request.api_group,
                    request.resource,
                    request.subresource,
                    request.namespace,
                    name,
                    path,
                ]
                .map(str::to_owned),
                request.resource_request,
            )
        };
        {
            let decisions = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
            if decisions.version == version
                && let Some(decision) = decisions
                    .by_request
                    .get(&key(EVERY_NAME))
                    .or_else(|| decisions.by_request.get(&key(request.name)))
            {
                return decision.clone();
            }
        }
        // Decided from objects at least as new as `version`: a change in
        // between only bumps the version again, and the next ask decides anew.
        let (decision, reason, every_name) = self.with_rbac(|rbac| rbac.decide_by_name(request));
        let decision = (decision, reason);
        let mut decisions = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        if decisions.version != version || decisions.by_request.len() >= DECISIONS_KEPT {
            decisions.by_request.clear();
            decisions.version = version;
        }
        let name = if every_name { EVERY_NAME } else { request.name };
        decisions.by_request.insert(key(name), decision.clone());
        decision
    }

    /// Runs `f` on the stored RBAC objects.
    pub fn with_rbac<T>(&self, f: impl FnOnce(&rbac::Rbac<'_>) -> T) -> T {
        let txn = self.store.lock();
        let all =
            |plural: &str| txn.all(&("rbac.authorization.k8s.io".to_owned(), plural.to_owned()));
        let (roles, role_bindings, cluster_roles, cluster_role_bindings) = (
            all("roles"),
            all("rolebindings"),
            all("clusterroles"),
            all("clusterrolebindings"),
        );
        drop(txn);
        f(&rbac::Rbac {
            roles: &roles,
            role_bindings: &role_bindings,
            cluster_roles: &cluster_roles,
            cluster_role_bindings: &cluster_role_bindings,
        })
    }

    /// Every served resource type.
    pub fn types(&self) -> Vec<Arc<ResourceType>> {
        self.types.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Replaces the types a CRD registered (none, when it is deleted).
    pub fn set_crd_types(&self, crd: &str, new: Vec<ResourceType>) {
        let mut types = self.types.write().unwrap_or_else(|p| p.into_inner());
        types.retain(|t| t.crd.as_deref() != Some(crd));
        types.extend(new.into_iter().map(Arc::new));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::attributes::UserInfo;

    fn state() -> Arc<State> {
        State::new(
            Users::load("admin", None).expect("users"),
            Authorization::Rbac,
            HashMap::new(),
            Duration::from_secs(60),
            mpsc::unbounded_channel().0,
        )
    }

    fn put(state: &State, plural: &str, namespace: &str, object: serde_json::Value) {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        state.store.lock().put(
            (RBAC_GROUP.to_owned(), plural.to_owned()),
            (namespace.to_owned(), name),
            object,
        );
    }

    /// Binds the user alice to the Role `read` of namespace `team`.
    fn bind_alice_to_read(state: &State) {
        put(
            state,
            "rolebindings",
            "team",
            json!({"metadata": {"name": "alice-reads", "namespace": "team"},
                   "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "read"},
                   "subjects": [{"kind": "User", "name": "alice"}]}),
        );
    }

    #[test]
    fn a_remembered_decision_is_dropped_when_rbac_changes() {
        let state = state();
        let alice = UserInfo {
            username: "alice".into(),
            ..Default::default()
        };
        let request = rbac::Request {
            user: &alice,
            verb: "get",
            resource_request: true,
            api_group: "",
            resource: "configmaps",
            subresource: "",
            namespace: "team",
            name: "settings",
            path: "",
        };
        let allowed = |state: &State| state.authorize(&request).is_ok();
        assert!(!allowed(&state));
        put(
            &state,
            "roles",
            "team",
            json!({"metadata": {"name": "read", "namespace": "team"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        );
        assert!(!allowed(&state), "a role alone grants nothing");
        bind_alice_to_read(&state);
        assert!(allowed(&state));
        assert!(allowed(&state), "and again, from what was remembered");
        state.store.lock().remove(
            (RBAC_GROUP.to_owned(), "rolebindings".to_owned()),
            ("team".to_owned(), "alice-reads".to_owned()),
            json!({}),
        );
        assert!(!allowed(&state), "the binding is gone");
    }

    #[test]
    fn a_decision_is_kept_for_every_name_only_when_no_rule_names_objects() {
        let state = state();
        let alice = UserInfo {
            username: "alice".into(),
            ..Default::default()
        };
        let get = |verb: &'static str, name: &'static str| rbac::Request {
            user: &alice,
            verb,
            resource_request: true,
            api_group: "",
            resource: "configmaps",
            subresource: "",
            namespace: "team",
            name,
            path: "",
        };
        put(
            &state,
            "roles",
            "team",
            json!({"metadata": {"name": "read", "namespace": "team"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                 "resourceNames": ["settings"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
            ]}),
        );
        bind_alice_to_read(&state);
        let allowed = |request: rbac::Request<'_>| state.authorize(&request).is_ok();
        assert!(allowed(get("get", "settings")));
        assert!(
            !allowed(get("get", "secrets-copy")),
            "the grant named one ConfigMap"
        );
        assert!(allowed(get("get", "settings")), "and again, remembered");
        assert!(allowed(get("list", "a")));
        assert!(allowed(get("list", "b")));
        let kept = state.decisions.lock().unwrap().by_request.len();
        assert_eq!(
            kept, 3,
            "two decisions by name for get, one for every name for list"
        );
    }
}
