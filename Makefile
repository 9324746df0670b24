# modelserving: every developer and CI entry point.
# `make run` and `make test` install whatever they need on a fresh machine.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Tool caches outside the checkout (kept between clones): uv, the control plane, cargo.
CACHE ?= $(or $(MODELSERVING_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/modelserving)

# uv installs .venv from uv.lock (exact versions and sha256 hashes of every package); uv itself
# comes from PyPI, pinned by version and by the hashes of its Linux and macOS wheels.
UV_VERSION := 0.13.9
UV_HASHES := \
  d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19 \
  2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25 \
  5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe \
  ecb6028d79dc96fbeafffe5c8af62a7099487ebc05a701e76714eebcffd06375 \
  c16ed11e013557536b3e60065f1b912f6407bd6518e041b961e23ef9e6b4fbf5 \
  66c512266d633bef48384a1f53003f41f2a8e7b36fe6e7fbfd3e0fd52d96fa63
UV_HOME := $(CACHE)/uv-$(UV_VERSION)
UV := $(UV_HOME)/bin/uv
# Never download a Python: the venv uses $(PYTHON). UV_PROJECT_ENVIRONMENT keeps it in $(VENV).
# UV_COMPILE_BYTECODE: the installed packages are compiled to bytecode once, at install, so no
# process compiles them again (where PYTHONDONTWRITEBYTECODE is set, every process would).
UV_ENV := UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=$(abspath $(VENV)) UV_NO_PROGRESS=1 \
  UV_COMPILE_BYTECODE=1
# The recipes keep the checkout's own bytecode in its __pycache__ folders (git ignores them),
# whatever the caller's environment says: with PYTHONDONTWRITEBYTECODE set, each of the test
# processes (pytest, the CLIs, the compile workers, the controllers) compiled host/ and tests/
# afresh; collecting the unit and wasm tests took 13-17 s of CPU instead of 6-7 s.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help setup lock uv system-deps lint fmt crds crds-check test test-unit bench run render-example fresh-check clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | sort

setup: $(STAMP) ## create .venv from uv.lock (exact versions and hashes), the package editable

$(STAMP): pyproject.toml uv.lock | $(UV)
	@$(UV_ENV) $(UV) lock --check --python $(PYTHON) --quiet || { \
		echo "error: uv.lock does not match pyproject.toml: run 'make lock' and commit uv.lock" >&2; \
		exit 1; }
	$(UV_ENV) $(UV) sync --locked --extra dev --python $(PYTHON) --quiet
	@touch $@

lock: $(UV) ## update uv.lock after a change to pyproject.toml (UPGRADE=1: newest allowed versions)
	$(UV_ENV) $(UV) lock --python $(PYTHON) $(if $(UPGRADE),--upgrade)

uv: $(UV) ## install the pinned uv into the cache

$(UV):
	@rm -rf $(UV_HOME) $(UV_HOME).partial && mkdir -p $(UV_HOME).partial
	{ printf 'uv==$(UV_VERSION)'; printf ' --hash=sha256:%s' $(UV_HASHES); echo; } > $(UV_HOME).partial/requirements.txt
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
		--no-deps --require-hashes \
		--only-binary=:all: --target $(UV_HOME).partial -r $(UV_HOME).partial/requirements.txt
	@mv $(UV_HOME).partial $(UV_HOME) && $(UV) --version

system-deps: ## install the Debian packages the tools need, when missing (openssl)
	@command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }
	@command -v go >/dev/null || { echo "error: Go is needed to build the local control plane and the Go plugins (see docs/local-cluster.md)" >&2; exit 1; }

lint: setup ## ruff, mypy --strict, import-linter layering contracts
	$(BIN)/ruff check host tests
	$(BIN)/ruff format --check host tests
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: setup ## apply ruff's formatter and fixes
	$(BIN)/ruff check --fix host tests
	$(BIN)/ruff format host tests

crds: setup ## regenerate crds/ from the API models
	$(BIN)/modelserving crd --output-dir crds

crds-check: setup ## fail when crds/ does not match the API models
	$(BIN)/modelserving crd --output-dir crds --check

# `make test` builds the control plane in the background (low priority; nothing to do when it is
# cached) while the checks and the unit and wasm tests run: they leave a core idle most of the
# time. The integration tests wait for it, then run beside the tests marked `heavy` (compilers and
# fuzzing, busy on both cores for about two minutes): the integration tests keep about a core busy
# and mostly wait on the cluster, so the heavy tests fill the other core there instead of taking
# CPU from the build before it. Their output is shown when both are done. The build and the heavy
# tests stop with `make test`.
# The TinyGo modules are checked there too (tests/wasm/test_tinygo_build.py installs TinyGo, about
# 1.5 minutes once, and rebuilds them); before the unit tests, only the standard Go ones are.
# (Running the integration tests beside the unit tests was tried: the kernel shares CPU between
# sessions, not by nice value, so their busy-loop and cluster processes starved the unit tests'
# compiles past their 10 s limit.)
# Each pytest run ends with its slowest tests (those over 2 s), to see where the time goes.
DURATIONS := --durations=15 --durations-min=2
BUILD_LOG := $(CACHE)/kube/background-build.log
HEAVY_LOG := $(CACHE)/heavy-tests.log
# The integration tests mostly wait (for the control plane, the controller's passes, the
# garbage collector): two pytest-xdist workers, each with a control plane of its own, a file
# at a time, take 0.58 of the time one takes (docs/local-cluster.md).
INTEGRATION_WORKERS ?= 2

test: setup system-deps ## lint, generated-file checks (crds, wasm), Rust and Go SDK tests, then every test
	@mkdir -p $(dir $(BUILD_LOG)); \
	nice -n 10 $(PY) -m modelserving.devcluster build > $(BUILD_LOG) 2>&1 & build=$$!; heavy=; \
	trap 'kill $$build $$heavy 2>/dev/null; wait $$build $$heavy 2>/dev/null' EXIT; \
	$(MAKE) --no-print-directory smith lint crds-check wasm-rust-check wasm-go-check-std wasm-sdk-test wasm-go-test && \
	$(BIN)/pytest -m "not heavy" $(DURATIONS) tests/unit tests/wasm && { \
	wait $$build; \
	echo "heavy tests: running beside the integration tests (output follows them)"; \
	nice -n 10 $(BIN)/pytest -m heavy -p no:cacheprovider $(DURATIONS) tests/unit tests/wasm > $(HEAVY_LOG) 2>&1 & heavy=$$!; \
	$(BIN)/pytest -n $(INTEGRATION_WORKERS) --dist loadfile $(DURATIONS) tests/integration; integration=$$?; \
	wait $$heavy; heavy_status=$$?; heavy=; cat $(HEAVY_LOG); \
	[ $$integration -eq 0 ] && [ $$heavy_status -eq 0 ]; }

test-unit: setup ## only the fast tests that need no cluster or toolchain
	$(BIN)/pytest tests/unit

bench: setup system-deps ## print performance figures (render, plugins native vs WebAssembly, the controller with 800 Pods, fleets of 1k/5k/10k Pods)
	$(PY) -m modelserving.bench

render-example: setup ## render the example ModelServings offline (two roles; multi-node vLLM with built-in plugins)
	$(BIN)/modelserving render -f examples/prefill-decode.yaml
	$(BIN)/modelserving render --config examples/operator-rdma.yaml -f examples/multinode-vllm-rdma.yaml

run: setup system-deps ## the controller in the foreground: against $$KUBECONFIG, else a local control plane with a demo
	@if [ -n "$$KUBECONFIG" ]; then \
		$(BIN)/modelserving run $(RUN_ARGS); \
	else \
		$(BIN)/modelserving run --local-cluster .cluster --no-leader-election $(RUN_ARGS); \
	fi

fresh-check: ## clone HEAD into a temporary folder with an empty home, run make test there, timed (FRESH_KEEP=1 keeps the control plane and Go caches)
	bash .ci/fresh-check

clean: ## remove the venv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# --- local control plane (devcluster) ---
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and Volcano's
# scheduler and controller manager, built once per version into $MODELSERVING_CACHE (default
# ~/.cache/modelserving)/kube; state in .cluster/.
.PHONY: cluster-build cluster-up cluster-down cluster-status

cluster-build: setup system-deps ## build (or find cached) the local control plane binaries
	$(PY) -m modelserving.devcluster build

cluster-up: setup system-deps ## start the local control plane; writes .cluster/kubeconfig
	$(PY) -m modelserving.devcluster up

cluster-down: setup ## stop the local control plane and remove .cluster/
	$(PY) -m modelserving.devcluster down

cluster-status: setup ## show the local control plane's processes, health and memory
	$(PY) -m modelserving.devcluster status
# --- end devcluster ---

# --- wasm ---
# The Rust WebAssembly plugins: plugins-src/ (guest SDK, built-ins) compiled with Debian's Rust
# 1.63 (apt-installed when missing), offline and reproducibly, into the committed plugins-wasm/.
# The Go ones: plugins-src/sdk-go (guest SDK) and plugins-src/examples-go/* compiled with Go
# 1.26.8 (pinned with GOTOOLCHAIN), reproducibly, into the committed examples/wasm/go-*.wasm, and
# with TinyGo v0.37.0 (installed into the cache by `make tinygo`) into examples/wasm/tinygo-*.wasm.
.PHONY: wasm wasm-check wasm-sdk-test wasm-rust wasm-rust-check wasm-go wasm-go-check wasm-go-check-std wasm-go-check-tinygo wasm-go-test tinygo

wasm: wasm-rust wasm-go ## build plugins-wasm/*.wasm (Rust) and examples/wasm/{go,tinygo}-*.wasm (Go) from plugins-src/

wasm-check: wasm-rust-check wasm-go-check ## fail when plugins-wasm/ or examples/wasm/ does not match plugins-src/

wasm-rust: ## build plugins-wasm/*.wasm from plugins-src/ (Rust)
	bash plugins-src/build.sh build

wasm-rust-check: ## fail when plugins-wasm/ does not match plugins-src/ (Rust)
	bash plugins-src/build.sh check

wasm-sdk-test: ## cargo tests of the Rust SDK and built-ins
	bash plugins-src/build.sh test

wasm-go: ## build examples/wasm/go-*.wasm (standard Go) and tinygo-*.wasm (TinyGo) from plugins-src/examples-go/
	bash plugins-src/build-go.sh build

wasm-go-check: ## fail when examples/wasm/{go,tinygo}-*.wasm do not match plugins-src/ (installs TinyGo when missing)
	bash plugins-src/build-go.sh check

wasm-go-check-std: ## fail when examples/wasm/go-*.wasm (standard Go) do not match plugins-src/
	bash plugins-src/build-go.sh check go

wasm-go-check-tinygo: ## fail when examples/wasm/tinygo-*.wasm do not match plugins-src/ (installs TinyGo when missing)
	bash plugins-src/build-go.sh check tinygo

tinygo: ## install TinyGo v0.37.0 into the cache (Debian's LLVM 19, the Go module proxy; once)
	@bash plugins-src/install-tinygo.sh >/dev/null

wasm-go-test: ## go vet and go test of the Go SDK and examples (natively; replays abi/vectors)
	bash plugins-src/build-go.sh test
# --- end wasm ---

# --- kthena-revision ---
# Kthena's revision and role-template-hash values: tests/kthena-revision (Go, a build-time tool;
# nothing at run time needs Go) writes the Go type schema the Python hashes render from
# (host/modelserving/data/kthena-role-types.json) and, given Kthena's ModelServing CRD
# (KTHENA_CRD=<file>), the test vectors the unit tests replay (tests/data/kthena-revision/). The
# check is opt-in (its first build compiles the API server's schema packages, ~4 minutes): the
# schema is fresh, and our CRD's defaults give Kthena's values for every case.
.PHONY: kthena-revision kthena-revision-check

kthena-revision: ## regenerate the Kthena type schema; with KTHENA_CRD=<Kthena's CRD file> also the revision vectors
	MODELSERVING_CACHE=$(CACHE) bash tests/kthena-revision/run.sh types
	$(if $(KTHENA_CRD),MODELSERVING_CACHE=$(CACHE) bash tests/kthena-revision/run.sh vectors $(KTHENA_CRD))

kthena-revision-check: ## (opt-in, builds Go) the Kthena type schema is fresh and our CRD gives Kthena's revisions
	MODELSERVING_CACHE=$(CACHE) bash tests/kthena-revision/run.sh check
# --- end kthena-revision ---

# --- fuzz ---
# ms-smith (tests/wasm/smith): random valid modules from random bytes, through the wasm-smith
# library with `wasm-tools smith`'s configuration names, and a module's text for reports; the
# module fuzz test (tests/wasm/test_fuzz_modules.py) feeds them through the sandbox. Built from
# its own Cargo.lock (exact crates from crates.io, --locked) into the cache under a key of its
# sources, with rustup's pinned toolchain (wasm-smith needs Rust 1.88 or later; Debian's 1.63 of
# plugins-src/build.sh is too old) and build.sh's CARGO_HOME, unoptimised
# (tests/wasm/smith/Cargo.toml says why): about 40 s of CPU, once.
# The tests find the binary through $(SMITH), exported below.
.PHONY: smith fuzz

SMITH_SRC := tests/wasm/smith
SMITH_KEY := $(shell cat $(SMITH_SRC)/Cargo.toml $(SMITH_SRC)/Cargo.lock $(SMITH_SRC)/src/main.rs 2>/dev/null | sha256sum | cut -c1-12)
SMITH_HOME := $(CACHE)/smith-$(SMITH_KEY)
SMITH := $(SMITH_HOME)/ms-smith
SMITH_TOOLCHAIN ?= 1.95.0
RUSTUP ?= $(or $(shell command -v rustup 2>/dev/null),$(HOME)/.cargo/bin/rustup)
# rustup's toolchains: $$RUSTUP_HOME, else the .rustup beside the .cargo/bin that holds rustup
# (where rustup-init puts both; under another home, as in `make fresh-check`, rustup is still
# reachable by PATH, and a rustup proxy run there may leave an empty ~/.rustup), else ~/.rustup.
RUSTUP_BESIDE := $(abspath $(dir $(RUSTUP))../../.rustup)
RUSTUP_HOME ?= $(if $(wildcard $(RUSTUP_BESIDE)/toolchains/$(SMITH_TOOLCHAIN)-*),$(RUSTUP_BESIDE),$(HOME)/.rustup)
export SMITH

smith: $(SMITH) ## build ms-smith (random modules for the fuzz tests) into the cache

$(SMITH):
	@[ -x "$(RUSTUP)" ] || { echo "error: ms-smith is built with rustup's Rust $(SMITH_TOOLCHAIN) (Debian's 1.63 is too old): no rustup found (RUSTUP=...)" >&2; exit 1; }
	@rm -rf $(SMITH_HOME) $(SMITH_HOME).partial && mkdir -p $(SMITH_HOME).partial $(CACHE)/cargo
	env -u RUSTFLAGS -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET -u RUSTC_WRAPPER -u RUSTC \
		CARGO_HOME=$(CACHE)/cargo $(if $(RUSTUP_HOME),RUSTUP_HOME=$(RUSTUP_HOME)) \
		nice -n 10 $(RUSTUP) run $(SMITH_TOOLCHAIN) cargo build --quiet --locked --release \
		--manifest-path $(SMITH_SRC)/Cargo.toml --target-dir $(SMITH_HOME).partial/target
	@cp $(SMITH_HOME).partial/target/release/ms-smith $(SMITH_HOME).partial/ms-smith
	@rm -rf $(SMITH_HOME).partial/target
	@mv $(SMITH_HOME).partial $(SMITH_HOME)

# The fuzz tests, longer: FUZZ_COUNT random modules (default 2000) and FUZZ_EXAMPLES hypothesis
# examples a response test (default 5000), from FUZZ_SEED (default: a new one, printed first).
# A failure prints the seed and the module's index: FUZZ_SEED=<seed> makes the same campaign.
fuzz: setup smith ## a long fuzz campaign: random modules and responses through the sandbox (FUZZ_SEED, FUZZ_COUNT)
	@seed=$${FUZZ_SEED:-$$RANDOM$$RANDOM}; echo "fuzz: FUZZ_SEED=$$seed"; \
	FUZZ_SEED=$$seed FUZZ_COUNT=$${FUZZ_COUNT:-2000} FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-5000} \
		$(BIN)/pytest tests/wasm/test_fuzz.py tests/wasm/test_fuzz_modules.py \
		--hypothesis-seed=$$seed -o timeout=0 -p no:cacheprovider -s -v
# --- end fuzz ---
