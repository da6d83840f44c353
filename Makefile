# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# Test files run in this many pytest-xdist workers, each file whole in one worker (its module
# fixtures, its clusters); 1 runs the suite in one process. Two fill a 2-core machine: a
# sequential suite keeps it 65% busy (waiting on Ray's start-up and on subprocesses), and four
# overload it until Ray's own start-up times out.
PYTEST_WORKERS ?= 2

.PHONY: run test gates chromium install install-test bench clean

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

# tests/viz opens the HTML report in a real browser: Debian's chromium, installed if missing.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "make test: installing Debian's chromium for the report's browser test (tests/viz)"; \
	    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } || \
	      { echo "make test: apt-get could not install chromium; as root run: apt-get install -y chromium" >&2; exit 1; }; \
	  else \
	    echo "make test: /usr/bin/chromium is missing and there is no apt-get: install Chromium at /usr/bin/chromium (tests/viz opens the HTML report in it)" >&2; exit 1; \
	  fi; \
	fi

test: gates chromium
	$(PY) -m pytest --durations=25 $(if $(filter-out 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

bench: install-test
	$(PIP) install -e ".[bench]"
	$(PY) bench/evaluator.py

clean:
	rm -rf $(VENV) build *.egg-info outputs multirun .pytest_cache
