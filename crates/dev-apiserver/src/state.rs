//! What every request and controller of this server shares: the store, the
//! served types, the users and how they are authorized, and the signals
//! that wake the controllers after a write.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::auth::Users;
use crate::faults::Faults;
use crate::rbac;
use crate::resources::{self, ResourceType};
use crate::status::ApiError;
use crate::store::Store;

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
}

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
        })
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
        match self.with_rbac(|rbac| rbac.authorize(request)) {
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
        match self.with_rbac(|rbac| rbac.decide(request)) {
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
