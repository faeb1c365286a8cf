//! `cd.hanzo.ai/sync-options`, read fail closed: the parser lives in
//! `navique_api::sync_options` (the kubectl plugin's previews read the
//! options with it too); these tests pin what the Stacks and the engine
//! deletes make of it.

pub use navique_api::sync_options::*;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use navique_api::constants::sync_options::{BOOLEAN_VALUES, IGNORED, REMOVAL_VALUES};
    use navique_api::grpc::approvals::v1::Operation;
    use navique_api::messages;

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
