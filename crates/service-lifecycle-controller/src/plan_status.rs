//! A ServicePlan's status: its allowed deletion policies in words, for the
//! POLICIES column (a CRD column can only print the list as JSON).
//! Written only when it differs, so nothing is written at rest.

use std::convert::Infallible;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use navique_api::services::{ServicePlan, ServicePlanStatus};
use navique_runtime::controller::{ReconcileMetrics, Tracker, log_outcome};
use navique_runtime::{Component, Leadership};
use serde_json::json;

use crate::Error;
use crate::managed_service::objects::MANAGER;

pub struct Context {
    client: Client,
    tracker: Tracker<ServicePlan>,
    leadership: Leadership,
}

impl Context {
    pub fn new(client: Client, metrics: ReconcileMetrics, leadership: Leadership) -> Self {
        Self {
            client,
            tracker: Tracker::new(metrics),
            leadership,
        }
    }
}

/// `service_plan_reconciles_total` and `service_plan_reconcile_errors_total`.
pub fn register_metrics(component: &Component) -> ReconcileMetrics {
    ReconcileMetrics::register(component, "service_plan", "ServicePlan")
}

/// The status `plan` should have.
fn desired(plan: &ServicePlan) -> ServicePlanStatus {
    ServicePlanStatus {
        observed_generation: plan.metadata.generation,
        policies: Some(plan.spec.policies_summary()),
    }
}

pub async fn run(context: Context) -> Result<(), Infallible> {
    let token = context.leadership.token().clone();
    Controller::new(
        Api::<ServicePlan>::all(context.client.clone()),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(token.cancelled_owned())
    .run(reconcile, error_policy, Arc::new(context))
    .for_each(log_outcome)
    .await;
    Ok(())
}

async fn reconcile(plan: Arc<ServicePlan>, context: Arc<Context>) -> Result<Action, Error> {
    let work = async {
        let status = desired(&plan);
        if plan.status.as_ref() != Some(&status) {
            Api::<ServicePlan>::all(context.client.clone())
                .patch_status(
                    &plan.name_any(),
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(json!({
                        "apiVersion": "services.kube-dc.com/v1alpha1",
                        "kind": "ServicePlan",
                        "status": status,
                    })),
                )
                .await
                .map_err(|source| Error::WriteObjectStatus {
                    kind: "ServicePlan",
                    name: plan.name_any(),
                    source,
                })?;
        }
        Ok(Action::await_change())
    };
    context.tracker.reconcile(&plan, work).await
}

fn error_policy(plan: Arc<ServicePlan>, error: &Error, context: Arc<Context>) -> Action {
    context.tracker.failed(&plan, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use navique_api::services::ServicePlanSpec;

    #[test]
    fn the_status_says_the_policies_of_this_generation() {
        let spec: ServicePlanSpec = serde_json::from_value(json!({
            "classRef": {"name": "postgresql"},
            "allowedDeletionPolicies": ["Retain", "Delete"],
        }))
        .unwrap();
        let mut plan = ServicePlan::new("p", spec);
        plan.metadata.generation = Some(3);
        assert_eq!(
            desired(&plan),
            ServicePlanStatus {
                observed_generation: Some(3),
                policies: Some("Retain, Delete".into()),
            }
        );
    }
}
