# Navique: `make demo` shows it working, `make test` runs every test.
CARGO ?= cargo

.PHONY: all setup build test lint crds demo clean

all: build

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --workspace --bins

# Unit, integration and end-to-end tests. The end-to-end tests start the
# binaries that `build` made.
test: build
	scripts/test.sh

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Regenerates the CRD YAML from crates/api; a test fails when it is stale.
crds:
	$(CARGO) run -q -p navique-api --bin crdgen -- deploy/crds charts/navique/crds

demo: build
	scripts/demo.sh

clean:
	$(CARGO) clean
	rm -rf .dev
