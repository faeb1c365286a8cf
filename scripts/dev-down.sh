#!/usr/bin/env bash
# Stops what scripts/dev-up.sh started. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=$PWD/.dev

for pidfile in "$dev"/pids/*; do
  [[ -f $pidfile ]] || continue
  name=$(basename "$pidfile")
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "$name: stopped"
  fi
  rm -f "$pidfile"
done
if [[ -d $dev/postgres ]]; then
  scripts/postgres.sh stop "$dev/postgres"
fi
