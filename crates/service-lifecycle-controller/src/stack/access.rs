//! Who may see which pending approvals: the authentication and
//! authorisation of every `ApprovalEvents` call.
//!
//! - **Authentication**: the call carries the caller's own Kubernetes bearer
//!   token (`authorization: Bearer <token>` metadata), which a TokenReview,
//!   made with the controller's client, turns into a user (name, uid,
//!   groups, extra). No token, or one the API server does not authenticate:
//!   `Unauthenticated`. Authenticated tokens are remembered for
//!   [`TOKEN_TTL`], keyed by the token's SHA-256 (the token itself is never
//!   stored or logged).
//! - **Authorisation**: the caller sees a namespace's approvals when a
//!   SubjectAccessReview for that user allows `list` on
//!   `stacks.core.navique.com` in the namespace ([`VERB`], [`GROUP`],
//!   [`RESOURCE`]). Pending approvals are read from Stacks' status, so this
//!   shows nothing the caller could not list from the API server itself.
//!   A request for one namespace the caller may not list is
//!   `PermissionDenied`; a request for every namespace gets only the
//!   namespaces allowed, each checked as its approvals or events come up.
//!   Decisions are remembered for [`DECISION_TTL`], so a removed
//!   RoleBinding takes effect on an open stream within that time.
//! - **Fail closed**: a review that cannot be made refuses the call with
//!   `Unavailable` (an open stream ends with it), never lets it through.
//!
//! Without this the server would be an "unauthenticated inside" endpoint
//! (anyone on the pod network reads every Project's pending deletions) and a
//! "privileged deputy" (the controller reads every namespace with its own
//! ClusterRole and would hand that on to whoever asks).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use navique_api::grpc::approvals::v1::PendingApproval;
use sha2::{Digest, Sha256};
use tonic::Status;
use tonic::metadata::MetadataMap;

/// What a caller must be allowed to do in a namespace to see its approvals:
/// `list` `stacks.core.navique.com` there.
pub const VERB: &str = "list";
pub const GROUP: &str = "core.navique.com";
pub const RESOURCE: &str = "stacks";

/// How long an authenticated token is taken at its TokenReview's word.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long a SubjectAccessReview's answer is reused.
pub const DECISION_TTL: Duration = Duration::from_secs(10);
/// Entries kept per cache; beyond it, expired ones go, then all.
const CACHE_ENTRIES: usize = 10_000;

/// A user as a TokenReview names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A TokenReview's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenReviewed {
    Authenticated(Caller),
    /// Not authenticated, with the API server's error if it gave one.
    Refused(String),
}

/// A review that could not be made (the API server unreachable, the
/// controller not allowed to create reviews...).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReviewFailed(pub String);

/// The two reviews, made by the API server in production and by a fake in
/// tests.
#[tonic::async_trait]
pub trait Reviews: Send + Sync + 'static {
    /// A TokenReview of `token`.
    async fn review_token(&self, token: &str) -> Result<TokenReviewed, ReviewFailed>;
    /// A SubjectAccessReview: may `caller` do [`VERB`] on [`RESOURCE`] in
    /// `namespace`?
    async fn may_list_stacks(&self, caller: &Caller, namespace: &str)
    -> Result<bool, ReviewFailed>;
}

/// The reviews, asked of the API server with the controller's own client
/// (which needs `create` on `tokenreviews` and `subjectaccessreviews`).
pub struct KubeReviews(pub kube::Client);

#[tonic::async_trait]
impl Reviews for KubeReviews {
    async fn review_token(&self, token: &str) -> Result<TokenReviewed, ReviewFailed> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewFailed(format!("TokenReview: {}", navique_runtime::one_line(&e))))?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        Ok(match (status.authenticated, user.username) {
            (Some(true), Some(username)) if !username.is_empty() => {
                TokenReviewed::Authenticated(Caller {
                    username,
                    uid: user.uid.unwrap_or_default(),
                    groups: user.groups.unwrap_or_default(),
                    extra: user.extra.unwrap_or_default(),
                })
            }
            _ => TokenReviewed::Refused(status.error.unwrap_or_default()),
        })
    }

    async fn may_list_stacks(
        &self,
        caller: &Caller,
        namespace: &str,
    ) -> Result<bool, ReviewFailed> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.username.clone()),
                uid: Some(caller.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(caller.groups.clone()),
                extra: Some(caller.extra.clone()).filter(|e| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_owned()),
                    verb: Some(VERB.to_owned()),
                    group: Some(GROUP.to_owned()),
                    resource: Some(RESOURCE.to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                ReviewFailed(format!(
                    "SubjectAccessReview: {}",
                    navique_runtime::one_line(&e)
                ))
            })?;
        Ok(reviewed.status.is_some_and(|s| s.allowed))
    }
}

/// Answers that expire.
struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
    ttl: Duration,
}

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    fn new(ttl: Duration) -> Self {
        Self {
            entries: Mutex::default(),
            ttl,
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, value)| value.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

type TokenHash = [u8; 32];

/// The caller of one RPC, authenticated.
#[derive(Clone, Debug)]
pub struct Authenticated {
    token: TokenHash,
    pub caller: Caller,
}

/// The authentication and authorisation of ApprovalEvents calls.
#[derive(Clone)]
pub struct Access {
    reviews: Arc<dyn Reviews>,
    tokens: Arc<Cache<TokenHash, Caller>>,
    decisions: Arc<Cache<(TokenHash, String), bool>>,
}

impl Access {
    /// Reviews asked of the API server `client` talks to.
    pub fn new(client: kube::Client) -> Self {
        Self::with_reviews(KubeReviews(client))
    }

    pub fn with_reviews(reviews: impl Reviews) -> Self {
        Self {
            reviews: Arc::new(reviews),
            tokens: Arc::new(Cache::new(TOKEN_TTL)),
            decisions: Arc::new(Cache::new(DECISION_TTL)),
        }
    }

    /// The caller whose bearer token `metadata` carries.
    pub async fn authenticate(&self, metadata: &MetadataMap) -> Result<Authenticated, Status> {
        let token = bearer(metadata)?;
        let hash: TokenHash = Sha256::digest(token.as_bytes()).into();
        if let Some(caller) = self.tokens.get(&hash) {
            return Ok(Authenticated {
                token: hash,
                caller,
            });
        }
        match self.reviews.review_token(token).await {
            Ok(TokenReviewed::Authenticated(caller)) => {
                self.tokens.put(hash, caller.clone());
                Ok(Authenticated {
                    token: hash,
                    caller,
                })
            }
            Ok(TokenReviewed::Refused(error)) => {
                let why = if error.is_empty() {
                    String::new()
                } else {
                    format!(" ({error})")
                };
                Err(Status::unauthenticated(format!(
                    "the Kubernetes API server does not accept the bearer token{why}: send a current token of your kubeconfig's user"
                )))
            }
            Err(e) => Err(Status::unavailable(format!(
                "cannot check the caller's bearer token: {e}; try again"
            ))),
        }
    }

    /// Whether `who` may see the approvals of `namespace`.
    pub async fn may_see(&self, who: &Authenticated, namespace: &str) -> Result<bool, Status> {
        let key = (who.token, namespace.to_owned());
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(allowed);
        }
        let allowed = self
            .reviews
            .may_list_stacks(&who.caller, namespace)
            .await
            .map_err(|e| {
                Status::unavailable(format!(
                    "cannot check whether {} may see the approvals of namespace {namespace}: {e}; try again",
                    who.caller.username
                ))
            })?;
        tracing::debug!(user = %who.caller.username, namespace, allowed, "ApprovalEvents access");
        self.decisions.put(key, allowed);
        Ok(allowed)
    }

    /// `PermissionDenied` unless `who` may see the approvals of `namespace`.
    pub async fn require(&self, who: &Authenticated, namespace: &str) -> Result<(), Status> {
        if self.may_see(who, namespace).await? {
            Ok(())
        } else {
            Err(denied(who, namespace))
        }
    }

    /// The approvals of `approvals` that `who` may see, namespace by
    /// namespace.
    pub async fn visible(
        &self,
        who: &Authenticated,
        approvals: Vec<PendingApproval>,
    ) -> Result<Vec<PendingApproval>, Status> {
        let namespaces: BTreeSet<&str> = approvals.iter().filter_map(namespace_of).collect();
        let decisions = futures::future::join_all(
            namespaces
                .iter()
                .map(|ns| async move { self.may_see(who, ns).await.map(|ok| (*ns, ok)) }),
        )
        .await;
        let mut allowed = BTreeSet::new();
        for decision in decisions {
            if let (ns, true) = decision? {
                allowed.insert(ns.to_owned());
            }
        }
        Ok(approvals
            .into_iter()
            .filter(|a| namespace_of(a).is_some_and(|ns| allowed.contains(ns)))
            .collect())
    }
}

/// The Stack namespace of an approval; `None` (seen by no one) without one.
pub fn namespace_of(approval: &PendingApproval) -> Option<&str> {
    approval
        .stack
        .as_ref()
        .map(|s| s.namespace.as_str())
        .filter(|ns| !ns.is_empty())
}

/// The refusal for a namespace `who` may not list Stacks in, worded as
/// kube-apiserver words an RBAC refusal.
pub fn denied(who: &Authenticated, namespace: &str) -> Status {
    Status::permission_denied(format!(
        "User {:?} cannot {VERB} resource {RESOURCE:?} in API group {GROUP:?} in the namespace {namespace:?}: ApprovalEvents shows a namespace's approvals to whoever may list its Stacks",
        who.caller.username
    ))
}

/// The token of `authorization: Bearer <token>`.
fn bearer(metadata: &MetadataMap) -> Result<&str, Status> {
    const MISSING: &str = "ApprovalEvents needs the caller's Kubernetes bearer token: send `authorization: Bearer <token>` metadata (kubectl navique sends your kubeconfig's)";
    let value = metadata
        .get("authorization")
        .ok_or_else(|| Status::unauthenticated(MISSING))?
        .to_str()
        .map_err(|_| Status::unauthenticated(MISSING))?;
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => Err(Status::unauthenticated(MISSING)),
    }
}

/// `InvalidArgument` naming `field` unless `name` is empty or a valid
/// name: a namespace is an RFC 1123 label (at most 63 characters), any
/// other object name an RFC 1123 subdomain (at most 253).
pub fn valid_name(field: &str, name: &str, namespace: bool) -> Result<(), Status> {
    fn label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }
    let (max, valid, rule) = if namespace {
        (
            63,
            label(name),
            "a lowercase RFC 1123 label: lower case alphanumeric characters or '-', starting and ending with an alphanumeric character",
        )
    } else {
        (
            253,
            name.split('.').all(label),
            "a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character",
        )
    };
    if name.is_empty() || (name.len() <= max && valid) {
        return Ok(());
    }
    let shown: String = name.chars().take(80).collect();
    let problem = if name.len() > max {
        format!("must be no more than {max} characters")
    } else {
        format!("must be {rule}")
    };
    Err(Status::invalid_argument(format!(
        "{field}: Invalid value: {shown:?}: {problem}"
    )))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use navique_api::grpc::approvals::v1::StackRef;
    use tonic::Code;

    use super::*;

    /// Tokens `<user>-token`; `allowed` (user, namespace) pairs; counts the
    /// reviews made; `broken` fails them all.
    #[derive(Default)]
    pub(crate) struct Fake {
        users: Vec<&'static str>,
        allowed: Vec<(&'static str, &'static str)>,
        broken: bool,
        token_reviews: Arc<AtomicUsize>,
        access_reviews: Arc<AtomicUsize>,
    }

    #[tonic::async_trait]
    impl Reviews for Fake {
        async fn review_token(&self, token: &str) -> Result<TokenReviewed, ReviewFailed> {
            self.token_reviews.fetch_add(1, Ordering::SeqCst);
            if self.broken {
                return Err(ReviewFailed("connection refused".into()));
            }
            Ok(
                match self.users.iter().find(|u| format!("{u}-token") == token) {
                    Some(user) => TokenReviewed::Authenticated(Caller {
                        username: (*user).to_owned(),
                        groups: vec!["system:authenticated".into()],
                        ..Caller::default()
                    }),
                    None => TokenReviewed::Refused(String::new()),
                },
            )
        }

        async fn may_list_stacks(
            &self,
            caller: &Caller,
            namespace: &str,
        ) -> Result<bool, ReviewFailed> {
            self.access_reviews.fetch_add(1, Ordering::SeqCst);
            if self.broken {
                return Err(ReviewFailed("connection refused".into()));
            }
            Ok(self
                .allowed
                .iter()
                .any(|(u, ns)| *u == caller.username && *ns == namespace))
        }
    }

    /// carol may list Stacks in team-a; dave nowhere.
    pub(crate) fn fake() -> Fake {
        Fake {
            users: vec!["carol", "dave"],
            allowed: vec![("carol", "team-a")],
            ..Fake::default()
        }
    }

    pub(crate) fn metadata(value: Option<&str>) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        if let Some(value) = value {
            metadata.insert("authorization", value.parse().unwrap());
        }
        metadata
    }

    async fn caller(access: &Access, user: &str) -> Authenticated {
        access
            .authenticate(&metadata(Some(&format!("Bearer {user}-token"))))
            .await
            .unwrap()
    }

    fn approval(namespace: &str, stack: &str) -> PendingApproval {
        PendingApproval {
            stack: Some(StackRef {
                namespace: namespace.into(),
                name: stack.into(),
            }),
            ..PendingApproval::default()
        }
    }

    #[tokio::test]
    async fn no_token_or_an_unknown_one_is_unauthenticated() {
        let access = Access::with_reviews(fake());
        for value in [
            None,
            Some("Bearer "),
            Some("Basic Y2Fyb2w6eA=="),
            Some("carol-token"),
        ] {
            let status = access.authenticate(&metadata(value)).await.unwrap_err();
            assert_eq!(status.code(), Code::Unauthenticated, "{value:?}");
            assert!(status.message().contains("authorization: Bearer <token>"));
        }
        let status = access
            .authenticate(&metadata(Some("Bearer bogus")))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(
            status.message(),
            "the Kubernetes API server does not accept the bearer token: send a current token of your kubeconfig's user"
        );
        let carol = caller(&access, "carol").await;
        assert_eq!(carol.caller.username, "carol");
        // The scheme is case-insensitive, as kube-apiserver takes it.
        let again = access
            .authenticate(&metadata(Some("bearer carol-token")))
            .await
            .unwrap();
        assert_eq!(again.caller, carol.caller);
    }

    #[tokio::test]
    async fn authenticated_tokens_and_decisions_are_reused() {
        let fake = fake();
        let (tokens, reviews) = (fake.token_reviews.clone(), fake.access_reviews.clone());
        let access = Access::with_reviews(fake);
        let carol = caller(&access, "carol").await;
        caller(&access, "carol").await;
        assert_eq!(tokens.load(Ordering::SeqCst), 1, "one TokenReview");
        for _ in 0..2 {
            assert!(access.may_see(&carol, "team-a").await.unwrap());
            assert!(!access.may_see(&carol, "team-b").await.unwrap());
        }
        assert_eq!(
            reviews.load(Ordering::SeqCst),
            2,
            "one review per namespace"
        );
        // A refused token is asked about again: it may become valid.
        for _ in 0..2 {
            let _ = access.authenticate(&metadata(Some("Bearer bogus"))).await;
        }
        assert_eq!(tokens.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_viewer_of_one_namespace_sees_only_its_approvals() {
        let access = Access::with_reviews(fake());
        let carol = caller(&access, "carol").await;
        let all = vec![
            approval("team-a", "web"),
            approval("team-b", "web"),
            approval("team-a", "db"),
            approval("", "orphan"),
        ];
        let seen = access.visible(&carol, all.clone()).await.unwrap();
        assert_eq!(seen, [approval("team-a", "web"), approval("team-a", "db")]);
        access.require(&carol, "team-a").await.unwrap();
        let status = access.require(&carol, "team-b").await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied);
        assert_eq!(
            status.message(),
            "User \"carol\" cannot list resource \"stacks\" in API group \"core.navique.com\" in the namespace \"team-b\": ApprovalEvents shows a namespace's approvals to whoever may list its Stacks"
        );

        let dave = caller(&access, "dave").await;
        assert_eq!(access.visible(&dave, all).await.unwrap(), []);
        let status = access.require(&dave, "team-a").await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied);
    }

    #[tokio::test]
    async fn a_review_that_cannot_be_made_refuses_with_unavailable() {
        let access = Access::with_reviews(Fake {
            broken: true,
            ..fake()
        });
        let status = access
            .authenticate(&metadata(Some("Bearer carol-token")))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status.message(),
            "cannot check the caller's bearer token: connection refused; try again"
        );

        let carol = caller(&Access::with_reviews(fake()), "carol").await;
        let status = access
            .visible(&carol, vec![approval("team-a", "web")])
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status.message(),
            "cannot check whether carol may see the approvals of namespace team-a: connection refused; try again"
        );
        assert_eq!(
            access.require(&carol, "team-a").await.unwrap_err().code(),
            Code::Unavailable
        );
    }

    #[test]
    fn names_are_kubernetes_names() {
        for (name, namespace) in [
            ("", true),
            ("team-a", true),
            ("a", true),
            ("web.v2", false),
            (&"a".repeat(63), true),
            (&format!("{}.b", "a".repeat(63)), false),
        ] {
            valid_name("field", name, namespace).unwrap();
        }
        let message = |name: &str, namespace: bool| {
            let status = valid_name("namespace", name, namespace).unwrap_err();
            assert_eq!(status.code(), Code::InvalidArgument);
            status.message().to_owned()
        };
        assert_eq!(
            message("Team_A", true),
            "namespace: Invalid value: \"Team_A\": must be a lowercase RFC 1123 label: lower case alphanumeric characters or '-', starting and ending with an alphanumeric character"
        );
        assert_eq!(
            message(&"a".repeat(64), true),
            format!(
                "namespace: Invalid value: {:?}: must be no more than 63 characters",
                "a".repeat(64)
            )
        );
        assert!(message("web.v2", true).contains("RFC 1123 label"));
        assert!(message("-web", false).contains("RFC 1123 subdomain"));
        assert!(message(&"a".repeat(254), false).contains("no more than 253 characters"));
        assert!(message("a/b", false).contains("\"a/b\""));
    }
}
