//! Finding the cluster and connecting to it.

use std::path::Path;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

use crate::Error;

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

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
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|source| Error::Kubeconfig {
                path: "from $KUBECONFIG or ~/.kube/config".to_owned(),
                source,
            }),
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
    let mut delay = FIRST_RETRY;
    loop {
        match client.apiserver_version().await {
            Ok(version) => {
                tracing::info!(server = %cluster_url, version = %version.git_version, "connected to the Kubernetes API");
                return Ok(Some(client));
            }
            Err(e) => {
                failures.inc();
                tracing::warn!(server = %cluster_url, error = %e, retry_in = ?delay, "cannot reach the Kubernetes API");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(delay) => {}
        }
        delay = next_delay(delay);
    }
}

fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_up_to_the_cap() {
        assert_eq!(next_delay(FIRST_RETRY), Duration::from_secs(1));
        assert_eq!(next_delay(Duration::from_secs(20)), MAX_RETRY);
        assert_eq!(next_delay(MAX_RETRY), MAX_RETRY);
    }
}
