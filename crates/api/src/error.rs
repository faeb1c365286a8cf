/// Errors from this crate's helpers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRD could not be rendered as YAML.
    #[error("cannot render CRD {name} as YAML: {source}")]
    RenderCrd {
        name: String,
        #[source]
        source: serde_yaml::Error,
    },
    /// A duration field that does not hold a duration the API takes.
    #[error("{field}: {value:?} {problem}")]
    Duration {
        field: &'static str,
        value: String,
        problem: &'static str,
    },
    /// A quantity field that does not hold a quantity the API takes.
    #[error("{field}: {problem}, not {value:?}")]
    Quantity {
        field: &'static str,
        value: String,
        problem: &'static str,
    },
    /// A `postgresql.parameters` key that is not a setting name.
    #[error("spec.parameters.postgresql.parameters: {name:?} is not a PostgreSQL setting name")]
    SettingName { name: String },
}
