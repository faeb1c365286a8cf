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

/// The identity a request asks to act as, if it impersonates.
pub fn impersonated(headers: &HeaderMap) -> Option<UserInfo> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let username = header("Impersonate-User")?.to_owned();
    let mut groups: Vec<String> = headers
        .get_all("Impersonate-Group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    if let Some(rest) = username.strip_prefix("system:serviceaccount:")
        && let Some((namespace, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".to_owned());
        groups.push(format!("system:serviceaccounts:{namespace}"));
    }
    if username != "system:anonymous" && !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.to_owned());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Ok(value) = value.to_str()
        {
            extra
                .entry(key.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    Some(UserInfo {
        username,
        uid: header("Impersonate-Uid").unwrap_or_default().to_owned(),
        groups,
        extra,
    })
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
    fn impersonating_a_service_account_adds_its_groups() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "Impersonate-User",
            "system:serviceaccount:ns1:robot".parse().unwrap(),
        );
        headers.append("Impersonate-Group", "extra-group".parse().unwrap());
        let user = impersonated(&headers).unwrap();
        assert_eq!(user.username, "system:serviceaccount:ns1:robot");
        assert_eq!(
            user.groups,
            [
                "extra-group",
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
    }
}
