//! The CEL `authorizer` variable of ValidatingAdmissionPolicies, as
//! kube-apiserver's authz library (`k8s.io/apiserver/pkg/cel/library/
//! authz.go`) offers it: checks of the request's user against the
//! authorizer, for any verb, custom verbs included:
//!
//! ```text
//! authorizer.group('core.navique.com').resource('locks')
//!     .namespace(request.namespace).name(request.name).check('suspend').allowed()
//! authorizer.path('/healthz').check('get').allowed()
//! ```
//!
//! `check` gives a decision with `allowed()`, `reason()`, `errored()` and
//! `error()`. Not offered: `authorizer.serviceAccount(...)`,
//! `authorizer.requestResource`, `fieldSelector`/`labelSelector` on a
//! resource check.

use std::fmt;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::Opaque;
use kube_cel::cel::{Context, ExecutionError, ResolveResult, Value as Cel};

/// One authorization question, for the request's user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    pub verb: String,
    /// A resource check (`group(...)`); `None` for a path check.
    pub group: Option<String>,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
}

/// The authorizer's answer: allowed, and the reason it gives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: String,
}

/// Answers [`Check`]s for one request's user.
pub type Authorize = Arc<dyn Fn(&Check) -> Verdict + Send + Sync>;

/// `authorizer`, or a check being built from it.
#[derive(Clone)]
struct Builder {
    authorize: Authorize,
    check: Check,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.check.fmt(f)
    }
}

impl PartialEq for Builder {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorize, &other.authorize) && self.check == other.check
    }
}

impl Eq for Builder {}

impl Opaque for Builder {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Authorizer"
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Decision(Verdict);

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The value of the `authorizer` variable.
pub fn value(authorize: Authorize) -> Cel {
    Cel::Opaque(Arc::new(Builder {
        authorize,
        check: Check::default(),
    }))
}

/// Registers the library's functions.
pub fn register(context: &mut Context<'static>) {
    context.add_function("group", |This(b): This<Cel>, g: Arc<String>| {
        with(&b, |c| c.group = Some(g.to_string()))
    });
    context.add_function("resource", |This(b): This<Cel>, r: Arc<String>| {
        with(&b, |c| c.resource = r.to_string())
    });
    context.add_function("subresource", |This(b): This<Cel>, s: Arc<String>| {
        with(&b, |c| c.subresource = s.to_string())
    });
    context.add_function("namespace", |This(b): This<Cel>, n: Arc<String>| {
        with(&b, |c| c.namespace = n.to_string())
    });
    context.add_function("name", |This(b): This<Cel>, n: Arc<String>| {
        with(&b, |c| c.name = n.to_string())
    });
    context.add_function("path", |This(b): This<Cel>, p: Arc<String>| {
        with(&b, |c| c.path = p.to_string())
    });
    context.add_function("check", check);
    context.add_function("allowed", |This(d): This<Cel>| {
        decision(&d).map(|d| Cel::Bool(d.allowed))
    });
    context.add_function("reason", |This(d): This<Cel>| {
        decision(&d).map(|d| Cel::String(Arc::new(d.reason.clone())))
    });
    // The dev server's authorizer (RBAC) never errs.
    context.add_function("errored", |This(d): This<Cel>| {
        decision(&d).map(|_| Cel::Bool(false))
    });
    context.add_function("error", |This(d): This<Cel>| {
        decision(&d).map(|_| Cel::String(Arc::new(String::new())))
    });
}

fn builder(value: &Cel) -> Result<&Builder, ExecutionError> {
    match value {
        Cel::Opaque(o) => o.downcast_ref::<Builder>(),
        _ => None,
    }
    .ok_or(ExecutionError::NoSuchOverload)
}

fn decision(value: &Cel) -> Result<&Verdict, ExecutionError> {
    match value {
        Cel::Opaque(o) => o.downcast_ref::<Decision>().map(|d| &d.0),
        _ => None,
    }
    .ok_or(ExecutionError::NoSuchOverload)
}

fn with(value: &Cel, change: impl FnOnce(&mut Check)) -> ResolveResult {
    let mut next = builder(value)?.clone();
    change(&mut next.check);
    Ok(Cel::Opaque(Arc::new(next)))
}

fn check(This(value): This<Cel>, verb: Arc<String>) -> ResolveResult {
    let builder = builder(&value)?;
    let check = Check {
        verb: verb.to_string(),
        ..builder.check.clone()
    };
    Ok(Cel::Opaque(Arc::new(Decision((builder.authorize)(&check)))))
}
