#!/usr/bin/env bash
# Stops what scripts/dev-up.sh started. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=${DEV_DIR:-$PWD/.dev}

stop() {
  local pidfile=$dev/pids/$1 pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "$1: stopped"
  fi
  rm -f "$pidfile"
}

# The components first, while the API server still answers their goodbyes
# (a controller releases its Lease on the way out).
for pidfile in "$dev"/pids/*; do
  name=$(basename "$pidfile")
  [[ -f $pidfile && $name != dev-apiserver ]] && stop "$name"
done
stop dev-apiserver
if [[ -d $dev/postgres ]]; then
  scripts/postgres.sh stop "$dev/postgres"
fi
