"""C++ for the CPU target.

The kernel is a plain function; ``cpu::launch`` runs it once per CTA, spreading CTAs over OpenMP
threads. Register buffers with a static local size stay register arrays (on the stack of the CTA's
host thread) while their total stays small; a buffer whose size is a DimVar, or any buffer once the
total is large, lives in ``cpu::scratch`` storage allocated once per CTA.
"""

from __future__ import annotations

from ...ir.types.storage import Storage
from ...tir.buffer import Buffer
from ...tir.function import PrimFunc, TirModule
from ...tir.stmt import Stmt
from .. import cxx
from ..host import HostEmitter
from ..kernel import KernelEmitter, allocations
from ..unit import translation_unit, uniform_program_shapes
from .chains import fuse_chains

# Register arrays of one CTA beyond this many bytes go to heap scratch instead of the host stack.
STACK_BYTES = 256 * 1024


class CpuKernel(KernelEmitter):
    target_label = "cpu"
    qualifier = "void"

    def __init__(self, fn: PrimFunc) -> None:
        super().__init__(fn)
        static = [b for b in allocations(fn.body) if isinstance(b.local_size(), int)]
        total = sum(b.local_size() * b.dtype.bits // 8 for b in static)
        self.on_stack = total <= STACK_BYTES

    def body(self) -> list[Stmt]:
        """The function's body, its chains of elementwise calls run as one call each (chains.py)."""
        return fuse_chains(self.fn)

    def alloc(self, b: Buffer, ind: str) -> list[str]:
        if b.storage is Storage.rmem and isinstance(b.local_size(), int) and self.on_stack:
            return super().alloc(b, ind)
        # A CTA's shared memory is the memory of the one host thread running it.
        name = self.buffer(b)
        storage = self.names(("storage", id(b)), f"{name}_storage")
        size = cxx.dim_expr(b.local_size(), self.dims)
        ctype = cxx.cxx_type(b.dtype)
        at = f"cute::make_smem_ptr({storage}.data())" if b.storage is Storage.smem else f"{storage}.data()"
        return [f"cpu::scratch<{ctype}> {storage}({size});", f"auto {name} = {self.view_over(at, b, ind)};"]


class CpuHost(HostEmitter):
    device_type = "kDLCPU"
    device_label = "cpu"

    def launch(self, kernel: KernelEmitter, args: str) -> list[str]:
        return [f"cpu::launch(static_cast<int>(grid), [&] {{ {kernel.kernel_name}({args}); }});"]

    def position_check(self, param: str, bound: str, table: str) -> list[str]:
        return [f"check.positions({self.views[param]}, {cxx.string(param)}, {bound}, {cxx.string(table)});"]

    def cache_write_check(self, pos: str, count: str, capacity: str, what: str) -> list[str]:
        return [f"check.cache_write({self.views[pos]}, {cxx.string(pos)}, {self.views[count]}, {cxx.string(count)}, "
                f"{capacity}, {cxx.string(what)});"]

    def temporary(self, name: str, ctype: str, count: str) -> list[str]:
        return [f"cpu::scratch<{ctype}> {name}({count});"]


def emit_cpu(mod: TirModule) -> str:
    """The translation unit of ``mod`` for the CPU target."""
    shapes = uniform_program_shapes([k for f in mod.functions.values() for k in f.kernels])
    return translation_unit(mod, CpuKernel, CpuHost, "TILEFOUNDRY_TARGET_CPU", shapes)
