"""The kernels of an attention stage (``fuse_attention.py`` recognises it): the keys split over CTAs, then a combine.

``attention(q, keys, vals[, qpos, kpos])``: q (B, M, D), keys (B, D, N), vals (B, N, Dv) views (or all
without B). The query heads that read one key head (keys and values repeated G times along B: grouped-query
attention) share a CTA, so each key and value row is read once for all of them; the keys are cut into
``splits`` slices, a CTA each. The first kernel (``ops::attention``) runs the online softmax of its G x M
query rows over its slice and writes the slice's state (weighted sum of value rows, maximum, sum of
exponentials) to a temporary; the second (``ops::attention_combine``) merges the slices' states of a key
head into its G x M output rows. The split count is fixed when lowering (from the largest context the
DimVar allows), never from the context itself, so a CUDA graph captured once serves every context length;
short contexts leave the last slices empty.

On a GPU with thread-block clusters (sm_90 and later) the two are one kernel: a key head's slices run as one
cluster, whose CTAs wait for each other at the cluster's barrier after writing their states and then merge
them, each a share of the head's outputs (``ops::attention_combine``'s cluster form). The decode step then has
no launch between the slices and their merge: on the H200 at Qwen3-1.7B's shape (the slot alone, CUDA-graph
replays) 10.07 -> 8.18 us at context 1024 and 17.98 -> 16.75 us at 4096, the decode step 2124 -> 2067 us. The
slices' states then stay in each CTA's shared memory, which its cluster's peers read (distributed shared memory),
where a key head's G x M rows fit (32 rows of 128 values): through global memory the combine cost 43 us of a 1563 us
decode step at context 300; through shared memory the step took 1540 us.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dim_range, dims_equal, floordiv, product, total
from ..ir.types.dtype import f32
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer, Literal
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import Alloc, GmemView, OpCall, Origin, RowLoop, RowOffset, Stmt, Tag
from .errors import LoweringError
from .gemm import CUDA_GEMM_MIN_ROWS
from .program import Op
from .views import View

# Threads of a CUDA CTA of either kernel (ops::attention's grouped tier takes 128).
CUDA_ATTENTION_THREADS = 128
# CTAs that fill the GPU (an H200 has 132 SMs): the splits give about one CTA per SM, at most 16 a key head (the
# combine reads every slice), each slice at least 64 keys (one pass of the grouped tier).
CUDA_ATTENTION_CTAS = 132
CUDA_MAX_SPLITS = 16
CUDA_MIN_SLICE = 64
# On the CPU a CTA is a thread of the OpenMP loop: a few slices keep both cores busy on one key head (slices of the
# keys for a decode step's few query rows, of the rows for a prompt's many: cpu/ops/attention.h).
CPU_MAX_SPLITS = 4
CPU_MIN_SLICE = 32
# The largest thread-block cluster a key head's slices may form (16: beyond the portable 8, which Hopper allows).
CUDA_MAX_CLUSTER = 16
# A prompt's attention (at least CUDA_GEMM_MIN_ROWS query rows, as the GEMM schedule's matmuls: dispatch.py's
# row_variants splits a function there) through the tensor cores (sm_80 and later: ops::attention_rows,
# cuda/ops/attention_mma.cuh; sm_90a at a head_dim of 128: cuda/ops/attention_gmma.cuh, on wgmma): a CTA of
# CUDA_ATTENTION_THREADS takes CUDA_ATTENTION_BLOCK_ROWS query rows of one key head over every key they see, and
# writes them (no slices, no combine).
CUDA_ATTENTION_BLOCK_ROWS = 64  # attention_mma.cuh's kBlockRows
# CTAs an SM the blocks' kernel is built to hold (__launch_bounds__' minimum: at most 168 registers a thread), which
# the wgmma tier's scores a tile ahead of the softmax need to keep three (185 registers unbounded: two).
CUDA_ATTENTION_ROWS_CTAS_PER_SM = 3
# The wgmma tier's shared memory (sm_90a, a head_dim of 128: attention_gmma.cuh's kRingBytes), given as a
# ring in the dynamic shared memory: the block's q, a tile of keys, two stages of values (64 x 128 16-bit elements
# each) and the slack that aligns them to the 128-byte swizzle's 1024 bytes.
CUDA_ATTENTION_RING_BYTES = 4 * 64 * 128 * 2 + 1024


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def merges_in_clusters(target: Target, splits: int) -> bool:
    """Whether the slices of a key head merge in their own kernel, as one thread-block cluster: a GPU that has
    clusters (sm_90 and later), and more than one slice, at most ``CUDA_MAX_CLUSTER``."""
    if not isinstance(target, CudaTarget):
        return False
    return target.sm >= 90 and 1 < splits <= CUDA_MAX_CLUSTER


def attention_splits(target: Target, heads: Dim, keys: Dim) -> int:
    """The number of slices the keys are cut into: fixed for every context the DimVar allows."""
    most = dim_range(keys)
    longest = most[1] if most is not None else (keys if isinstance(keys, int) else 1 << 20)
    if isinstance(target, CudaTarget):
        per_head = _ceil_div(CUDA_ATTENTION_CTAS, heads) if isinstance(heads, int) else 1
        return max(1, min(CUDA_MAX_SPLITS, per_head, _ceil_div(longest, CUDA_MIN_SLICE)))
    return max(1, min(CPU_MAX_SPLITS, _ceil_div(longest, CPU_MIN_SLICE)))


def attention_part_shape(q: View, k: View, v: View, target: Target) -> tuple[Dim, ...]:
    """The temporary holding every slice's state: (key heads, splits, G, M, Dv + 2) floats."""
    heads, groups, _ = _grouping(q, k, v)
    splits = attention_splits(target, heads, k.shape[-1])
    return (heads, splits, groups, q.shape[-2], v.shape[-1] + 2)


def _grouping(q: View, k: View, v: View) -> tuple[Dim, int, tuple[int, int]]:
    """(key heads, query heads a CTA takes, (keys' repeats, values' repeats)) along the batch axis."""
    if len(q.shape) == 2:
        return 1, 1, (1, 1)
    rk, rv = k.repeats[0], v.repeats[0]
    groups = rk if rk == rv else 1
    heads = q.shape[0] if groups == 1 else floordiv(q.shape[0], groups)
    return heads, groups, (rk, rv)


def rows_tier(op: Op, q: View, k: View, v: View, target: Target) -> bool:
    """Whether attention ``op`` over ``q``, ``k``, ``v`` runs as blocks of query rows through the tensor cores
    (``ops::attention_rows``; no temporary, no combine): a CUDA target of sm_80 or later, at least
    CUDA_GEMM_MIN_ROWS query rows whatever value their DimVars take, 16-bit operands of one type summed in f32, a
    static head_dim (a multiple of 16, at most 128) of contiguous elements in q, the keys and the values
    (attention_mma.cuh's tier)."""
    if not isinstance(target, CudaTarget) or target.sm < 80:
        return False
    rows = dim_range(q.shape[-2])
    d, dv = q.shape[-1], v.shape[-1]
    dtypes = {x.root.type.dtype.name for x in (q, k, v)}
    return (rows is not None and rows[0] >= CUDA_GEMM_MIN_ROWS and len(dtypes) == 1 and dtypes <= {"bf16", "f16"}
            and op.attrs["acc_dtype"].name == "f32" and isinstance(d, int) and d == dv and d % 16 == 0
            and d <= 128 and dims_equal(q.strides[-1], 1) and dims_equal(k.strides[-2], 1)
            and dims_equal(v.strides[-1], 1))


def attention_bodies(name: str, op: Op, views: list[View], out: View, part: str | None, homes: dict[int, str],
                     target: Target) -> list[tuple[list[Stmt], Schedule]]:
    """The statements and schedules of the two kernels, the slices' and the combine, or of the one kernel doing
    both in clusters (``merges_in_clusters``), or (``part`` None: where ``rows_tier`` holds) of the one kernel of
    blocks of query rows
    (``name``: the function, as refusals name it; ``part``: the slices' temporary's name; ``homes``: the parameter
    each view's root is in)."""
    q, k, v = views[:3]
    for what, view in (("q", q), ("keys", k), ("values", v), ("result", out), *(("positions", p) for p in views[3:])):
        if view.gathers:
            raise LoweringError(op.op, name, f"its {what} is a view {view} whose rows are picked by positions "
                                "(index_select); not compiled yet", op.loc)
    if any(r != 1 for r in q.repeats) or any(r != 1 for r in (*k.repeats[-2:], *v.repeats[-2:])):
        raise LoweringError(op.op, name, "its queries, or the rows of its keys or values, repeat "
                            "(repeat_interleave); only the key and value heads may", op.loc)
    heads, groups, (rk, rv) = _grouping(q, k, v)
    m, d = q.shape[-2:]
    n, dv = v.shape[-2:]
    rows = part is None
    if rows and not rows_tier(op, q, k, v, target):
        raise ValueError("attention_bodies: no temporary for the slices' states, but the rows tier does not apply")
    # CTAs a key head: blocks of its G x M query rows, or slices of its keys
    splits = (floordiv(total((product((groups, m)), CUDA_ATTENTION_BLOCK_ROWS - 1)), CUDA_ATTENTION_BLOCK_ROWS)
              if rows else attention_splits(target, heads, n))
    batched = len(q.shape) == 3
    threads = CUDA_ATTENTION_THREADS if isinstance(target, CudaTarget) else 1
    origin = Origin(op.op, op.loc, op.composite)

    def head_term(view: View, repeats: int, per_cta: Dim) -> tuple[tuple[Dim, Dim | None, Dim], ...]:
        """The CTA's key head (``row // per_cta``) as an offset in ``view``'s memory."""
        if not batched or dims_equal(view.strides[0], 0):
            return ()
        return ((product((per_cta, repeats // groups)), None, view.strides[0]),)

    def gmem(body: list[Stmt], what: str, view: View, shape: tuple[Dim, ...], strides: tuple[Dim, ...],
             terms: tuple[tuple[Dim, Dim | None, Dim], ...]) -> Buffer:
        buf = Buffer(f"{view.root.name}_{what}", view.root.type.dtype, Storage.gmem, shape, TLayout(shape, strides))
        body.append(GmemView(buf, homes[id(view.root)], RowOffset(terms, (), view.offset)))
        return buf

    # The slices' kernel: CTA row = key head * splits + slice (or block of rows).
    state = (groups, m, dv + 2)
    body: list[Stmt] = []
    qb = gmem(body, "q", q, (groups, m, d), (q.strides[0] if batched else 0, *q.strides[-2:]),
              ((splits, None, product((groups, q.strides[0]))),) if batched else ())
    kb = gmem(body, "keys", k, (d, n), k.strides[-2:], head_term(k, rk, splits))
    vb = gmem(body, "vals", v, (n, dv), v.strides[-2:], head_term(v, rv, splits))
    o_strides = (out.strides[0] if batched else 0, *out.strides[-2:])
    if part is not None:
        pb = Buffer(f"{part}_slice", f32, Storage.gmem, state, TLayout(state, (product((m, dv + 2)), dv + 2, 1)))
        body.append(GmemView(pb, part, RowOffset(((1, None, product(state)),))))
    else:
        pb = gmem(body, "out", out, (groups, m, dv), o_strides,
                  ((splits, None, product((groups, out.strides[0]))),) if batched else ())
    functors = [_scores(op, q)]
    operands: list[Buffer] = []
    if op.attrs["cmp"] is not None:
        functors.append(Tag(f"{op.attrs['cmp']}_op"))
        qpos = views[3]
        operands.append(gmem(body, "qpos", qpos, (m,), (qpos.strides[0],), ()))
        if not op.attrs.get("key_index"):  # else key n's position is n (ops::attention's cache form)
            kpos = views[4]
            operands.append(gmem(body, "kpos", kpos, (n,), (kpos.strides[1],), ()))
    grid = product((heads, splits))
    if part is None:  # the block's query rows written whole
        ring = None
        if isinstance(target, CudaTarget) and target.sm == 90 and d == 128:  # the wgmma tier (sm_90a) and its ring
            elems = CUDA_ATTENTION_RING_BYTES * 8 // q.root.type.dtype.bits
            ring = Buffer("ring", q.root.type.dtype, Storage.smem, (elems,), TLayout((elems,), (1,)))
            body.insert(0, Alloc(ring))
        body.append(OpCall("attention_rows", Tag(op.attrs["acc_dtype"].name), (*operands, qb, kb, vb), pb, origin,
                           functors=tuple(functors), indices=(RowOffset(((1, splits, 1),)),), workspace=ring))
        return [([RowLoop("row", body)], Schedule("attention", grid, threads, rows=grid, rows_per_cta=1,
                                                  ctas_per_sm=CUDA_ATTENTION_ROWS_CTAS_PER_SM))]
    call = OpCall("attention", Tag(op.attrs["acc_dtype"].name), (*operands, qb, kb, vb), pb, origin,
                  functors=tuple(functors), indices=(RowOffset(((1, splits, 1),)), RowOffset(base=splits)))
    body.append(call)

    def combine(body: list[Stmt], per_cta: Dim, indices: tuple[RowOffset, ...]) -> None:
        """The merge of the key head ``row // per_cta``'s slices into its outputs."""
        states = (splits, *state)
        sb = Buffer(f"{part}_slices", f32, Storage.gmem, states,
                    TLayout(states, (product(state), product((m, dv + 2)), dv + 2, 1)))
        body.append(GmemView(sb, part, RowOffset(((per_cta, None, product(states)),))))
        ob = gmem(body, "out", out, (groups, m, dv), o_strides,
                  ((per_cta, None, product((groups, out.strides[0]))),) if batched else ())
        body.append(OpCall("attention_combine", None, (sb,), ob, origin, indices=indices))

    if merges_in_clusters(target, splits):  # the key head's slices merge in their cluster: CTA rank = slice
        combine(body, splits, call.indices)
        return [([RowLoop("row", body)], Schedule("attention", grid, threads, rows=grid, rows_per_cta=1,
                                                  cluster=splits))]
    first = ([RowLoop("row", body)], Schedule("attention", grid, threads, rows=grid, rows_per_cta=1))
    body = []  # the combine: CTA row = key head
    combine(body, 1, ())
    second = ([RowLoop("row", body)], Schedule("attention", heads, threads, rows=heads, rows_per_cta=1))
    return [first, second]


def _scores(op: Op, q: View) -> Tag:
    """How a dot product becomes a score: times or divided by the scale (in the scores' dtype), or as it is."""
    scale = op.attrs["scale"]
    if scale is None:
        return Tag("scores_as_is")
    kind, value = scale
    return Tag("scores_times" if kind == "mul" else "scores_over", (Literal(value, q.root.type.dtype),))
