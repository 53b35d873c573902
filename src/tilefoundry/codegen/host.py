"""The host entry of a PrimFunction: checks every argument, then launches the kernel.

Shared by every target: the checks (``host::ArgChecker``, runtime/common/host_entry.h) run in
declaration order, per parameter device, dtype, rank and static extents, binding each DimVar at its
first plain axis (in range); then every other DimVar axis and expression must agree, every tensor be
contiguous (and, where the target reads it in wide words, aligned), and no output share memory with an
input or another output. A target supplies its checker, the device it runs on and the launch.

A staged function's entry checks its own arguments once, allocates its temporaries (``temporary``, per
target) and launches each stage's kernel in order, each over the pointers its stage binds (a target may run
independent stages in one launch: ``stage_emitters``; CUDA's, codegen/cuda/launches.py).
"""

from __future__ import annotations

from typing import Any

from ..ir.types.dim import DimVar, product
from ..tir.function import KernelParam, PrimFunc
from . import cxx
from .kernel import KernelEmitter, gathers, scanned_positions


class HostEmitter:
    """Emits one PrimFunction's host entry; a target overrides ``device`` and ``launch``."""

    device_type = "kDLCPU"
    device_label = "cpu"

    def __init__(self, fn: PrimFunc, kernel: KernelEmitter, target: object = None,
                 stage_kernels: tuple[KernelEmitter, ...] = ()) -> None:
        self.fn = fn
        self.kernel = kernel
        self.stage_kernels = stage_kernels
        self.target = target
        self.names = cxx.Names(("check", "grid"))
        self.views = {p.name: self.names(("view", p.name), p.name) for p in fn.params}
        self.pointers = {p.name: self.names(("ptr", p.name), f"{p.name}_ptr") for p in fn.params}
        self.dims = {b.dimvar.name: self.names(("dim", b.dimvar.name), b.dimvar.name) for b in fn.dimvars}

    @classmethod
    def stage_emitters(cls, fn: PrimFunc, kernel_cls: type[KernelEmitter]) -> tuple[list[Any], tuple[Any, ...]]:
        """A staged function's kernels to emit, in order, and what the entry launches (here: each stage's kernel,
        one launch a stage; a target may share launches between stages)."""
        kernels = tuple(kernel_cls(s.fn) for s in fn.stages)
        return list(kernels), kernels

    @property
    def entry_name(self) -> str:
        return self.names(("entry", self.fn.name), f"{self.fn.name}_entry")

    def emit(self) -> list[str]:
        """The entry function's lines."""
        fn = self.fn
        params = ", ".join(f"tvm::ffi::TensorView {self.views[p.name]}" for p in fn.params)
        body = [self.checker()]
        binding = {(b.param, b.axis): b for b in fn.dimvars}
        bound_by = {b.dimvar.name: b.param for b in fn.dimvars}
        later: list[str] = []
        for p in fn.params:
            v, name, decl = self.views[p.name], cxx.string(p.name), cxx.string(declared_of(p))
            code, bits = cxx.CXX_TYPES[p.type.dtype.name][1:]
            body.append(f"// {p.name}: {declared_of(p)}{' (output)' if p.is_output else ''}")
            body += self.device(v, name)
            body.append(f"check.dtype({v}, {name}, {code}, {bits}, {decl});")
            body.append(f"check.rank({v}, {name}, {p.type.rank}, {decl});")
            for axis, d in enumerate(p.type.shape):
                if isinstance(d, int):
                    body.append(f"check.extent({v}, {name}, {axis}, {d}, {decl});")
                elif isinstance(d, DimVar) and (p.name, axis) in binding:
                    body.append(f"int64_t const {self.dims[d.name]} = check.bind({v}, {name}, {axis}, "
                                f"{cxx.string(d.name)}, {d.lo}, {d.hi}, {decl});")
                else:
                    src = bound_by[next(iter(sorted(dv.name for dv in d.dimvars())))] if d.dimvars() else "?"
                    later.append(f"check.agree({v}, {name}, {axis}, {cxx.dim_expr(d, self.dims)}, "
                                 f"{cxx.string(str(d))}, {cxx.string(src)}, {decl});")
        body += later
        for p in fn.params:
            body.append(f"check.contiguous({self.views[p.name]}, {cxx.string(p.name)});")
            body += self.layout_checks(p)
        aliases = set(fn.aliases)
        for k, o in enumerate(fn.outputs):
            for i in fn.inputs:
                check = "same_or_disjoint" if (o.name, i.name) in aliases else "disjoint"
                body.append(f"check.{check}({self.views[o.name]}, {cxx.string(o.name)}, {self.views[i.name]}, "
                            f"{cxx.string(i.name)});")
            for other in fn.outputs[:k]:
                body.append(f"check.disjoint_outputs({self.views[o.name]}, {cxx.string(o.name)}, "
                            f"{self.views[other.name]}, {cxx.string(other.name)});")
        for p in fn.params:
            const = "" if p.is_output else " const"
            ctype = cxx.cxx_type(p.type.dtype)
            body.append(f"auto* const {self.pointers[p.name]} = host::data<{ctype}{const}>({self.views[p.name]});")
        if fn.stages:
            body += self.position_checks()
            body += self.launch_stages()
        else:
            body.append(f"int64_t const grid = {cxx.dim_expr(fn.schedule.grid, self.dims)};")
            maps, args = self.kernel_args(self.kernel, self.pointers)
            body += [*maps, *self.launch(self.kernel, args)]
        return [f"void {self.entry_name}({params}) {{", *("  " + line for line in body), "}"]

    def launch_stages(self) -> list[str]:
        """A staged function's temporaries, then each stage's launch in order, over the pointers it binds."""
        lines, pointers = self.temporaries()
        for k, kernel in enumerate(self.stage_kernels):
            lines += self.stage_launch(f"stage {k}", k, kernel, pointers)
        return lines

    def temporaries(self) -> tuple[list[str], dict[str, str]]:
        """The declarations of a staged function's temporaries, and the pointer of every parameter and
        temporary by name."""
        lines = []
        pointers = dict(self.pointers)
        for t in self.fn.temps:
            name = self.names(("temp", t.name), t.name)
            count = cxx.dim_expr(product(t.type.shape), self.dims)
            lines.append(f"// {t.name}: {declared_of(t)}, between stages")
            lines += self.temporary(name, cxx.cxx_type(t.type.dtype), count)
            pointers[t.name] = f"{name}.data()"
        return lines, pointers

    def stage_launch(self, label: str, k: int, kernel: KernelEmitter, pointers: dict[str, str]) -> list[str]:
        """The launch of stage ``k``'s own kernel over the pointers it binds (skipped where it copies an input
        updated in place), in a block commented ``label``."""
        stage = self.fn.stages[k]
        bound = {p.name: pointers[arg] for p, arg in zip(stage.fn.params, stage.args)}
        opening = f"{{  // {label}: {stage.fn.name}({', '.join(stage.args)})"
        if stage.unless_same is not None:  # an input updated in place: nothing to copy
            a, b = stage.unless_same
            opening = (f"if (static_cast<void const*>({pointers[a]}) != static_cast<void const*>({pointers[b]})) "
                       f"{opening}, unless {b} is {a}")
        maps, args = self.kernel_args(kernel, bound)
        return [opening, f"  int64_t const grid = {cxx.dim_expr(stage.fn.schedule.grid, self.dims)};",
                *("  " + line for line in [*maps, *self.launch(kernel, args)]), "}"]

    def kernel_args(self, kernel: KernelEmitter, pointers: dict[str, str]) -> tuple[list[str], str]:
        """The declarations of the tensor maps ``kernel`` takes (made here, on the host), and the arguments of its
        launch over ``pointers``."""
        maps, names = kernel.map_declarations(pointers, self.dims, self.names)
        return maps, kernel.call_args(pointers, self.dims, names)

    def position_checks(self) -> list[str]:
        """The checks of the positions the stages read on the device from the function's integer arguments
        (token ids, rotary positions): each inside the table it indexes, where the target checks them."""
        lines: list[str] = []
        seen: set[tuple[str, str]] = set()
        params = {p.name for p in self.fn.params}
        for stage in self.fn.stages:
            bound_to = dict(zip((p.name for p in stage.fn.params), stage.args))
            read = [(g.param, g.bound, g.table) for g in gathers(stage.fn.body)] + scanned_positions(stage.fn.body)
            for param, extent, table in read:
                arg = bound_to[param]
                bound = cxx.dim_expr(extent, self.dims)
                if arg in params and (arg, bound) not in seen:
                    seen.add((arg, bound))
                    lines += self.position_check(arg, bound, table)
            for w in stage.cache_writes:
                if bound_to[w.pos] in params and bound_to[w.count] in params:
                    lines += self.cache_write_check(bound_to[w.pos], bound_to[w.count],
                                                    cxx.dim_expr(w.capacity, self.dims), w.what)
        return lines

    def cache_write_check(self, pos: str, count: str, capacity: str, what: str) -> list[str]:
        """The check that ``count`` rows written at ``pos`` fit a cache of ``capacity`` rows (none where the kernel
        leaves the rows past the cache's end alone)."""
        return []

    def position_check(self, param: str, bound: str, table: str) -> list[str]:
        """The check that argument ``param`` holds positions in [0, ``bound``) (none where the kernel clamps)."""
        return []

    def temporary(self, name: str, ctype: str, count: str) -> list[str]:  # pragma: no cover - targets override
        """The declaration of a temporary ``name`` of ``count`` elements whose ``.data()`` the stages take."""
        raise NotImplementedError

    def checker(self) -> str:
        """The declaration of the entry's argument checker ``check``."""
        return f"host::ArgChecker check({cxx.string(self.fn.name)});"

    def layout_checks(self, p: KernelParam) -> list[str]:
        """Checks of a parameter's memory beyond contiguity (none on a target without vector accesses)."""
        return []

    def device(self, view: str, name: str) -> list[str]:
        """The device check of one argument."""
        return [f"check.device({view}, {name}, {self.device_type}, {cxx.string(self.device_label)});"]

    def launch(self, kernel: KernelEmitter, args: str) -> list[str]:  # pragma: no cover - targets override it
        """The launch of ``kernel`` over ``grid`` CTAs with ``args``."""
        raise NotImplementedError


def declared_of(p: object) -> str:
    """A parameter's declaration as the user wrote it (``Tensor[(seq, 2048), bf16]``)."""
    t = p.type  # type: ignore[attr-defined]
    kind = "Tensor"
    return f"{kind}{str(t)[len('Tensor'):]}"
