# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
UV     := $(VENV)/bin/uv
# uv installs the same packages as pip in well under half the time (44 s for the test extras on
# a 2-core machine, against 124 s with pip: it downloads, unpacks and compiles in parallel).
# It compiles the bytecode at install as pip does: where PYTHONDONTWRITEBYTECODE is set, every
# process would otherwise compile Ray and JAX from source again. It does not read pip's
# configuration, so the machine's find-links (local wheels, such as the CPU build of torch that
# the test extras cap at) and index URL are passed on. Where uv cannot be installed, or its
# install fails, pip does it.
# Recursive (=): pip's configuration is read only when an install runs, not on every make.
FIND_LINKS  = $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
INDEX_URL   = $(or $(PIP_INDEX_URL),$(shell $(PYTHON) -m pip config get global.index-url 2>/dev/null))
UV_PIP      = $(UV) pip install --python $(PY) -q --compile-bytecode \
              $(foreach d,$(FIND_LINKS),--find-links $(d)) $(if $(INDEX_URL),--index-url $(INDEX_URL))
# Installs $(1) with uv if the venv has it (pip if uv fails), else with pip.
install_into_venv = if [ -x $(UV) ] && $(UV_PIP) $(1); then :; else \
	  { [ ! -x $(UV) ] || echo "make: uv could not install the packages; installing them with pip" >&2; }; \
	  $(PIP) install $(1); fi
# Test files run in this many pytest-xdist workers, each file whole in one worker (its module
# fixtures, its clusters); 1 runs the suite in one process. Two fill a 2-core machine: a
# sequential suite keeps it 65% busy (waiting on Ray's start-up and on subprocesses), and four
# overload it until Ray's own start-up times out.
PYTEST_WORKERS ?= 2
# mypy's worker processes (mypy 2's --num-workers): a cold check of the strict packages takes
# 46 s in one process on 2 cores, 31 s with two workers.
MYPY_WORKERS ?= 2

.PHONY: run test gates chromium install install-test bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install "uv>=0.5,<1" || $(PIP) install --upgrade pip

# Stamps re-run the install whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(call install_into_venv,-e .)
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(call install_into_venv,-e ".[test]")
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/sr-dist $(ARGS)

# The gates first (import contract, lint, strict typing; see docs/architecture.md), then the suite.
gates: install-test
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check sr_dist tests bench
	$(VENV)/bin/mypy $(if $(filter-out 0 1,$(MYPY_WORKERS)),--num-workers $(MYPY_WORKERS))

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
	$(call install_into_venv,-e ".[bench]")
	$(PY) bench/evaluator.py

clean:
	rm -rf $(VENV) build *.egg-info outputs multirun .pytest_cache
