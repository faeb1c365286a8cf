#!/usr/bin/env bash
# Starts the development environment in the background, idempotently: the
# dev API server (enforcing RBAC), a throwaway PostgreSQL, the operator
# installed from its Helm chart, the provider catalogue, and every operator
# component. Writes .dev/kubeconfig and .dev/env
# (`source .dev/env` to use them). `scripts/dev-down.sh` stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dev=${DEV_DIR:-$root/.dev}
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

# Each component acts as its own service account, as in a cluster: the Lock
# guard lets only the lock-controller change lock markers.
users=$dev/users.yaml
{
  echo "users:"
  for component in "${components[@]}"; do
    echo "- {token: $component-dev-token, name: 'system:serviceaccount:navique-system:navique-$component', groups: [system:serviceaccounts, 'system:serviceaccounts:navique-system']}"
  done
} >"$users"

# The webhook's serving certificate, for its Service name, signed by a dev CA
# that the webhook configurations trust.
tls=$dev/webhook-tls
if [[ ! -f $tls/tls.crt ]]; then
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=navique dev CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=navique-webhook.navique-system.svc" \
    -keyout "$tls/tls.key" -out "$tls/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:navique-webhook.navique-system.svc,IP:127.0.0.1\n' >"$tls/ext"
  openssl x509 -req -in "$tls/tls.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 3650 -extfile "$tls/ext" -out "$tls/tls.crt" 2>/dev/null
fi
webhook_port=${DEV_WEBHOOK_PORT:-18443}
backup_port=${DEV_BACKUP_RUNNER_PORT:-19090}
approvals_port=${DEV_APPROVALS_PORT:-19091}

# The API server keeps everything in memory: when it (re)starts, the
# components, which trusted the previous one, restart with it.
if ! running dev-apiserver; then
  for component in "${components[@]}"; do stop "$component"; done
  rm -f "$dev/apiserver/kubeconfig"
fi
start dev-apiserver target/debug/dev-apiserver --addr "$apiserver_addr" --dir "$dev/apiserver" \
  --authorization rbac --users "$users" --webhook-service "navique-system/navique-webhook=127.0.0.1:$webhook_port"
for _ in $(seq 100); do [[ -f $dev/apiserver/kubeconfig ]] && break; sleep 0.1; done
cp "$dev/apiserver/kubeconfig" "$dev/kubeconfig"
export KUBECONFIG=$dev/kubeconfig
kubectl get --raw /readyz >/dev/null

scripts/postgres.sh start "$dev/postgres" "$postgres_port"
database_url=$(scripts/postgres.sh url "$dev/postgres" "$postgres_port")

# The operator, installed from its chart with the pinned helm, as a platform
# team installs it: CRDs, each component's ServiceAccount and RBAC, the Lock
# guard's ValidatingAdmissionPolicies, the webhook configurations (trusting
# the dev CA), the Project roles, the Roles on the gRPC CA Secret. Nothing runs pods here, so its Deployments
# stay at rest; the binaries started below stand in for them, each as its
# ServiceAccount, and the API server enforces RBAC.
helm upgrade --install navique charts/navique --namespace navique-system --create-namespace \
  --set webhook.tls.mode=existingSecret --set "webhook.caBundle=$(base64 -w0 "$tls/ca.crt")" \
  --set backupRunner.networkPolicy.enabled=false >/dev/null
kubectl wait --for condition=established --timeout 30s crd --all >/dev/null
echo "operator: helm release navique in navique-system (CRDs, RBAC, admission policies, webhook configurations)"
kubectl -n navique-system create secret generic provider-postgresql-admin \
  --from-literal=host=127.0.0.1 --from-literal=port="$postgres_port" \
  --from-literal=user=postgres --from-literal=password= --from-literal=sslmode=disable \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f deploy/examples/catalogue.yaml >/dev/null
echo "catalogue: ServiceClass postgresql, ServicePlan postgresql-platform-ha (PostgreSQL on 127.0.0.1:$postgres_port)"

# Admin ports: DEV_ADMIN_PORTS names one per component, in the order above;
# otherwise they run on from DEV_ADMIN_PORT.
read -r -a admin_ports <<<"${DEV_ADMIN_PORTS:-}"
base=${DEV_ADMIN_PORT:-18081}
for i in "${!components[@]}"; do
  component=${components[$i]}
  port=${admin_ports[$i]:-$((base + i))}
  # The component's own kubeconfig: the admin's, with its token.
  sed "s/token: .*/token: $component-dev-token/" "$dev/kubeconfig" >"$dev/kubeconfig-$component"
  args=(--kubeconfig "$dev/kubeconfig-$component" --admin-addr "127.0.0.1:$port")
  case $component in
    # Internal gRPC is self-managed mutual TLS, as the chart installs it:
    # each component issues itself a certificate from the CA Secret
    # navique-system/navique-grpc-ca for the address it is dialled at.
    service-lifecycle-controller) args+=(--lease-namespace navique-system --backup-runner-url "https://127.0.0.1:$backup_port" --approvals-listen-addr "127.0.0.1:$approvals_port" --grpc-dns-names 127.0.0.1,localhost) ;;
    *controller) args+=(--lease-namespace navique-system) ;;
    # Backups go to a local directory (an S3, GCS or Azure URL works the same).
    backup-runner) mkdir -p "$dev/backups"; args+=(--listen-addr "127.0.0.1:$backup_port" --store-url "file://$dev/backups" --grpc-dns-names 127.0.0.1,localhost) ;;
    webhook) args+=(--listen-addr "127.0.0.1:$webhook_port" --tls-cert-file "$tls/tls.crt" --tls-key-file "$tls/tls.key") ;;
  esac
  start "$component" "target/debug/$component" "${args[@]}"
done

# The webhook configurations came with the chart; wait until it answers,
# or stop here saying why (every ManagedService write would fail).
for _ in $(seq 300); do curl -sk "https://127.0.0.1:$webhook_port/" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sk "https://127.0.0.1:$webhook_port/" >/dev/null 2>&1 || {
  echo "the webhook does not answer on 127.0.0.1:$webhook_port; see $dev/logs/webhook.log:" >&2
  tail -5 "$dev/logs/webhook.log" >&2
  exit 1
}

# The gRPC CA the components created, for clients of the TLS ApprovalEvents
# server (kubectl navique approvals --watch).
grpc_ca=$dev/grpc-ca.crt
for _ in $(seq 100); do
  kubectl -n navique-system get secret navique-grpc-ca -o 'jsonpath={.data.ca\.crt}' 2>/dev/null | base64 -d >"$grpc_ca.tmp" 2>/dev/null || true
  [[ -s $grpc_ca.tmp ]] && break
  sleep 0.1
done
[[ -s $grpc_ca.tmp ]] || { echo "the gRPC CA Secret navique-system/navique-grpc-ca did not appear; see .dev/logs" >&2; exit 1; }
mv "$grpc_ca.tmp" "$grpc_ca"
echo "gRPC: mutual TLS from the self-managed CA (navique-system/navique-grpc-ca; its certificate in .dev/grpc-ca.crt)"

cat >"$dev/env" <<ENV
export KUBECONFIG=$dev/kubeconfig
export DATABASE_URL=$database_url
export PATH=$root/.tools/bin:$root/target/debug:\$PATH
export NAVIQUE_APPROVALS_URL=https://127.0.0.1:$approvals_port
export NAVIQUE_APPROVALS_CA_FILE=$grpc_ca
ENV
echo "environment: source .dev/env  (KUBECONFIG=.dev/kubeconfig, DATABASE_URL=$database_url)"
