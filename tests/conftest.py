"""Shared test setup."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# pytest-xdist runs one worker per core; torch's own thread pool on top of that oversubscribes the cores
# and turns every small kernel into a wait at an OpenMP barrier.
torch.set_num_threads(1)

# The modules whose tests take a minute or more on a 2-core machine (nvcc's units, the SmolLM2 command-line runs,
# the CPU decode bench), collected first and longest first, each module kept whole: pytest-xdist's workers start
# them early, beside the short tests, so that the run does not end on one of them while the other worker idles.
SLOW_MODULES = ("tests/test_compile_cuda_build.py", "tests/test_smollm2.py", "tests/test_compile_cuda.py",
                "tests/test_bench_decode.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect ``SLOW_MODULES``' tests first (in that order), every other test after them in its own order."""

    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return SLOW_MODULES.index(module) if module in SLOW_MODULES else len(SLOW_MODULES)

    items.sort(key=rank)


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One disk cache of built libraries for the whole test session ($TILEFOUNDRY_CACHE points at it).

    Under pytest-xdist the workers share it (it lives beside their own temporary folders), so a kernel
    one worker built is loaded, not rebuilt, by the other; the cache's lock keeps two builds of one
    kernel apart.
    """
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "tilefoundry-cache"
    root.mkdir(exist_ok=True)
    old = os.environ.get("TILEFOUNDRY_CACHE")
    os.environ["TILEFOUNDRY_CACHE"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("TILEFOUNDRY_CACHE", None)
        else:
            os.environ["TILEFOUNDRY_CACHE"] = old


@pytest.fixture
def default_opt_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """TILEFOUNDRY_OPT_LEVEL unset for one test: builds take the default level, 3 (`make test` sets 2)."""
    monkeypatch.delenv("TILEFOUNDRY_OPT_LEVEL", raising=False)
