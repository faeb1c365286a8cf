//! What the integration tests share: navique_testkit's throwaway PostgreSQL
//! as the provider's server, started with `Auth::Scram` so that the tests
//! can tell a right password from a wrong one. [`cluster`] adds the dev API
//! server and the controllers.
#![allow(dead_code)]

pub mod cluster;

use std::collections::BTreeMap;

use navique_testkit::postgres::{ADMIN_PASSWORD, ADMIN_USER, Postgres};
use service_lifecycle_controller::postgres::{AdminConnection, Engine};

/// The throwaway server as the provider sees it.
pub trait Provider {
    /// The data of a provider admin Secret that logs in as `user`.
    fn secret(&self, user: &str, password: &str) -> BTreeMap<String, String>;

    /// The provider's engine, as the admin.
    fn engine(&self) -> Engine;
}

impl Provider for Postgres {
    fn secret(&self, user: &str, password: &str) -> BTreeMap<String, String> {
        [
            ("host", "127.0.0.1".to_owned()),
            ("port", self.port.to_string()),
            ("user", user.to_owned()),
            ("password", password.to_owned()),
            ("sslmode", "disable".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn engine(&self) -> Engine {
        Engine::new(AdminConnection::from_secret(&self.secret(ADMIN_USER, ADMIN_PASSWORD)).unwrap())
    }
}
