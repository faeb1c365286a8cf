//! What deleting a ManagedService does: the pure decision lives in
//! `navique_api::services::deletion`, so that the kubectl plugin's
//! `preview delete` predicts exactly what this controller decides.

pub use navique_api::services::deletion::*;
