# Navique: `make demo` shows it working, `make test` runs every test.
CARGO ?= cargo

.PHONY: all setup build test lint crds manifests dev-up dev-down demo bench bench-locks bench-webhook clean

all: build

# System packages, toolchain components, and the pinned kubectl and helm.
setup:
	@scripts/setup.sh
	@scripts/tools.sh

build: setup
	$(CARGO) build --workspace --bins

# Unit, integration and end-to-end tests. The end-to-end tests start the
# binaries that `build` made, against a dev API server of their own.
test: build
	scripts/test.sh

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Regenerates the CRD YAML from crates/api; a test fails when it is stale.
crds:
	$(CARGO) run -q -p navique-api --bin crdgen -- deploy/crds charts/navique/crds

# Regenerates deploy/ from the chart's defaults; a test fails when stale.
manifests:
	scripts/render-manifests.sh

# The development environment: dev API server, PostgreSQL, CRDs, catalogue
# and every component, in the background. `source .dev/env` to use it.
dev-up: build
	scripts/dev-up.sh

dev-down:
	scripts/dev-down.sh

demo: dev-up
	scripts/demo.sh

# Write throughput and watch fan-out of the dev API server (release build).
bench:
	$(CARGO) bench -p dev-apiserver --bench throughput

# Lock activation latency and lock-controller memory at 1,000 Locks.
bench-locks: setup
	$(CARGO) build --release --bins
	$(CARGO) bench -p navique-e2e --bench lock_activation

# Webhook admission latency, throughput and memory for DELETE reviews over TLS.
bench-webhook: setup
	$(CARGO) build --release --bins
	$(CARGO) bench -p navique-e2e --bench webhook_admission

clean: dev-down
	$(CARGO) clean
	rm -rf .dev
