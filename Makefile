# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv when it is
# missing and installs the package with its pinned dependencies before running.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
CUTLASS_PIN := $(shell sed -n 's/.*"\(nvidia-cutlass==[^"]*\)".*/\1/p' pyproject.toml)

.PHONY: demo test test-py test-cpp lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps '$(CUTLASS_PIN)'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tilefoundry.demo

test: test-py test-cpp lint

test-py: $(STAMP)
	$(PY) -m pytest -q -n 2 tests

test-cpp: $(STAMP)
	@echo "C++ runtime tests: see tests/cpp (added by the runtime issue)"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench

clean:
	rm -rf build
