# Every target that needs Python bootstraps .venv itself, so a fresh clone only
# needs `make serve` or `make test`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# Narrow the test run without editing the recipe, e.g. `make test PYTEST_ARGS=tests/service`.
PYTEST_ARGS ?=
# pytest-xdist processes for `make test` (auto: one per core; 0 runs the suite in one process).
# Most of the suite's time is spent waiting on servers, fits and PostgreSQL, so even two cores
# shared by two workers finish far sooner. Tests that share a module's fixture run together
# in one worker (tests/conftest.py), and tests/postgres.py keeps the server restart apart.
PYTEST_WORKERS ?= auto
# Examples per operation and per fuzz test in `make fuzz`; `make test` runs a few dozen.
FUZZ_EXAMPLES ?= 500

.PHONY: serve test long kernels compose-checker browser image image-test lint format fuzz faults bench bench-service bench-client bench-dask scale-test soak clean

# The stamp is rebuilt whenever pyproject.toml changes, so new dependencies
# arrive with the next `make` instead of a hand-run pip command.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@

# Compiles the engine's and the service's kernels into Numba's on-disk cache once (about a minute on a fresh
# clone, seconds after), so no test or first fit pays for compilation under a time limit.
kernels: $(VENV)/.installed
	$(BIN)/python -m service.warmup

serve: $(VENV)/.installed kernels
	$(BIN)/coppice migrate
	$(BIN)/coppice serve --host $(HOST) --port $(PORT)

# `docker compose config` checks docker-compose.yml offline, but no compose v2 plugin is
# packaged for Debian 12 or PyPI: Debian's docker-compose (v1.29, the same `config` check
# against the Compose specification) stands in where apt-get can install it. Best effort:
# without it the check skips, unless COPPICE_REQUIRE_COMPOSE=1 (as in CI) makes it fail.
compose-checker:
	@if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's docker-compose to check docker-compose.yml"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			docker-compose >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends docker-compose >/dev/null 2>&1; } \
		|| echo "could not install docker-compose; the compose file check will skip"; \
	fi

# tests/browser drive Debian's Chromium through Playwright, which never downloads a browser of
# its own. Best effort, as for docker-compose above: without it those tests skip, unless
# COPPICE_REQUIRE_BROWSER=1 makes that a failure.
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the browser tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			chromium >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
		|| echo "could not install chromium; the browser tests will skip"; \
	fi

test: $(VENV)/.installed compose-checker browser kernels
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not long" $(PYTEST_ARGS)

# The tests marked `long`: longer loops (more jobs, rounds, rows, examples) of behaviours that
# `make test` checks in brief, kept out of it so that it stays under 15 minutes on a loaded
# 2-core machine (README, "Development").
long: $(VENV)/.installed compose-checker browser kernels
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m long $(PYTEST_ARGS)

# The container image (Dockerfile), built with docker or podman, whichever runs here (as root,
# apt-get installs podman where neither does). With no python:3.11-slim in the engine's store
# it builds on a stand-in made once with debootstrap and kept there: our machines reach no
# container registry. BASE_IMAGE=python:3.11-slim builds on the real one, pulled if need be.
# See deploy/image.sh and docs/operations.md, "The container image".
IMAGE ?= coppice:local
BASE_IMAGE ?=
image:
	COPPICE_IMAGE=$(IMAGE) BASE_IMAGE=$(BASE_IMAGE) bash deploy/image.sh build

# Builds the image, then runs its containers and drives them as a user would (tests/image):
# health, upload, train, predict, on SQLite and on the host's PostgreSQL as API + worker; the
# kernels compiled at build time serve the first predict; the faults; the compose stack with
# its host-PostgreSQL override (hence compose-checker). Some 5 to 10 minutes after the build.
image-test: $(VENV)/.installed compose-checker image
	COPPICE_IMAGE_TEST=1 COPPICE_IMAGE=$(IMAGE) \
		COPPICE_CONTAINER_ENGINE=$$(bash deploy/image.sh engine) \
		$(BIN)/pytest -n 0 tests/image $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The bad-input fuzzers (Schemathesis over /openapi.json, Hypothesis over uploads and
# predictions) with many more examples than `make test` gives them; takes several minutes.
fuzz: $(VENV)/.installed
	COPPICE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest tests/service/fuzz $(PYTEST_ARGS)

# Kill fits, workers, the API and whole servers at random moments, then prove no job is lost:
# ROUNDS rounds on SQLite, then on PostgreSQL (COPPICE_TEST_POSTGRES_URL or the local server).
ROUNDS ?= 50
faults: $(VENV)/.installed
	$(BIN)/python -m tests.stress.fault_loop --database sqlite --rounds $(ROUNDS)
	$(BIN)/python -m tests.stress.fault_loop --database postgres --rounds $(ROUNDS)

bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks.run

bench-service: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks.service

# What the Python client adds to a one-row prediction over raw httpx (target: <= 0.3 ms).
bench-client: $(VENV)/.installed kernels
	$(BIN)/python -m benchmarks.client_overhead

# Forests and XGBoost-style boosting through a two-worker Dask LocalCluster beside the local
# executors, and the backend's per-task and per-level overheads (benchmarks/README.md).
bench-dask: $(VENV)/.installed kernels
	$(BIN)/python -m benchmarks.dask_backend

# Issue 27's scale test: 16 M x 24 rows written as Parquet parts by two single-thread Dask
# workers limited to 1 GiB each, registered and trained (XGBoost-style, depth 6, 50 rounds)
# through `coppice serve`; prints the job's resources and the workers' peaks, fails on a failed
# job or a restarted worker. Takes both cores for a long while: never beside benchmarks.
# SCALE_ARGS narrows it, e.g. SCALE_ARGS="--rows 2000000 --rounds 5".
SCALE_ARGS ?=
scale-test: $(VENV)/.installed kernels
	$(BIN)/python -m benchmarks.scale_test $(SCALE_ARGS)

# 20,000 one-row predictions at concurrency 32 against a real server; fails on any error or
# when the server's memory grows over the second half (see benchmarks/soak.py).
soak: $(VENV)/.installed
	$(BIN)/python -m benchmarks.soak

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
