//! `cd.hanzo.ai/sync-options`, read fail closed: the one parser of the
//! annotation, for Stacks and for the operator's own deletes of engine
//! objects.
//!
//! Comma-separated `Key=Value` items, whitespace around items tolerated,
//! case-sensitive. `Prune` and `Delete` take exactly `confirm`, `false` or
//! `true`; Argo CD's options that do not concern removal
//! ([`sync_options::IGNORED`]) take `true` or `false` and are ignored.
//! Anything else (an unknown option, another case, an unknown value, an
//! empty item, another separator) is [`SyncOptions::Invalid`]: a resource
//! with such options is neither pruned nor deleted. A misspelt
//! `Prune=confirm` once meant "prune now" ("fail open").

use std::collections::BTreeMap;

use navique_api::constants::annotations;
use navique_api::constants::sync_options::{
    BOOLEAN_VALUES, CONFIRM, DELETE, FALSE, IGNORED, PRUNE, REMOVAL_VALUES, TRUE,
};
use navique_api::grpc::approvals::v1::Operation;
use navique_api::messages;

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
    fn of(value: &str) -> Option<Self> {
        [Gate::Allow, Gate::Confirm, Gate::Never]
            .into_iter()
            .find(|gate| gate.value() == value)
    }

    fn value(self) -> &'static str {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::stack::approvers::Approval;
    use crate::stack::plan::{self, Removal};

    fn gates(annotation: &str) -> Gates {
        match SyncOptions::parse(Some(annotation)) {
            SyncOptions::Valid(gates) => gates,
            other => panic!("{annotation:?}: {other:?}"),
        }
    }

    fn problem(annotation: &str) -> Problem {
        match SyncOptions::parse(Some(annotation)) {
            SyncOptions::Invalid(problem) => problem,
            other => panic!("{annotation:?}: {other:?}"),
        }
    }

    fn gate(prune: Gate, delete: Gate) -> Gates {
        Gates { prune, delete }
    }

    #[test]
    fn prune_and_delete_take_exactly_confirm_false_and_true() {
        use Gate::*;
        assert_eq!(gates("Prune=confirm"), gate(Confirm, Allow));
        assert_eq!(gates("Prune=false"), gate(Never, Allow));
        assert_eq!(gates("Prune=true"), gate(Allow, Allow));
        assert_eq!(gates("Delete=confirm"), gate(Allow, Confirm));
        assert_eq!(gates("Delete=false"), gate(Allow, Never));
        assert_eq!(
            gates("Prune=confirm,Delete=confirm"),
            gate(Confirm, Confirm)
        );
        assert_eq!(gates("Prune=false,Delete=true"), gate(Never, Allow));
    }

    #[test]
    fn no_annotation_allows_both_removals() {
        assert_eq!(
            SyncOptions::parse(None),
            SyncOptions::Valid(Gates::default())
        );
        assert_eq!(
            SyncOptions::of(None).gate(Operation::Prune),
            Some(Gate::Allow)
        );
    }

    #[test]
    fn whitespace_around_items_is_tolerated() {
        assert_eq!(
            gates("  Prune=confirm ,\tDelete=false  "),
            gate(Gate::Confirm, Gate::Never)
        );
    }

    #[test]
    fn argo_cd_options_that_do_not_concern_removal_are_accepted_and_ignored() {
        for option in IGNORED {
            for value in BOOLEAN_VALUES {
                assert_eq!(
                    gates(&format!("{option}={value},Prune=confirm")),
                    gate(Gate::Confirm, Gate::Allow)
                );
            }
        }
        assert_eq!(
            gates("ServerSideApply=true,Validate=false,Validate=true"),
            Gates::default(),
            "conflicts of ignored options change nothing"
        );
        assert_eq!(
            problem("Validate=no"),
            Problem::UnknownValue {
                key: "Validate",
                value: "no".into(),
                accepted: &BOOLEAN_VALUES
            }
        );
    }

    /// Fail open: each of these once pruned at once.
    #[test]
    fn misspelt_wrong_case_and_unknown_values_are_not_understood() {
        let unknown_value = |key: &'static str, value: &str| Problem::UnknownValue {
            key,
            value: value.into(),
            accepted: &REMOVAL_VALUES,
        };
        assert_eq!(problem("Prune=Confirm"), unknown_value("Prune", "Confirm"));
        assert_eq!(problem("Prune=confrim"), unknown_value("Prune", "confrim"));
        assert_eq!(problem("Delete=TRUE"), unknown_value("Delete", "TRUE"));
        assert_eq!(problem("Prune="), unknown_value("Prune", ""));
        assert_eq!(
            problem("Prune=confirm;Delete=confirm"),
            unknown_value("Prune", "confirm;Delete=confirm")
        );
        assert_eq!(
            problem("Prune=confirm=true"),
            unknown_value("Prune", "confirm=true")
        );
        assert_eq!(
            problem("prune=confirm"),
            Problem::UnknownOption {
                key: "prune".into()
            }
        );
        assert_eq!(
            problem("Prune =confirm"),
            Problem::UnknownOption {
                key: "Prune ".into()
            }
        );
        assert_eq!(
            problem("PrunePropagationPolicy=orphan"),
            Problem::UnknownOption {
                key: "PrunePropagationPolicy".into()
            },
            "a removal option the Stack does not honour is not ignored"
        );
        assert_eq!(
            problem("Prune"),
            Problem::NotKeyValue {
                item: "Prune".into()
            }
        );
        assert_eq!(
            problem("Prune:confirm"),
            Problem::NotKeyValue {
                item: "Prune:confirm".into()
            }
        );
    }

    #[test]
    fn an_empty_value_or_item_is_not_understood() {
        assert_eq!(problem(""), Problem::Empty);
        assert_eq!(problem("  "), Problem::Empty);
        assert_eq!(
            problem("Prune=confirm,"),
            Problem::EmptyItem { position: 2 }
        );
        assert_eq!(
            problem(",Prune=confirm"),
            Problem::EmptyItem { position: 1 }
        );
        assert_eq!(
            problem("Prune=confirm,,Delete=confirm"),
            Problem::EmptyItem { position: 2 }
        );
    }

    #[test]
    fn options_not_understood_gate_no_removal() {
        let invalid = SyncOptions::parse(Some("Prune=Confirm"));
        assert_eq!(invalid.gate(Operation::Prune), None);
        assert_eq!(invalid.gate(Operation::Delete), None);
        assert_eq!(
            invalid.problem("Prune=Confirm").unwrap(),
            messages::sync_options_invalid(
                "Prune=Confirm",
                &messages::sync_options_unknown_value("Prune", "Confirm", &REMOVAL_VALUES)
            )
        );
    }

    #[test]
    fn conflicting_values_hold_the_most_protective_and_are_reported() {
        let options = SyncOptions::parse(Some("Delete=confirm,Prune=confirm,Prune=true"));
        let SyncOptions::Conflicting(held, conflicts) = &options else {
            panic!("{options:?}");
        };
        assert_eq!(*held, gate(Gate::Confirm, Gate::Confirm));
        assert_eq!(
            conflicts,
            &[Conflict {
                key: "Prune",
                values: vec![Gate::Confirm, Gate::Allow],
                holds: Gate::Confirm
            }]
        );
        assert_eq!(
            options
                .problem("Delete=confirm,Prune=confirm,Prune=true")
                .unwrap(),
            "cd.hanzo.ai/sync-options \"Delete=confirm,Prune=confirm,Prune=true\" gives Prune more than one value (confirm, true); the most protective, Prune=confirm, holds: give Prune once"
        );
        let options = SyncOptions::parse(Some("Prune=true,Prune=false,Prune=confirm"));
        assert_eq!(options.gate(Operation::Prune), Some(Gate::Never));
        assert_eq!(
            gates("Prune=confirm, Prune=confirm"),
            gate(Gate::Confirm, Gate::Allow),
            "the same value twice is no conflict"
        );
    }

    // --- Properties ---------------------------------------------------------

    /// The specification, written plainly: the items of `annotation` if
    /// every one is an accepted option with an accepted value.
    fn exactly_accepted(annotation: &str) -> Option<Vec<(&str, &str)>> {
        if annotation.trim().is_empty() {
            return None;
        }
        annotation
            .split(',')
            .map(|item| {
                let (key, value) = item.trim().split_once('=')?;
                let accepted = match key {
                    "Prune" | "Delete" => ["confirm", "false", "true"].contains(&value),
                    _ => IGNORED.contains(&key) && ["true", "false"].contains(&value),
                };
                accepted.then_some((key, value))
            })
            .collect()
    }

    /// Whether the specification lets `operation` go without approval.
    fn allows_unapproved(annotation: &str, operation: Operation) -> bool {
        let key = if operation == Operation::Prune {
            "Prune"
        } else {
            "Delete"
        };
        exactly_accepted(annotation)
            .is_some_and(|items| items.iter().all(|(k, v)| *k != key || *v == "true"))
    }

    fn word(known: &'static [&'static str]) -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(known).prop_map(str::to_owned),
            1 => proptest::sample::select(known).prop_map(|w| w.to_uppercase()),
            1 => proptest::sample::select(known).prop_map(|w| {
                let mut chars: Vec<char> = w.chars().collect();
                chars.reverse();
                chars.into_iter().collect()
            }),
            2 => "[A-Za-z;:=| ]{0,10}",
        ]
    }

    fn item() -> impl Strategy<Value = String> {
        const KEYS: &[&str] = &[
            "Prune",
            "Delete",
            "Validate",
            "ServerSideApply",
            "PruneLast",
            "prune",
        ];
        const VALUES: &[&str] = &["confirm", "false", "true", "Confirm", "confrim"];
        let space = prop_oneof![Just(""), Just(" "), Just("\t")];
        let equals = prop_oneof![6 => Just("="), 1 => Just(":"), 1 => Just(" = "), 1 => Just("")];
        (space.clone(), word(KEYS), equals, word(VALUES), space)
            .prop_map(|(a, key, eq, value, b)| format!("{a}{key}{eq}{value}{b}"))
    }

    fn annotation() -> impl Strategy<Value = String> {
        let separator =
            prop_oneof![6 => Just(","), 1 => Just(";"), 1 => Just(",,"), 1 => Just(" ")];
        proptest::collection::vec((item(), separator), 0..5).prop_map(|items| {
            let mut text = String::new();
            for (index, (item, separator)) in items.iter().enumerate() {
                if index > 0 {
                    text.push_str(separator);
                }
                text.push_str(item);
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Fail open, as a property: no sync-options string leads to a
        /// prune or delete without approval unless it is exactly accepted
        /// options that allow one.
        #[test]
        fn no_options_remove_without_approval_unless_exactly_accepted_ones_allow_it(
            annotation in annotation(),
        ) {
            let options = SyncOptions::parse(Some(&annotation));
            for operation in [Operation::Prune, Operation::Delete] {
                let gate = options.gate(operation);
                for approval in [Approval::Missing, Approval::Stale] {
                    if plan::removal(gate, approval) == Removal::Delete {
                        prop_assert!(
                            allows_unapproved(&annotation, operation),
                            "{annotation:?} removes ({operation:?}) without approval"
                        );
                    }
                }
                prop_assert_eq!(
                    gate.is_some(),
                    exactly_accepted(&annotation).is_some(),
                    "{:?} is understood only when exactly accepted", annotation
                );
            }
        }

        /// What is understood is what the specification says.
        #[test]
        fn understood_options_set_the_most_protective_value_given(
            annotation in annotation(),
        ) {
            let Some(items) = exactly_accepted(&annotation) else {
                return Ok(());
            };
            let options = SyncOptions::parse(Some(&annotation));
            for (operation, key) in [(Operation::Prune, "Prune"), (Operation::Delete, "Delete")] {
                let expected = items
                    .iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| Gate::of(v).unwrap())
                    .max()
                    .unwrap_or_default();
                prop_assert_eq!(options.gate(operation), Some(expected));
            }
        }
    }

    /// A fuzz-style run: random mutations of accepted options (bytes
    /// inserted, removed, replaced, case flipped) must never panic, must be
    /// understood only when exactly accepted, and must explain themselves
    /// in a message short enough for an Event.
    #[test]
    fn mutated_options_never_fail_open_and_always_explain_themselves() {
        const SEEDS: &[&str] = &[
            "Prune=confirm",
            "Delete=confirm,Prune=confirm",
            "Prune=false, ServerSideApply=true",
            "Delete=false,Validate=false,PruneLast=true",
        ];
        const ALPHABET: &[char] = &[
            ',', ';', '=', ' ', '\t', '\n', 'P', 'p', 'e', 'c', 'C', 'r', 'u', 'T', 'é', '€',
            '\u{200b}', '\u{0}', '"',
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for round in 0..20_000 {
            let mut chars: Vec<char> = SEEDS[round % SEEDS.len()].chars().collect();
            for _ in 0..=next(4) {
                let at = next(chars.len() + 1);
                match next(4) {
                    0 => chars.insert(at, ALPHABET[next(ALPHABET.len())]),
                    1 if at < chars.len() => {
                        chars.remove(at);
                    }
                    2 if at < chars.len() => chars[at] = ALPHABET[next(ALPHABET.len())],
                    _ if at < chars.len() => {
                        chars[at] = if chars[at].is_uppercase() {
                            chars[at].to_ascii_lowercase()
                        } else {
                            chars[at].to_ascii_uppercase()
                        }
                    }
                    _ => {}
                }
            }
            let annotation: String = chars.into_iter().collect();
            let options = SyncOptions::parse(Some(&annotation));
            for operation in [Operation::Prune, Operation::Delete] {
                assert_eq!(
                    options.gate(operation).is_some(),
                    exactly_accepted(&annotation).is_some(),
                    "{annotation:?}"
                );
                if options.gate(operation) == Some(Gate::Allow) {
                    assert!(allows_unapproved(&annotation, operation), "{annotation:?}");
                }
            }
            if let Some(problem) = options.problem(&annotation) {
                assert!(problem.len() < 900, "{annotation:?}: {problem}");
            }
        }
    }
}
