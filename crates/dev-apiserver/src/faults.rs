//! Faults tests inject through `POST /debug/faults`: delayed or failed
//! responses for chosen verbs and resources. `DELETE /debug/faults` clears
//! them and lets the delayed requests go on at once; `POST
//! /debug/drop-watches` ends every open watch.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use crate::status::ApiError;

/// One fault rule; unset fields match anything.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fault {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: Option<String>,
    pub group: Option<String>,
    pub resource: Option<String>,
    /// `status`, `scale`, ...; `""` matches the main resource only.
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// The requesting user's name, so that a test can fail one component's
    /// requests while its own go through.
    pub user: Option<String>,
    /// Answer after this delay.
    #[serde(default)]
    pub delay_ms: u64,
    /// Fail with this HTTP code (500, 503, 429, ...); without it, only delay.
    pub code: Option<u16>,
    pub message: Option<String>,
    /// How many requests it applies to; unset: until cleared.
    pub times: Option<u32>,
}

#[derive(Deserialize)]
pub struct FaultList {
    pub faults: Vec<Fault>,
}

/// The request as fault rules see it.
pub struct Target<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub user: &'a str,
}

/// The fault rules in force; the first that matches a request applies.
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    /// Counts the clears, which end the delays under way: a test can hold
    /// requests back for long and let them go once it has seen enough.
    clears: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::default(),
            clears: watch::Sender::new(0),
        }
    }
}

impl Faults {
    pub fn add(&self, faults: Vec<Fault>) {
        self.rules().extend(faults);
    }

    pub fn clear(&self) {
        let mut rules = self.rules();
        rules.clear();
        // Under the rules' lock, so that a request that matched a rule
        // before has subscribed and sees it.
        self.clears.send_modify(|n| *n += 1);
    }

    fn rules(&self) -> MutexGuard<'_, Vec<Fault>> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the request meets: a delay, then maybe an error.
pub async fn inject(faults: &Faults, target: Target<'_>) -> Result<(), ApiError> {
    let Target {
        verb,
        group,
        resource,
        subresource,
        namespace,
        user,
    } = target;
    let (fault, mut clears) = {
        let mut rules = faults.rules();
        let matches = |f: &Fault| {
            f.verb.as_deref().is_none_or(|v| v == verb)
                && f.group.as_deref().is_none_or(|g| g == group)
                && f.resource.as_deref().is_none_or(|r| r == resource)
                && f.subresource.as_deref().is_none_or(|s| s == subresource)
                && f.namespace.as_deref().is_none_or(|n| n == namespace)
                && f.user.as_deref().is_none_or(|u| u == user)
        };
        let Some(index) = rules.iter().position(matches) else {
            return Ok(());
        };
        let fault = rules[index].clone();
        if let Some(times) = &mut rules[index].times {
            *times = times.saturating_sub(1);
            if *times == 0 {
                rules.remove(index);
            }
        }
        (fault, faults.clears.subscribe())
    };
    if fault.delay_ms > 0 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(fault.delay_ms)) => {}
            _ = clears.changed() => {}
        }
    }
    match fault.code {
        None => Ok(()),
        Some(code) => {
            let reason = match code {
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                409 => "Conflict",
                _ => "InternalError",
            };
            let message = fault
                .message
                .unwrap_or_else(|| format!("injected fault: {verb} {resource}"));
            Err(ApiError {
                code,
                body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get_secrets() -> Target<'static> {
        Target {
            verb: "get",
            group: "",
            resource: "secrets",
            subresource: "",
            namespace: "forge",
            user: "alice",
        }
    }

    #[tokio::test]
    async fn a_clear_lets_the_delayed_requests_go_at_once() {
        let faults = std::sync::Arc::new(Faults::default());
        let rule: Fault = serde_json::from_value(json!({
            "verb": "get", "resource": "secrets", "delayMs": 3_600_000, "code": 503,
        }))
        .expect("fault");
        faults.add(vec![rule]);
        let held = tokio::spawn({
            let faults = faults.clone();
            async move { inject(&faults, get_secrets()).await }
        });
        // Until the clear, the request waits.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!held.is_finished());
        faults.clear();
        let result = tokio::time::timeout(Duration::from_secs(10), held)
            .await
            .expect("released by the clear")
            .expect("task");
        // It goes on as the rule said, and later requests meet no rule.
        assert_eq!(result.expect_err("the rule's failure").code, 503);
        assert!(inject(&faults, get_secrets()).await.is_ok());
    }
}
