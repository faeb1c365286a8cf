//! Navique's API: the custom resource types of both API groups, the annotation,
//! label, finalizer, reason and message constants the seeds define, condition
//! helpers, and the gRPC contracts generated from `proto/`.
//!
//! This crate holds no runtime code: every component and test depends on it,
//! and it compiles and tests without a cluster.
#![forbid(unsafe_code)]
// `#[kube(printcolumn(..))]` repeats `type_ = "string"` once per column,
// which this lint mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod approvals;
pub mod conditions;
pub mod constants;
pub mod core;
pub mod crds;
pub mod duration;
pub mod grpc;
pub mod messages;
pub mod names;
pub mod quantity;
pub mod schema;
pub mod services;
pub mod sync_options;

mod error;
pub use error::Error;
