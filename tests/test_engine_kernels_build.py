"""The decode engine's CUDA kernels on a machine without a GPU: they build with nvcc (one translation unit, no
warning), export every entry through tvm-ffi, compile to the machine code they were written for (16-byte
streamed weight loads, no local-memory spills), ship with the package, and every argument check runs in C++
before anything touches a device."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tilefoundry.engine import ENTRIES, attention_workspace, build_kernels, library

ROOT = Path(__file__).resolve().parents[1]
BF16 = torch.bfloat16

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("TILEFOUNDRY_NVCC") or "nvcc") is None,
                                reason="needs nvcc to build the kernels")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library, built once per test session (pytest-xdist workers share the folder and its build lock)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return build_kernels(shared / "engine-kernel-cache")


@pytest.fixture(scope="module")
def kernels(built: Path):
    import tvm_ffi

    return tvm_ffi.load_module(str(built))


def test_builds_without_a_warning_and_exports_every_entry(built: Path, kernels) -> None:
    assert built.is_file() and built.name == "engine_kernels.so"
    assert library.build_diagnostics(built) == "", "nvcc warned while building the kernels"
    for name in ENTRIES:
        assert callable(getattr(kernels, name)), name
    assert kernels.pdl() is True
    kernels.set_pdl(False)
    assert kernels.pdl() is False
    kernels.set_pdl(True)


def test_second_build_is_the_cached_library(built: Path) -> None:
    before = built.stat().st_mtime_ns
    assert build_kernels(built.parents[2]) == built
    assert built.stat().st_mtime_ns == before


def _cuobjdump() -> str | None:
    for candidate in (os.environ.get("CUOBJDUMP"), "/work/tools/cuobjdump", shutil.which("cuobjdump")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_sass_streams_weights_16_bytes_at_a_time_and_never_spills(built: Path) -> None:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (set $CUOBJDUMP or put it on PATH)")
    sass = subprocess.run([tool, "-sass", str(built)], capture_output=True, text=True, check=True).stdout
    functions = {m.group(1): body for m in re.finditer(r"Function : (\S+)\n(.*?)(?=\n\s*Function : |\Z)", sass,
                                                        re.S) for body in [m.group(2)]}
    families = {"gemv_tiled_kernel": 50, "gemv_stream_kernel": 30, "attention_kernel": 8, "rope_cache_kernel": 8,
                "rmsnorm_kernel": 2, "swiglu_kernel": 1}
    for family, count in families.items():
        assert sum(family in name for name in functions) == count, f"{family}: {count} kernels expected"
    for name, body in functions.items():
        assert not re.search(r"\b(LDL|STL)\b", body), f"{name} spills to local memory"
        wide = re.findall(r"\bLDG\.E(?:\.\w+)*\.128\b", body)
        assert wide, f"{name} has no 16-byte load"
        if "gemv_tiled_kernel" in name:  # the weights: not kept in L1, 256-byte L2 lines
            assert any(".NA." in w and "LTC256B" in w for w in wide), f"{name}: weight loads are not streamed"
        if "gemv_stream_kernel" in name:  # the weights: bulk copies into shared memory, read 16 bytes at a time
            assert re.search(r"\bUBLKCP\b", body), f"{name}: weights are not bulk-copied"
            assert re.search(r"\bLDS(?:\.\w+)*\.128\b", body), f"{name}: no 16-byte shared-memory load"


def test_package_data_ships_every_kernel_source() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["tilefoundry"]
    sources = [p.relative_to(ROOT / "src" / "tilefoundry").as_posix() for p in library.KERNEL_DIR.iterdir()]
    assert sources and all(any(fnmatch.fnmatch(s, g) for g in globs) for s in sources), sources


# ---- argument checks, all in C++, all before the device is looked at -----------------------------------------

def t(*shape: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


def misaligned(*shape: int) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    return t(n + 1)[1:].view(*shape)


REFUSALS = [
    # (entry, arguments, exception, words of the message)
    ("gemv", lambda: (t(1, 64, dtype=torch.float32), t(8, 64), t(1, 8), 0), TypeError,
     "gemv: x has dtype float32, expected bfloat16"),
    ("gemv", lambda: (t(1, 64), t(8, 64, dtype=torch.float16), t(1, 8), 0), TypeError, "weight has dtype float16"),
    ("gemv", lambda: (t(64), t(8, 64), t(1, 8), 0), TypeError, "x has rank 1"),
    ("gemv", lambda: (t(17, 64), t(8, 64), t(17, 8), 0), ValueError, "token count M (x's axis 0) is 17"),
    ("gemv", lambda: (t(1, 60), t(8, 60), t(1, 8), 0), ValueError, "must be a multiple of 8"),
    ("gemv", lambda: (t(1, 64), t(8, 72), t(1, 8), 0), ValueError, "weight has shape (8, 72), but axis 1 must be 64"),
    ("gemv", lambda: (t(1, 64), t(8, 64), t(1, 9), 0), ValueError, "out has shape (1, 9), but axis 1 must be 8"),
    ("gemv", lambda: (t(1, 64), t(64, 8).T, t(1, 8), 0), ValueError, "weight (shape (8, 64)) is not contiguous"),
    ("gemv", lambda: (misaligned(1, 64), t(8, 64), t(1, 8), 0), ValueError, "x does not start at a 16-byte boundary"),
    ("gemv", lambda: (t(1, 64), t(8, 64), t(1, 8), 3), ValueError, "split_k is 3"),
    ("gemv", lambda: (t(1, 64), t(8, 64), t(1, 8), 0), ValueError, "x is not on a CUDA device"),
    ("gemv_residual", lambda: (t(1, 64), t(8, 64), t(2, 8), t(1, 8), 0), ValueError,
     "residual has shape (2, 8), but axis 0 must be 1"),
    ("gemv_swiglu", lambda: (t(1, 64), t(9, 64), t(1, 4), 0), ValueError, "N (weight's axis 0) is 9"),
    ("gemv_swiglu", lambda: (t(1, 64), t(8, 64), t(1, 8), 0), ValueError, "out has shape (1, 8), but axis 1 must be 4"),
    ("rmsnorm_gemv", lambda: (t(1, 64), t(32), t(8, 64), t(1, 8), 1e-6, 0), ValueError,
     "norm_weight has shape (32,), but axis 0 must be 64"),
    ("rmsnorm_gemv", lambda: (t(1, 64), t(64), t(8, 64), t(1, 8), -1.0, 0), ValueError, "eps is -1"),
    ("gemv_argmax", lambda: (t(2, 64), t(8, 64), t(2, 8), t(2, dtype=torch.int32), t(3, dtype=torch.int64), 0),
     TypeError, "token has dtype int32, expected int64"),
    ("gemv_argmax", lambda: (t(2, 64), t(8, 64), t(2, 8), t(2, dtype=torch.int64), t(2, dtype=torch.int64), 0),
     ValueError, "workspace holds 2 elements, fewer than the 3 it needs"),
    ("rmsnorm_gemv_greedy", lambda: (t(2, 64), t(64), t(8, 64), t(2, 8), t(2, dtype=torch.int64),
                                     t(3, 4, dtype=torch.int32), t(4, dtype=torch.int64), 1e-6), ValueError,
     "token count M (x's axis 0) is 2, which must lie in [1, 1]"),
    ("gemv_greedy", lambda: (t(1, 64), t(8, 64), t(1, 8), t(1, dtype=torch.int64), t(3, 4, dtype=torch.int32),
                             t(3, dtype=torch.int64)), ValueError, "result has shape (1,), but axis 0 must be 2"),
    ("gemv_greedy", lambda: (t(1, 64), t(8, 64), t(1, 8), t(2, dtype=torch.int64), t(3, 4, dtype=torch.int64),
                             t(3, dtype=torch.int64)), TypeError, "step has dtype int64, expected int32"),
    ("gemv_greedy", lambda: (t(1, 64), t(8, 64), t(1, 8), t(2, dtype=torch.int64), t(2, 4, dtype=torch.int32),
                             t(3, dtype=torch.int64)), ValueError, "step has shape (2, 4), but axis 0 must be 3"),
    ("gemv_greedy", lambda: (t(1, 64), t(8, 64), t(1, 8), t(2, dtype=torch.int64), t(3, 4, dtype=torch.int32),
                             t(2, dtype=torch.int64)), ValueError,
     "workspace holds 2 elements, fewer than the 3 it needs (a ticket, one key per token and a not-finite flag)"),
    ("decode_attention", lambda: (t(1, 6, 128), t(16, 4, 128), t(16, 4, 128), t(1, dtype=torch.int32),
                                  t(1, 6, 128), t(1 << 20, dtype=torch.uint8), 0.1, 0), ValueError,
     "q has 6 heads and the cache 4 KV heads"),
    ("decode_attention", lambda: (t(1, 8, 96), t(16, 4, 96), t(16, 4, 96), t(1, dtype=torch.int32),
                                  t(1, 8, 96), t(1 << 20, dtype=torch.uint8), 0.1, 0), ValueError,
     "head_dim D (q's axis 2) is 96"),
    ("decode_attention", lambda: (t(1, 8, 128), t(16, 4, 128), t(16, 4, 128), t(1, dtype=torch.int64),
                                  t(1, 8, 128), t(1 << 20, dtype=torch.uint8), 0.1, 0), TypeError,
     "position has dtype int64, expected int32"),
    ("decode_attention", lambda: (t(1, 8, 128), t(16, 4, 128), t(16, 4, 64), t(1, dtype=torch.int32),
                                  t(1, 8, 128), t(1 << 20, dtype=torch.uint8), 0.1, 0), ValueError,
     "cache_v has shape (16, 4, 64), but axis 2 must be 128"),
    ("decode_attention", lambda: (t(1, 8, 128), t(16, 4, 128), t(16, 4, 128), t(1, dtype=torch.int32),
                                  t(1, 8, 128), t(64, dtype=torch.uint8), 0.1, 5), ValueError,
     "attention_workspace_bytes gives the size"),
    ("decode_attention", lambda: (t(1, 8, 128), t(16, 4, 128), t(16, 4, 128), t(1, dtype=torch.int32),
                                  t(1, 8, 128), t(1 << 20, dtype=torch.uint8), 0.0, 0), ValueError, "scale is 0"),
    ("decode_attention", lambda: (t(1, 8, 128), t(16, 4, 128), t(16, 4, 128), t(1, dtype=torch.int32),
                                  t(1, 8, 128), t(1 << 20, dtype=torch.uint8), 0.1, 65), ValueError, "splits is 65"),
    ("qk_norm_rope_cache", lambda: (t(1, 1000), t(64), t(64), t(32, 64), t(32, 64), t(1, dtype=torch.int32),
                                    t(1, 8, 64), t(32, 2, 64), t(32, 2, 64), 1e-6), ValueError,
     "qkv has shape (1, 1000), but axis 1 must be 768"),
    ("qk_norm_rope_cache", lambda: (t(1, 768), t(64), t(64), t(32, 64), t(32, 64, dtype=torch.float32),
                                    t(1, dtype=torch.int32), t(1, 8, 64), t(32, 2, 64), t(32, 2, 64), 1e-6),
     TypeError, "cos is bfloat16 but sin is float32"),
    ("rope_cache", lambda: (t(1, 768), t(32, 64, dtype=torch.float16), t(32, 64), t(1, dtype=torch.int32),
                            t(1, 8, 64), t(32, 2, 64), t(32, 2, 64)), TypeError,
     "cos has dtype float16, expected bfloat16 or float32"),
    ("rope_cache", lambda: (t(1, 768), t(32, 64), t(32, 64), t(1, dtype=torch.int32), t(1, 8, 64), t(32, 2, 64),
                            t(32, 2, 64)), ValueError, "qkv is not on a CUDA device"),
    ("rmsnorm", lambda: (t(2, 12), t(12), t(2, 12), 1e-6), ValueError, "hidden size K (x's axis 1) is 12"),
    ("add_rmsnorm", lambda: (t(2, 64), t(2, 64), t(64), t(2, 32), 1e-6), ValueError,
     "out has shape (2, 32), but axis 1 must be 64"),
    ("swiglu", lambda: (t(2, 64), t(2, 56), t(2, 64)), ValueError, "up has shape (2, 56), but axis 1 must be 64"),
    ("swiglu", lambda: (t(2, 128)[:, ::2], t(2, 64), t(2, 64)), ValueError, "gate (shape (2, 64)) has stride 2"),
]


@pytest.mark.parametrize("entry,make,error,words", REFUSALS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSALS)])
def test_entry_refuses_bad_arguments(kernels, entry: str, make, error: type, words: str) -> None:
    with pytest.raises(error) as info:
        getattr(kernels, entry)(*make())
    assert words in str(info.value) and str(info.value).startswith(entry), str(info.value)


def test_output_overlapping_an_input_is_refused(kernels) -> None:
    x = t(1, 64)
    with pytest.raises(ValueError, match="gemv: out overlaps x, which the kernel reads while it writes out"):
        kernels.gemv(x, t(8, 64), x.view(-1)[8:16].view(1, 8), 0)


def test_attention_workspace_grows_with_slices_and_tokens(kernels) -> None:
    one = kernels.attention_workspace_bytes(1, 16, 8, 128, 1, 0)
    many = kernels.attention_workspace_bytes(1, 16, 8, 128, 33, 0)
    chunk = kernels.attention_workspace_bytes(16, 16, 8, 128, 33, 0)
    # each slice keeps, per query row, D floats of output and one log-sum-exp
    assert many >= 33 * 8 * 2 * (128 + 1) * 4 and many > one and chunk > many
    ws = attention_workspace(kernels, 16, 16, 8, 128, device="cpu", splits=33)
    assert ws.dtype == torch.uint8 and ws.numel() == chunk and not ws.any()
    with pytest.raises(ValueError, match="heads 6 must be a multiple of kv_heads 4"):
        kernels.attention_workspace_bytes(1, 6, 4, 128, 1, 0)
