# Relay — every target creates .venv and node_modules by itself when they are missing or stale.
SHELL := /bin/bash
# Lambda runs the functions on python3.13 (infra/constructs/layers.py), so .venv, and with it every test,
# runs on 3.13 too: a python3.13 on PATH that runs (a pyenv shim may not), else pyenv's newest 3.13.x;
# PY=/path/to/python3.13 overrides.
PYTHON_VERSION := 3.13
ifeq ($(origin PY),undefined)
PY := $(shell for p in $$(command -v python$(PYTHON_VERSION)) $$(ls -1d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(PYTHON_VERSION).*/bin/python$(PYTHON_VERSION) 2>/dev/null | sort -rV); do "$$p" -c '' 2>/dev/null && { echo "$$p"; break; }; done)
endif
VENV := .venv
BIN := $(VENV)/bin
STAGE ?= dev
# jsii (the CDK's bridge to Node) warns on every call on Node 20; the CDK runs fine on it.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 20
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled
comma := ,
# Passed through to a target's command, for a run of another size or place (CI's short forms of each
# target, tests/demo/test_make_*.py): LOCAL_ARGS to `python -m local` (demo, chaos, local: e.g.
# "--emulator-port 4600 --api-port 0 --no-state --state-dir /tmp/run", which leaves .sandbox alone),
# SMOKE_ARGS to the smoke suite (e.g. "--sandbox-state /tmp/run/state.json": that sandbox, not the one
# `make local` runs), PYTEST_ARGS to pytest, COST_JSON where make cost writes its figures (its sandbox's
# logs beside it) and make capacity reads them, OPENAPI_DIR where make openapi writes, PYTHON_SOURCES
# what make fmt and make lint read.
LOCAL_ARGS ?=
SMOKE_ARGS ?=
PYTEST_ARGS ?=
COST_JSON ?= .sandbox/cost.json
OPENAPI_DIR ?= functions
PYTHON_SOURCES := app.py infra functions layers/relay/python emulator local ops tests bench scripts examples

.PHONY: _browser chaos cost cost-scale capacity openapi help install lock check-locks lint fmt hooks typecheck synth cfn-lint _cfn-lint checkov _checkov _templates _tools pytest unit handlers infra e2e test test-profile bench demo local deploy diff destroy stateful-manifest smoke clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' Makefile | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

# uv installs the locked requirements (pip took ~90 s of a fresh `make demo`; uv ~30 s, nearly all of
# it compiling the packages to bytecode, which synth and every sandbox worker then import quickly).
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode

# A .venv made by another Python (an older checkout) is rebuilt, not reused.
$(VENV)/python-$(PYTHON_VERSION):
	@if [ -z "$(PY)" ] || ! "$(PY)" -c 'import sys; sys.exit(sys.version_info[:2] != ($(subst .,$(comma),$(PYTHON_VERSION))))' 2>/dev/null; then \
	  echo "error: Python $(PYTHON_VERSION) is required (the Lambda runtime is python$(PYTHON_VERSION) and the tests run on it)," >&2; \
	  echo "  and PY='$(PY)' is not it (by default: python$(PYTHON_VERSION) on PATH, then pyenv's \$${PYENV_ROOT:-~/.pyenv}/versions/$(PYTHON_VERSION).*)." >&2; \
	  echo "  Install it (e.g. 'pyenv install $(PYTHON_VERSION)') or pass PY=/path/to/python$(PYTHON_VERSION)." >&2; \
	  exit 2; fi
	if [ -x $(BIN)/python ] && ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != ($(subst .,$(comma),$(PYTHON_VERSION))))'; then \
	  echo "$(VENV) was made by another Python: rebuilding it with $(PY)"; rm -rf $(VENV); fi
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	touch $@

$(BIN)/uv: $(VENV)/python-$(PYTHON_VERSION)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# pyproject.toml declares what each environment installs (dependency groups) and uv.lock resolves them all
# together; `make lock` exports each group, every package pinned with its hashes, to the requirements file
# its install reads (EXPORTS: file:group). `make check-locks` (first in `make test`, offline) fails when
# uv.lock no longer matches pyproject.toml or an export no longer matches uv.lock. `uv pip install`, not
# `sync`: the two steps add to one .venv (the dev export holds the sandbox's packages at the same
# versions), and a sync to the sandbox group would remove the dev tools, pip and uv itself.
EXPORTS := requirements.txt:cdk requirements-sandbox.txt:sandbox requirements-dev.txt:dev requirements-checkov.txt:checkov layers/dependencies/requirements.txt:layer
UV_PROJECT := --python $(BIN)/python --no-python-downloads
EXPORT_GROUP := $(BIN)/uv export $(UV_PROJECT) --frozen --quiet --no-header --no-emit-project --format requirements-txt --only-group
# The shell loop over EXPORTS: $$file and $$group set, then $(1) run for each.
define each_export
set -e; for pair in $(EXPORTS); do file=$${pair%%:*}; group=$${pair##*:}; $(1); done
endef
EXPORT_HEADER = echo "\# Exported from uv.lock by \`make lock\` (group $$group of pyproject.toml): edit pyproject.toml and run make lock."

# What the sandbox and synth need: enough for `make demo` and `make local`.
$(BIN)/.sandbox-installed: $(BIN)/uv requirements-sandbox.txt
	$(UV) --require-hashes -r requirements-sandbox.txt
	touch $@

# Everything, test and lint tools included.
$(BIN)/.installed: $(BIN)/.sandbox-installed requirements-dev.txt
	$(UV) --require-hashes -r requirements-dev.txt
	touch $@

lock: $(BIN)/uv ## resolve pyproject.toml's dependency groups into uv.lock (UPGRADE=1: newest versions allowed), then export each group with hashes
	$(BIN)/uv lock $(UV_PROJECT) $(if $(UPGRADE),--upgrade)
	@$(call each_export,{ $(EXPORT_HEADER); $(EXPORT_GROUP) $$group; } > $$file; echo "lock: $$group -> $$file")

check-locks: $(BIN)/uv ## fail, naming the file, when uv.lock does not match pyproject.toml or an exported requirements file does not match uv.lock (offline)
	@$(BIN)/uv lock --check --offline --quiet $(UV_PROJECT) || { echo "error: uv.lock does not match pyproject.toml (uv says why above): run make lock and commit both" >&2; exit 1; }
	@$(call each_export,{ $(EXPORT_HEADER); $(EXPORT_GROUP) $$group; } | diff -q $$file - >/dev/null || { echo "error: $$file is not uv.lock's export of group $$group: run make lock and commit both" >&2; exit 1; })
	@echo "check-locks: uv.lock matches pyproject.toml, and the $(words $(EXPORTS)) exports match uv.lock"

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/.installed node_modules/.installed ## create .venv and node_modules (uv + npm), only when stale

lint: $(BIN)/.installed ## ruff lint + format check
	$(BIN)/ruff check $(PYTHON_SOURCES)
	$(BIN)/ruff format --check $(PYTHON_SOURCES)

# Lint fixes first: an import sort or a rewrite they make is then formatted like everything else.
fmt: $(BIN)/.installed ## ruff check --fix, then ruff format, on every Python source
	$(BIN)/ruff check --fix $(PYTHON_SOURCES)
	$(BIN)/ruff format $(PYTHON_SOURCES)

# .pre-commit-config.yaml runs this .venv's ruff and mypy, as `make lint` and `make typecheck` do.
hooks: $(BIN)/.installed ## install the git pre-commit hook (ruff lint + format check, mypy) for this clone
	$(BIN)/pre-commit install

typecheck: $(BIN)/.installed ## mypy (strict) on the kernel, the functions, the sandbox and the infra
	$(BIN)/mypy layers/relay/python/relay functions emulator local infra ops scripts examples

synth: install ## synthesize every stack to cdk.out/ with cdk-nag and the Relay guards on
	npx cdk synth --quiet -c stage=$(STAGE)

cfn-lint: synth ## cfn-lint every synthesized template (errors fail)
	@$(MAKE) --no-print-directory _cfn-lint

# The _targets check the cdk.out already there (`make test` synthesizes once, then runs them beside pytest).
_cfn-lint: $(BIN)/.installed
	$(BIN)/cfn-lint --non-zero-exit-code error -- cdk.out/*.template.json

# checkov pins boto3/botocore 1.35.x, older than the app's, so it gets a venv of its own, installed from
# its group's export (uv resolves it apart: tool.uv.conflicts in pyproject.toml).
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: $(BIN)/uv requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(BIN)/python -m venv $(CHECKOV_VENV)
	$(BIN)/uv pip install --python $(CHECKOV_VENV)/bin/python --quiet --require-hashes -r requirements-checkov.txt
	touch $@

checkov: synth ## checkov every synthesized template (a failed check fails; skips and their reasons: .checkov.yaml)
	@$(MAKE) --no-print-directory _checkov

_checkov: $(CHECKOV_VENV)/.installed
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml -f cdk.out/*.template.json
	@skipped="$$(sed -nE 's/^  - (CKV[A-Z0-9_]+).*/\1/p' .checkov.yaml | paste -sd ' ')"; \
	  echo "checkov: $$(wc -w <<<"$$skipped") checks skipped for the whole app (skip-check in .checkov.yaml, each with its reason): $$skipped"

openapi: $(BIN)/.installed ## regenerate the checked-in OpenAPI documents (functions/<service>/openapi.json) from the APIs
	for svc in loyalty orders payments scores; do \
	  mkdir -p $(OPENAPI_DIR)/$$svc && \
	  PYTHONPATH=layers/relay/python:functions $(BIN)/python -m $$svc.handlers.api > $(OPENAPI_DIR)/$$svc/openapi.json || exit 1; done

# pytest-xdist workers for the whole suite: 4 on this 2-core machine, because the e2e and chaos sandboxes
# mostly wait on their own latency; tests/scheduling.py keeps the tests that share a sandbox on one worker
# and starts the longest first. WORKERS=0 runs the suite in one process, in collection order.
WORKERS ?= 4
XDIST = -n $(WORKERS)

# The console's browser tests (tests/console) drive the system's Chromium through Playwright, which never
# downloads a browser: Debian's chromium, installed here when it is missing (CI runs as root on a clean
# machine); a no-op when it is there. CHROMIUM=/path/to/chromium for another one.
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM
_browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: the console's browser tests need Chromium at $(CHROMIUM): sudo apt-get install chromium chromium-driver" >&2; \
	    exit 2; fi; \
	  echo "installing Debian's chromium (the console's browser tests, tests/console)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; fi

pytest: $(BIN)/.installed _browser ## run the whole pytest suite (WORKERS=4 pytest-xdist workers; WORKERS=0: one process)
	$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

# One layer of the suite at a time (`make pytest` runs them all, tests/fakes and tests/sandbox included).
unit: $(BIN)/.installed ## the unit tests: in-process, socket-free (tests/unit; a connect fails the test), about a second
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

# The handler tests build their resources from an in-process synth of the app (Node via jsii, no CDK CLI),
# cached under .pytest_cache/relay-assemblies; so do the ops CLI's tests (tests/ops), on the same worlds.
handlers: $(BIN)/.installed ## the handler tests: each function, and the ops CLI, against moto's in-process AWS (tests/handlers, tests/ops)
	$(BIN)/python -m pytest -q tests/handlers tests/ops $(PYTEST_ARGS)

infra: $(BIN)/.installed ## the infra assertion tests: the stacks synthesized in process, cdk-nag on (tests/infra)
	$(BIN)/python -m pytest -q tests/infra $(PYTEST_ARGS)

# The sandbox synthesizes cdk.out with `npx cdk synth` when it is missing or older than the sources.
# Two workers: tests/e2e is two scopes, each on one sandbox (tests/scheduling.py).
e2e: $(BIN)/.installed node_modules/.installed ## the end-to-end tests: the whole app on the local sandbox, IAM enforced (tests/e2e)
	$(BIN)/python -m pytest -q -n $(if $(filter 0,$(WORKERS)),0,2) tests/e2e $(PYTEST_ARGS)

# Locks and lint first (seconds, and they fail fast); then one synth; then mypy, cfn-lint + checkov and
# pytest side by side, each target's output printed whole when it ends (--output-sync). mypy, cfn-lint and
# checkov run at a lower CPU priority (nice), as pytest's in-process workers do: the sandboxes' clocks are
# real (tests/scheduling.py).
test: check-locks lint synth $(CHECKOV_VENV)/.installed ## everything CI runs: locks, lint, synth + nag + guards, then types, cfn-lint + checkov and pytest side by side
	$(MAKE) --no-print-directory -j2 --output-sync=target _tools pytest

_tools:
	nice -n 10 $(MAKE) --no-print-directory -j2 --output-sync=target typecheck _templates

_templates: _cfn-lint
	$(MAKE) --no-print-directory _checkov

test-profile: $(BIN)/.installed node_modules/.installed $(CHECKOV_VENV)/.installed ## where `make test`'s time goes: each stage's seconds (run one after the other), pytest by folder, the 30 slowest tests and fixtures
	$(BIN)/python scripts/test_profile.py --workers $(WORKERS)

cost: $(BIN)/.sandbox-installed node_modules/.installed ## $ per 1M operations per flow: every AWS request counted in the sandbox, priced (bench/prices.json); figures in .sandbox/cost.json
	PYTHONPATH=. $(BIN)/python bench/cost.py --json $(COST_JSON)

SIZES ?= 200,2000
cost-scale: $(BIN)/.sandbox-installed node_modules/.installed ## do a payment's requests grow with volume? the payments flow at 200 and 2,000 (SIZES=a,b) and the sweeper with that many open; exit 1 if a per-payment count grows over 10 %
	PYTHONPATH=. $(BIN)/python -m bench.scale_check --sizes $(SIZES)

capacity: $(BIN)/.sandbox-installed ## capacity on paper at RATE operations/s (FLOW=payments, STAGE=dev|prod): each table, key, index shard, queue, topic, function and API beside its AWS quota (bench/quotas.json), the first to bind and the quotas to raise; reads make cost's .sandbox/cost.json
	@if [ -z "$(RATE)" ]; then echo "error: RATE is required: make capacity RATE=1000 [FLOW=payments]" >&2; exit 2; fi
	@if [ ! -f $(COST_JSON) ]; then echo "error: $(COST_JSON) not found: run 'make cost' first (the model multiplies the requests per operation it measures)" >&2; exit 2; fi
	$(BIN)/python -m bench.capacity --rate $(RATE) --flow $(or $(FLOW),payments) --stage $(STAGE) --json $(COST_JSON)

bench: install ## print benchmark figures (never asserted)
	$(BIN)/python bench/synth_bench.py
	$(BIN)/python bench/kernel_bench.py
	$(BIN)/python bench/moto_transactions_bench.py
	$(BIN)/python bench/moto_query_bench.py
	$(BIN)/python bench/sigv4_bench.py
	$(BIN)/python bench/tracing_bench.py
	PYTHONPATH=. $(BIN)/python bench/sandbox_bench.py

demo: $(BIN)/.sandbox-installed node_modules/.installed ## the main job: run the whole app locally and drive a payments scenario; exits 0 only if the invariants hold
	$(BIN)/python -m local demo $(LOCAL_ARGS)

# CHAOS_OPERATIONS (10000), CHAOS_FAULT_RATE (0.1) and CHAOS_SEED (1) change the run; CI runs 300 in process
# (tests/chaos/test_chaos.py) and make chaos itself at 60 (tests/demo/test_make_sandbox_targets.py).
chaos: $(BIN)/.sandbox-installed node_modules/.installed ## 10,000 operations under crashes, AWS faults, duplicates, lost replies, outages and poison; exits 0 only if every invariant holds
	$(BIN)/python -m local chaos $(LOCAL_ARGS)

local: $(BIN)/.sandbox-installed node_modules/.installed ## start the local sandbox (emulator :4566, HTTP API :8000) until Ctrl-C
	$(BIN)/python -m local up $(LOCAL_ARGS)

# deploy and diff use the assembly `make synth` just wrote for STAGE (--app cdk.out): one synth, and what
# cdk-nag and the guards passed is what is deployed.
deploy: synth ## deploy every stack to the AWS account in your credentials (STAGE=dev|prod)
	npx cdk deploy --app cdk.out --all

diff: synth ## show what a deploy would change (STAGE=dev|prod)
	npx cdk diff --app cdk.out --all

destroy: synth ## delete every stack of STAGE; a non-disposable stage (prod) keeps its data (docs/deployment.md: "make destroy")
	npx cdk destroy --app cdk.out --all --force

# STAGE=local is the sandbox (the running `make local`, else one started for the run on free ports); any
# other STAGE is that stage on AWS, found from its stacks' outputs and called with your AWS credentials.
# CI runs the same suite against the e2e session's sandbox (tests/e2e/test_smoke_e2e.py, in `make test`).
smoke: $(BIN)/.sandbox-installed node_modules/.installed ## the black-box suite against a deployed stage (STAGE=dev|prod) or the sandbox (STAGE=local); exit 0 only if every check passes
	$(BIN)/python -m $(if $(filter local,$(STAGE)),local,ops) smoke --stage $(STAGE) $(SMOKE_ARGS)

stateful-manifest: install ## rewrite infra/stateful-resources.json from a synth; REASON="the migration" is required when it changes
	$(BIN)/python -m infra.update_safety --reason "$(REASON)"

clean: ## remove build output (keeps .venv, .venv-checkov and node_modules)
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache
