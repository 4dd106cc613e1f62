# The README's commands. `make run` starts the playground, `make test` runs everything.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.floe-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test install system-deps js-deps lint format bench fuzz librdkafka-tests clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

## Debian packages the test suite drives: Chromium (browser tests), kcat (a Kafka client),
## and the replicated metadata PostgreSQL's parts (tests/ha): PostgreSQL 15's server, etcd,
## and libpq's headers (barman-cloud's psycopg2 builds against them).
system-deps:
	@missing=""; command -v chromium >/dev/null || missing="$$missing chromium"; \
	 command -v kcat >/dev/null || missing="$$missing kcat"; \
	 test -x /usr/lib/postgresql/15/bin/postgres || missing="$$missing postgresql-15"; \
	 command -v etcd >/dev/null || missing="$$missing etcd-server"; \
	 test -e /usr/include/postgresql/libpq-fe.h || missing="$$missing libpq-dev"; \
	 if [ -n "$$missing" ]; then echo "installing$$missing (apt)"; \
	   $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing >/dev/null; fi

## kafkajs, for the JavaScript client tests.
js-deps: tests/js/node_modules/.floe-installed
tests/js/node_modules/.floe-installed: tests/js/package.json
	cd tests/js && npm install --no-audit --no-fund --silent
	@touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@# django-stubs' plugin imports the settings, which want a key (one that signs nothing)
	@# and start the embedded PostgreSQL and Redis when no URL is given (addresses that are
	@# never dialled: type checking opens no connection).
	SECRET_KEY=$${SECRET_KEY:-type-checking-only-this-key-signs-nothing} \
	  DATABASE_URL=$${DATABASE_URL:-postgres://type-checking@127.0.0.1:1/none} \
	  REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:1/0} $(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## The suite on TEST_WORKERS processes (a file's tests stay together: module fixtures
## such as a Spark master or the fault suite's world start once), in the order tests/conftest.py
## gives them: the longest files first. A worker that dies (a test past its timeout, below)
## ends the run at once, naming the test: pytest-xdist 3.8 hangs when it replaces a worker
## under --dist loadfile (its issues 1323, 1327, 1378), which CI saw run for 40 minutes.
TEST_WORKERS ?= 2
test: system-deps install js-deps lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart=0 --durations=25

run: install
	@command -v java >/dev/null || echo "note: Java 17+ is not installed; Spark jobs (compaction, retention) will not run until it is."
	$(BIN)/python -m controlplane.playground

bench: install
	$(BIN)/python bench/metadata_commit.py

## Schemathesis over the REST API, every phase and check, against a running control plane
## (`make run`, then FLOE_API_KEY=<its api-key line> make fuzz).
fuzz: install
	$(BIN)/st run "$${FLOE_URL:-http://127.0.0.1:8000}/api/v1/schema/?format=json" \
	  -H "Authorization: Bearer $$FLOE_API_KEY" --checks all --max-examples 30 \
	  --phases examples,coverage,fuzzing,stateful

## librdkafka's own integration tests (bench/librdkafka_tests.txt), one at a time in full
## mode, against a fresh playground; not part of `make test` (needs librdkafka's source,
## ~40 minutes): LIBRDKAFKA_SRC=<librdkafka checkout> make librdkafka-tests
librdkafka-tests: install
	$(BIN)/python bench/librdkafka_tests.py

clean:
	rm -rf $(VENV) .floe tests/js/node_modules
