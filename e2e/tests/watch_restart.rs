//! A kube-rs Controller keeps reconciling when the API server drops its
//! watch history: its watch resumes from a compacted resourceVersion, gets
//! 410 Gone, and relists. In a test binary of its own because compaction
//! ends every open watch of the server.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use navique_e2e::{cluster, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_kube_rs_controller_reconciles_through_a_forced_watch_restart() {
    use futures::StreamExt;
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::watcher;
    use std::sync::Arc;

    if !cluster().is_dev() {
        eprintln!("not run: forcing a compaction needs the dev API server's /debug/compact");
        return;
    }

    let ns = cluster().namespace("controller");
    let client = cluster().client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    async fn reconcile(
        cm: Arc<ConfigMap>,
        api: Arc<Api<ConfigMap>>,
    ) -> Result<Action, kube::Error> {
        let name = cm.metadata.name.clone().unwrap();
        if cm
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("reconciled"))
        {
            let patch = json!({"metadata": {"annotations": {"reconciled": "yes"}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(Action::await_change())
    }
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(
            reconcile,
            |_, _: &kube::Error, _| Action::requeue(Duration::from_secs(1)),
            Arc::new(api.clone()),
        )
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    let create = |name: &str| {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        let api = api.clone();
        async move { api.create(&PostParams::default(), &cm).await.unwrap() }
    };
    let reconciled = |name: &'static str| {
        let api = api.clone();
        async move {
            eventually(WAIT, &format!("{name} to be reconciled"), || async {
                let cm = api.get(name).await.ok()?;
                cm.metadata
                    .annotations?
                    .contains_key("reconciled")
                    .then_some(())
            })
            .await
        }
    };
    create("before").await;
    reconciled("before").await;

    // Drop the server's history and end every watch: the controller's watch
    // resumes from a compacted resourceVersion, gets 410, and relists.
    let request = http::Request::post("/debug/compact")
        .body(Vec::new())
        .unwrap();
    let answer = client.request_text(request).await.unwrap();
    assert_eq!(answer, "compacted");
    create("after").await;
    reconciled("after").await;
    assert!(
        cluster()
            .dev_log()
            .contains("watch from a compacted resourceVersion: 410 Expired"),
        "the controller resumed its watch from before the compaction and got 410:\n{}",
        cluster().dev_log()
    );
    controller.abort();
}
