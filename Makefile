# Navique: `make demo` shows it working, `make test` runs every test.
CARGO ?= cargo

.PHONY: all setup build test lint crds manifests dev-up dev-down demo bench bench-locks bench-webhook bench-backup clean images e2e-kind

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
	$(CARGO) run -q -p navique-api --bin crdgen -- deploy/crds charts/navique/files/crds

# Regenerates deploy/ from the chart's defaults; a test fails when stale.
manifests:
	scripts/render-manifests.sh

# Container images, one per deployed binary (images/<binary>/Containerfile),
# tagged navique/<binary>:$(VERSION): the builder image compiles all four
# once, then each image copies its binary into a minimal runtime.
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
DOCKER ?= docker
IMAGES := lock-controller webhook service-lifecycle-controller backup-runner
images:
	$(DOCKER) build -f images/builder/Containerfile -t localhost/navique-builder:$(VERSION) .
	for image in $(IMAGES); do \
	  $(DOCKER) build -f images/$$image/Containerfile \
	    --build-arg BUILDER=localhost/navique-builder:$(VERSION) \
	    -t navique/$$image:$(VERSION) images/$$image || exit 1; \
	done

# The chart on a kind cluster with the images built here: seed flows and the
# cluster-generic e2e tests (needs docker and kind).
e2e-kind: setup
	scripts/e2e-kind.sh

# The development environment: dev API server, PostgreSQL, CRDs, catalogue
# and every component, in the background. `source .dev/env` to use it.
dev-up: build
	scripts/dev-up.sh

dev-down:
	scripts/dev-down.sh

# The demo creates its namespaces, services and backups from scratch, so it
# starts a fresh environment: what an earlier run left (a database recorded
# for a service the new API server never had) would refuse its steps.
demo: build
	scripts/dev-down.sh
	rm -rf .dev/apiserver .dev/postgres .dev/backups
	scripts/dev-up.sh
	scripts/demo.sh

# Write throughput and watch fan-out of the dev API server (release build).
bench:
	$(CARGO) bench -p dev-apiserver --bench throughput

# Lock activation latency beside its floor, lock-controller memory and idle
# writes at 1,000 Locks, 10,000 in one namespace and 10,000 over 100.
bench-locks: setup
	$(CARGO) build --release --bins
	$(CARGO) bench -p navique-e2e --bench lock_activation

# Webhook admission latency, throughput and memory for DELETE reviews over TLS.
bench-webhook: setup
	$(CARGO) build --release --bins
	$(CARGO) bench -p navique-e2e --bench webhook_admission

# Final-snapshot and restore throughput of backup-runner beside their floors
# (`pg_dump -Fc -Z0 | zstd > file`, `zstd -d < file | pg_restore`) on a
# database of 512 MiB (NAVIQUE_BENCH_DATABASE_MIB; 10 GiB:
# NAVIQUE_BENCH_DATABASE_MIB=10240 NAVIQUE_BENCH_ROUNDS=1), and its peak
# memory. Needs zstd (apt-get install zstd).
bench-backup: setup
	$(CARGO) build --release --bins
	$(CARGO) bench -p navique-e2e --bench final_snapshot

clean: dev-down
	$(CARGO) clean
	rm -rf .dev
