//! Authentication: bearer tokens map to users and groups, and
//! `Impersonate-User` / `Impersonate-Group` / `Impersonate-Uid` /
//! `Impersonate-Extra-*` headers switch to another identity, as `kubectl
//! --as` sends them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::RwLock;

use http::HeaderMap;
use serde::Deserialize;

use crate::attributes::UserInfo;

/// The group every authenticated user is in.
const AUTHENTICATED: &str = "system:authenticated";

/// One token's identity, as written in the users file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct User {
    pub token: String,
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Deserialize)]
struct UsersFile {
    users: Vec<User>,
}

/// Tokens and the users they stand for.
pub struct Users(RwLock<HashMap<String, UserInfo>>);

impl Users {
    /// The admin behind `admin_token`, in `system:masters`, and the users
    /// of `file` (YAML: `users: [{token, name, uid?, groups?}]`).
    pub fn load(admin_token: &str, file: Option<&Path>) -> Result<Self, String> {
        let users = Self(RwLock::default());
        users.add(User {
            token: admin_token.to_owned(),
            name: "dev-admin".to_owned(),
            uid: String::new(),
            groups: vec!["system:masters".to_owned()],
        });
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read users file {}: {e}", path.display()))?;
            let parsed: UsersFile = serde_yaml::from_str(&text)
                .map_err(|e| format!("cannot parse users file {}: {e}", path.display()))?;
            for user in parsed.users {
                users.add(user);
            }
        }
        Ok(users)
    }

    /// Adds (or replaces) a token's user.
    pub fn add(&self, user: User) {
        let mut groups = user.groups;
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        let info = UserInfo {
            username: user.name,
            uid: user.uid,
            groups,
            extra: BTreeMap::new(),
        };
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user.token, info);
    }

    /// The user a request's bearer token names.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let token = headers
            .get(http::header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        self.user_of(token)
    }

    /// The user `token` stands for: what a request bearing it is
    /// authenticated as, and what a TokenReview of it answers.
    pub fn user_of(&self, token: &str) -> Option<UserInfo> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }
}

/// What a requester must be allowed to `impersonate` (kube-apiserver's
/// impersonation filter): `serviceaccounts` in the account's namespace for
/// `system:serviceaccount:<ns>:<name>`, `users` for another user name,
/// `groups` (API group ""), and `uids` and `userextras/<key>` (API group
/// `authentication.k8s.io`), each named.
#[derive(Debug, Clone, PartialEq)]
pub struct ImpersonationCheck {
    pub api_group: &'static str,
    pub resource: &'static str,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// The identity a request asks to act as, if it impersonates, and what
/// the requester must be allowed for it, in kube-apiserver's order (user,
/// groups, extras, uid). A ServiceAccount gets its groups
/// (`system:serviceaccounts`, `system:serviceaccounts:<ns>`) only when no
/// `Impersonate-Group` is given, as kube-apiserver does; every user but
/// `system:anonymous` gets `system:authenticated` without a check.
pub fn impersonated(headers: &HeaderMap) -> Option<(UserInfo, Vec<ImpersonationCheck>)> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let check = |resource, subresource: &str, namespace: &str, name: &str| ImpersonationCheck {
        api_group: match resource {
            "uids" | "userextras" => "authentication.k8s.io",
            _ => "",
        },
        resource,
        subresource: subresource.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    };
    let username = header("Impersonate-User")?.to_owned();
    let mut groups: Vec<String> = headers
        .get_all("Impersonate-Group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let groups_given = !groups.is_empty();
    let mut checks = Vec::new();
    match username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => {
            checks.push(check("serviceaccounts", "", namespace, name));
            if !groups_given {
                groups.push("system:serviceaccounts".to_owned());
                groups.push(format!("system:serviceaccounts:{namespace}"));
            }
        }
        None => checks.push(check("users", "", "", &username)),
    }
    if groups_given {
        checks.extend(groups.iter().map(|g| check("groups", "", "", g)));
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Ok(value) = value.to_str()
        {
            checks.push(check("userextras", key, "", value));
            extra
                .entry(key.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    let uid = header("Impersonate-Uid").unwrap_or_default().to_owned();
    if !uid.is_empty() {
        checks.push(check("uids", "", "", &uid));
    }
    if username != "system:anonymous" && !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.to_owned());
    }
    let user = UserInfo {
        username,
        uid,
        groups,
        extra,
    };
    Some((user, checks))
}

/// The identities kube-controller-manager's controllers act as.
pub fn controller(name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:kube-system:{name}"),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            "system:serviceaccounts:kube-system".to_owned(),
            AUTHENTICATED.to_owned(),
        ],
        extra: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_users_and_everyone_is_authenticated() {
        let users = Users::load("admin-token", None).unwrap();
        users.add(User {
            token: "alice-token".into(),
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["project-users".into()],
        });
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer alice-token".parse().unwrap(),
        );
        let alice = users.authenticate(&headers).unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.groups, ["project-users", "system:authenticated"]);
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer admin-token".parse().unwrap(),
        );
        assert_eq!(
            users.authenticate(&headers).unwrap().groups,
            ["system:masters", "system:authenticated"]
        );
        headers.insert(http::header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert_eq!(users.authenticate(&headers), None);
    }

    #[test]
    fn impersonating_a_service_account_is_checked_on_serviceaccounts_and_adds_its_groups() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "Impersonate-User",
            "system:serviceaccount:ns1:robot".parse().unwrap(),
        );
        let (user, checks) = impersonated(&headers).unwrap();
        assert_eq!(user.username, "system:serviceaccount:ns1:robot");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        assert_eq!(
            checks,
            [ImpersonationCheck {
                api_group: "",
                resource: "serviceaccounts",
                subresource: String::new(),
                namespace: "ns1".into(),
                name: "robot".into(),
            }]
        );
    }

    #[test]
    fn groups_given_replace_a_service_accounts_own_and_are_each_checked() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "Impersonate-User",
            "system:serviceaccount:ns1:robot".parse().unwrap(),
        );
        headers.append("Impersonate-Group", "extra-group".parse().unwrap());
        let (user, checks) = impersonated(&headers).unwrap();
        assert_eq!(user.groups, ["extra-group", "system:authenticated"]);
        let checked: Vec<_> = checks
            .iter()
            .map(|c| (c.resource, c.name.as_str()))
            .collect();
        assert_eq!(
            checked,
            [("serviceaccounts", "robot"), ("groups", "extra-group")]
        );
    }

    #[test]
    fn impersonating_a_user_is_checked_on_users_at_the_cluster_scope() {
        let mut headers = HeaderMap::new();
        headers.insert("Impersonate-User", "alice".parse().unwrap());
        headers.insert("Impersonate-Uid", "u-1".parse().unwrap());
        let (user, checks) = impersonated(&headers).unwrap();
        assert_eq!(user.groups, ["system:authenticated"]);
        let checked: Vec<_> = checks
            .iter()
            .map(|c| (c.resource, c.namespace.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(checked, [("users", "", "alice"), ("uids", "", "u-1")]);
    }
}
