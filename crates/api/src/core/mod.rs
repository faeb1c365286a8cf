//! `core.navique.com/v1alpha1`: Locks and Stacks.

mod lock;
mod stack;
pub mod suspension;

pub use lock::*;
pub use stack::*;
