//! `cd.hanzo.ai/sync-options`, read fail closed: the one parser of the
//! annotation, for Stacks, the operator's own deletes of engine objects and
//! the kubectl plugin's previews.
//!
//! Comma-separated `Key=Value` items, whitespace around items tolerated,
//! case-sensitive. `Prune` and `Delete` take exactly `confirm`, `false` or
//! `true`; Argo CD's options that do not concern removal
//! ([`crate::constants::sync_options::IGNORED`]) take `true` or `false` and are ignored.
//! Anything else (an unknown option, another case, an unknown value, an
//! empty item, another separator) is [`SyncOptions::Invalid`]: a resource
//! with such options is neither pruned nor deleted. A misspelt
//! `Prune=confirm` once meant "prune now" ("fail open").

use std::collections::BTreeMap;

use crate::constants::annotations;
use crate::constants::sync_options::{
    BOOLEAN_VALUES, CONFIRM, DELETE, FALSE, IGNORED, PRUNE, REMOVAL_VALUES, TRUE,
};
use crate::grpc::approvals::v1::Operation;
use crate::messages;

/// What a sync option allows for one kind of removal, least protective
/// first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gate {
    /// Removed without asking (`true`, or no option).
    #[default]
    Allow,
    /// Removed once approved with `cd.hanzo.ai/deletion-approved: "true"`.
    Confirm,
    /// Never removed by the operator (`false`).
    Never,
}

impl Gate {
    /// The gate a `Prune` or `Delete` value sets; `None` for any other.
    pub fn of(value: &str) -> Option<Self> {
        [Gate::Allow, Gate::Confirm, Gate::Never]
            .into_iter()
            .find(|gate| gate.value() == value)
    }

    /// The option's value that sets this gate: `true`, `confirm`, `false`.
    pub fn value(self) -> &'static str {
        match self {
            Gate::Allow => TRUE,
            Gate::Confirm => CONFIRM,
            Gate::Never => FALSE,
        }
    }
}

/// The removal gates the options set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gates {
    /// Removal when the resource leaves `spec.resources`.
    pub prune: Gate,
    /// Removal when the Stack is deleted.
    pub delete: Gate,
}

/// Why sync options are not understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The annotation is there, with nothing in it.
    Empty,
    /// Item `position` (from 1) is empty: `Prune=confirm,`.
    EmptyItem { position: usize },
    /// An item without `=`: `Prune`, `Prune:confirm`.
    NotKeyValue { item: String },
    /// An option this version does not know: `prune=confirm`.
    UnknownOption { key: String },
    /// A known option with a value it does not take: `Prune=Confirm`,
    /// `Prune=confirm;Delete=confirm`.
    UnknownValue {
        key: &'static str,
        value: String,
        accepted: &'static [&'static str],
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&match self {
            Problem::Empty => messages::SYNC_OPTIONS_EMPTY.to_owned(),
            Problem::EmptyItem { position } => messages::sync_options_empty_item(*position),
            Problem::NotKeyValue { item } => messages::sync_options_not_key_value(item),
            Problem::UnknownOption { key } => messages::sync_options_unknown_option(key),
            Problem::UnknownValue {
                key,
                value,
                accepted,
            } => messages::sync_options_unknown_value(key, value, accepted),
        })
    }
}

/// `Prune` or `Delete` given more than one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub key: &'static str,
    /// The values, in the order first given.
    pub values: Vec<Gate>,
    /// The most protective of them, which holds.
    pub holds: Gate,
}

/// A resource's `cd.hanzo.ai/sync-options`, as far as removal goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncOptions {
    /// Every item is an accepted option with an accepted value (or there
    /// is no annotation).
    Valid(Gates),
    /// Accepted options, but `Prune` or `Delete` given different values:
    /// the most protective of each holds, and the Stack warns.
    Conflicting(Gates, Vec<Conflict>),
    /// Not understood: the resource is neither pruned nor deleted.
    Invalid(Problem),
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions::Valid(Gates::default())
    }
}

impl SyncOptions {
    /// Reads the annotation's value; `None` is no annotation.
    pub fn parse(annotation: Option<&str>) -> Self {
        let Some(annotation) = annotation else {
            return Self::default();
        };
        if annotation.trim().is_empty() {
            return SyncOptions::Invalid(Problem::Empty);
        }
        let (mut prune, mut delete) = (Vec::new(), Vec::new());
        for (index, item) in annotation.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                return SyncOptions::Invalid(Problem::EmptyItem {
                    position: index + 1,
                });
            }
            let Some((key, value)) = item.split_once('=') else {
                return SyncOptions::Invalid(Problem::NotKeyValue { item: item.into() });
            };
            let (key, given) = match key {
                PRUNE => (PRUNE, Some(&mut prune)),
                DELETE => (DELETE, Some(&mut delete)),
                _ => match IGNORED.iter().find(|k| **k == key) {
                    Some(ignored) => (*ignored, None),
                    None => {
                        return SyncOptions::Invalid(Problem::UnknownOption { key: key.into() });
                    }
                },
            };
            let unknown_value = |accepted: &'static [&'static str]| {
                SyncOptions::Invalid(Problem::UnknownValue {
                    key,
                    value: value.into(),
                    accepted,
                })
            };
            match given {
                Some(given) => {
                    let Some(gate) = Gate::of(value) else {
                        return unknown_value(&REMOVAL_VALUES);
                    };
                    if !given.contains(&gate) {
                        given.push(gate);
                    }
                }
                None if BOOLEAN_VALUES.contains(&value) => {}
                None => return unknown_value(&BOOLEAN_VALUES),
            }
        }
        let mut conflicts = Vec::new();
        let mut holds = |key: &'static str, values: Vec<Gate>| {
            let holds = values.iter().copied().max().unwrap_or_default();
            if values.len() > 1 {
                conflicts.push(Conflict { key, values, holds });
            }
            holds
        };
        let gates = Gates {
            prune: holds(PRUNE, prune),
            delete: holds(DELETE, delete),
        };
        if conflicts.is_empty() {
            SyncOptions::Valid(gates)
        } else {
            SyncOptions::Conflicting(gates, conflicts)
        }
    }

    /// The options an object carries.
    pub fn of(metadata_annotations: Option<&BTreeMap<String, String>>) -> Self {
        Self::parse(value(metadata_annotations))
    }

    /// The gate of a prune or a delete; `None` when the options are not
    /// understood: the resource is held.
    pub fn gate(&self, operation: Operation) -> Option<Gate> {
        let gates = match self {
            SyncOptions::Valid(gates) | SyncOptions::Conflicting(gates, _) => gates,
            SyncOptions::Invalid(_) => return None,
        };
        Some(if operation == Operation::Prune {
            gates.prune
        } else {
            gates.delete
        })
    }

    /// What is wrong with options whose value is `annotation`, for the
    /// Stack's status and Events: why they are not understood, or which
    /// value holds where they conflict. `None` when nothing is.
    pub fn problem(&self, annotation: &str) -> Option<String> {
        match self {
            SyncOptions::Valid(_) => None,
            SyncOptions::Invalid(problem) => Some(messages::sync_options_invalid(
                annotation,
                &problem.to_string(),
            )),
            SyncOptions::Conflicting(_, conflicts) => Some(
                conflicts
                    .iter()
                    .map(|c| {
                        let values: Vec<&str> = c.values.iter().map(|g| g.value()).collect();
                        messages::sync_options_conflict(annotation, c.key, &values, c.holds.value())
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        }
    }
}

/// The value of an object's `cd.hanzo.ai/sync-options`.
pub fn value(metadata_annotations: Option<&BTreeMap<String, String>>) -> Option<&str> {
    metadata_annotations
        .and_then(|a| a.get(annotations::SYNC_OPTIONS))
        .map(String::as_str)
}
