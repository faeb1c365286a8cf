#!/usr/bin/env bash
# Runs Navique on a real cluster: creates a kind cluster, builds the images
# (`make images`), loads them, installs the chart with the pinned helm exactly
# as a platform team would, waits for every component to be available, then
# runs the end-to-end tests that target a given cluster
# (NAVIQUE_E2E_KUBECONFIG) and the seeds' Lock and approval flows with kubectl.
#
# Needs docker and kind on PATH (not installed by `make setup`: neither runs
# on the project's build machines). KIND_CLUSTER names the cluster (default
# navique-e2e); KEEP_CLUSTER=1 keeps it afterwards.
#
# The component-level suites (services, backups, Stacks, restarts) start the
# binaries themselves and inject API faults, which only the dev API server
# offers; they run in `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cluster=${KIND_CLUSTER:-navique-e2e}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)

for tool in docker kind; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is not on PATH" >&2; exit 1; }
done
scripts/tools.sh >/dev/null
export PATH="$root/.tools/bin:$PATH"

if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --wait 120s
fi
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"; [[ ${KEEP_CLUSTER:-0} == 1 ]] || kind delete cluster --name "$cluster"' EXIT
kind get kubeconfig --name "$cluster" >"$kubeconfig"
export KUBECONFIG=$kubeconfig

make images VERSION="$version"
for image in lock-controller webhook service-lifecycle-controller backup-runner; do
  kind load docker-image --name "$cluster" "navique/$image:$version"
done

# The install section of the README, with the images just built.
helm upgrade --install navique charts/navique --namespace navique-system --create-namespace \
  --set "lockController.image.tag=$version,webhook.image.tag=$version" \
  --set "serviceLifecycleController.image.tag=$version,backupRunner.image.tag=$version" \
  --wait --timeout 5m
kubectl -n navique-system wait --for condition=available deployment --all --timeout 300s

# The seed flows against the installed operator.
ns=navique-e2e-$RANDOM
kubectl create namespace "$ns"
sed "s/namespace: forge/namespace: $ns/" deploy/examples/forge-stack-account.yaml | kubectl apply -f -
sed "s/namespace: forge/namespace: $ns/" deploy/examples/forge-stack.yaml | kubectl apply -f -
sed "s/namespace: forge/namespace: $ns/" deploy/examples/lock.yaml | kubectl apply -f -
kubectl wait --for=jsonpath='{.status.active}'=true lock/protect-forge-stack -n "$ns" --timeout 60s
if kubectl delete stack forge -n "$ns" 2>/dev/null; then
  echo "e2e-kind: a locked Stack was deleted" >&2; exit 1
fi
kubectl wait --for=jsonpath='{.status.operation.phase}'=Succeeded stack/forge -n "$ns" --timeout 60s
kubectl delete lock protect-forge-stack -n "$ns"
kubectl delete stack forge -n "$ns" --wait=false
kubectl wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'=WaitingForApproval stack/forge -n "$ns" --timeout 60s
cargo build -q -p kubectl-navique
PATH="$root/target/debug:$PATH" kubectl navique approve --all --stack forge -n "$ns"
kubectl wait --for=delete stack/forge -n "$ns" --timeout 60s
kubectl delete namespace "$ns" --wait=false

# The suites written against any cluster.
NAVIQUE_E2E_KUBECONFIG=$kubeconfig cargo test -p navique-e2e \
  --test admission --test garbage_collection --test namespace_termination --test watch_restart
echo "e2e-kind: passed on kind cluster $cluster"
