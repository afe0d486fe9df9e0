# The two commands of the README: `make up` (local stack + demo task) and `make test`.
VENV    := .venv
BIN     := $(VENV)/bin
SANDBOX ?= docker

.PHONY: up test deps venv lint bench clean

## up: install, start Redis, Docker, every service as a process, run the demo task, stay up
up: venv deps
	$(BIN)/taskyard up --sandbox $(SANDBOX)

## test: install and start what the tests need, check the code's contracts, run the whole suite
test: venv lint deps
	$(BIN)/pytest

venv: $(VENV)/.installed

# The locked packages, each checked against its hashes; then taskyard itself, which adds none.
$(VENV)/.installed: pyproject.toml requirements-dev.lock
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --require-hashes -r requirements-dev.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

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

## bench: the agent tier's figures in one run (wrk, a C load generator, is installed if missing)
bench: venv deps
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk >/dev/null)
	$(BIN)/python bench/agent_tier_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
