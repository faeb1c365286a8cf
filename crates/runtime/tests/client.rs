//! The runtime's Kubernetes client against the dev API server, which offers
//! HTTP/2 as kube-apiserver does.

use k8s_openapi::api::core::v1::Namespace;
use kube::config::Kubeconfig;
use kube::{Api, Client, Config};
use navique_testkit::DevApiServer;

async fn config(server: &DevApiServer) -> Config {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = Kubeconfig::read_from(server.kubeconfig()).expect("kubeconfig");
    Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config")
}

/// This process's established TCP connections to `port`.
fn connections_to(port: u16) -> usize {
    let mut entries = procfs::net::tcp().expect("tcp");
    entries.extend(procfs::net::tcp6().expect("tcp6"));
    let ours: std::collections::HashSet<u64> = procfs::process::Process::myself()
        .and_then(|me| me.fd())
        .expect("fds")
        .filter_map(|fd| match fd.ok()?.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    entries
        .iter()
        .filter(|e| {
            e.state == procfs::net::TcpState::Established
                && e.remote_address.port() == port
                && ours.contains(&e.inode)
        })
        .count()
}

/// 32 lists at once, then the connections they left open.
async fn connections_after_a_burst(client: Client, port: u16) -> usize {
    let namespaces = Api::<Namespace>::all(client);
    let params = Default::default();
    let lists = (0..32).map(|_| namespaces.list(&params));
    futures::future::try_join_all(lists).await.expect("lists");
    connections_to(port)
}

#[tokio::test]
async fn requests_at_once_share_one_http2_connection() {
    let server = DevApiServer::start(&[]);
    let config = config(&server).await;
    let port = config.cluster_url.port_u16().expect("port");

    let client = navique_runtime::client::client(config.clone()).expect("client");
    assert_eq!(connections_after_a_burst(client.clone(), port).await, 1);
    drop(client);

    // kube's own client, for contrast: HTTP/1.1, one connection per
    // request in flight, all kept.
    let kube_default = Client::try_from(config).expect("client");
    assert!(connections_after_a_burst(kube_default, port).await > 1);
}
