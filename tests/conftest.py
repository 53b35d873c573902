"""Shared test setup."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# pytest-xdist runs one worker per core; torch's own thread pool on top of that oversubscribes the cores
# and turns every small kernel into a wait at an OpenMP barrier.
torch.set_num_threads(1)


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
