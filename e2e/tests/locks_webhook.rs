//! The Locks guide end to end with the guard in webhook mode: the real
//! lock-controller and webhook against the dev API server, driven by kubectl.

navique_e2e::lock_guard_tests!(navique_e2e::locks::GuardMode::Webhook);
