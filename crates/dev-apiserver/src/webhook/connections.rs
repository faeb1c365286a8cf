//! HTTP/2 connections to webhooks kept open between calls, as
//! kube-apiserver's client keeps them: without them every admitted write
//! paid a TCP and TLS handshake on both ends, more than the review itself.
//!
//! A connection is reused only for the same target (a `service` or a
//! `url`), host, port and `caBundle`, so a changed configuration is
//! verified afresh; one the webhook closed is dropped when next asked for,
//! and one kept for a `caBundle` the target no longer uses when a
//! connection for the new one is kept.

use std::collections::HashMap;
use std::sync::Mutex;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;

pub type Sender = SendRequest<Full<Bytes>>;

/// What a connection was verified for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// Whether the target is a `service` (resolved by this server), not a
    /// `url`: the two may name the same `host:port`.
    pub service: bool,
    /// `host:port`, as the URL names it.
    pub authority: String,
    pub ca_bundle: Option<String>,
}

/// The open connections, one per [`Key`].
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Key, Sender>>,
}

impl Connections {
    /// An open connection for `key`, if one is kept.
    pub fn get(&self, key: &Key) -> Option<Sender> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        match open.get(key) {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            Some(_) => {
                open.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `sender` for `key`, dropping the connections that closed and
    /// those to the same target under another `caBundle` (rotated out).
    pub fn keep(&self, key: Key, sender: Sender) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|kept_key, kept| {
            let same_target =
                kept_key.service == key.service && kept_key.authority == key.authority;
            !kept.is_closed() && !same_target
        });
        open.insert(key, sender);
    }

    /// Stops reusing the connection for `key`.
    pub fn forget(&self, key: &Key) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.remove(key);
    }
}
