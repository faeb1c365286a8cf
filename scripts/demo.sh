#!/usr/bin/env bash
# Walks through what Navique does today on the environment `make dev-up`
# started, printing each kubectl command and its result. Each capability adds
# its seed scenarios here.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source .dev/env

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() {
  printf '\033[36m$ %s\033[0m\n' "$*"
  "$@"
  local status=$?
  [[ $status -eq 0 ]] || printf '\033[33m(exit code %s)\033[0m\n' "$status"
}
apply() {
  printf '\033[36m$ kubectl apply -f - <<EOF\n%s\nEOF\033[0m\n' "$1"
  kubectl apply -f - <<<"$1"
  local status=$?
  [[ $status -eq 0 ]] || printf '\033[33m(exit code %s)\033[0m\n' "$status"
}

step "The API server, the operator's kinds and their short names"
run kubectl version
run kubectl api-resources --categories navique

step "The Locks guide: Stack forge in namespace forge, and the Lock that protects it"
run kubectl create namespace forge
run kubectl apply -f deploy/examples/forge-stack-account.yaml
run kubectl apply -f deploy/examples/forge-stack.yaml
run kubectl apply -f deploy/examples/lock.yaml
run kubectl wait --for=jsonpath='{.status.active}'=true lock/protect-forge-stack -n forge --timeout 30s
run kubectl get locks -n forge
run kubectl get stacks -A -l core.navique.com/locked=true
run kubectl get stack forge -n forge -o jsonpath='{.metadata.annotations.core\.navique\.com/locked}{"\n"}{.metadata.annotations.core\.navique\.com/lock-reasons}{"\n"}'

step "Deleting the Stack is refused at admission, naming the Lock and its reason"
run kubectl delete stack forge -n forge

step "So is deleting its namespace, which would delete the Lock first"
run kubectl delete namespace forge

step "Nobody but the lock-controller may lift the marker"
run kubectl annotate stack forge -n forge core.navique.com/locked-

step "Updates of a locked object still work"
run kubectl label stack forge -n forge tier=production

step "A Lock on something it cannot protect says so"
apply "apiVersion: core.navique.com/v1alpha1
kind: Lock
metadata: {name: on-a-configmap, namespace: forge}
spec:
  targetRef: {apiVersion: v1, kind: ConfigMap, name: settings}"
run kubectl wait --for=jsonpath='{.status.conditions[0].reason}'=InvalidTarget lock/on-a-configmap -n forge --timeout 30s
run kubectl get locks -n forge -o wide
run kubectl describe lock on-a-configmap -n forge

step "So does a Lock on a misspelt kind: kubectl prints the admission warning"
apply "apiVersion: core.navique.com/v1alpha1
kind: Lock
metadata: {name: on-a-typo, namespace: forge}
spec:
  targetRef: {apiVersion: core.navique.com/v1alpha1, kind: Stak, name: forge}"

step "A Lock must name its target's kind: the API server refuses it, naming the field"
apply "apiVersion: core.navique.com/v1alpha1
kind: Lock
metadata: {name: no-kind, namespace: forge}
spec:
  targetRef: {name: forge}"

step "The approvals proposal: the Stack applied its resources in wave order and reports each one"
run kubectl wait --for=jsonpath='{.status.operation.phase}'=Succeeded stack/forge -n forge --timeout 30s
run kubectl get stack forge -n forge -o jsonpath='{range .status.resources[*]}wave {.syncWave}: {.kind}/{.name} {.status} {.health.status}{"\n"}{end}'
run kubectl get configmap,service -n forge -l core.navique.com/stack=forge

step "guestbook-ui leaves the Stack; it is marked Prune=confirm, so the prune waits for approval"
run kubectl patch stack forge -n forge --type json -p '[{"op":"remove","path":"/spec/resources/1"}]'
run kubectl wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'=WaitingForApproval stack/forge -n forge --timeout 30s
run kubectl get stack forge -n forge -o jsonpath='{.status.operation.phase}: {.status.operation.message}{"\n"}{range .status.resources[*]}{.kind}/{.name} requiresPruning={.requiresPruning} requiresDeletionApproval={.requiresDeletionApproval}{"\n"}{end}'
run kubectl describe stack forge -n forge
run kubectl navique approvals -n forge

step "Approve it with your own credentials (whoever may patch the Service may approve); then it is pruned"
run kubectl navique approve service/guestbook-ui -n forge
run kubectl wait --for=jsonpath='{.status.operation.phase}'=Succeeded stack/forge -n forge --timeout 30s
run kubectl get configmap,service -n forge -l core.navique.com/stack=forge

step "Put it back; then delete the Lock deliberately, and delete the Stack"
run kubectl apply -f deploy/examples/forge-stack.yaml
run kubectl wait --for=jsonpath='{.status.operation.phase}'=Succeeded stack/forge -n forge --timeout 30s
run kubectl delete lock protect-forge-stack on-a-configmap on-a-typo -n forge
run kubectl delete stack forge -n forge --wait=false

step "guestbook-ui is marked Delete=confirm: the teardown pauses in its wave (wave 1) and wave 0 waits"
run kubectl wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'=WaitingForApproval stack/forge -n forge --timeout 30s
run kubectl get stack forge -n forge -o jsonpath='{.status.operation.message}{"\n"}{range .status.resources[*]}{.kind}/{.name}: {.message}{"\n"}{end}'
run kubectl navique approvals -A -o json

step "Approve everything the Stack waits for; the teardown finishes in reverse wave order"
run kubectl navique approve --all --stack forge -n forge
run kubectl wait --for=delete stack/forge -n forge --timeout 30s
run kubectl get configmap,service -n forge -l core.navique.com/stack=forge
run kubectl delete namespace forge

step "The 'Status and Deletion' guide: orders-db in Project 'my-project', a database on the provider's PostgreSQL"
run kubectl create namespace my-project
run kubectl apply -f deploy/examples/orders-db.yaml
run kubectl wait --for=jsonpath='{.status.phase}'=Ready managedservice/orders-db -n my-project --timeout 60s
run kubectl get managedservices -n my-project \
  -o custom-columns='NAME:.metadata.name,INSTANCE_NAMESPACE:.status.instanceNamespace,POLICY:.spec.deletionPolicy,PROTECTED:.spec.deletionProtection'
run kubectl get managedservice orders-db -n my-project \
  -o jsonpath='phase={.status.phase}{"\n"}{range .status.conditions[?(@.type=="Ready")]}reason={.reason} {.message}{"\n"}{end}'
# On the provider's shared server the Project prefixes the names (docs/managed-services.md).
run psql "$DATABASE_URL" -Atc "select datname, pg_get_userbyid(datdba) from pg_database where datname = 'my_project__orders'"
run psql "$DATABASE_URL" -Atc "select kind, name, namespace, service, retained from navique.engine_objects where namespace = 'my-project' order by kind, name"

step "deletionPolicy must be one of Retain, SnapshotAndDelete, Delete"
run kubectl patch managedservice orders-db -n my-project --type merge -p '{"spec":{"deletionPolicy":"Destroy"}}'

step "deletionProtection: the delete is refused while the stored object has it on"
run kubectl patch managedservice orders-db -n my-project --type merge -p '{"spec":{"deletionProtection":true}}'
run kubectl delete managedservice orders-db -n my-project
run kubectl patch managedservice orders-db -n my-project --type merge -p '{"spec":{"deletionProtection":false}}'

step "A Project user cannot delete the platform's backup records"
apply "apiVersion: services.kube-dc.com/v1alpha1
kind: ServiceBackup
metadata: {name: orders-db-before-migration, namespace: my-project}
spec:
  serviceRef: {name: orders-db}"
apply "apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-admin, namespace: my-project}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]"
run kubectl delete servicebackup orders-db-before-migration -n my-project --as alice

step "Delete without the typed confirmation: the service waits in Deleting and the database stays"
run kubectl annotate managedservice orders-db -n my-project services.kube-dc.com/confirm-delete-
run kubectl delete managedservice orders-db -n my-project --wait=false
run kubectl wait --for=jsonpath='{.status.conditions[0].reason}'=DeletionConfirmationNeeded managedservice/orders-db -n my-project --timeout 30s
run kubectl get managedservice orders-db -n my-project \
  -o jsonpath='phase={.status.phase}{"\n"}{range .status.conditions[?(@.type=="Ready")]}reason={.reason} {.message}{"\n"}{end}'
run psql "$DATABASE_URL" -Atc "select count(*) from pg_database where datname = 'my_project__orders'"

step "Confirm with the service's name: the deletion completes and the database is gone"
run kubectl annotate managedservice orders-db -n my-project services.kube-dc.com/confirm-delete=orders-db
run kubectl wait --for=delete managedservice/orders-db -n my-project --timeout 60s
run psql "$DATABASE_URL" -Atc "select count(*) from pg_database where datname = 'my_project__orders'"
run kubectl get servicebackups -n my-project

step "SnapshotAndDelete: a verified final backup first (backup-runner, over gRPC, into .dev/backups), then the data goes"
apply "apiVersion: services.kube-dc.com/v1alpha1
kind: ManagedService
metadata: {name: billing-db, namespace: my-project}
spec:
  classRef: {name: postgresql}
  planRef: {name: postgresql-platform-ha}
  placement: {mode: ProviderShared}
  parameters: {database: billing, owner: billing}
  deletionPolicy: SnapshotAndDelete
  deletionProtection: false"
run kubectl wait --for=jsonpath='{.status.phase}'=Ready managedservice/billing-db -n my-project --timeout 60s
run psql "${DATABASE_URL%/*}/my_project__billing" -Atc "set role my_project__billing; create table invoices (id int primary key, total numeric); insert into invoices select g, g * 1.5 from generate_series(1, 500) g"
run kubectl delete managedservice billing-db -n my-project --timeout 120s
run kubectl get servicebackups -n my-project
run kubectl get events -n my-project --field-selector involvedObject.name=billing-db \
  -o custom-columns='TYPE:.type,REASON:.reason,MESSAGE:.message'
run psql "$DATABASE_URL" -Atc "select count(*) from pg_database where datname = 'my_project__billing'"
final=$(kubectl get servicebackups -n my-project -o jsonpath='{.items[?(@.spec.origin=="Final")].metadata.name}')

step "Restore the final backup into a new service of the same Project"
apply "apiVersion: services.kube-dc.com/v1alpha1
kind: ManagedService
metadata: {name: billing-db-restored, namespace: my-project}
spec:
  classRef: {name: postgresql}
  planRef: {name: postgresql-platform-ha}
  placement: {mode: ProviderShared}
  parameters: {database: billing_restored, owner: billing_restored}
  restoreFrom: {backupName: $final}
  deletionProtection: false"
run kubectl wait --for=jsonpath='{.status.phase}'=Ready managedservice/billing-db-restored -n my-project --timeout 120s
run kubectl get managedservice billing-db-restored -n my-project -o jsonpath='restoredFrom={.status.restoredFrom}{"\n"}'
run kubectl describe managedservice billing-db-restored -n my-project
run psql "${DATABASE_URL%/*}/my_project__billing_restored" -Atc "select count(*), sum(total) from invoices"

step "A restore from another Project is refused"
apply "apiVersion: services.kube-dc.com/v1alpha1
kind: ManagedService
metadata: {name: stolen-db, namespace: my-project}
spec:
  classRef: {name: postgresql}
  planRef: {name: postgresql-platform-ha}
  placement: {mode: ProviderShared}
  restoreFrom: {backupName: $final, namespace: someone-elses-project}"

step "A plan may allow SnapshotAndDelete only with backups enabled (a CEL rule on the CRD)"
apply "apiVersion: services.kube-dc.com/v1alpha1
kind: ServicePlan
metadata: {name: no-backups}
spec:
  classRef: {name: postgresql}
  allowedDeletionPolicies: [Retain, SnapshotAndDelete]
  backup: {enabled: false}"

step "The provider's catalogue the seeds' manifests refer to"
run kubectl get serviceclasses,serviceplans

step "The components: each alive, ready, and exporting metrics; one replica per controller leads"
# The admin ports as scripts/dev-up.sh gives them.
read -r -a admin_ports <<<"${DEV_ADMIN_PORTS:-}"
components=(lock-controller service-lifecycle-controller backup-runner webhook)
for i in "${!components[@]}"; do
  port=${admin_ports[$i]:-$((${DEV_ADMIN_PORT:-18081} + i))}
  printf '%-30s healthz: %-4s readyz: %s\n' "${components[$i]}" \
    "$(curl -s "127.0.0.1:$port/healthz")" "$(curl -s "127.0.0.1:$port/readyz")"
done
run kubectl get leases -n navique-system
lock_controller=${admin_ports[0]:-${DEV_ADMIN_PORT:-18081}}
printf '\033[36m$ curl -s 127.0.0.1:%s/metrics | grep leader\033[0m\n' "$lock_controller"
curl -s "127.0.0.1:$lock_controller/metrics" | grep leader

step "Done. The environment keeps running: 'source .dev/env' to use it, 'make dev-down' to stop it."
