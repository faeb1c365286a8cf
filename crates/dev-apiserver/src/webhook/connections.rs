//! HTTP/2 connections to webhooks kept open between calls, as
//! kube-apiserver's client keeps them: without them every admitted write
//! paid a TCP and TLS handshake on both ends, more than the review itself.
//!
//! A connection is reused only for the same host, port and `caBundle`, so
//! a changed configuration is verified afresh; one the webhook closed is
//! dropped when next asked for.

use std::collections::HashMap;
use std::sync::Mutex;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;

pub type Sender = SendRequest<Full<Bytes>>;

/// What a connection was verified for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
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

    /// Keeps `sender` for `key`, dropping the connections that closed.
    pub fn keep(&self, key: Key, sender: Sender) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, kept| !kept.is_closed());
        open.insert(key, sender);
    }

    /// Stops reusing the connection for `key`.
    pub fn forget(&self, key: &Key) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.remove(key);
    }
}
