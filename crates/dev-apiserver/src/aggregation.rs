//! The ClusterRole aggregation controller: an aggregated ClusterRole
//! (`aggregationRule.clusterRoleSelectors`) gets, in its `rules`, the rules
//! of every ClusterRole its selectors match, as kube-controller-manager
//! writes them.

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::state::State;

const GROUP: &str = "rbac.authorization.k8s.io";

/// After a write: recomputes aggregated ClusterRoles when a ClusterRole
/// changed.
pub fn after_write(state: &State, rt: &ResourceType) {
    if rt.group != GROUP || rt.plural != "clusterroles" {
        return;
    }
    let storage = (GROUP.to_owned(), "clusterroles".to_owned());
    let mut txn = state.store.lock();
    let roles: Vec<Value> = txn
        .list(&storage, None, None)
        .map(|(_, o)| o.clone())
        .collect();
    for (name, rules) in crate::rbac::aggregate(&roles) {
        let key = (String::new(), name);
        if let Some(mut role) = txn.get(&storage, &key).cloned() {
            role["rules"] = rules;
            role["metadata"]["resourceVersion"] = json!(txn.next_rv().to_string());
            txn.put(storage.clone(), key, role);
        }
    }
}
