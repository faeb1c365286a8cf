//! The ManagedService controller: provisioning and the deletion-policy
//! machine. `reconcile` gathers what is known, `deletion` and `service`
//! decide (pure), and `objects`, `instance`, `engine` and `final_backup`
//! carry out the step; `schedule` records scheduled backups.

pub mod deletion;
pub mod engine;
pub mod final_backup;
pub mod instance;
pub mod objects;
pub mod reconcile;
pub mod schedule;
pub mod service;
