//! A request as the handlers see it: authenticated, its query parsed, its
//! body read, and, on a resource path, the resource it targets.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, Method, header};
use hyper::body::Bytes;

use crate::attributes::UserInfo;
use crate::resources::ResourceType;
use crate::store::ObjectKey;

/// The parsed query string.
pub type Query = HashMap<String, String>;

/// A request as the handlers see it.
pub struct Req {
    pub user: UserInfo,
    pub method: Method,
    pub path: String,
    pub query: Query,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Req {
    pub fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// Whether the client asked for a meta.k8s.io Table.
    /// A boolean parameter as Go's `strconv.ParseBool` reads it (the Python
    /// client sends `watch=True`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(
            self.param(name),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True")
        )
    }

    pub fn wants_table(&self) -> bool {
        self.header(header::ACCEPT).contains("as=Table")
    }

    /// `dryRun=All`.
    pub fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }
}

/// A request on one resource type, parsed from its path.
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    pub fn key(&self) -> ObjectKey {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
}
