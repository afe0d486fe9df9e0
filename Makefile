# The two commands of the README: `make up` (local stack + demo task) and `make test`.
VENV    := .venv
BIN     := $(VENV)/bin
SANDBOX ?= docker
# The interpreter the venv is made with: Python 3.11 or 3.12.
PYTHON  ?= python3

.PHONY: up test preflight deps venv install-lock lint bench clean

## up: install, start Redis, Docker, every service as a process, run the demo task, stay up
up: preflight venv deps
	$(BIN)/taskyard up --sandbox $(SANDBOX)

## test: install and start what the tests need, check the code's contracts, run the whole suite
test: preflight venv lint deps
	$(BIN)/pytest

## preflight: what the commands need (Linux, Python 3.11/3.12 with venv, root or the tools), one line if not
preflight:
	@bash scripts/preflight.sh $(PYTHON)

venv: $(VENV)/.installed

# The locked packages (install-lock); then taskyard itself, which adds none; pip check proves
# nothing is missing; then the wheels of the lock entries this Python skips, whose metadata
# tests/contracts reads.
$(VENV)/.installed: pyproject.toml requirements-dev.lock requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
	$(MAKE) --no-print-directory install-lock VENV=$(VENV) LOCK=requirements-dev.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	$(BIN)/pip check
	$(BIN)/python scripts/checkout_pth.py
	$(BIN)/python scripts/lock_environments.py fetch $(VENV)/lock-wheels requirements-dev.lock requirements.lock
	touch $@

## install-lock: install LOCK into the venv VENV exactly, resolving nothing against the index
# --no-deps: the lock is complete (tests/contracts/test_lock_environments.py), so pip has
# nothing to resolve; without it pip resolves extras (`lxml[html_clean]>=4.4.2`) against
# whatever the index publishes today, outside the pins, and --require-hashes refuses the run.
install-lock:
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --require-hashes -r $(LOCK)
	$(BIN)/pip check

## deps: system packages, the Docker engine and the sandbox image
deps:
	bash scripts/install_system_deps.sh
	bash scripts/setup_docker.sh
	bash scripts/build_sandbox_image.sh

## lint: style, formatting, types (mypy, configured in pyproject) and import contracts
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## bench: the agent tier's figures in one run (wrk, a C load generator, is installed if missing),
## then two LLM proxy instances sharing placements against one (hit share, added latency), then
## the chaos run's failover variant (Redis's primary SIGKILLed under Sentinel)
bench: venv deps
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk >/dev/null)
	$(BIN)/python bench/agent_tier_bench.py
	$(BIN)/python bench/proxy_bench.py --fleet
	$(BIN)/python bench/chaos_run.py --variants failover

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
