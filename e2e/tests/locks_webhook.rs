//! The Locks guide end to end with the guard in webhook mode: the real
//! lock-controller and webhook against the dev API server, driven by kubectl.

use std::sync::OnceLock;

use navique_e2e::lock_scenarios as scenario;
use navique_e2e::locks::{GuardMode, LockEnv};

fn env() -> &'static LockEnv {
    static ENV: OnceLock<LockEnv> = OnceLock::new();
    ENV.get_or_init(|| LockEnv::start(GuardMode::Webhook))
}

#[tokio::test]
async fn the_seed_example_is_refused_until_the_lock_goes() {
    scenario::the_seed_example(env()).await;
}

#[tokio::test]
async fn two_locks_both_protect_until_both_go() {
    scenario::two_locks_stack(env()).await;
}

#[tokio::test]
async fn missing_targets_activate_later_and_invalid_ones_stamp_nothing() {
    scenario::missing_and_invalid_targets(env()).await;
}

#[tokio::test]
async fn tampering_with_the_marker_is_refused_or_undone() {
    scenario::tampering_is_refused_or_undone(env()).await;
}

#[tokio::test]
async fn updates_pass_and_cascades_stop_at_the_lock() {
    scenario::updates_pass_and_cascades_stop_at_the_lock(env()).await;
}

#[tokio::test]
async fn namespaces_and_crds_with_locks_stay_and_the_label_lists_locked_objects() {
    scenario::namespaces_crds_and_the_label(env()).await;
}
