#!/usr/bin/env bash
# Walks through what Navique does today, printing each step. Grows with each
# capability: the dev API server, then the seed scenarios with kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/debug
work=.dev/demo
rm -rf "$work" && mkdir -p "$work"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "The API: every kind as a CRD generated from crates/api (deploy/crds)"
printf '%-26s %-22s %-11s %s\n' KIND GROUP SCOPE SHORTNAME
for crd in deploy/crds/*.yaml; do
  kind=$(awk '/^    kind:/ {print $2; exit}' "$crd")
  group=$(awk '/^  group:/ {print $2; exit}' "$crd")
  scope=$(awk '/^  scope:/ {print $2; exit}' "$crd")
  short=$(awk '/shortNames:/ {getline; print $2; exit}' "$crd")
  printf '%-26s %-22s %-11s %s\n' "$kind" "$group" "$scope" "$short"
done

step "The seeds' manifests against those schemas: accepted as written, bad ones rejected naming the field"
cargo test -p navique-api --test seed_manifests 2>/dev/null | grep -E "^test "

step "A component refuses to start on a kubeconfig it cannot read, in one line"
printf '$ %s\n' "$bin/webhook --kubeconfig /nonexistent"
"$bin/webhook" --kubeconfig /nonexistent || echo "(exit code $?)"

# A kubeconfig for an API server that is not there (yet): the components wait
# for it with backoff instead of failing.
cat > "$work/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "http://127.0.0.1:16443"}}]
users: [{name: demo, user: {token: demo}}]
contexts: [{name: demo, context: {cluster: demo, user: demo, namespace: default}}]
current-context: demo
KUBECONFIG

components=(lock-controller service-lifecycle-controller backup-runner webhook)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

step "All four components start, each with its own admin server"
port=18181
for component in "${components[@]}"; do
  printf '$ %s\n' "$bin/$component --kubeconfig $work/kubeconfig --admin-addr 127.0.0.1:$port &"
  "$bin/$component" --kubeconfig "$work/kubeconfig" --admin-addr "127.0.0.1:$port" \
    >"$work/$component.log" 2>&1 &
  pids+=($!)
  port=$((port + 1))
done
sleep 2

step "Alive (/healthz) but not ready (/readyz) while the API server cannot be reached"
port=18181
for component in "${components[@]}"; do
  printf '%-30s healthz: %-4s readyz: %s\n' "$component" \
    "$(curl -s "127.0.0.1:$port/healthz")" "$(curl -s "127.0.0.1:$port/readyz")"
  port=$((port + 1))
done

step "Per-component Prometheus metrics"
run curl -s 127.0.0.1:18181/metrics

step "The controller's log: retrying with backoff"
grep -m3 'cannot reach' "$work/lock-controller.log" | sed 's/^/  /'

step "SIGTERM: every component shuts down cleanly"
for i in "${!components[@]}"; do
  kill -TERM "${pids[$i]}"
  status=0
  wait "${pids[$i]}" || status=$?
  printf '%-30s exit code %s; last log line: %s\n' "${components[$i]}" "$status" \
    "$(tail -1 "$work/${components[$i]}.log" | sed 's/^.*INFO //')"
done
pids=()

step "Done. Next: the dev API server, then Locks, managed services and approvals walk through here with kubectl."
