#!/usr/bin/env bash
# Starts the development environment in the background, idempotently: the
# dev API server, a throwaway PostgreSQL, the CRDs, the provider catalogue,
# and every operator component. Writes .dev/kubeconfig and .dev/env
# (`source .dev/env` to use them). `scripts/dev-down.sh` stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dev=$root/.dev
mkdir -p "$dev/logs" "$dev/pids"

apiserver_addr=${DEV_APISERVER_ADDR:-127.0.0.1:16443}
postgres_port=${DEV_POSTGRES_PORT:-55432}
components=(lock-controller service-lifecycle-controller backup-runner webhook)

scripts/tools.sh >/dev/null
export PATH="$root/.tools/bin:$PATH"
cargo build -q --workspace --bins

running() { [[ -f $dev/pids/$1 ]] && kill -0 "$(cat "$dev/pids/$1")" 2>/dev/null; }
stop() {
  if running "$1"; then
    kill -TERM "$(cat "$dev/pids/$1")"
    while running "$1"; do sleep 0.1; done
    echo "$1: stopped"
  fi
  rm -f "$dev/pids/$1"
}
start() {
  local name=$1
  shift
  if running "$name"; then
    echo "$name: running (pid $(cat "$dev/pids/$name"))"
    return
  fi
  nohup "$@" >"$dev/logs/$name.log" 2>&1 &
  echo $! >"$dev/pids/$name"
  echo "$name: started (pid $!, log .dev/logs/$name.log)"
}

# The API server keeps everything in memory: when it (re)starts, the
# components, which trusted the previous one, restart with it.
if ! running dev-apiserver; then
  for component in "${components[@]}"; do stop "$component"; done
  rm -f "$dev/apiserver/kubeconfig"
fi
start dev-apiserver target/debug/dev-apiserver --addr "$apiserver_addr" --dir "$dev/apiserver"
for _ in $(seq 100); do [[ -f $dev/apiserver/kubeconfig ]] && break; sleep 0.1; done
cp "$dev/apiserver/kubeconfig" "$dev/kubeconfig"
export KUBECONFIG=$dev/kubeconfig
kubectl get --raw /readyz >/dev/null

scripts/postgres.sh start "$dev/postgres" "$postgres_port"
database_url=$(scripts/postgres.sh url "$dev/postgres" "$postgres_port")

kubectl apply -f deploy/crds >/dev/null
kubectl wait --for condition=established --timeout 30s crd --all >/dev/null
echo "CRDs: installed"
kubectl create namespace navique-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n navique-system create secret generic provider-postgresql-admin \
  --from-literal=host=127.0.0.1 --from-literal=port="$postgres_port" \
  --from-literal=user=postgres --from-literal=password= --from-literal=sslmode=disable \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f deploy/examples/catalogue.yaml >/dev/null
echo "catalogue: ServiceClass postgresql, ServicePlan postgresql-platform-ha (PostgreSQL on 127.0.0.1:$postgres_port)"

port=18081
for component in "${components[@]}"; do
  args=(--kubeconfig "$dev/kubeconfig" --admin-addr "127.0.0.1:$port")
  case $component in *controller) args+=(--lease-namespace navique-system) ;; esac
  start "$component" "target/debug/$component" "${args[@]}"
  port=$((port + 1))
done

cat >"$dev/env" <<ENV
export KUBECONFIG=$dev/kubeconfig
export DATABASE_URL=$database_url
export PATH=$root/.tools/bin:\$PATH
ENV
echo "environment: source .dev/env  (KUBECONFIG=.dev/kubeconfig, DATABASE_URL=$database_url)"
