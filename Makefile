# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: run test gates install install-test bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# Stamps re-run the install whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -e ".[test]"
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/sr-dist $(ARGS)

# The gates first (import contract, lint, strict typing; see docs/architecture.md), then the suite.
gates: install-test
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check sr_dist tests bench
	$(VENV)/bin/mypy

test: gates
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install-test
	$(PIP) install -e ".[bench]"
	$(PY) bench/evaluator.py

clean:
	rm -rf $(VENV) build *.egg-info outputs multirun .pytest_cache
