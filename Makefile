# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test ui venv bench clean conformance

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/dsv demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

ui: $(STAMP)
	DAGSTER_HOME=$(CURDIR)/.dsv/dagster $(BIN)/dagster dev -w workspace.yaml

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

conformance: $(STAMP)
	$(BIN)/dsv conformance --write dsv_platform/conformance/vectors.json

clean:
	rm -rf $(VENV) .dsv .pytest_cache
