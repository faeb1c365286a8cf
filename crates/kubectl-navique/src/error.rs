/// What the plugin's pure parts refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An `approve` argument that is not `<kind>/<name>` (kubectl's wording).
    #[error("arguments in resource/name form must have a single resource and name: {0:?}")]
    ResourceName(String),
    /// No resource type of the server is called that (kubectl's wording).
    #[error("the server doesn't have a resource type \"{0}\"")]
    UnknownResourceType(String),
    /// The resource is not in any Stack's pending approvals of the namespace.
    #[error("{0} is not waiting for a deletion approval")]
    NotPending(String),
    /// The page's approval names an object other than the one now pending.
    #[error("{0} was replaced by another object since you confirmed; confirm again")]
    Replaced(String),
    /// The page sent an approval request this version cannot read.
    #[error("invalid approval request: {0}")]
    UiRequest(String),
    /// The page sent a preview request this version cannot read.
    #[error("invalid preview request: {0}")]
    PreviewRequest(String),
    /// The name matches pending resources of several API groups.
    #[error(
        "{target} names several pending resources ({candidates}); add the API group, e.g. {example}"
    )]
    Ambiguous {
        target: String,
        candidates: String,
        example: String,
    },
    /// The kubeconfig's user has no token-based credential for ApprovalEvents.
    #[error("ApprovalEvents needs a bearer token; {0}")]
    NoBearerToken(String),
    /// The kubeconfig's credential could not be obtained (token file, exec plugin).
    #[error("cannot get the kubeconfig user's token for ApprovalEvents: {0}")]
    Credentials(String),
    /// A result could not be printed as JSON.
    #[error("cannot print JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A result could not be printed as YAML.
    #[error("cannot print YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}
