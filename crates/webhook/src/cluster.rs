//! The [`Cluster`] the server uses: Namespaces (metadata only) and
//! ServicePlans kept in memory by kube-runtime reflectors, so that a
//! decision never waits for the API server. Until both caches have listed
//! once, every lookup is [`Unavailable`] and the request is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use navique_api::services::ServicePlan;
use navique_runtime::one_line;

use crate::services::{Cluster, Unavailable};

type NamespaceMeta = PartialObjectMeta<Namespace>;

/// The caches, readable from the validator.
pub struct ClusterCache {
    namespaces: Store<NamespaceMeta>,
    plans: Store<ServicePlan>,
    synced: AtomicBool,
}

/// What fills a [`ClusterCache`]: run it once a client is at hand.
pub struct CacheWatches {
    cache: Arc<ClusterCache>,
    namespaces: Writer<NamespaceMeta>,
    plans: Writer<ServicePlan>,
}

impl ClusterCache {
    /// Empty caches, and the watches that fill them.
    pub fn new() -> (Arc<Self>, CacheWatches) {
        let (namespaces_view, namespaces) = reflector::store();
        let (plans_view, plans) = reflector::store();
        let cache = Arc::new(Self {
            namespaces: namespaces_view,
            plans: plans_view,
            synced: AtomicBool::new(false),
        });
        let watches = CacheWatches {
            cache: cache.clone(),
            namespaces,
            plans,
        };
        (cache, watches)
    }

    /// Whether both caches have listed once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn check_synced(&self) -> Result<(), Unavailable> {
        if self.is_synced() {
            Ok(())
        } else {
            Err(Unavailable(
                "the webhook's caches of Namespaces and ServicePlans are not synced yet".to_owned(),
            ))
        }
    }
}

impl ClusterCache {
    /// The annotations of Namespace `namespace`; `None` when it is not in
    /// the cache.
    pub fn namespace_annotations(
        &self,
        namespace: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, Unavailable> {
        self.check_synced()?;
        Ok(self
            .namespaces
            .get(&ObjectRef::new(namespace))
            .map(|ns| ns.meta().annotations.clone().unwrap_or_default()))
    }
}

impl Cluster for ClusterCache {
    fn namespace_terminating(&self, namespace: &str) -> Result<bool, Unavailable> {
        self.check_synced()?;
        Ok(self
            .namespaces
            .get(&ObjectRef::new(namespace))
            .is_some_and(|ns| ns.meta().deletion_timestamp.is_some()))
    }

    fn plan(&self, name: &str) -> Result<Option<Arc<ServicePlan>>, Unavailable> {
        self.check_synced()?;
        Ok(self.plans.get(&ObjectRef::new(name)))
    }
}

impl CacheWatches {
    /// Watches until the watch streams end (never, short of being dropped);
    /// calls `on_synced` once both caches have listed.
    pub async fn run(self, client: Client, on_synced: impl FnOnce()) {
        let namespaces = watcher(
            Api::<NamespaceMeta>::all(client.clone()),
            Default::default(),
        )
        .default_backoff()
        .reflect(self.namespaces);
        let plans = watcher(Api::<ServicePlan>::all(client), Default::default())
            .default_backoff()
            .reflect(self.plans);
        let cache = self.cache;
        let synced = async {
            let namespaces = cache.namespaces.wait_until_ready();
            let plans = cache.plans.wait_until_ready();
            if let (Ok(()), Ok(())) = futures::join!(namespaces, plans) {
                cache.synced.store(true, Ordering::Release);
                tracing::info!("Namespace and ServicePlan caches synced");
                on_synced();
            }
        };
        futures::join!(
            drain(namespaces, "Namespace"),
            drain(plans, "ServicePlan"),
            synced
        );
    }
}

async fn drain<K>(stream: impl Stream<Item = Result<K, watcher::Error>>, kind: &'static str) {
    stream
        .for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(kind, error = %one_line(&e), "watch failed; retrying");
            }
        })
        .await;
}
