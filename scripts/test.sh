#!/usr/bin/env bash
# Runs the whole test suite and closes with one line that sums every test
# binary's result, since cargo's own last line is that of the last binary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mkdir -p .dev
cargo test --workspace "$@" 2>&1 | tee .dev/test.log
status=${PIPESTATUS[0]}
awk '/^test result:/ { passed += $4; failed += $6 }
     END { printf "tests: %d passed, %d failed\n", passed, failed }' .dev/test.log
exit "$status"
