#!/usr/bin/env bash
# Installs what a fresh Debian machine with only the Rust toolchain lacks for
# building and testing Navique. Idempotent: installs only what is missing.
set -euo pipefail

packages=()
command -v cc >/dev/null || packages+=(gcc libc6-dev)
command -v curl >/dev/null || packages+=(curl)
command -v openssl >/dev/null || packages+=(openssl)
# The browser tests of `kubectl navique ui` (e2e/tests/ui.rs) drive Debian's
# headless Chromium through its chromedriver; they fail without them.
[[ -x /usr/bin/chromium ]] || packages+=(chromium)
[[ -x /usr/bin/chromedriver ]] || packages+=(chromium-driver)
# A font for the page's text in screenshots.
[[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || packages+=(fonts-dejavu-core)
# make bench-backup's floors (pg_dump | zstd > file).
command -v zstd >/dev/null || packages+=(zstd)

if ((${#packages[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing ${packages[*]}; install them (apt-get install ${packages[*]}) or run as root" >&2
    exit 1
  fi
  echo "setup: installing ${packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi

for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "setup: adding the $component toolchain component"
    rustup component add "$component"
  fi
done
