"""The kernel body of a PrimFunction as C++ on the runtime headers, shared by every target.

One statement per TIR statement: buffers are declared by name (``tilefoundry::make_tensor(iterator,
shard_layout)`` over a parameter's memory, ``tilefoundry::make_tensor<T>(shard_layout)`` for registers:
cute tensors whose layout is a ShardLayout, spec 2.9), each op is one call of its family's ``ops::`` entry,
and a comment gives the source line of the HIR ops that follow it. A target subclasses
:class:`KernelEmitter` for what differs: the kernel's qualifier and the storage of buffers whose size
is known only at launch.
"""

from __future__ import annotations

from ..ir.core.source import SourceLoc
from ..ir.types.dim import Dim, DimVar
from ..ir.types.storage import Storage
from ..tir.buffer import Buffer, Literal, Operand
from ..tir.function import PrimFunc
from ..tir.layout import TLayout
from ..tir.mesh import TMesh
from ..tir.stmt import (
    AliasView,
    Alloc,
    AsyncWait,
    Bound,
    Epilogue,
    Gather,
    GmemView,
    MeshScope,
    OpCall,
    Origin,
    Prologue,
    RowGuard,
    RowLoop,
    RowOffset,
    Stmt,
    Sync,
    Tag,
    calls,
)
from ..tir.tensor_map import TensorMap
from . import cxx

# Op families whose tag is the name of the dtype they compute in (``ops::matmul<float>(a, b, out)``).
COMPUTE_TAGGED = frozenset({"matmul", "rope"})
# Tags of the arg-reductions: their split form's parts are two buffers, values and positions.
ARG_TAGS = frozenset({"argmax_op", "argmin_op"})


class KernelEmitter:
    """Emits one PrimFunction's kernel function."""

    target_label = "?"
    qualifier = "void"
    pointer_qualifier = ""  # e.g. " __restrict__" where the entry guarantees no aliasing
    cta_index = "int64_t(program_id<TopologyScope::cta>())"  # the CTA the row loop runs the rows of

    def __init__(self, fn: PrimFunc, names: cxx.Names | None = None) -> None:
        self.fn = fn
        self.names = names or cxx.Names(("row", "row_begin", "row_end"))
        self.dims: dict[str, str] = {b.dimvar.name: self.names(("dim", b.dimvar.name), b.dimvar.name)
                                     for b in fn.dimvars}
        self.pointers = {p.name: self.names(("ptr", p.name), f"{p.name}_ptr") for p in fn.params}
        self.layouts: dict[TLayout, str] = {}
        self.layout_storages: dict[TLayout, set[Storage]] = {}
        self.meshes: dict[str, str] = {}
        self.lines: list[str] = []
        self._last_loc: object = None
        self.reads: dict[str, str] = {}  # a position read on the device -> the row's local holding it

    # -- names --------------------------------------------------------------------------------
    @property
    def kernel_name(self) -> str:
        return self.names(("kernel", self.fn.name), f"{self.fn.name}_kernel")

    def buffer(self, b: Buffer) -> str:
        return self.names(("buffer", id(b)), b.name)

    def operand(self, o: Operand) -> str:
        return cxx.literal(o) if isinstance(o, Literal) else self.buffer(o)

    # -- signature ----------------------------------------------------------------------------
    def signature_params(self) -> list[str]:
        """The kernel's parameters: a typed pointer per tensor (inputs const), then the DimVars."""
        out = []
        for p in self.fn.params:
            const = "" if p.is_output else " const"
            out.append(f"{cxx.cxx_type(p.type.dtype)}{const}*{self.pointer_qualifier} {self.pointers[p.name]}")
        out += [f"int64_t {self.dims[b.dimvar.name]}" for b in self.fn.dimvars]
        out += [f"__grid_constant__ ops::tensor_map const {self.map_name(m)}" for m in tensor_maps(self.fn.body)]
        return out

    def map_name(self, m: TensorMap) -> str:
        """The kernel's name for tensor map ``m`` (a parameter)."""
        return self.names(("map", m.name), m.name)

    def call_args(self, pointer_names: dict[str, str], dim_names: dict[str, str],
                  map_names: dict[str, str] | None = None) -> str:
        """The arguments a host entry passes, given its own names for pointers, DimVars and the tensor maps it
        made (``map_declarations``)."""
        args = [pointer_names[p.name] for p in self.fn.params] + [dim_names[b.dimvar.name] for b in self.fn.dimvars]
        args += [(map_names or {})[m.name] for m in tensor_maps(self.fn.body)]
        return ", ".join(args)

    def map_declarations(self, pointer_names: dict[str, str], dim_names: dict[str, str],
                         names: cxx.Names) -> tuple[list[str], dict[str, str]]:
        """The host entry's declarations of the tensor maps the kernel takes (``ops::make_tensor_map`` over the
        pointers it passes), and the name of each, by map name, drawn from the entry's ``names``."""
        lines: list[str] = []
        made: dict[str, str] = {}
        for m in tensor_maps(self.fn.body):
            name = made[m.name] = names(("map", id(self), m.name), m.name)
            rows, depth, stride, offset = (cxx.dim_expr(d, dim_names) for d in (m.rows, m.depth, m.stride, m.offset))
            at = "" if m.offset == 0 else f" + {offset}"
            lines.append(f"auto const {name} = ops::make_tensor_map({pointer_names[m.param]}{at}, {rows}, {depth}, "
                         f"{stride}, {m.box_rows}, {m.box_depth});  // {m}")
        return lines, made

    # -- body ---------------------------------------------------------------------------------
    def emit(self) -> list[str]:
        """The kernel function's lines."""
        s = self.fn.schedule
        head = [f"// {self.fn.name}: schedule {s}"]
        if self.fn.loc is not None:
            head.insert(0, f"// from @func {self.fn.name} at {_short(self.fn.loc.filename)}:{self.fn.loc.lineno}")
        self.lines = []
        body = self.body()
        self.declare_meshes(meshes_of(body), "  ")
        buffers = _buffers(body)
        for b in buffers:  # a layout several storages share is named after all of them
            self.layout_storages.setdefault(b.layout, set()).add(b.storage)
        for b in buffers:
            self.layout(b.layout, b.storage, "  ")
        for stmt in body:
            self.stmt(stmt, "  ")
        sig = ", ".join(self.signature_params())
        return head + [f"{self.qualifier} {self.kernel_name}({sig}) {{", *self.lines, "}"]

    def body(self) -> list[Stmt]:
        """The statements the kernel's C++ is made of: its function's body (a target may run some as one)."""
        return self.fn.body

    def stmt(self, s: Stmt, ind: str) -> None:
        if isinstance(s, MeshScope):
            self.mesh_scope(s, ind)
        elif isinstance(s, Alloc):
            self.lines += [ind + line for line in self.alloc(s.buffer, ind)]
        elif isinstance(s, GmemView):
            self.gmem_view(s, ind)
        elif isinstance(s, AliasView):
            self.alias_view(s, ind)
        elif isinstance(s, OpCall):
            self.call(s, ind)
        elif isinstance(s, Sync):
            self.lines.append(f"{ind}ops::sync<ops::SyncKind::{s.kind}>();")
        elif isinstance(s, AsyncWait):
            self.lines.append(f"{ind}ops::cp_async_wait<0>();")
        elif isinstance(s, RowLoop):
            self.row_loop(s, ind)
        elif isinstance(s, RowGuard):
            conds = " && ".join(self.bound(c) for c in s.conds)
            self.lines.append(f"{ind}if ({conds}) {{")
            for stmt in s.body:
                self.stmt(stmt, ind + "  ")
            self.lines.append(f"{ind}}}")
        else:  # pragma: no cover - every TIR statement is handled above
            raise TypeError(f"no C++ for TIR statement {type(s).__name__}")

    def declare_meshes(self, meshes: list[TMesh], ind: str) -> None:
        for mesh in meshes:
            name = self.names(("mesh", mesh.name), mesh.name)
            self.meshes[mesh.name] = name
            levels = ", ".join(f"TopologyScope::{lv}" for lv in mesh.levels)
            layout = cxx.mesh_layout(tuple(a.extent for a in mesh.axes), tuple(a.stride for a in mesh.axes))
            self.lines.append(f"{ind}// {mesh}")
            self.lines.append(f"{ind}auto const {name} = make_mesh<{levels}>({layout});")

    def mesh_scope(self, s: MeshScope, ind: str) -> None:
        """The statements run over a mesh (declared at the top of the kernel with the others)."""
        for stmt in s.body:
            self.stmt(stmt, ind)

    def layout(self, layout: TLayout, storage: Storage, ind: str) -> str:
        """The name of a (shard) layout, declared on first use."""
        key = layout
        if key not in self.layouts:
            scalar = all(d == 1 for d in layout.shape)
            kinds = sorted(st.value for st in self.layout_storages.get(key, {storage}))
            base = "one_element" if scalar else f"{'_'.join(kinds)}_layout"
            name = self.names(("layout", key), base)
            self.layouts[key] = name
            if layout.mesh is None:
                expr = cxx.layout(layout, self.dims)
            else:
                expr = cxx.shard_layout(layout, self.meshes[layout.mesh.name], self.dims)
            self.lines.append(f"{ind}auto const {name} = {expr};")
        return self.layouts[key]

    def view_over(self, iterator: str, b: Buffer, ind: str) -> str:
        """A tensor over memory at ``iterator`` laid out as ``b`` (a ShardLayout when ``b`` is distributed)."""
        layout = self.layout(b.layout, b.storage, ind)
        if b.layout.mesh is None:
            return f"cute::make_tensor({iterator}, {layout})"
        return f"tilefoundry::make_tensor({iterator}, {layout})"

    def alloc(self, b: Buffer, ind: str) -> list[str]:
        """Declares a static register buffer (a target overrides this for other storage)."""
        layout = self.layout(b.layout, b.storage, ind)
        ctype = cxx.cxx_type(b.dtype)
        if b.layout.mesh is None:
            return [f"auto {self.buffer(b)} = cute::make_tensor<{ctype}>({layout});"]
        return [f"auto {self.buffer(b)} = tilefoundry::make_tensor<{ctype}>({layout});"]

    def data_of(self, b: Buffer) -> str:
        """The iterator of a declared buffer's memory."""
        return f"{self.buffer(b)}.data()"

    def gmem_view(self, s: GmemView, ind: str) -> None:
        ptr = self.pointers[s.param]
        offset = self.offset_expr(s)
        at = f"{ptr} + {offset}" if offset != "0" else ptr
        view = self.view_over(self.gmem_iterator(s, at), s.buffer, ind)
        self.lines.append(f"{ind}auto {self.buffer(s.buffer)} = {view};")

    def gmem_iterator(self, s: GmemView, at: str) -> str:
        """The iterator of a global-memory view at address ``at`` (a target may promise its alignment)."""
        return f"cute::make_gmem_ptr({at})"

    def offset_expr(self, s: GmemView) -> str:
        return self.row_offset(s.offset)

    def row_offset(self, offset: RowOffset) -> str:
        """The C++ of a row offset: its terms over ``row``, then its positions read on the device."""
        parts = [] if offset.base == 0 else [cxx.dim_expr(offset.base, self.dims)]
        minus = []  # terms of a negative constant stride, subtracted (a tile shifted back)
        for div, mod, stride in offset.terms:
            t = "row" if div == 1 else f"(row / {self.operand_of(div)})"
            if mod is not None:
                t = f"({t} % {self.operand_of(mod)})"
            negative = isinstance(stride, int) and stride < 0
            stride = -stride if negative else stride
            if stride != 1:
                st = cxx.dim_expr(stride, self.dims)
                t = f"{t} * {st if isinstance(stride, int) or isinstance(stride, DimVar) else '(' + st + ')'}"
            (minus if negative else parts).append(t)
        for g in offset.gathers:
            at = self.read_of(g)
            t = (f"detail::index_in({at}, {cxx.dim_expr(g.bound, self.dims)}, {cxx.string(g.param)}, "
                 f"{cxx.string(g.table)})")
            if g.stride != 1:
                st = cxx.dim_expr(g.stride, self.dims)
                t = f"{t} * {st if isinstance(g.stride, (int, DimVar)) else '(' + st + ')'}"
            parts.append(t)
        return "".join([" + ".join(parts) or "0", *(f" - {t}" for t in minus)])

    def operand_of(self, d: Dim) -> str:
        """The C++ of extent ``d`` as an operand of ``/`` or ``%``: parenthesised unless one number or name (``row / 2
        * s`` would divide by 2 and then multiply)."""
        text = cxx.dim_expr(d, self.dims)
        return text if isinstance(d, (int, DimVar)) else f"({text})"

    def read_of(self, g: Gather) -> str:
        """The C++ of the position ``g`` reads: the row's local holding it where ``row_loop`` loaded it first."""
        at = self._load(g)
        return self.reads.get(at, at)

    def _load(self, g: Gather) -> str:
        """The C++ reading the position ``g`` reads from memory."""
        return f"{self.pointers[g.param]}[{self.row_offset(g.at)}]"

    def load_reads(self, body: list[Stmt], ind: str) -> None:
        """Loads every position the row's statements read on the device into a local, together, before any is
        checked or used: each check (``detail::index_in``, ``detail::row_within``) may stop the kernel, so nvcc
        issues no load after one before it, and reads made where they are used would each wait for the last
        (Qwen3's rope + cache write: its position, then the new rows' count, then the cache's write position, then
        the rows, four round trips to memory where two do). Every read is in bounds for a row of the loop."""
        for g in gathers(body):
            at = self._load(g)
            if at in self.reads:
                continue
            name = self.names(("read", at), f"{g.param}_at")
            self.lines.append(f"{ind}auto const {name} = {at};")
            self.reads[at] = name

    def after_reads(self, ind: str) -> None:
        """What a row runs once its positions are loaded, before its views and ops (a target's hook: CUDA waits
        there for the kernel before it where the positions may be read early)."""

    def bound(self, c: Bound) -> str:
        """The C++ of a row's bound: ``lhs < rhs``, or where it stops, ``detail::row_within`` (a kernel past it
        prints the two and stops)."""
        lhs, rhs = self.row_offset(c.lhs), self.row_offset(c.rhs)
        if c.stops is None:
            return f"({lhs}) < ({rhs})"
        return f"detail::row_within({lhs}, {rhs}, {cxx.string(c.stops)})"

    def alias_view(self, s: AliasView, ind: str) -> None:
        view = self.view_over(self.data_of(s.source), s.buffer, ind)
        self.lines.append(f"{ind}auto {self.buffer(s.buffer)} = {view};")

    def split_reductions(self, ind: str, tags: tuple[Tag, ...], buffers: list[str], maker: str,
                         results: tuple[str, ...] | list[str] = ()) -> list[str]:
        """The arguments of a split reduction's call, one line each: ``ops::<maker><Op>(...)`` of each tag, over its
        buffers in order (two of an arg-reduction's: values and positions; one of another's), then its result."""
        lines = []
        k = 0
        for i, tag in enumerate(tags):
            n = 2 if tag.name in ARG_TAGS else 1
            own = [*buffers[k:k + n], *results[i:i + 1]]
            k += n
            end = ");" if i == len(tags) - 1 else ","
            lines.append(f"{ind}    ops::{maker}<ops::{tag.name}>({', '.join(own)}){end}")
        return lines

    def call(self, s: OpCall, ind: str) -> None:
        self.comment(s.origin, ind)
        out = self.buffer(s.out)
        args = [self.operand(o) for o in s.operands]
        if s.family == "fill":
            line = f"ops::fill({out}, {args[0]});"
        elif s.family == "copy_async":  # one group per call: an AsyncWait waits for all of them
            self.lines += [f"{ind}ops::copy_async({args[0]}, {out});", f"{ind}ops::cp_async_commit();"]
            return
        elif s.family == "reduce":
            axes = ", ".join(str(a) for a in s.axes)
            ws = f", {self.buffer(s.workspace)}" if s.workspace is not None else ""
            line = f"ops::reduce<ops::{s.tag.name}, cute::seq<{axes}>>({args[0]}, {out}{ws});"
        elif s.family == "arg_reduce":
            axes = ", ".join(str(a) for a in s.axes)
            line = f"ops::arg_reduce<ops::{s.tag.name}, cute::seq<{axes}>>({args[0]}, {out});"
        elif s.family == "iota":  # ops::iota<Axes>(out, start, step): each element start + step * its position
            axes = ", ".join(str(a) for a in s.axes)
            line = f"ops::iota<cute::seq<{axes}>>({out}, int64_t({self.row_offset(s.indices[0])}), {args[0]});"
        elif s.family == "reduce_parts":  # ops::reduce_parts(tile, col0, ops::part_of<Op>(values[, positions])...)
            col0 = f"int64_t({self.row_offset(s.indices[0])})"
            each = self.split_reductions(ind, s.functors, [out, *(self.buffer(b) for b in s.more_out)], "part_of")
            self.lines += [f"{ind}ops::reduce_parts({args[0]}, {col0},", *each]
            return
        elif s.family == "reduce_merges":  # ops::reduce_merges(count, ops::merge_of<Op>(values[, positions], out)...)
            count = f"int64_t({self.row_offset(s.indices[0])})"
            results = [out, *(self.buffer(b) for b in s.more_out)]
            each = self.split_reductions(ind, s.functors, args, "merge_of", results)
            self.lines += [f"{ind}ops::reduce_merges({count},", *each]
            return
        elif s.family == "topk":
            axes = ", ".join(str(a) for a in s.axes)
            indices = self.buffer(s.more_out[0])
            line = f"ops::topk<ops::{s.tag.name}, cute::seq<{axes}>>({args[0]}, {out}, {indices});"
        elif s.family == "attention":  # ops::attention<Acc>(scores, [cmp, qpos, [kpos,]] q, k, v, part, split, splits)
            functors = [self.tag_of(t) for t in s.functors]
            indices = [f"int64_t({self.row_offset(i)})" for i in s.indices]
            acc = cxx.COMPUTE_TYPES[s.tag.name]
            line = f"ops::attention<{acc}>({', '.join([*functors, *args, out, *indices])});"
        elif s.family == "attention_rows":  # ops::attention_rows<Acc>(scores, [cmp, qpos, [kpos,]] q, k, v, out, block
            functors = [self.tag_of(t) for t in s.functors]  # [, ring])
            block = f"int64_t({self.row_offset(s.indices[0])})"
            ring = [self.buffer(s.workspace)] if s.workspace is not None else []
            acc = cxx.COMPUTE_TYPES[s.tag.name]
            line = f"ops::attention_rows<{acc}>({', '.join([*functors, *args, out, block, *ring])});"
        elif s.family == "attention_combine":  # ops::attention_combine(part, out[, rank, ranks]): ranks a cluster's
            indices = [f"int64_t({self.row_offset(i)})" for i in s.indices]
            line = f"ops::attention_combine({', '.join([args[0], out, *indices])});"
        elif s.family == "index_add":  # ops::index_add(x, rows, index, alpha, out, at, extent)
            at, extent = (f"int64_t({self.row_offset(i)})" for i in s.indices)
            line = f"ops::index_add({', '.join(args)}, {out}, {at}, {extent});"
        elif s.family == "reduce_axis":
            line = f"ops::reduce_axis<ops::{s.tag.name}>({args[0]}, {out});"
        elif s.family == "matmul" and (s.epilogue is not None or s.prologue is not None or s.workspace is not None):
            acc = cxx.COMPUTE_TYPES[s.tag.name]
            epilogue = self.epilogue(s.epilogue, acc, ind) if s.epilogue is not None else "ops::no_epilogue{}"
            if s.prologue is not None:
                epilogue += f", {self.prologue(s.prologue, ind)}"
            elif len(args) == 3 or s.workspace is not None:  # a pair (two weights) or a ring names how a is read
                epilogue += ", ops::plain_rows{}"
            if s.workspace is not None:  # the streamed or GEMM schedule's ring comes first (cuda/ops/matmul.cuh)
                args.insert(0, self.buffer(s.workspace))
            ranks = "".join(f", int64_t({self.row_offset(i)})" for i in s.indices)  # the GEMM schedule's row tiles
            ranks += "".join(f", {self.map_name(m)}" for m in s.maps)  # its operands' tensor maps
            line = f"ops::matmul<{acc}>({', '.join(args)}, {out}, {epilogue}{ranks});"
        elif s.family in COMPUTE_TAGGED:  # the tag names the dtype the op computes (accumulates) in
            reads = f", {self.prologue(s.prologue, ind)}" if s.prologue is not None else ""  # rope: x normed
            line = f"ops::{s.family}<{cxx.COMPUTE_TYPES[s.tag.name]}>({', '.join(args)}, {out}{reads});"
        else:
            line = f"ops::{s.family}({self.tag(s)}, {', '.join(args)}, {out}{self.fold(s)});"
        self.lines.append(ind + line)

    def fold(self, s: OpCall) -> str:
        """The trailing argument of an elementwise call folding a reduction of its results (``OpCall.fold``):
        ``, ops::fold<ops::sum_op, cute::seq<0, 1>>(dst)``; empty where it folds none."""
        if s.fold is None:
            return ""
        axes = ", ".join(str(a) for a in s.fold.axes)
        return f", ops::fold<ops::{s.fold.tag.name}, cute::seq<{axes}>>({self.buffer(s.fold.out)})"

    def epilogue(self, e: Epilogue, acc: str, ind: str) -> str:
        """Declares ``e`` and returns its name: a lambda of (m, n, the accumulated value), each step one
        ``ops::scalar`` call; where it reads tensors (a residual, a bias), ``ops::reads_at(f, tensors...)``, f a
        lambda of the accumulated value and each tensor's element, so that the runtime reads them itself (the
        GEMM tier reads a word of each at once: common/ops/matmul_epilogue.h)."""
        name = self.names(("epilogue", id(e)), "epilogue")
        value, second = (self.names(("epilogue", id(e), k), k) for k in ("acc", "acc_second"))

        def local(key: str) -> str:
            return self.names(("epilogue", id(e), "value", key), key)

        reads: dict[int, Buffer] = {}  # the tensors the steps read, in the order they first do
        for step in e.steps:
            for o in step.operands:
                if isinstance(o, Buffer):
                    reads.setdefault(id(o), o)
        read_at = {key: self.names(("epilogue", id(e), "read", key), b.name.removesuffix("_tile"))
                   for key, b in reads.items()}
        values = {e.value: local(e.value)}
        body = [f"auto const {values[e.value]} = ops::scalar::unary<{cxx.cxx_type(e.dtype)}>(ops::cast_op{{}}, "
                f"{value});"]
        if e.second is not None:  # a pair's second product
            values[e.second] = local(e.second)
            body.append(f"auto const {values[e.second]} = ops::scalar::unary<{cxx.cxx_type(e.dtype)}>("
                        f"ops::cast_op{{}}, {second});")
        for step in e.steps:
            if step.origin.loc != self._last_loc and step.origin.loc is not None:
                self._last_loc = step.origin.loc
                body.append(f"// {_where(step.origin.loc)}")
            ins = [values[o] if isinstance(o, str) else read_at[id(o)] if isinstance(o, Buffer)
                   else cxx.literal(o) for o in step.operands]
            values[step.name] = local(step.name)
            call = f"ops::scalar::{step.family}<{cxx.cxx_type(step.dtype)}>({self.tag_of(step.tag)}, {', '.join(ins)})"
            body.append(f"auto const {values[step.name]} = {call};")
        body.append(f"return {values[e.result]};")
        params = [f"{acc} {value}"] + ([f"{acc} {second}"] if e.second is not None else [])
        params += [f"{cxx.cxx_type(b.dtype)} {read_at[key]}" for key, b in reads.items()]
        if reads:  # the tensors, read by the runtime at each element
            self.lines.append(f"{ind}auto const {name} = ops::reads_at([&]({', '.join(params)}) {{")
        else:
            self.lines.append(f"{ind}auto const {name} = [&](int64_t, int64_t, {', '.join(params)}) {{")
        self.lines += [f"{ind}  {line}" for line in body]
        tensors = "".join(f", {self.buffer(b)}" for b in reads.values())
        self.lines.append(f"{ind}}}{tensors});" if reads else f"{ind}}};")
        return name

    def prologue(self, p: Prologue, ind: str) -> str:
        """Declares how a matmul reads its first operand, or a rope its row (``ops::rms_norm_prologue``), and returns
        its name."""
        name = self.names(("prologue", id(p)), "prologue")
        compute = cxx.COMPUTE_TYPES[p.compute.name]
        eps = cxx.literal(p.eps, compute=True)
        self.lines.append(f"{ind}auto const {name} = ops::{p.kind}_prologue<{compute}, {cxx.cxx_type(p.dtype)}>("
                          f"{self.buffer(p.weight)}, {eps});")
        return name

    def tag(self, s: OpCall) -> str:
        """The call's op object; with ops applied after it (``then``), their composition."""
        out = self.tag_of(s.tag)
        for t in s.then:
            out = f"ops::then({out}, {self.tag_of(t)})"
        return out

    def tag_of(self, tag: Tag) -> str:
        """An op object: ``ops::exp_op{}``, or with fields ``ops::clamp_op<float>{lo, hi}``."""
        if tag.args:  # a tag with fields (clamp_op's bounds, softplus_op's beta and threshold): in their compute type
            ctype = cxx.COMPUTE_TYPES[tag.args[0].dtype.name]
            fields = ", ".join(cxx.literal(a, compute=True) for a in tag.args)
            return f"ops::{tag.name}<{ctype}>{{{fields}}}"
        return f"ops::{tag.name}{{}}"

    def comment(self, origin: Origin, ind: str) -> None:
        if origin.loc == self._last_loc:
            return
        self._last_loc = origin.loc
        if origin.loc is None:
            self.lines.append(f"{ind}// {origin.op}")
            return
        via = f" [{origin.composite}]" if origin.composite else ""
        self.lines.append(f"{ind}// {_where(origin.loc)}{via}")

    def row_loop(self, s: RowLoop, ind: str) -> None:
        """The rows of this CTA: a loop over its ``rows_per_cta`` rows, or, where a CTA takes one row, a test of
        that row.

        A CTA of one row gets no loop: in a loop whose trip count it cannot see, nvcc hoists the loads of views
        that do not move with the row (a weight row) and their conversions above it, and keeps them in
        registers across every iteration (rms_norm at hidden 8192: 128 registers a thread in a loop, 63 without).
        """
        sched = self.fn.schedule
        rows = cxx.dim_expr(sched.rows, self.dims)
        self._last_loc = None
        if isinstance(sched.rows_per_cta, int) and sched.rows_per_cta == 1:
            self.lines += [
                f"{ind}int64_t const row = {self.cta_index};",
                f"{ind}if (row < ({rows})) {{",
            ]
        else:
            per = cxx.dim_expr(sched.rows_per_cta, self.dims)
            self.lines += [
                f"{ind}int64_t const row_begin = {self.cta_index} * ({per});",
                f"{ind}int64_t const row_end = row_begin + ({per}) < ({rows}) ? row_begin + ({per}) : ({rows});",
                f"{ind}for (int64_t row = row_begin; row < row_end; ++row) {{",
            ]
        self.load_reads(s.body, ind + "  ")
        self.after_reads(ind + "  ")
        for stmt in s.body:
            self.stmt(stmt, ind + "  ")
        self.lines.append(f"{ind}}}")
        self.reads = {}


def allocations(body: list[Stmt]) -> list[Buffer]:
    """Every buffer a body allocates (``Alloc``), nested scopes included, in order."""
    out: list[Buffer] = []
    for s in body:
        if isinstance(s, Alloc):
            out.append(s.buffer)
        elif isinstance(s, (MeshScope, RowLoop, RowGuard)):
            out += allocations(s.body)
    return out


def _buffers(body: list[Stmt]) -> list[Buffer]:
    """Every buffer a body declares, in order (nested scopes included)."""
    out: list[Buffer] = []
    for s in body:
        if isinstance(s, (Alloc, GmemView, AliasView)):
            out.append(s.buffer)
        elif isinstance(s, (RowLoop, MeshScope, RowGuard)):
            out += _buffers(s.body)
    return out


def meshes_of(body: list[Stmt]) -> list[TMesh]:
    """Every mesh a body runs over or lays a buffer out over, first use first."""
    found: dict[str, TMesh] = {}
    for s in body:
        if isinstance(s, MeshScope):
            found.setdefault(s.mesh.name, s.mesh)
            for m in meshes_of(s.body):
                found.setdefault(m.name, m)
        elif isinstance(s, (RowLoop, RowGuard)):
            for m in meshes_of(s.body):
                found.setdefault(m.name, m)
    for b in _buffers(body):
        if b.layout.mesh is not None:
            found.setdefault(b.layout.mesh.name, b.layout.mesh)
    return list(found.values())


def _short(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


def _where(loc: SourceLoc) -> str:
    """``file.py:7: <the line's text>`` for a comment: a Python line continued by a backslash loses it, which
    would carry the comment on into the next line of C++."""
    text = loc.text.rstrip().rstrip("\\").rstrip()
    return f"{_short(loc.filename)}:{loc.lineno}: {text}"


def tensor_maps(body: list[Stmt]) -> list[TensorMap]:
    """Every tensor map a body's calls take, first use first (each once)."""
    found: dict[str, TensorMap] = {}
    for c in calls(body):
        for m in c.maps:
            found.setdefault(m.name, m)
    return list(found.values())


def gathers(body: list[Stmt]) -> list[Gather]:
    """Every position a body's views read on the device (``Gather`` terms of their row offsets), in order."""
    out: list[Gather] = []
    for s in body:
        if isinstance(s, GmemView):
            out += _gathers_of(s.offset)
        elif isinstance(s, (MeshScope, RowLoop, RowGuard)):
            out += gathers(s.body)
            if isinstance(s, RowGuard):
                out += [g for a, b in s.conds for g in (*_gathers_of(a), *_gathers_of(b))]
    return out


def scanned_positions(body: list[Stmt]) -> list[tuple[str, Dim, str]]:
    """Every index a body's ops read whole (index_add's: each row scans all of it), as (parameter, the extent its
    positions index, what they index), in order."""
    params: dict[int, str] = {}
    calls: list[OpCall] = []

    def walk(stmts: list[Stmt]) -> None:
        for s in stmts:
            if isinstance(s, GmemView):
                params[id(s.buffer)] = s.param
            elif isinstance(s, OpCall) and s.family == "index_add":
                calls.append(s)
            elif isinstance(s, (MeshScope, RowLoop, RowGuard)):
                walk(s.body)

    walk(body)
    return [(params[id(c.operands[2])], c.indices[1].base, "positions along the indexed axis") for c in calls]


def _gathers_of(offset: RowOffset) -> list[Gather]:
    out = []
    for g in offset.gathers:
        out += [*_gathers_of(g.at), g]
    return out
