//! Two replicas of a controller never reconcile at once: they elect a leader
//! through a Lease on the API server, the standby waits (ready, not
//! leading), and takes over as soon as the leader shuts down: the leader
//! releases the Lease and the standby, watching it, takes it within about a
//! second instead of waiting for it to expire.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use navique_e2e::{Process, cluster, eventually, free_port, http_get, wait_for_status};

const WAIT: Duration = Duration::from_secs(30);
/// Long enough that a takeover by expiry (at least `LEASE_GRACE` seconds
/// after the last renewal) is told apart from one on release.
const LEASE_DURATION: &str = "30";
const LEASE_GRACE: &str = "5";
/// How soon the standby leads once the leader has exited.
const TAKEOVER: Duration = Duration::from_secs(3);

fn start(namespace: &str, identity: &str) -> (SocketAddr, Process) {
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let process = Process::spawn(
        "lock-controller",
        &[
            "--kubeconfig",
            cluster().kubeconfig().to_str().unwrap(),
            "--admin-addr",
            &admin.to_string(),
            "--lease-namespace",
            namespace,
            "--lease-identity",
            identity,
            "--lease-duration",
            LEASE_DURATION,
            "--lease-grace",
            LEASE_GRACE,
        ],
    );
    (admin, process)
}

async fn leading(admin: SocketAddr) -> Option<bool> {
    let metrics = http_get(admin, "/metrics").await.ok()?;
    let line = metrics
        .body
        .lines()
        .find(|l| l.starts_with("navique_lock_controller_leader "))?;
    Some(line.ends_with(" 1"))
}

fn holder(namespace: &str) -> String {
    cluster().kubectl_ok(&[
        "get",
        "lease",
        "lock-controller",
        "-n",
        namespace,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_and_the_standby_takes_over_when_it_stops() {
    let ns = cluster().namespace("leader");
    let (admin_a, mut a) = start(&ns, "replica-a");
    let (admin_b, mut b) = start(&ns, "replica-b");
    wait_for_status(admin_a, "/readyz", 200, WAIT).await;
    wait_for_status(admin_b, "/readyz", 200, WAIT).await;

    let (leader_is_a, _) = eventually(WAIT, "one replica to lead", || async {
        let (a, b) = (leading(admin_a).await?, leading(admin_b).await?);
        (a != b).then_some((a, b))
    })
    .await;
    // Stays that way: the standby keeps waiting while the leader renews.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(leading(admin_a).await, Some(leader_is_a));
    assert_eq!(leading(admin_b).await, Some(!leader_is_a));
    let (leader, standby, standby_admin, standby_id) = if leader_is_a {
        (&mut a, &mut b, admin_b, "replica-b")
    } else {
        (&mut b, &mut a, admin_a, "replica-a")
    };
    assert_eq!(
        holder(&ns),
        if leader_is_a {
            "replica-a"
        } else {
            "replica-b"
        }
    );

    assert!(
        leader.terminate(Duration::from_secs(10)).success(),
        "{}",
        leader.stderr()
    );
    let exited = Instant::now();
    eventually(
        Duration::from_secs(10),
        "the standby to take over",
        || async { leading(standby_admin).await.filter(|l| *l) },
    )
    .await;
    let took = exited.elapsed();
    assert!(
        took < TAKEOVER,
        "the standby took over {took:?} after the leader exited; the released Lease should be taken within {TAKEOVER:?}:\n{}",
        standby.stderr()
    );
    assert_eq!(holder(&ns), standby_id);
    assert!(standby.terminate(Duration::from_secs(10)).success());
}
