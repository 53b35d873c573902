"""The kernel of a matmul stage: ``out = a @ b`` over views of the memory a stage reads and writes.

Each operand is a view (``views.py``): a transposed weight, a reshaped or sliced cache are strides, not
copies. The batch axes broadcast as torch's do (an operand without an axis, or of extent 1 there, is read at
stride 0), a 1-D ``a`` is a row and a 1-D ``b`` a column. The work is cut into CTAs, one per batch element
and tile of ``MATMUL_TILE_N`` output columns (the largest divisor of N up to it; a DimVar N is one tile);
each CTA's view of ``a`` (M x K), ``b`` (K x tile) and ``out`` (M x tile) starts where its row offset says,
and ``ops::matmul`` computes the tile, every element a dot product accumulated in the op's accumulate
dtype (f32 for 16-bit inputs), its tier chosen from the views' layouts (contiguous runs of K: a warp a dot
product in 16-byte groups). On CUDA a head over a large vocabulary with reductions fused after it (greedy decoding's;
more tiles than CTAs in one wave) takes one wave of wider tiles instead, where no divisor of N need exist: the last
tile is shifted back to end at N, and computes again columns the one before computed, where the call allows that
(``_may_overlap``).

On CUDA (sm_90 on) a large weight takes the streamed schedule instead (``_cuda_stream_tile``): about two CTAs
an SM of ``CUDA_STREAM_THREADS``, each given a ring of shared memory (a workspace the call takes first, in the
kernel's dynamic shared memory) through which ``ops::matmul`` streams the tile's weight rows with bulk copies
when the call has one or two rows (a decode step), the dot-product tier taking more rows in the same CTAs.

Many rows on a Hopper GPU (``gemm.gemm_rows``: at least 17 rows whatever the row count's DimVar is at
launch, 16-bit operands contiguous along K, no prologue or fused reduction) take the GEMM schedule instead
(``_cuda_gemm``): CTAs of two warpgroups of math and a copy warpgroup, one an SM, through the tensor cores
(cuda/ops/matmul_gmma.cuh). A product of two matrices is read through tensor maps (``_gemm_maps``, made by the host
entry, the copy engine filling the kernel's ring of stages): one column tile of all N, the CTAs taking its output
tiles of CUDA_GEMM_TILE_M x CUDA_GEMM_TILE_N rank, rank + ranks, ... (the call's rank and ranks; the kernel takes
half as many rows a tile where such tiles are one wave at most, its own pick from the runtime extents: matmul_gmma.cuh's
rows_of), launched in
clusters of two CTAs (``gemm_cluster``) so that where the tiles at launch leave at least half the CTAs idle, a pair
splits each tile's K steps and adds its halves through shared memory. A pair of 2-D products (``pairs.py``: gate
and up) is read through three maps, its output tiles CUDA_GEMM_TILE_N / 2 columns of both products, one wgmma a
step making both (a stage's b tile is those columns of each weight), the epilogue taking each element's two sums
(no map, or maps the host could not make: the pair's dot-product tier over the row tiles). A batch of
products keeps a column tile of at most CUDA_GEMM_TILE_N columns a CTA group, ``ranks`` CTAs a column tile taking
its row tiles in turn, the stages copied by the math threads.

A prologue (``prologue.py``: the rms_norm of ``a``'s rows, with the norm's weight) and an epilogue
(``epilogue.py``: elementwise ops over each result) run inside the same call.
"""

from __future__ import annotations

from ..ir.types.dim import Dim, dim_range, dims_equal, floordiv, product
from ..ir.types.storage import Storage
from ..target import CudaTarget, Target
from ..tir.buffer import Buffer, Literal
from ..tir.function import Schedule
from ..tir.layout import TLayout
from ..tir.stmt import (
    Alloc,
    Epilogue,
    EpilogueStep,
    Gather,
    GmemView,
    OpCall,
    Origin,
    Prologue,
    RowLoop,
    RowOffset,
    Stmt,
    Tag,
)
from ..tir.tensor_map import TensorMap
from .epilogue import constant_literal, operand_strides, step_of
from .errors import LoweringError
from .gemm import gemm_rows
from .program import Op, Val
from .reduce_epilogue import reduction_parts
from .views import View

# Output columns one CTA computes (at most; the largest divisor of N up to this).
MATMUL_TILE_N = 128
# ... on CUDA where the runs of K are contiguous (ops::matmul's dot-product tier, a warp four outputs): fewer
# columns a CTA, so that a decode step's GEMV spreads its weight rows over every SM.
CUDA_DOT_TILE_N = 16
# ... halved (down to CUDA_DOT_MIN_TILE_N, one group of four columns, the CTA's four warps then splitting K) while
# the grid would have fewer CTAs than CUDA_DOT_MIN_CTAS, so that a short weight still keeps every SM's loads in
# flight. Measured on the H200 (132 SMs) at Qwen3-1.7B's decode shapes, CUDA-graph medians against the engine's
# hand-written GEMV: 512 CTAs took o_proj (2048 x 2048) from 6.8 to 4.8 us (hand-written 5.4), down (2048 x 6144)
# from 17.2 to 9.4 us (11.9), q/k/v (4096 x 2048 + norm) from 8.9 to 8.1 us (7.8); 1024 CTAs and CTAs of 8 warps
# were each slower. (An L2 prefetch of the CTA's weight before the wait for the earlier kernel, slower for a GEMV
# timed back to back, wins inside a whole decode step: cuda/ops/matmul.cuh does it.)
CUDA_DOT_MIN_CTAS = 512
CUDA_DOT_MIN_TILE_N = 4
# ... and where N / CUDA_DOT_TILE_N would make more CTAs than one wave of them (CUDA_DOT_WAVE_CTAS: eight CTAs of
# CUDA_MATMUL_THREADS on each of the H200's 132 SMs) and reductions are fused after the matmul (reduce_epilogue.py:
# greedy decoding's head), as many tiles as one wave, each a multiple of the largest tile (the last one shifted back
# to end at N, computing again columns the one before computed: where the call allows it, _may_overlap). Measured on
# the H200, the greedy head at Qwen3-1.7B's shape (151936 x 2048, its norm, argmax, largest and smallest fused;
# CUDA-graph medians, 20 launches): 9496 CTAs of 16 columns 168.4 us; 1056 CTAs of 144 columns 159.4 (the
# hand-written kernel 154.7); 528 CTAs 174.0, 2112 165.2, 3168 161.4; 4748 CTAs of 32 columns 162.0. The streamed
# schedule over 264 such tiles of 576 columns was slower still (196-200 us; with a ring of 96 KiB, 199; 396 CTAs,
# 196). The sampling head (logits alone, of a row count known at launch) was slower in one wave, 157.9 -> 185.8 us
# (the hand-written kernel 149.2), and keeps its tiles, as does any matmul without fused reductions.
CUDA_DOT_WAVE_CTAS = 1056
# ... of a pair of matmuls (pairs.py: two weight rows an output column) at most this many columns. Measured on the
# H200, gate/up + norm + SwiGLU at Qwen3-1.7B's shape (12288 x 2048, the interleaved weight): 8 columns 15.1 us
# (the hand-written kernel 14.9), 4 columns 18.4, 2 columns 21.9.
CUDA_DOT_PAIR_TILE_N = 8
# ... on the CPU a multiple of this where N has one: whole panels of the blocked GEMM tier (its bf16 panels are 32
# columns wide, its float ones 16).
CPU_PANEL_N = 32
# The streamed schedule (CUDA sm_90 on, cuda/ops/matmul_stream.cuh): a weight of at least CUDA_STREAM_MIN_BYTES whose
# rows (runs of K) are at most CUDA_STREAM_MAX_ROW_BYTES is cut into tiles for about CUDA_STREAM_CTAS CTAs (two on
# each of the H200's 132 SMs) of CUDA_STREAM_THREADS threads, each streaming its tile's weight rows through a ring of
# shared memory filled by bulk copies (a step's one or two tokens; more rows go to the dot-product tier in the same
# CTAs). The hand-written engine's streamed GEMV measured faster from 32 MiB (gate/up, 48 MiB at Qwen3-1.7B).
CUDA_STREAM_MIN_BYTES = 32 << 20
CUDA_STREAM_MAX_ROW_BYTES = 16 << 10
CUDA_STREAM_RING_BYTES = 64 << 10  # the ring's shared memory a CTA (dynamic shared memory)
CUDA_STREAM_CTAS = 264
CUDA_STREAM_THREADS = 256  # matmul_stream.cuh's kWarps: change both together
# The GEMM schedule (CUDA sm_90a, cuda/ops/matmul_gmma.cuh; change its constants together): output tiles of
# CUDA_GEMM_TILE_M x CUDA_GEMM_TILE_N, or (a batch of products) column tiles of at most CUDA_GEMM_TILE_N columns (the
# largest divisor of N up to it, at least CUDA_GEMM_MIN_TILE_N) cut in row tiles; a ring of CUDA_GEMM_RING_BYTES
# (CUDA_GEMM_STAGES stages of CUDA_GEMM_TILE_K of both tiles, 1 KiB that aligns it to the swizzle, the stages' barriers,
# and the math warps' staging of their sums on the way out): one CTA an SM, at most CUDA_GEMM_CTAS of them (one wave on
# the H200's 132 SMs; a CTA with no tile exits at once). Measured on the H200 at Qwen3-1.7B's projections (bf16,
# CUDA-graph medians, TFLOP/s at M = 1024 / 4096; cuBLAS 466-784): this schedule q/k/v 398 / 448, o_proj 198 / 380,
# gate/up 438 / 470, down 304 / 563; with a column tile a CTA group (ranks of them taking its row tiles) 427 / 496, 242
# / 450, 362 / 352, 356 / 622 (gate/up's 96 column tiles then kept 96 CTAs busy); one warpgroup a CTA of 128 x 128
# tiles, cp.async, one CTA an SM: 323 / 346, 311 / 335, 244 / 237, 385 / 376 (the version before this one).
CUDA_GEMM_TILE_M = 256
CUDA_GEMM_TILE_N = 128
CUDA_GEMM_MIN_TILE_N = 64
CUDA_GEMM_TILE_K = 64  # values of K a stage: one 128-byte row of 16-bit elements
# Rows of a tensor map's box (matmul_gmma.cuh's kBoxRows): a stage's row tile is copied as CUDA_GEMM_TILE_M /
# CUDA_GEMM_BOX_ROWS boxes, so that the kernel's row tile (its warpgroups' rows, each call's choice) needs no
# other map; half a column tile, so that each CTA of a pair sharing a weight tile copies one half into both.
CUDA_GEMM_BOX_ROWS = 64
CUDA_GEMM_STAGES = 4  # matmul_gmma.cuh's kStages
CUDA_GEMM_OUT_BYTES = (CUDA_GEMM_TILE_M // 32) * 8 * CUDA_GEMM_TILE_N * 4  # 8 rows of f32 sums a math warp
CUDA_GEMM_RING_BYTES = (CUDA_GEMM_STAGES * (CUDA_GEMM_TILE_M + CUDA_GEMM_TILE_N) * CUDA_GEMM_TILE_K * 2 + 1024 + 128
                        + CUDA_GEMM_OUT_BYTES)
CUDA_GEMM_CTAS = 132
CUDA_GEMM_THREADS = 384  # two warpgroups of math and the copy warpgroup (its registers given to the math)
# Threads of a CUDA CTA computing a tile (they share its elements). ops::matmul's dot-product tier makes its K split a
# constant of the kernel for CTAs of this size (matmul_impl.h, kScheduleWarps: change both together).
CUDA_MATMUL_THREADS = 128


def matmul_schedule(target: Target, grid: Dim, threads: int = CUDA_MATMUL_THREADS, cluster: int = 1) -> Schedule:
    """One CTA per batch element and column tile; on CUDA its ``threads`` share the tile (the GEMM schedule's
    CTAs, one an SM, built for that: matmul_gmma.cuh moves the copy warpgroup's registers to the math), launched in
    thread-block clusters of ``cluster`` CTAs where more than one."""
    cuda = isinstance(target, CudaTarget)
    return Schedule("matmul", grid, threads if cuda else 1, rows=grid, rows_per_cta=1, vector_width=1,
                    cluster=cluster if cuda else 1, ctas_per_sm=1 if cuda and threads == CUDA_GEMM_THREADS else 0)


def gemm_cluster(ranks: int, mapped: bool) -> int:
    """The CTAs of a thread-block cluster of the GEMM schedule's launch: two where its operands are read through
    tensor maps and its CTAs pair up (an even count), so that a call whose tiles leave at least half the CTAs idle
    splits each tile's K steps over a pair (matmul_gmma.cuh, Tiles::split: the row count is known only at launch,
    the kernel decides); one (no cluster) otherwise. Hopper's SMs come in pairs (a TPC), so clusters of two leave
    none of a wave's SMs unused."""
    return 2 if mapped and ranks % 2 == 0 else 1


def _tile(n: Dim, most: int, panel: int = 1) -> Dim:
    """The largest divisor of ``n`` up to ``most``, a multiple of ``panel`` where one is (a DimVar ``n`` is one
    tile)."""
    if not isinstance(n, int):
        return n
    if n <= 0:
        return 1
    divisors = [t for t in range(1, min(n, most) + 1) if n % t == 0]
    return max((t for t in divisors if t % panel == 0), default=max(divisors))


def _cuda_dot_tile(n: Dim, batch: Dim, pair: bool, wave: bool) -> tuple[Dim, int]:
    """The columns of a CUDA CTA in the dot-product tier, and the columns its last tile shares with the one before
    it: the largest divisor of ``n`` up to CUDA_DOT_TILE_N (CUDA_DOT_PAIR_TILE_N of a ``pair``), halved while it
    divides ``n``, stays at least CUDA_DOT_MIN_TILE_N (its half, of a pair) and the grid (``batch`` elements times
    ``n / tile``) has fewer than CUDA_DOT_MIN_CTAS CTAs, sharing nothing. Where that grid would have more than
    CUDA_DOT_WAVE_CTAS CTAs (a vocabulary's head), no batch axes, and the call takes one wave (``wave``: reductions
    fused after it, and it may compute a column twice), CUDA_DOT_WAVE_CTAS tiles of a multiple of the largest tile
    cover ``n`` instead, the last one shifted back to end at ``n``."""
    most = CUDA_DOT_PAIR_TILE_N if pair else CUDA_DOT_TILE_N
    tile = _tile(n, most)
    least = CUDA_DOT_MIN_TILE_N // 2 if pair else CUDA_DOT_MIN_TILE_N
    while (isinstance(n, int) and isinstance(batch, int) and isinstance(tile, int) and tile % 2 == 0
           and tile // 2 >= least and n % (tile // 2) == 0 and batch * (n // tile) < CUDA_DOT_MIN_CTAS):
        tile //= 2
    if not (wave and isinstance(n, int) and isinstance(tile, int) and dims_equal(batch, 1)
            and n // tile > CUDA_DOT_WAVE_CTAS):
        return tile, 0
    wide = -(-n // CUDA_DOT_WAVE_CTAS)
    wide = -(-wide // most) * most
    return wide, -(-n // wide) * wide - n


def _may_overlap(epilogue: tuple[list[Op], list[tuple[Val, View]], Val] | None,
                 reductions: list[tuple[Op, tuple[str, ...]]]) -> bool:
    """Whether two CTAs may compute the same output columns (a last tile shifted back to end at N): the epilogue
    reads nothing from memory (so no result is added to what it overwrites) and every reduction fused after the
    call is the same whichever CTA's part holds a column (largest, smallest, largest magnitude, argmax; not a sum
    or mean)."""
    if epilogue is not None and epilogue[1]:
        return False
    return all(r.op == "argmax" or r.attrs["kind"] in ("max", "min", "abs_max") for r, _ in reductions)


def _cuda_stream_tile(n: Dim, k: Dim, batch: Dim, bits: int, pair: bool, target: CudaTarget) -> int | None:
    """The columns of a CTA in the streamed schedule, or None where it does not apply: an sm_90 (or later) target,
    no batch axes, static N and K, 16-byte runs of K of at most CUDA_STREAM_MAX_ROW_BYTES, a weight (both of a
    ``pair``) of at least CUDA_STREAM_MIN_BYTES, and a divisor of N giving between half of CUDA_STREAM_CTAS and
    CUDA_STREAM_CTAS tiles (the smallest such tile: the most CTAs)."""
    if not (isinstance(n, int) and isinstance(k, int) and dims_equal(batch, 1)):
        return None
    if target.sm < 90:
        return None
    row = k * bits // 8
    weight = row * n * (2 if pair else 1)
    if row % 16 or row > CUDA_STREAM_MAX_ROW_BYTES or weight < CUDA_STREAM_MIN_BYTES:
        return None
    tile = next((t for t in range(1, n + 1) if n % t == 0 and n // t <= CUDA_STREAM_CTAS), n)
    return tile if 2 * (n // tile) >= CUDA_STREAM_CTAS else None


def _cuda_gemm(n: Dim, batch: Dim, op: Op, target: CudaTarget, mapped: bool,
               pair: bool = False) -> tuple[int, int] | None:
    """The column tile and the CTAs a column tile (``ranks``) of the GEMM schedule, or None where it does not
    apply: a matmul ``gemm_rows`` takes, of a static N. Where its operands are read through tensor maps
    (``mapped``), one column tile of all N, its CTAs taking the kernel's output tiles of CUDA_GEMM_TILE_M x
    CUDA_GEMM_TILE_N in turn (of a ``pair``, CUDA_GEMM_TILE_N / 2 columns of each product: a tile's b is a box of
    each weight; at most CUDA_GEMM_CTAS of them, one wave); else a column tile (a divisor of N, or N
    itself under CUDA_GEMM_TILE_N) of at least CUDA_GEMM_MIN_TILE_N columns a CTA, ``ranks`` CTAs taking its row
    tiles in turn. The caller checks the layouts (runs of K contiguous) and that nothing else is fused into the
    call (prologue, reductions)."""
    if not gemm_rows(op, target) or not isinstance(n, int):
        return None
    rows = dim_range(op.inputs[0].type.shape[-2])
    assert rows is not None
    row_tiles = -(-rows[1] // CUDA_GEMM_TILE_M)
    if mapped:
        cols = CUDA_GEMM_TILE_N // 2 if pair else CUDA_GEMM_TILE_N
        return n, min(CUDA_GEMM_CTAS, row_tiles * -(-n // cols))
    if pair:
        return None  # a pair takes the GEMM schedule through tensor maps only
    tile = _tile(n, CUDA_GEMM_TILE_N, 8)
    if not isinstance(tile, int) or tile < min(n, CUDA_GEMM_MIN_TILE_N):
        return None
    per_rank = (batch if isinstance(batch, int) else 1) * (n // tile)
    return tile, max(1, min(row_tiles, CUDA_GEMM_CTAS // per_rank))


def matmul_body(name: str, op: Op, a: View, b: View, out: View, homes: dict[int, str], target: Target,
                epilogue: tuple[list[Op], list[tuple[Val, View]], Val] | None = None,
                norm_weight: View | None = None, pair: tuple[Op, View] | None = None,
                reductions: list[tuple[Op, tuple[str, ...]]] = (),
                weights_constant: bool = False) -> tuple[list[Stmt], Schedule]:
    """The statements and schedule of the matmul stage computing ``op``
    (``name``: the function, as refusals name it; ``homes``: the parameter name each
    view's root is read from or written to; ``epilogue``: the elementwise ops fused after it, the outside values
    they read with their views, and the value stored, ``out``'s, as ``epilogue.py`` found them; ``norm_weight``:
    the weight of the rms_norm a prologue applies to ``a``'s rows, as ``prologue.py`` moved it in; ``pair``: the
    second matmul of a pair (``pairs.py``) and the view of its second operand, of ``b``'s shape, whose result the
    epilogue reads too; ``reductions``: the reductions fused after it (``reduce_epilogue.py``), each with the
    temporaries its CTAs' parts of each row go to, one row of them a CTA); ``weights_constant``: ``b`` (and the
    pair's second operand) are ConstTensor parameters, which a streamed CUDA tile copies before its wait: marked on
    the call where the streamed schedule runs it)."""
    second = [("the second weight", pair[1])] if pair is not None else []
    for what, v in (("a", a), ("b", b), *second, ("out", out)):
        if any(axis >= len(v.shape) - 2 for axis, _, _ in v.gathers) or (v.gathers and what in ("a", "out")):
            raise LoweringError(op.op, name, f"its operand {what} is a view {v} whose rows are picked by positions "
                                "(index_select); only a weight's batch axis may be picked (a mixture's chosen "
                                "experts), not compiled yet", op.loc)
        if any(r != 1 for r in v.repeats[-2:]):
            raise LoweringError(op.op, name, f"its operand {what} is a view {v} whose rows or columns repeat "
                                "(repeat_interleave); only batch axes may repeat", op.loc)
    a_shape, a_strides = (((1, *a.shape), (0, *a.strides)) if len(a.shape) == 1 else (a.shape, a.strides))
    b_shape, b_strides = (((*b.shape, 1), (*b.strides, 0)) if len(b.shape) == 1 else (b.shape, b.strides))
    m, k = a_shape[-2:]
    n = b_shape[-1]
    batch_rank = max(len(a_shape), len(b_shape)) - 2
    batch = _broadcast_batch(a_shape[:-2], b_shape[:-2], batch_rank)
    o_strides = _out_strides(out, batch_rank, len(a.shape) == 1, len(b.shape) == 1)
    dot = dims_equal(a_strides[-1], 1) and dims_equal(b_strides[-2], 1)  # ops::matmul's dot-product tier
    cuda = isinstance(target, CudaTarget)
    threads = CUDA_MATMUL_THREADS
    ring = None
    shared = 0  # the columns the last tile shares with the one before it (a tile shifted back to end at N)
    ranks = 0  # the GEMM schedule's CTAs a column tile (0: another schedule)
    gemm = None
    maps: tuple[TensorMap, ...] = ()  # the GEMM's operands read through the copy engine
    if dot and cuda and norm_weight is None and not reductions:
        second = pair[1] if pair is not None else None
        maps = _gemm_maps(a, b, homes, m, k, n, a_strides[-2], b_strides[-1], second) \
            if dims_equal(product(batch), 1) else ()
        gemm = _cuda_gemm(n, product(batch), op, target, bool(maps), pair is not None)  # type: ignore[arg-type]
    if gemm is not None:
        tile, ranks = gemm
        threads = CUDA_GEMM_THREADS
        elems = CUDA_GEMM_RING_BYTES * 8 // a.root.type.dtype.bits
        ring = Buffer("ring", a.root.type.dtype, Storage.smem, (elems,), TLayout((elems,), (1,)))
    elif dot and cuda:
        bits = a.root.type.dtype.bits
        stream = (_cuda_stream_tile(n, k, product(batch), bits, pair is not None, target)  # type: ignore[arg-type]
                  if a.root.type.dtype == b.root.type.dtype and bits in (16, 32) else None)
        if stream is not None:
            tile, threads = stream, CUDA_STREAM_THREADS
            weight_dtype = b.root.type.dtype
            elems = CUDA_STREAM_RING_BYTES * 8 // weight_dtype.bits
            ring = Buffer("ring", weight_dtype, Storage.smem, (elems,), TLayout((elems,), (1,)))
        else:
            wave = bool(reductions) and _may_overlap(epilogue, list(reductions))
            tile, shared = _cuda_dot_tile(n, product(batch), pair is not None, wave)
    else:
        tile = _tile(n, MATMUL_TILE_N, 1 if cuda else CPU_PANEL_N)
    tiles = (1 if dims_equal(tile, n) else n // tile) if not shared else -(-n // tile)  # type: ignore[operator]
    lanes = max(ranks, 1)  # CTAs a column tile: the GEMM schedule's ranks (the CTA index's fastest part)
    grid = product((*batch, tiles, lanes))

    def offset(view: View, col_stride: Dim | None, inner: int) -> RowOffset:
        """The CTA's start in ``view``'s memory: its column tile, and its batch element (an operand's batch axis
        of extent 1 read at every index; a repeated axis at index // repeats)."""
        terms = []
        if col_stride is not None and tiles != 1:
            terms.append((lanes, tiles, product((tile, col_stride))))
            if shared:  # the last tile, shifted back to end at column N
                terms.append((tiles - 1, None, product((-shared, col_stride))))
        pad = batch_rank - (len(view.shape) - inner)  # ``inner``: the view's trailing axes that are no batch axes
        picked = {axis: (index, bound) for axis, index, bound in view.gathers}
        gathers = []
        for j, extent in enumerate(batch):
            if j < pad or (j - pad not in picked and (dims_equal(extent, 1) or dims_equal(view.shape[j - pad], 1))):
                continue
            stride, times = view.strides[j - pad], view.repeats[j - pad]
            div = product((*batch[j + 1:], tiles, times, lanes))
            mod = None if j == 0 else floordiv(extent, times)
            if j - pad in picked:  # the batch element's row of the table: a position read on the device
                index, bound = picked[j - pad]
                at = RowOffset(((div, mod, index.strides[0]),), (), index.offset)
                gathers.append(Gather(homes[id(index.root)], at, stride, bound, f"rows of {view.root.name}"))
                continue
            if dims_equal(stride, 0):
                continue
            terms.append((div, mod, stride))
        return RowOffset(tuple(terms), tuple(gathers), view.offset)

    dtype_a = a.root.type.dtype
    a_buf = Buffer(f"{a.root.name}_tile", dtype_a, Storage.gmem, (m, k), TLayout((m, k), a_strides[-2:]))
    b_buf = Buffer(f"{b.root.name}_tile", b.root.type.dtype, Storage.gmem, (k, tile),
                   TLayout((k, tile), b_strides[-2:]))
    o_buf = Buffer(f"{out.root.name}_tile", out.root.type.dtype, Storage.gmem, (m, tile),
                   TLayout((m, tile), o_strides[-2:]))
    acc = op.attrs["acc_dtype"].name  # the tag names the accumulate dtype; codegen spells its C++ type
    origin = Origin(op.op, op.loc, op.composite)
    views: list[Stmt] = [
        GmemView(a_buf, homes[id(a.root)], offset(a, None, min(len(a.shape), 2))),
        GmemView(b_buf, homes[id(b.root)], offset(b, b_strides[-1], min(len(b.shape), 2))),
    ]
    weights = [b_buf]
    if pair is not None:  # of b's shape (K x N, or a batch of them): the same column tile of it
        b1 = pair[1]
        b1_buf = Buffer(f"{b1.root.name}_tile", b1.root.type.dtype, Storage.gmem, (k, tile),
                        TLayout((k, tile), b1.strides[-2:]))
        views.append(GmemView(b1_buf, homes[id(b1.root)], offset(b1, b1.strides[-1], 2)))
        weights.append(b1_buf)
    views.append(GmemView(o_buf, homes[id(out.root)],
                          offset(out, o_strides[-1], 2 - (len(a.shape) == 1) - (len(b.shape) == 1))))
    prologue = None
    if norm_weight is not None:
        w_buf = Buffer(f"{norm_weight.root.name}_tile", norm_weight.root.type.dtype, Storage.gmem, (k,),
                       TLayout((k,), norm_weight.strides[-1:]))
        views.append(GmemView(w_buf, homes[id(norm_weight.root)], RowOffset((), (), norm_weight.offset)))
        compute = op.attrs["prologue_compute"]
        prologue = Prologue(op.attrs["prologue"], w_buf, Literal(float(op.attrs["prologue_eps"]), compute), compute,
                            dtype_a, origin)
    fused = None
    if epilogue is not None and epilogue[0]:
        ops, read, result = epilogue
        buffers: dict[int, Buffer] = {}
        for v, view in read:  # each read at the tile's (m, n): the CTA's column tile of it
            strides = operand_strides(view, op.outputs[0].type.shape)
            buf = Buffer(f"{view.root.name}_tile", view.root.type.dtype, Storage.gmem, (m, tile),
                         TLayout((m, tile), strides))
            views.append(GmemView(buf, homes[id(view.root)], offset(view, strides[1], 2)))
            buffers[id(v)] = buf
        fused = _epilogue(op, ops, buffers, result, pair[0] if pair is not None else None)
    indices = (RowOffset(((1, ranks, 1),)), RowOffset(base=ranks)) if ranks else ()  # the CTA's rank, the ranks
    call = OpCall("matmul", Tag(acc), (a_buf, *weights), o_buf, origin, workspace=ring, epilogue=fused,
                  prologue=prologue, indices=indices,  # the streamed tier reads before its wait:
                  weights_constant=weights_constant and ring is not None and not ranks,
                  maps=maps if ranks else ())
    after = reduction_parts(list(reductions), o_buf, tile, tiles, shared) if reductions else []
    body: list[Stmt] = [RowLoop("row", [*([Alloc(ring)] if ring is not None else []), *views, call, *after])]
    return body, matmul_schedule(target, grid, threads, gemm_cluster(ranks, bool(maps)) if ranks else 1)


def _gemm_maps(a: View, b: View, homes: dict[int, str], m: Dim, k: Dim, n: Dim, a_stride: Dim,
               b_stride: Dim, b1: View | None = None) -> tuple[TensorMap, ...]:
    """The tensor maps through which the GEMM schedule's copy engine reads one matrix product's operands: ``a``'s
    ``m`` rows of ``k`` and ``b`` as ``n`` rows (a weight stored (N, K)) of ``k`` (and a pair's second weight
    ``b1``, of ``b``'s shape, the same way), each a box of CUDA_GEMM_BOX_ROWS rows of CUDA_GEMM_TILE_K at a time (a
    tile is whole boxes); none where a view picks or repeats rows, or its rows start where no 16-byte word does
    (the kernel then copies its stages itself; a pair takes the other tiers)."""
    views = (a, b) if b1 is None else (a, b, b1)
    if any(v.gathers or any(r != 1 for r in v.repeats) for v in views):
        return ()
    words = 128 // a.root.type.dtype.bits  # elements of 16 bytes: a map's rows start at multiples of them
    strides = (a_stride, b_stride) if b1 is None else (a_stride, b_stride, b1.strides[-1])
    if any(isinstance(d, int) and d % words for d in (*strides, *(v.offset for v in views))):
        return ()  # (the host checks the rest at the launch: a map it cannot make sends the call to cp.async)
    names: list[str] = []
    for v, suffix in zip(views, ("", "_b", "_b1")):  # one name a map, where two views share a root
        name = f"{v.root.name}_map"
        names.append(name if name not in names else f"{name}{suffix}")
    return tuple(TensorMap(name, homes[id(v.root)], v.offset, rows, k, stride, CUDA_GEMM_BOX_ROWS, CUDA_GEMM_TILE_K)
                 for name, v, rows, stride in zip(names, views, (m, n, n), strides))


def _epilogue(mm: Op, ops: list[Op], buffers: dict[int, Buffer], result: Val, second: Op | None = None) -> Epilogue:
    """The TIR epilogue of ``ops`` applied to ``mm``'s result (and ``second``'s, of a pair): each op a step over
    the results, earlier steps, scalar constants and the outside values' ``buffers``."""
    value = mm.outputs[0]
    names = {id(value): value.name}
    if second is not None:
        names[id(second.outputs[0])] = second.outputs[0].name
    steps = []
    for op in ops:
        operands: list[Buffer | Literal | str] = []
        for v in op.inputs:
            if id(v) in names:
                operands.append(names[id(v)])
            elif id(v) in buffers:
                operands.append(buffers[id(v)])
            else:
                operands.append(constant_literal(v))
        family, tag = step_of(op)
        out = op.outputs[0]
        names[id(out)] = out.name
        steps.append(EpilogueStep(out.name, family, tag, tuple(operands), out.type.dtype,
                                  Origin(op.op, op.loc, op.composite)))
    return Epilogue(value.name, value.type.dtype, tuple(steps), names[id(result)],
                    second.outputs[0].name if second is not None else None)


def _broadcast_batch(a: tuple[Dim, ...], b: tuple[Dim, ...], rank: int) -> tuple[Dim, ...]:
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    return tuple(y if dims_equal(x, 1) else x for x, y in zip(a, b))


def _out_strides(out: View, rank: int, row: bool, col: bool) -> tuple[Dim, ...]:
    """The result view's strides as (*batch, M, N), the axes a 1-D operand dropped put back at stride 0."""
    strides = list(out.strides)
    if col:
        strides.append(0)
    if row:
        strides.insert(len(strides) - 1, 0)
    return tuple(strides)
