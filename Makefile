# dpone — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help install chromium test test-fast test-crash test-dask lint format demo demo-api bench clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

RUNTIME_STAMP := $(VENV)/.installed-runtime

# The demo needs only the package and its runtime dependencies; the suite needs the extras too.
$(RUNTIME_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUNTIME_STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench,dask]'
	@touch $(STAMP) $(RUNTIME_STAMP)

install: $(STAMP) ## create .venv and install dpone with its dev and bench extras

# The operator's HTML report is tested in headless Chromium (tests marked browser): Debian's
# package, installed here when missing (as root), so a fresh machine needs nothing by hand.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	} || { echo "make test needs chromium: apt-get install chromium" >&2; exit 1; }

test: $(STAMP) chromium ## run the whole test suite (installs first, chromium included)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not crash and not dask" tests

test-fast: $(STAMP) ## the suite without the slow tests
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not slow and not crash and not dask" tests

test-crash: $(STAMP) ## the full fault-injection matrix
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m crash tests

test-dask: $(STAMP) ## engine: dask on LocalClusters and a scheduler with two workers (one process per test module)
	$(BIN)/python -m pytest -p no:randomly -m dask tests

lint: $(STAMP) ## ruff format check, ruff lint, mypy --strict on dpone/ and tests/, the import layers, dead code
	$(BIN)/ruff format --check dpone tests bench
	$(BIN)/ruff check dpone tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture

format: $(STAMP) ## apply ruff format and the safe ruff fixes
	$(BIN)/ruff format dpone tests bench
	$(BIN)/ruff check --fix dpone tests bench

DEMO := manifests_examples/orders_csv
# The examples that need nothing beyond the runtime dependencies (dlt's are for `make install`).
DEMO_VALIDATE := $(filter-out %/dlt_source/manifest.yaml %/rest_api/manifest.yaml,$(wildcard manifests_examples/*/manifest.yaml))
demo: $(RUNTIME_STAMP) ## run the orders example into a DuckDB file, with its bad rows quarantined
	@rm -rf $(DEMO)/.dpone
	$(BIN)/dpone validate $(DEMO_VALIDATE)
	$(BIN)/dpone run $(DEMO)/manifest.yaml 2>$(DEMO)/.dpone-demo.log
	@echo
	$(BIN)/dpone ops dlq summary --dir $(DEMO)/.dpone/dlq
	@echo
	@echo "The loaded table (first rows):"
	@$(BIN)/python -c "import duckdb; duckdb.connect('$(DEMO)/.dpone/orders_csv.duckdb', read_only=True).sql('SELECT id, amount, currency, status, updated_at FROM analytics.orders ORDER BY id LIMIT 5').show()"
	@echo "Logs of the run: $(DEMO)/.dpone-demo.log; README.md explains what happened."

API_DEMO := manifests_examples/rest_api
API_PORT ?= 8765
export DEMO_API_TOKEN ?= demo-token
demo-api: $(STAMP) ## start the example orders API on 127.0.0.1:8765 and load it twice (incremental)
	@rm -rf $(API_DEMO)/.dpone
	@$(BIN)/python $(API_DEMO)/demo_server.py --port $(API_PORT) >$(API_DEMO)/.demo-server.log 2>&1 & \
	server=$$!; trap 'kill $$server' EXIT; \
	$(BIN)/python -c "import socket, time; [time.sleep(0.1) for _ in range(100) if socket.socket().connect_ex(('127.0.0.1', $(API_PORT)))]"; \
	$(BIN)/dpone run $(API_DEMO)/manifest.yaml 2>$(API_DEMO)/.dpone-demo.log && \
	echo && echo "Second run: only orders updated after the committed cursor are asked for." && \
	$(BIN)/dpone run $(API_DEMO)/manifest.yaml 2>>$(API_DEMO)/.dpone-demo.log && \
	echo && echo "Requests the API saw:" && grep -o 'GET [^ ]*' $(API_DEMO)/.demo-server.log

bench: $(STAMP) ## benchmarks side by side with what users would use instead
	$(BIN)/python -m bench

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
