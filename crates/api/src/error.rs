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
}
