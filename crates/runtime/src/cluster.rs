//! Finding the cluster and connecting to it.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::Error;
use crate::retry::Backoff;

/// Loads the cluster configuration: the given kubeconfig, else the usual
/// search ($KUBECONFIG, ~/.kube/config, in-cluster).
pub(crate) async fn load_config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Config, Error> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| Error::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(kubeconfig_error)
        }
        None if context.is_some() => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|source| Error::Kubeconfig {
                    path: "from $KUBECONFIG or ~/.kube/config".to_owned(),
                    source,
                })
        }
        None => Config::infer().await.map_err(Error::InferConfig),
    }
}

/// Builds a client and waits until the API server answers, retrying with
/// exponential backoff. Returns `None` if shut down first.
pub(crate) async fn connect(
    config: Config,
    failures: &Counter,
    shutdown: &CancellationToken,
) -> Result<Option<Client>, Error> {
    let cluster_url = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|source| Error::Client {
        cluster_url: cluster_url.clone(),
        source,
    })?;
    let mut backoff = Backoff::new();
    async {
        loop {
            match client.apiserver_version().await {
                Ok(version) => {
                    tracing::info!(version = %version.git_version, "connected to the Kubernetes API");
                    return Ok(Some(client));
                }
                Err(e) => {
                    failures.inc();
                    let delay = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?delay, "cannot reach the Kubernetes API");
                    if !Backoff::sleep(delay, shutdown).await {
                        return Ok(None);
                    }
                }
            }
        }
    }
    .instrument(tracing::info_span!("connect", server = %cluster_url))
    .await
}
