"""The TIR of a staged function: one kernel per stage (``stages.py``), the values between them homed.

Every value a stage writes for a later stage or for the caller has a *home*: the caller's output it is
returned as (when the function returns it once, through a contiguous view), else a temporary the entry
allocates. Each stage is lowered on its own, and bound to the homes of what it reads and writes: a row-wise
stage by the row-wise lowering, reading views through their strides (``views.Strided``: a transposed head, an
embedding's rows at the token ids); a matmul by ``matmul.py``; rope by ``rope.py``; a cache update as a
row-wise copy of the cache and a row-wise write of the new rows at the position read on the device, the rows
past ``n_new`` or past the cache's end left alone; a concat or stack as a row-wise copy of each operand into its
place in the result (``join``).

New rows a rope computes for a cache update and nothing else reads (the rotated keys of a decode step) are written
by the rope into the cache directly (``direct_cache_rows``): no temporary, no write stage; the cache's copy (none
when the caller updates the cache in place) then runs before every other stage.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dims_equal, dimvars_of, product, total
from ..ir.types.dtype import f32
from ..ir.types.tensor_type import TensorType
from ..target import Target
from ..tir.function import CacheWrite, DimBinding, KernelParam, PrimFunc, Schedule, StageCall
from ..tir.stmt import Bound, Gather, GmemView, RowGuard, RowOffset, Stmt
from .attention import attention_bodies, attention_part_shape, rows_tier
from .epilogue import epilogue_inputs, epilogue_result, fuse_epilogues
from .errors import LoweringError
from .in_place import elementwise_only
from .index_add import index_add_body
from .matmul import matmul_body
from .pairs import fuse_matmul_pairs, pair_split
from .params import bind_dimvars, output_params
from .program import Op, Program, Val
from .prologue import rope_prologues
from .reduce_axis import reduce_axis_body
from .reduce_epilogue import fuse_reduction_epilogues, part_names, part_types, reduction_merge, split_reductions
from .rope import RowsInto, rope_bodies
from .rowwise import lower_rows
from .schedule import Declared
from .stages import StagedProgram, split_stages, sub_program
from .views import VIEW_OPS, GatheredAxis, Strided, View, require_plain_index, row_major, rows_strided


def lower_staged(prog: Program, target: Target, declared: Declared) -> PrimFunc:
    """The PrimFunction of ``prog`` run as stages (see the module docstring)."""
    staged = fuse_reduction_epilogues(fuse_matmul_pairs(fuse_epilogues(split_stages(prog)), target), target)
    outs = output_params(prog)
    homes: dict[int, str] = {id(p): p.name for p in prog.params}
    stage_of: dict[int, int] = {}
    for k, stage in enumerate(staged.stages):
        for op in stage.ops:
            for v in op.outputs:
                stage_of[id(v)] = k
    copies: list[tuple[Val, KernelParam]] = []
    for v, kp in zip(prog.outputs, outs):
        view = staged.view(v)
        root = view.root
        if id(root) in stage_of and id(root) not in homes and view.contiguous:
            homes[id(root)] = kp.name
        else:
            copies.append((v, kp))  # a parameter, a constant, a value returned twice or through strides
    temps: list[KernelParam] = []
    read_later = _read_by_later_stages(staged, stage_of)
    read_later |= {id(r) for v, _ in copies for r in _roots(staged.view(v))}
    direct = direct_cache_rows(staged, homes, read_later, stage_of)
    read_later -= set(direct)
    for stage in staged.stages:
        for op in stage.ops:
            for v in op.outputs:
                if id(v) in read_later and id(v) not in homes:
                    name = prog.namer.unique(f"{v.name}_tmp")
                    temps.append(KernelParam(name, TensorType(v.type.shape, v.type.dtype), False))
                    homes[id(v)] = name
    lowering = _Stages(staged, homes, target, declared, {kp.name for kp in outs}, direct)
    calls = [call for k in range(len(staged.stages)) for call in lowering.stage(k)]
    calls = lowering.prelude + calls  # the caches' copies before the stages writing into them
    calls += [lowering.copy(v, kp, len(calls) + i) for i, (v, kp) in enumerate(copies)]
    params = tuple(KernelParam(p.name, p.type, False) for p in prog.params) + outs
    kernels = [c.fn for c in calls]
    sched = Schedule("stages", kernels[0].schedule.grid if kernels else 0,
                     max((f.schedule.threads_per_cta for f in kernels), default=1))
    return PrimFunc(prog.name, params, len(outs), bind_dimvars(prog, params), sched, [], prog.function.loc,
                    stages=tuple(calls), temps=(*temps, *lowering.temps), aliases=tuple(lowering.aliases))


def _roots(view: View) -> list[Val]:
    """The memory a view reads: its root's, and the positions picking its rows."""
    return [view.root, *(r for _, index, _ in view.gathers for r in _roots(index))]


def direct_cache_rows(staged: StagedProgram, homes: dict[int, str], read_later: set[int],
                      stage_of: dict[int, int]) -> dict[int, Op]:
    """The rope results a rope may write straight into a cache (by value id: the ``cache_update`` taking them):
    read by that update alone, as its new rows (a contiguous reshape of the result with leading axes of 1 more),
    not returned, of a cache that is a contiguous parameter of the function (its copy can run first) and whose
    update's result is contiguous and has a home (returned, or read by a later stage), the update's position and
    count parameters or computed before the rope (the rope reads them)."""
    prog = staged.prog
    out: dict[int, Op] = {}
    returned = {id(r) for v in prog.outputs for r in _roots(staged.view(v))}
    for op in prog.ops:
        if op.op != "cache_update":
            continue
        cache, pos, n_new, new = (staged.view(v) for v in op.inputs)
        r = new.root
        rope = r.producer
        result = op.outputs[0]
        if rope is None or rope.op != "rope" or id(r) in returned or cache.root.param is None:
            continue
        if not all(v.root.param is not None or stage_of.get(id(v.root), len(staged.stages)) < stage_of[id(r)]
                   for v in (pos, n_new)):
            continue
        if not (cache.contiguous and new.contiguous and staged.view(result).contiguous):
            continue
        if not (id(result) in read_later or id(result) in homes):
            continue
        lead = len(new.shape) - len(r.type.shape)
        if lead < 0 or not all(dims_equal(a, b) for a, b in zip(new.shape[lead:], r.type.shape)) or not all(
                dims_equal(d, 1) for d in new.shape[:lead]):
            continue
        readers = [o for stage in staged.stages for o in stage.ops for v in o.inputs
                   if any(x is r for x in _roots(staged.view(v)))]  # views are no readers: what reads them is
        if readers == [op]:
            out[id(r)] = op
    return out


def _read_by_later_stages(staged: StagedProgram, stage_of: dict[int, int]) -> set[int]:
    """The values (roots) a stage after the one producing them reads."""
    out: set[int] = set()
    for k, stage in enumerate(staged.stages):
        for op in stage.ops:
            for v in op.inputs:
                for root in _roots(staged.view(v)):
                    if id(root) in stage_of and stage_of[id(root)] < k:
                        out.add(id(root))
    return out


class _Stages:
    """Lowers the stages of one staged program, each bound to the homes of what it reads and writes."""

    def __init__(self, staged: StagedProgram, homes: dict[int, str], target: Target, declared: Declared,
                 outputs: set[str], direct: dict[int, Op]) -> None:
        self.staged = staged
        self.direct = direct  # rope results a rope writes into a cache (direct_cache_rows)
        self.prelude: list[StageCall] = []  # the copies of those caches, run first
        self.prog = staged.prog
        self.homes = homes
        self.target = target
        self.declared = declared
        self.outputs = outputs
        self.aliases: list[tuple[str, str]] = []  # (output, input) the caller may pass as one tensor
        self.temps: list[KernelParam] = []  # temporaries of a stage's own (attention's slices)
        self.weights = {p.name for p in self.prog.function.params if p.const}  # the ConstTensor parameters
        function_params = tuple(KernelParam(p.name, p.type, False) for p in self.prog.params)
        self.bindings = bind_dimvars(self.prog, function_params)  # where the entry reads each DimVar

    def home(self, v: Val, op: Op) -> str:
        if id(v) not in self.homes:
            raise LoweringError(op.op, self.prog.name, f"it reads {v.name}, which no stage computes (a constant "
                                f"operand of {op.op} is not compiled yet)", op.loc)
        return self.homes[id(v)]

    def stage(self, k: int) -> list[StageCall]:
        stage = self.staged.stages[k]
        name = f"{self.prog.name}_stage{k}"
        if stage.kind == "rows":
            sub, outside = sub_program(self.prog, self.staged.views, stage.ops, name)
            produced = [v for op in sub.ops for v in op.outputs]
            sub.outputs = tuple(v for v in produced if id(v) in self.homes)
            for op in sub.ops:
                for v in op.outputs:
                    v.producer = op
            call = self.rows(name, sub, outside, [self.homes[id(v)] for v in sub.outputs])
            if elementwise_only(stage.ops, sub.outputs):
                self.rows_in_place(stage.ops, sub.outputs[0])
            return [call]
        if stage.kind in ("matmul", "matmul_pair"):
            return self.matmul(name, stage.ops, stage.kind == "matmul_pair")
        (op,) = stage.ops
        views = [self.staged.view(v) for v in op.inputs]
        outs = [self.staged.view(v) for v in op.outputs]
        for v in views:
            if id(v.root) not in self.direct:  # new rows a rope writes into the cache have no home
                self.home(v.root, op)
        if stage.kind == "reduce_axis":
            body, sched = reduce_axis_body(self.prog.name, op, views[0], outs[0], self.homes, self.target)
            return [self.kernel(name, [views[0], outs[0]], body, sched, op)]
        if stage.kind == "rope":
            return self.rope(name, op, views, outs)
        if stage.kind == "attention":
            return self.attention(name, op, views, outs[0])
        if stage.kind in ("concat", "stack"):
            return self.join(name, op, views, outs[0])
        if stage.kind == "index_copy":
            return self.index_copy(name, op, views, outs[0])
        if stage.kind == "index_add":
            return self.index_add(name, op, views, outs[0])
        return self.cache_update(name, op, views, outs[0])

    def require_own_memory(self, op: Op, out: View) -> None:
        """Refuse ``op`` whose result ``out`` is read through a layout of its own (its kernels write it whole)."""
        if not out.contiguous:
            raise LoweringError(op.op, self.prog.name, "its result is read through a layout of its own; not "
                                "compiled yet", op.loc)

    def index_add(self, name: str, op: Op, views: list[View], out: View) -> list[StageCall]:
        """``index_add(x, index, source, dim, alpha)``: one kernel, each CTA a row of the result
        (lower/index_add.py)."""
        x, index, source = views
        self.require_own_memory(op, out)
        require_plain_index(self.prog.name, op, index)
        body, sched = index_add_body(self.prog.name, op, x, index, source, out, self.homes, self.target)
        return [self.kernel(name, [x, source, index, out], body, sched, op)]

    def index_copy(self, name: str, op: Op, views: list[View], out: View) -> list[StageCall]:
        """``index_copy(x, index, source, dim)``: x copied into the result, then row ``i`` of the source written at
        position ``index[i]`` (read on the device, checked against the axis's extent) of axis ``dim``. A position
        the index holds twice is written by two rows, in no set order (torch's CUDA index_copy leaves it so too)."""
        x, index, source = views
        dim = op.attrs["dim"]
        result = op.outputs[0]
        assert dim < len(result.type.shape) - 1, "gather_last.py moves one along the last axis to a leading axis"
        self.require_own_memory(op, out)
        require_plain_index(self.prog.name, op, index)
        home = self.homes[id(result)]
        copy = self.copy_rows(f"{name}_copy", x, f"{result.name}_old", "old", home)
        strides = row_major(result.type.shape)
        at = GatheredAxis(dim, self.home(index.root, op), index.strides[0], result.type.shape[dim],
                          f"positions of {result.name}")
        write = self.copy_rows(f"{name}_write", source, f"{result.name}_rows", "rows", home,
                               Strided(strides, (1,) * len(strides), (at,)), (), (index.root,))
        return [copy, write]

    def join(self, name: str, op: Op, views: list[View], out: View) -> list[StageCall]:
        """``concat`` or ``stack``: each operand copied into its place in the result (a row-wise kernel each, writing
        through the result's strides from where the operand's part starts: after the parts before it along the
        axis, or at its index along the new axis)."""
        self.require_own_memory(op, out)
        result = op.outputs[0]
        axis = op.attrs["axis"]  # normalised by the IR: an axis of the result (the last: rows written a stride apart)
        strides = row_major(result.type.shape)
        calls = []
        start: Dim = 0
        for i, view in enumerate(views):
            if op.op == "concat":
                into, base = strides, product((start, strides[axis]))
                start = total([start, view.shape[axis]])
            else:
                into, base = strides[:axis] + strides[axis + 1:], product((i, strides[axis]))
            calls.append(self.copy_rows(f"{name}_part{i}", view, f"{result.name}_part{i}", f"part{i}",
                                        self.homes[id(result)], Strided(into, (1,) * len(into), (), (), base)))
        return calls

    def rope(self, name: str, op: Op, views: list[View], outs: list[View]) -> list[StageCall]:
        """The rope's two kernels, q's and k's: each reads its row (through its norm, ``prologue.py``) and the cos
        and sin rows at its position, and writes its result, or the cache rows it goes to (``direct_cache_rows``)."""
        into: dict[int, RowsInto] = {}
        writes: dict[int, tuple[list[View], CacheWrite]] = {}  # the update's position and count, and its check
        for i, v in enumerate(op.outputs):
            cu = self.direct.get(id(v))
            if cu is None:
                continue
            cache, pos, n_new, new = (self.staged.view(u) for u in cu.inputs)
            result = self.staged.view(cu.outputs[0])
            at, guard, write = self.cache_rows(cu, cache, pos, n_new, new, result)
            rank = len(v.type.shape)
            into[i] = RowsInto(View(result.root, tuple(v.type.shape), result.strides[len(result.strides) - rank:]),
                               (at,), guard)
            writes[i] = ([pos, n_new], write)
        bodies = rope_bodies(self.prog.name, op, views, outs, self.homes, self.target, into)
        norms = rope_prologues(op)
        calls = []
        for i, (which, x, out, (body, sched)) in enumerate(zip("qk", views[:2], outs, bodies)):
            norm = [self.staged.view(norms[which][0])] if which in norms else []
            positions, write = writes.get(i, ([], None))
            written = into[i].view if i in into else out
            call = self.kernel(f"{name}_{which}", [x, *views[2:5], *norm, *positions, written], body, sched, op)
            if write is not None:
                call.cache_writes = (write,)
            calls.append(call)
        return calls

    def matmul(self, name: str, ops: list[Op], pair: bool = False) -> list[StageCall]:
        """A matmul's kernel, the elementwise ops fused after it (``epilogue.py``) applied to each result; of a
        pair (``pairs.py``), both matmuls in one kernel, the epilogue taking their two results; with reductions of
        its rows fused after it (``reduce_epilogue.py``), each CTA's parts of them found in the same kernel, then
        merged by a second."""
        ops, reductions = split_reductions(ops)
        op = ops[0]
        a, b, *weight = (self.staged.view(v) for v in op.inputs)  # a prologue's norm weight third (prologue.py)
        second = ops[pair_split(ops)] if pair else None
        b1 = [self.staged.view(second.inputs[1])] if second is not None else []
        picks = [index for _, index, _ in b.gathers]  # the weight's batch picked by positions (matmul_body)
        for v in (a, b, *b1, *weight, *picks):
            self.home(v.root, op)
        result = epilogue_result(self.staged, ops) if len(ops) > 1 else op.outputs[0]
        out = self.staged.view(result)
        steps = [o for o in ops[1:] if o is not second]
        read = [(v, self.staged.view(v)) for v in epilogue_inputs(self.staged, [op, *steps])
                if second is None or v is not second.outputs[0]]
        for _, v in read:
            self.home(v.root, op)
        pair_of = (second, b1[0]) if second is not None else None
        named = [(r, self.part_names(r, out)) for r in reductions]
        # weights no kernel writes, at addresses no kernel's output picks (not a mixture's chosen experts)
        constant = all(v.root.param in self.weights and not v.gathers for v in (b, *b1))
        body, sched = matmul_body(self.prog.name, op, a, b, out, self.homes, self.target, (steps, read, result),
                                  weight[0] if weight else None, pair_of, named, constant)
        for _, v in read:
            if self.read_in_place(v, out, ops[1:]):
                self.aliases.append((self.homes[id(out.root)], self.homes[id(v.root)]))
        call = self.kernel(name, [a, b, *b1, *weight, *picks, *(v for _, v in read), out], body, sched, op)
        if not reductions:
            return [call]
        rows = out.root.type.shape[0]
        parts = tuple(KernelParam(n, TensorType((sched.grid, rows), dtype), False)
                      for r, names in named for n, dtype in zip(names, part_types(r)))
        self.temps += parts
        call.fn.params = (*call.fn.params, *(KernelParam(p.name, p.type, True) for p in parts))
        call.fn.output_count += len(parts)
        call.args = (*call.args, *(p.name for p in parts))
        results = [self.staged.view(r.outputs[0]) for r in reductions]
        merging = [(r, names, v, self.home(v.root, r)) for (r, names), v in zip(named, results)]
        merge_body, merge_sched = reduction_merge(merging, sched.grid, out.shape[-1], self.target)
        roots = _distinct([v.root for v in results])
        written = tuple(KernelParam(self.homes[id(r)], TensorType(r.type.shape, r.type.dtype), True) for r in roots)
        fn = PrimFunc(f"{name}_{reductions[0].op}", (*parts, *written), len(written), (), merge_sched, merge_body,
                      reductions[0].loc)
        fn.dimvars = self.dimvars(fn)
        return [call, StageCall(fn, tuple(p.name for p in fn.params))]

    def part_names(self, op: Op, out: View) -> tuple[str, ...]:
        """The names of the temporaries of a reduction's parts (``reduce_epilogue.py``: one row of values, and of an
        argmax one of positions, a CTA of the matmul); and a home for the matmul's result where it has none (read
        by the reductions alone)."""
        root = out.root
        if id(root) not in self.homes:
            temp = KernelParam(self.prog.namer.unique(f"{root.name}_tmp"), TensorType(root.type.shape,
                                                                                     root.type.dtype), False)
            self.temps.append(temp)
            self.homes[id(root)] = temp.name
        name = op.outputs[0].name
        return tuple(self.prog.namer.unique(f"{name}_{what}") for what in part_names(op))

    def read_in_place(self, view: View, out: View, readers: list[Op]) -> bool:
        """Whether the caller may pass an input that ``readers`` read element by element (a matmul's epilogue, a
        row-wise stage of elementwise ops) as the output ``out`` too: they read each element of it where they write
        the result's (the residual stream, a step's inputs advanced, updated in place), the whole input in
        the result's own layout, and nothing else in the function reads the input (nor returns it)."""
        root = view.root
        if root.param is None or self.homes.get(id(out.root)) not in self.outputs:
            return False
        same = (view.contiguous and out.contiguous and len(view.shape) == len(out.shape)
                and all(dims_equal(x, y) for x, y in zip(view.shape, out.shape)))
        if not same:
            return False
        return self.read_only_by(root, readers)

    def rows_in_place(self, ops: list[Op], result: Val) -> None:
        """The aliases of a row-wise stage of elementwise ops writing one output (``in_place.py``): an input of its
        own shape and layout, read by nothing else, the caller may pass as the output too."""
        produced = {id(v) for o in ops for v in o.outputs}
        out = self.staged.view(result)
        views = [self.staged.view(v) for o in ops for v in o.inputs if id(v) not in produced]
        read = {id(view.root): view for view in views if view.root.param not in self.weights}
        for view in read.values():
            if self.read_in_place(view, out, ops):
                self.aliases.append((self.homes[id(out.root)], self.homes[id(view.root)]))

    def read_only_by(self, root: Val, ops: list[Op]) -> bool:
        """Whether no op but ``ops`` reads ``root``'s memory and the function does not return it: an output may
        then take its place (the caller passing one tensor as both). View ops read nothing (they run nowhere): the
        ops reading their results through them count."""
        inside = {id(o) for o in ops}
        readers = [o for o in self.prog.ops for v in o.inputs
                   if self.staged.view(v).root is root and o.op not in VIEW_OPS]
        returned = any(self.staged.view(v).root is root for v in self.prog.outputs)
        return not returned and all(id(o) in inside for o in readers)

    def attention(self, name: str, op: Op, views: list[View], out: View) -> list[StageCall]:
        """The kernels of an attention (``attention.py``): the keys' slices into a temporary of the slices'
        states, then their combine into the result; or one kernel doing both, a key head's slices a cluster; or
        (a prompt's many query rows on a GPU with tensor cores: ``rows_tier``) one kernel of blocks of rows."""
        ins = tuple(KernelParam(self.homes[id(r)], TensorType(r.type.shape, r.type.dtype), False)
                    for r in _distinct([v.root for v in views]))
        result = KernelParam(self.homes[id(out.root)], TensorType(out.root.type.shape, out.root.type.dtype), True)
        kernels: tuple[PrimFunc, ...]
        if rows_tier(op, *views[:3], self.target):
            ((body, sched),) = attention_bodies(self.prog.name, op, views, out, None, self.homes, self.target)
            kernels = (PrimFunc(f"{name}_rows", (*ins, result), 1, (), sched, body, op.loc),)
            return self.stage_calls(kernels)
        part = KernelParam(self.prog.namer.unique(f"{op.outputs[0].name}_slices"),
                           TensorType(attention_part_shape(*views[:3], self.target), f32), False)
        self.temps.append(part)
        bodies = attention_bodies(self.prog.name, op, views, out, part.name, self.homes, self.target)
        written = KernelParam(part.name, part.type, True)
        if len(bodies) == 1:
            ((body, sched),) = bodies
            kernels = (PrimFunc(f"{name}_merged", (*ins, written, result), 2, (), sched, body, op.loc),)
        else:
            (body1, sched1), (body2, sched2) = bodies
            kernels = (PrimFunc(f"{name}_slices", (*ins, written), 1, (), sched1, body1, op.loc),
                       PrimFunc(f"{name}_combine", (part, result), 1, (), sched2, body2, op.loc))
        return self.stage_calls(kernels)

    def stage_calls(self, kernels: tuple[PrimFunc, ...]) -> list[StageCall]:
        """A stage's kernels as calls, each of its own DimVars, its parameters passed by name."""
        calls = []
        for fn in kernels:
            fn.dimvars = self.dimvars(fn)
            calls.append(StageCall(fn, tuple(p.name for p in fn.params)))
        return calls

    def rows(self, name: str, sub: Program, outside: list[Val], out_homes: list[str],
             out_strided: dict[str, Strided] | None = None, guard: tuple[Bound, ...] = (),
             positions: tuple[Val, ...] = ()) -> StageCall:
        """A row-wise kernel of ``sub``, whose parameters stand for ``outside`` values and whose outputs are written
        to ``out_homes``; a parameter that is a view is read through its strides (and positions). ``positions``
        are integer tensors the offsets or the guard read on the device, parameters of the kernel beside the row
        values."""
        strided: dict[str, Strided] = dict(out_strided or {})
        extra: list[Val] = list(positions)
        for p, v in zip(sub.params, outside):
            view = self.staged.view(v)
            if not view.contiguous:
                strided[p.name] = self.strided(view, sub, v)
            for _, index, _ in view.gathers:
                if all(index.root is not e for e in extra):
                    extra.append(index.root)
        sub.name = self.prog.name  # refusals name the function
        fn = lower_rows(sub, self.target, self.declared, strided, guard, self.bindings)
        fn.name = name
        taken = {p.name for p in fn.inputs}
        extra = [r for r in extra if self.homes[id(r)] not in taken]  # a row value already: the same memory
        inputs = fn.inputs + tuple(KernelParam(self.homes[id(r)], TensorType(r.type.shape, r.type.dtype), False)
                                   for r in extra)
        fn.params = inputs + fn.outputs
        fn.dimvars = self.dimvars(fn)
        args = (tuple(self.homes[id(self.staged.view(v).root)] for v in outside)
                + tuple(self.homes[id(r)] for r in extra) + tuple(out_homes))
        return StageCall(fn, args)

    def strided(self, view: View, sub: Program, v: Val) -> Strided:
        """How a row-wise kernel reads ``view``: its row through its last axis's stride (consecutive elements, or a
        transposed axis's), its other axes through strides and positions."""
        op = next((o for o in sub.ops if any(i.name == v.name for i in o.inputs)), None)
        where = op.loc if op is not None else self.prog.function.loc
        what = op.op if op is not None else "return"
        if not rows_strided(view):
            raise LoweringError(what, self.prog.name, f"it reads {v.name}, a view {view} whose last axis repeats its "
                                "elements in runs or is indexed by positions; a row-wise op reads rows of elements "
                                "one stride apart (repeat or index another axis, or copy the result of the "
                                "repeat first)", where)
        gathered = tuple(GatheredAxis(axis, self.homes[id(index.root)], index.strides[0], bound,
                                      f"rows of {view.root.name}") for axis, index, bound in view.gathers)
        return Strided(view.strides, view.repeats, gathered, (), view.offset)

    def kernel(self, name: str, views: list[View], body: list[Stmt], sched: Schedule, op: Op) -> StageCall:
        """A stage kernel over the memory of ``views``' roots (the last one written), each a parameter named by its
        home."""
        roots = _distinct([v.root for v in views[:-1]])
        out = views[-1].root
        params = tuple(KernelParam(self.homes[id(r)], TensorType(r.type.shape, r.type.dtype), False) for r in roots
                       if r is not out)
        params += (KernelParam(self.homes[id(out)], TensorType(out.type.shape, out.type.dtype), True),)
        fn = PrimFunc(name, params, 1, (), sched, body, op.loc)
        fn.dimvars = self.dimvars(fn)
        return StageCall(fn, tuple(p.name for p in params))

    def dimvars(self, fn: PrimFunc) -> tuple[DimBinding, ...]:
        """The DimVars a stage kernel mentions (parameters, schedule, views, guards), as the function binds them:
        a stage may need an extent no input of its own gives, such as a score matrix's context length."""
        mentioned = dimvars_of(_dims(fn))
        return tuple(b for b in self.bindings if b.dimvar in mentioned)

    def copy_rows(self, kernel: str, view: View, name: str, param: str, home: str, into: Strided | None = None,
                  guard: tuple[Bound, ...] = (), positions: tuple[Val, ...] = ()) -> StageCall:
        """A row-wise kernel ``kernel`` copying ``view`` (read through its strides) into the parameter ``home``:
        in order, or through ``into`` (the strides, positions and start its rows are written at), the rows outside
        ``guard`` left alone; ``name`` and ``param`` name the copied value and the kernel's parameter for it, and
        ``positions`` are the integer tensors ``into`` and ``guard`` read on the device."""
        p = Val(TensorType(view.shape, view.root.type.dtype), name, param=param)
        self.staged.views[id(p)] = view
        sub = Program(self.prog.name, self.prog.function, (p,), [], (p,), self.prog.structure, self.prog.namer)
        written = {output_params(sub)[0].name: into} if into is not None else None
        return self.rows(kernel, sub, [p], [home], written, guard, positions)

    def copy(self, v: Val, out: KernelParam, k: int) -> StageCall:
        """A row-wise stage copying ``v`` (through its view) into the caller's output ``out``."""
        view = self.staged.view(v)
        root = view.root
        if root.constant or id(root) not in self.homes:
            raise LoweringError("return", self.prog.name, f"it returns {v.name}, which no stage computes (a "
                                "constant); not compiled yet", self.prog.function.loc)
        return self.copy_rows(f"{self.prog.name}_stage{k}", view, f"{v.name}_src", f"{v.name}_src", out.name)

    def cache_update(self, name: str, op: Op, views: list[View], out: View) -> list[StageCall]:
        """``cache_update(cache, cur_pos, n_new, new)``: the cache copied into the result, then the new rows
        written at ``cur_pos`` (read on the device), only the first ``n_new`` of them and only those inside the
        cache."""
        cache, pos, n_new, new = views
        if len(new.shape) < 3:
            raise LoweringError(op.op, self.prog.name, f"of rows {new} with no axis after the sequence axis; a "
                                "compiled cache update writes (batch, seq, ..., d) rows", op.loc)
        self.require_own_memory(op, out)
        result = op.outputs[0]
        copy = self.copy_rows(f"{name}_copy", cache, f"{result.name}_old", "old", self.homes[id(result)])
        in_place = self.in_place(op, cache, result)
        if in_place:
            copy.unless_same = (self.homes[id(cache.root)], self.homes[id(result)])
            self.aliases.append((self.homes[id(result)], self.homes[id(cache.root)]))
        if id(new.root) in self.direct:  # the rope computing the new rows writes them (rope())
            self.prelude.append(copy)
            return []
        strides = out.strides
        at, guard, write = self.cache_rows(op, cache, pos, n_new, new, out)
        scatter = self.copy_rows(f"{name}_write", new, f"{result.name}_new", "new", self.homes[id(result)],
                                 Strided(strides, (1,) * len(strides), (), (at,)), guard, (pos.root, n_new.root))
        scatter.cache_writes = (write,)
        return [copy, scatter]

    def cache_rows(self, op: Op, cache: View, pos: View, n_new: View, new: View,
                   out: View) -> tuple[Gather, tuple[Bound, ...], CacheWrite]:
        """Where a cache update writes its new rows: the position (read on the device) times the result's row
        stride, added to each row's offset, the guard keeping the rows it writes, and the entry's check of the
        position and count. cur_pos in [0, capacity] and n_new in [0, seq] (the CPU entry refuses others, a CUDA
        kernel stops at them): the guard keeps the rows i < n_new, and a row with cur_pos + i past the cache's end
        (cur_pos + n_new > capacity, which the CPU entry refuses) stops a CUDA kernel, saying so: no write leaves
        the cache, and none is dropped in silence."""
        capacity, seq = cache.shape[1], new.shape[1]
        pos_home, n_home = self.home(pos.root, op), self.home(n_new.root, op)
        positions = f"positions of {cache.root.name} (its length and one past it)"
        at = Gather(pos_home, RowOffset(), out.strides[1], total((capacity, 1)), positions)
        index = RowOffset(((product(new.shape[2:-1]), seq, 1),))  # the row's index along the sequence axis
        written = Gather(n_home, RowOffset(), 1, total((seq, 1)), f"counts of new rows of {new.root.name}")
        start = Gather(pos_home, RowOffset(), 1, total((capacity, 1)), positions)
        guard = (Bound(index, RowOffset(gathers=(written,))),
                 Bound(RowOffset(index.terms, (start,)), RowOffset(base=capacity),
                       f"writing {n_home} rows at {pos_home} passes the end of {cache.root.name}"))
        return at, guard, CacheWrite(pos_home, n_home, capacity, cache.root.name)

    def in_place(self, op: Op, cache: View, result: Val) -> bool:
        """Whether the caller may pass the cache as the result, updated in place: the cache is an input the
        function reads nowhere else (nor returns), read whole, and the result is one of its outputs."""
        root = cache.root
        if root.param is None or not cache.contiguous or self.homes.get(id(result)) not in self.outputs:
            return False
        return self.read_only_by(root, [op])


def _dims(fn: PrimFunc) -> list[Dim]:
    """Every extent a kernel mentions: its parameters' shapes, its schedule, its buffers, offsets, guards and its
    ops' indices."""
    out: list[Dim] = [d for p in fn.params for d in p.type.shape]
    out += [fn.schedule.grid, fn.schedule.rows, fn.schedule.rows_per_cta]

    def offset(o: RowOffset) -> None:
        out.append(o.base)
        for div, mod, stride in o.terms:
            out.extend((div, stride) if mod is None else (div, mod, stride))
        for g in o.gathers:
            out.extend((g.stride, g.bound))
            offset(g.at)

    def walk(body: list[Stmt]) -> None:
        for st in body:
            buffer = getattr(st, "buffer", None) or getattr(st, "out", None)
            if buffer is not None:
                out.extend((*buffer.shape, *buffer.layout.shape, *buffer.layout.stride))
            if isinstance(st, GmemView):
                offset(st.offset)
            if isinstance(st, RowGuard):
                for a, b in st.conds:
                    offset(a)
                    offset(b)
            for index in getattr(st, "indices", ()):  # an op's offsets and extents (a mean's row length)
                offset(index)
            walk(getattr(st, "body", []))

    walk(fn.body)
    return out


def _distinct(vals: list[Val]) -> list[Val]:
    seen: list[Val] = []
    for v in vals:
        if all(v is not s for s in seen):
            seen.append(v)
    return seen
