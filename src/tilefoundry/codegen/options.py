"""CompilerOptions: what the build step may be told, and its canonical text (part of the jit key)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

OPT_LEVEL_VARIABLE = "TILEFOUNDRY_OPT_LEVEL"


def default_opt_level() -> int:
    """``$TILEFOUNDRY_OPT_LEVEL`` (0, 1, 2 or 3) where it is set, else 3.

    A lower level builds faster (g++ at ``-O2`` takes about 60% of ``-O3``'s time on the compiled families' CPU
    kernels): for iterating on a kernel, or a test suite; the kernels' speed is measured at 3. The level is part
    of the jit key, so libraries built at one level are not loaded for another.
    """
    text = os.environ.get(OPT_LEVEL_VARIABLE, "").strip()
    if not text:
        return 3
    if text not in ("0", "1", "2", "3"):
        raise ValueError(f"${OPT_LEVEL_VARIABLE} must be 0, 1, 2 or 3, got {text!r}; unset it for the default, 3")
    return int(text)


@dataclass(frozen=True)
class CompilerOptions:
    """Options of the build step.

    Attributes:
        opt_level: the ``-O`` level of the build: of the C++ compiler (CPU target); of the host compiler and of
            ptxas, nvcc's assembler of the device code (CUDA target). Unset, ``$TILEFOUNDRY_OPT_LEVEL`` or 3
            (``default_opt_level``).
        compiler: the compiler executable (a name on PATH or a path); None takes ``$TILEFOUNDRY_CXX``
            (CPU target) or ``$TILEFOUNDRY_NVCC`` (CUDA target), else ``g++`` / ``nvcc``.
        cpu_arch: ``"native"`` builds for the instruction set of this machine's CPU (the x86-64 level
            it supports, e.g. ``x86-64-v3``), ``"generic"`` for any x86-64, or a ``-march`` value.
        extra_flags: appended to the compiler's command line.
        early_reads: names of parameters the caller promises are not written by the kernel launched right before
            the function's (on CUDA a kernel starts while the one before it ends, a programmatic dependent
            launch): a kernel whose rows read positions on the device (an index into a table, a cache's write
            position, a count of new rows) only from these reads them before it waits for that kernel, so their
            round trip to memory overlaps its end. A promise broken reads a stale position: pass only tensors
            written before the previous launch began (the decode engine's positions, written once a step).
        split_rows: lower a function whose matmuls take another schedule at 17 rows and more than at 16 and fewer
            (on a Hopper GPU, the tensor cores: the GEMM, and a fused attention's blocks of query rows) as an entry
            choosing between two variants by that row count (``lower(..., split_rows=)``; the decode engine's slots
            run a decode step and a prompt so); False keeps one body for every row count.
    """

    opt_level: int = field(default_factory=default_opt_level)
    compiler: str | None = None
    cpu_arch: str = "native"
    extra_flags: tuple[str, ...] = ()
    early_reads: tuple[str, ...] = ()
    split_rows: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.opt_level, bool) or self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"CompilerOptions.opt_level must be 0, 1, 2 or 3, got {self.opt_level!r}")
        if self.compiler is not None and (not isinstance(self.compiler, str) or not self.compiler):
            raise TypeError(f"CompilerOptions.compiler must be an executable name or path, got {self.compiler!r}")
        if not isinstance(self.cpu_arch, str) or not self.cpu_arch:
            raise TypeError(f"CompilerOptions.cpu_arch must be 'native', 'generic' or a -march value, got "
                            f"{self.cpu_arch!r}")
        if isinstance(self.extra_flags, str) or not all(isinstance(f, str) for f in self.extra_flags):
            raise TypeError(f"CompilerOptions.extra_flags must be a tuple of strings, got {self.extra_flags!r}")
        object.__setattr__(self, "extra_flags", tuple(self.extra_flags))
        if isinstance(self.early_reads, str) or not all(isinstance(n, str) and n for n in self.early_reads):
            raise TypeError(f"CompilerOptions.early_reads must be a tuple of parameter names, got "
                            f"{self.early_reads!r}")
        object.__setattr__(self, "early_reads", tuple(dict.fromkeys(self.early_reads)))
        if not isinstance(self.split_rows, bool):
            raise TypeError(f"CompilerOptions.split_rows must be True or False, got {self.split_rows!r}")

    def canonical_text(self) -> str:
        """Every field, in declaration order, as ``name=repr(value)``."""
        return "CompilerOptions(" + ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)) + ")"
