"""The official Python Kubernetes client against a cluster: creates, patches,
lists, watches and deletes a Service, a Deployment and a Job, and reads a
409's body. Prints one line per step; e2e/tests/dev_apiserver.rs compares
them, so any difference from kube-apiserver's answers shows.

Usage: python3 client_conformance.py KUBECONFIG NAMESPACE
"""

import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def watched(list_call, namespace, resource_version, wanted):
    """The first `wanted` event of a watch from `resource_version`."""
    stream = watch.Watch().stream(
        list_call, namespace, resource_version=resource_version, timeout_seconds=10
    )
    for event in stream:
        if event["type"] == wanted:
            return f"{event['type']} {event['object'].metadata.name}"
    return f"no {wanted} event"


def main(kubeconfig, namespace):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    batch = client.BatchV1Api()

    service = core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    port = service.spec.ports[0]
    print(f"service created: {port.protocol} {port.port}->{port.target_port} "
          f"loadBalancer={service.status.load_balancer.to_dict()}")
    patched = core.patch_namespaced_service(
        "web", namespace, {"metadata": {"labels": {"tier": "front"}}}
    )
    print(f"service patched: {sorted(patched.metadata.labels.items())}")
    listed = core.list_namespaced_service(namespace, label_selector="tier=front")
    print(f"services listed: {[s.metadata.name for s in listed.items]}")
    deleted = core.delete_namespaced_service("web", namespace)
    print(f"service deleted: {type(deleted).__name__} {deleted.metadata.name}")
    print(f"service watched: {watched(core.list_namespaced_service, namespace, listed.metadata.resource_version, 'DELETED')}")

    deployment = apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                },
            },
        },
    )
    print(f"deployment created: replicas={deployment.spec.replicas} "
          f"strategy={deployment.spec.strategy.type} "
          f"unavailable={deployment.status.unavailable_replicas}")
    listed = apps.list_namespaced_deployment(namespace)
    scaled = apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 3}})
    print(f"deployment patched: replicas={scaled.spec.replicas} generation={scaled.metadata.generation}")
    print(f"deployment watched: {watched(apps.list_namespaced_deployment, namespace, listed.metadata.resource_version, 'MODIFIED')}")
    print(f"deployments listed: {[d.metadata.name for d in apps.list_namespaced_deployment(namespace).items]}")
    status = apps.delete_namespaced_deployment("web", namespace)
    print(f"deployment deleted: {type(status).__name__} {status.status}")

    job = batch.create_namespaced_job(
        namespace,
        {
            "metadata": {"name": "once"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "once", "image": "busybox", "command": ["true"]}],
                    }
                }
            },
        },
    )
    print(f"job created: backoffLimit={job.spec.backoff_limit} active={job.status.active} "
          f"ready={job.status.ready}")
    listed = batch.list_namespaced_job(namespace)
    labelled = batch.patch_namespaced_job("once", namespace, {"metadata": {"labels": {"run": "1"}}})
    print(f"job patched: {labelled.metadata.labels}")
    print(f"job watched: {watched(batch.list_namespaced_job, namespace, listed.metadata.resource_version, 'MODIFIED')}")
    print(f"jobs listed: {[j.metadata.name for j in batch.list_namespaced_job(namespace).items]}")
    status = batch.delete_namespaced_job("once", namespace, propagation_policy="Background")
    print(f"job deleted: {type(status).__name__} {status.status}")

    body = {"metadata": {"name": "twice"}, "spec": {"ports": [{"port": 80}]}}
    core.create_namespaced_service(namespace, body)
    try:
        core.create_namespaced_service(namespace, body)
        print("second create: succeeded")
    except ApiException as error:
        print(f"second create: {error.status} {error.body!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
