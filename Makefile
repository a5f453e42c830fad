# wasmop: the two commands are `make run` and `make test`. Everything else is a step of those.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
CLUSTER_DIR ?= target/cluster
TEST_CLUSTER_DIR ?= target/test-cluster
# Toolchains where their installers put them, for shells that did not read a profile (CI).
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(HOME)/go/bin:$(PATH)
# A build from scratch (a fresh clone, CI) is faster, and its target directory a third smaller,
# without incremental compilation's caches; `CARGO_INCREMENTAL=1 make ...` for an edit loop.
export CARGO_INCREMENTAL ?= 0

.PHONY: help run run-dns test test-parts test-build bench build image test-image layout plugins control-plane registry helm cluster cluster-down lint format docs

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

run: build plugins ## Run the host with the webpage plugin against your cluster (or a local control plane)
	@tests/testbed/run-local.sh "$(CLUSTER_DIR)"

run-dns: build plugins ## Run the dnsrecord sample (an external dependent) with its local DNS service
	@tests/testbed/run-dns.sh "$(CLUSTER_DIR)"

test: ## Install what is missing, build everything, run unit and integration tests
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-parts
	@$(LINTED) tests/testbed/run-tests.sh "$(TEST_CLUSTER_DIR)"

# Clippy lints the workspace's crates while the test build compiles them, through the wrapper
# `cargo clippy` itself runs rustc with (its arguments in CLIPPY_ARGS, as cargo-clippy passes
# them): `make test` then compiles no second, check-only build of every dependency. Every cargo
# command of `make test` that builds tests runs with it; one without would build the
# workspace's crates again. `make lint` runs `cargo clippy` as usual.
LINTED := RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# What `make test` builds before the tests run, side by side, the longest first: each part keeps
# the cores busy only part of the time (downloads, linking, a crate compiled alone, Go's build),
# so on a machine of a few cores they overlap. The test build, the plugins' Rust and the image
# each hold their target directory while cargo builds, so the images have one of their own. Each
# part's output is printed whole once it is done.
test-parts: test-build test-image plugins format docs control-plane registry helm

test-build: ## Build the unit and integration tests, clippy's warnings as errors, without running them
	$(LINTED) $(CARGO) test --workspace --all-targets --no-run

bench: plugins control-plane ## wasmop against a native kube-rs controller, report in target/bench/
	@# The host alone, as `make build` builds it: built with the tests, its dependencies would
	@# have more features and its functions other names than host/layout gives the linker.
	$(CARGO) build --release -p wasmop
	$(CARGO) build --release -p wasmop-tests --bin wasmop-native --bin wasmop-bench
	target/release/wasmop-bench

build: ## Build the host (release)
	$(CARGO) build --release -p wasmop

image: ## Build the OCI image (static host, FROM scratch) into target/image/wasmop.tar
	@CARGO_TARGET_DIR="$(CURDIR)/target/image-build" deploy/image/build.sh >/dev/null

test-image: ## Build the image the tests run, less optimized (the `image-test` profile), into target/test-image/wasmop.tar
	@CARGO_TARGET_DIR="$(CURDIR)/target/image-build" WASMOP_IMAGE_PROFILE=image-test WASMOP_IMAGE_DIR=target/test-image \
	  deploy/image/build.sh >/dev/null

layout: plugins control-plane image ## Profile hosts at work and write the order of the host's functions (host/layout), for the release build and the image
	@tests/testbed/layout.sh

plugins: ## Build every plugin to plugins/dist/<name>.wasm
	@tests/testbed/build-plugins.sh

control-plane: ## Build kube-apiserver, kube-controller-manager and etcd into the cache (once)
	@tests/testbed/build-control-plane.sh >/dev/null

registry: ## Build the OCI registry the tests push plugins to (CNCF distribution) into the cache (once)
	@tests/testbed/build-registry.sh >/dev/null

helm: ## Build helm (renders and lints the chart in deploy/helm/wasmop) into the cache (once)
	@tests/testbed/build-helm.sh >/dev/null

cluster: control-plane ## Start a local control plane in the background; kubeconfig in target/cluster/kubeconfig
	@tests/testbed/cluster.sh up "$(CLUSTER_DIR)"

cluster-down: ## Stop the processes `make cluster` started
	@tests/testbed/cluster.sh down "$(CLUSTER_DIR)"

docs: ## Build the book (docs/) into target/book, its links, samples and the project's Markdown checked
	@tests/testbed/check-book.py --self-test
	@tests/testbed/check-book.py
	@mdbook=$$(tests/testbed/build-mdbook.sh) && "$$mdbook" build docs

lint: format ## rustfmt, the layers' check and clippy, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

format: ## rustfmt's check and the check that no two files import each other
	$(CARGO) fmt --all -- --check
	tests/testbed/check-layers.py
