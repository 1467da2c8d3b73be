# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Python writes its bytecode caches under make even where the shell says not to: without them every test process
# (two workers, every `dsv` and Dagster subprocess) compiles the platform and rewrites the test modules again
# (collection alone went from 10 s to 19 s a worker).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-slow lint ui venv bench clean conformance

# The runtime dependencies come from requirements.lock first (hashed, exact), then the deploy extra's lock (the image's
# packages: Celery, Redis, the Kubernetes client), then the package and its other extras around them, so the running
# environment is the lock that `dsv reproduce` rebuilds for an artifact made here, and the tests run the image's versions.
$(STAMP): pyproject.toml requirements.lock deploy/requirements-deploy.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r deploy/requirements-deploy.lock
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# Re-lock after changing [project].dependencies: keeps every pin it can (uv prefers the existing lock's versions).
# Also writes deploy/requirements-deploy.lock: the deploy extra's packages beyond requirements.lock (the image installs both).
# Upgrade on purpose with `make lock LOCK_ARGS=--upgrade` or `LOCK_ARGS='--upgrade-package numpy'`; then `make venv`.
LOCK_ARGS ?=
.PHONY: lock
lock:
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --generate-hashes --python-version 3.11 --no-annotate --custom-compile-command 'make lock' -o requirements.lock $(LOCK_ARGS)
	$(BIN)/uv pip compile pyproject.toml --extra deploy -c requirements.lock --generate-hashes --python-version 3.11 --no-annotate -o $(VENV)/deploy-full.lock
	$(BIN)/python deploy/deploy_lock.py requirements.lock $(VENV)/deploy-full.lock > deploy/requirements-deploy.lock

# The fraud example (.dsv), then the readings example in its own home (.dsv/readings): a report reproduced six months later.
demo: $(STAMP)
	$(BIN)/dsv demo
	DSV_CONFIG_DIR=dsv_platform/examples/readings/config DSV_HOME=.dsv/readings $(BIN)/dsv demo

# PostgreSQL server binaries, Chromium, Redis, make: apt-get installs the missing ones (a no-op when all are present).
.PHONY: prereqs
prereqs:
	.ci/prereqs

# The default set (everything but the slow and ui markers: 4:46 for 1,926 tests on 2 cores at the last measure, in place; a fresh clone adds about 5 %; the goal is 5); `make test-slow` runs the
# rest (end-to-end demos, deployments, kill-safety and race trials, the UI in Chromium, the PostgreSQL variants of tests that also run on
# SQLite). .ci/run runs both.
test: prereqs $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow and not ui" --durations=15 $(PYTEST_ARGS)

# Three workers on two cores: the slow set waits much of its time (Dagster daemons tick every 30 s, deployments start,
# subprocesses run), so a third worker fills the waits: 19:35 instead of 24:44 when compared; 19:25 for 408 tests at the last measure.
test-slow: prereqs $(STAMP)
	DSV_HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -n 3 --dist loadgroup -m "slow or ui" --durations=15 $(PYTEST_ARGS)

# ruff check (not ruff format: formatting is not enforced) and mypy, strict on dsv_platform.core (pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check dsv_platform dsv_platform_tests benchmarks deploy
	$(BIN)/mypy dsv_platform

# The webserver and the daemon (queue, schedules, sensors) on a home's embedded instance, whose dagster.yaml (telemetry
# off) is written if absent: ./.dsv, or the DSV_HOME (DAGSTER_HOME, DSV_CONFIG_DIR) given, as `dsv` reads them, e.g.
# `DSV_HOME=.dsv/readings DSV_CONFIG_DIR=dsv_platform/examples/readings/config make ui` (what `dsv demo` prints).
# Not `dagster dev`: Dagster 1.13 marks it superseded by `dg dev` (dagster-dg-cli).
UI_HOME = $(abspath $(or $(DSV_HOME),.dsv))
UI_DAGSTER = $(abspath $(or $(DAGSTER_HOME),$(UI_HOME)/dagster))
ui: $(STAMP)
	mkdir -p $(UI_DAGSTER) && (test -e $(UI_DAGSTER)/dagster.yaml || printf 'telemetry:\n  enabled: false\n' > $(UI_DAGSTER)/dagster.yaml)
	@echo "Dagster UI: http://127.0.0.1:3000 on $(UI_HOME) (Ctrl-C stops the webserver and the daemon)"
	DSV_HOME=$(UI_HOME) DAGSTER_HOME=$(UI_DAGSTER) sh -c '$(BIN)/dagster-daemon run -w workspace.yaml & trap "kill $$! 2>/dev/null" EXIT INT TERM; $(BIN)/dagster-webserver -w workspace.yaml'

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

conformance: $(STAMP)
	$(BIN)/dsv conformance --write dsv_platform/conformance/vectors.json
	$(BIN)/dsv conformance --joins --write dsv_platform/conformance/as_of_joins.json

clean:
	rm -rf $(VENV) .dsv .pytest_cache
