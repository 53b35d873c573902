"""The families' decoder functions compile: jitted for the CPU against the evaluator, a layer's CUDA source
built with nvcc in tests/test_compile_cuda_build.py.

On tiny random Llama (llama3 rope scaling), Llama with tied embeddings, Qwen2 (q/k/v biases), Qwen3 (q/k
norm) and Qwen3-MoE configs, in f32 and (Qwen2, Qwen3) bf16: the embedding, q/k/v, the q/k norm, the
attention block (rope at the positions, the cache update at ``cur_pos``, grouped key heads, the causal mask
from positions, softmax, the output projection and the residual), the dense MLP and the final norm with the
lm_head, at seq = 1, 7, 17, 63 and 128 (the attention at several cache positions, one past a step's start, a
prompt filling the whole cache). Each call is the compiled code alone: the evaluator patched to raise and the
outputs handed in filled with NaN. What is still refused is refused naming the op.

Tolerances: f32 results differ from torch's only in the order of a dot product's sum (torch's CPU matmul
blocks and vectorises it) and where torch's vectorised exp rounds differently: 1e-5 relative plus 1e-5
absolute. bf16 results round each op's result to bf16 on both sides, so a sum that lands within an f32 ulp of
a rounding boundary rounds to the other neighbour (one bf16 ulp, 2**-8 relative) and later ops carry that on:
2**-5 relative plus 2**-5 absolute.
"""

from __future__ import annotations

import pytest
import torch

from tests.compile_kernels import compiled_only, output_paths
from tests.hf_models import CONFIGS
from tilefoundry import func, jit, lower
from tilefoundry.dsl import Tensor, tf
from tilefoundry.ir.core.function import Function
from tilefoundry.ir.core.module import Module
from tilefoundry.models.config import parse_config
from tilefoundry.models.decoder import build_causal_lm
from tilefoundry.runtime.check import allclose, check, equal

pytestmark = pytest.mark.usefixtures("compile_cache")

F32 = allclose(atol=1e-5, rtol=1e-5)
BF16 = allclose(atol=2**-5, rtol=2**-5)
SEQS = (1, 7, 17, 63, 128)
FAMILIES = [("llama", "float32"), ("llama_tied", "float32"), ("qwen2", "float32"), ("qwen3", "float32"),
            ("qwen3_moe", "float32"), ("qwen2", "bfloat16"), ("qwen3", "bfloat16")]


def _family(fam: str, dtype: str = "float32", positions: int | None = None) -> Module:
    raw = CONFIGS[fam]().to_dict()
    raw["torch_dtype"] = raw["dtype"] = dtype
    if positions is not None:
        raw["max_position_embeddings"] = positions
    return build_causal_lm(parse_config(raw))


def _inputs(fn: Function, seq: int, step: int = 0, capacity: int | None = None) -> tuple[torch.Tensor, ...]:
    """Inputs of a family function at ``seq`` new tokens from position ``step`` (caches of ``capacity`` rows):
    positions as ``prepare_inputs_for_generation`` makes them, random activations and caches, weights of a
    linear layer scaled to unit outputs, norm weights and biases near 1."""
    g = torch.Generator().manual_seed(seq * 131 + step)
    extents = {"seq": seq, "ctx": step + seq, "capacity": capacity or step + seq}
    out = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else extents[d.name] for d in p.type.shape)
        positions = {"pos_ids": lambda: torch.arange(step, step + seq), "kv_pos": lambda: torch.arange(step + seq),
                     "cur_pos": lambda: torch.tensor(step), "n_new": lambda: torch.tensor(seq),
                     "input_ids": lambda: torch.randint(0, 256, (seq,), generator=g)}
        if p.name in positions:
            t = positions[p.name]()
        else:
            t = torch.randn(shape, generator=g)
            if p.type.rank == 1:
                t = 1.0 + 0.1 * t  # a norm's weight, a bias
            elif p.name.endswith(("proj", "lm_head", "router")) or p.name.startswith("experts_"):
                t = t / shape[-1] ** 0.5  # a linear weight (..., out, in)
        out.append(t.to(p.type.dtype.torch_dtype))
    return tuple(out)


def _expect(fn: Function, predicate: object) -> dict[str, list]:
    paths = output_paths(fn)
    return {p: [predicate] for p in paths}


def _functions(model: Module) -> dict[str, Function]:
    layer = model.layer0.functions
    names = ("qkv", "qk_norm", "attend", "mlp", "moe")
    return {**{n: layer[n] for n in names if n in layer}, "embed": model.functions["embed"],
            "head": model.functions["head"]}


@pytest.mark.parametrize("fam, dtype", FAMILIES, ids=lambda v: str(v))
def test_the_decoder_functions_match_the_evaluator(fam: str, dtype: str) -> None:
    model = _family(fam, dtype)
    expect = F32 if dtype == "float32" else BF16
    for name, fn in _functions(model).items():
        compiled = jit(fn, target="cpu")
        if name == "attend":  # a prompt, a step past it, a prompt filling the cache, steps deep into it
            cases = [(seq, step, cap) for seq in SEQS
                     for step, cap in ((0, min(seq + 3, 128)), (min(5, 128 - seq), 128))]
        else:
            cases = [(seq, 0, None) for seq in SEQS]
        for seq, step, cap in cases:
            predicate = equal() if name == "embed" else expect
            report = check(compiled_only(compiled), fn, _inputs(fn, seq, step, cap), expect=_expect(fn, predicate))
            assert report.passed, f"{fam} {dtype} {name} at seq {seq} from {step}:\n{report}"


@pytest.mark.parametrize("fam", ["llama", "qwen3"])
def test_a_prompt_of_500_tokens_through_the_decoder_functions_matches_the_evaluator(fam: str) -> None:
    """A long prefill: every matmul a tile of many rows (the CPU's blocked tier), attention over 500 keys."""
    model = _family(fam, positions=512)
    for name, fn in _functions(model).items():
        if name == "embed":
            continue
        report = check(compiled_only(jit(fn, target="cpu")), fn, _inputs(fn, 500, 0, 500), expect=_expect(fn, F32))
        assert report.passed, f"{fam} {name} at seq 500:\n{report}"


def test_a_cache_update_writes_only_n_new_rows_and_refuses_a_write_past_the_end() -> None:
    fn = _family("qwen3").layer0.functions["attend"]
    compiled = jit(fn, target="cpu")
    args = list(_inputs(fn, 7, 2, 12))
    names = [p.name for p in fn.params]
    args[names.index("n_new")] = torch.tensor(4)  # 7 new tokens given, the first 4 written
    report = check(compiled_only(compiled), fn, tuple(args), expect=_expect(fn, F32))
    assert report.passed, str(report)
    args[names.index("cur_pos")] = torch.tensor(9)  # 9 + 4 > 12 rows
    with pytest.raises(ValueError, match=r"attend: writing 4 rows \(n_new\) at position 9 \(cur_pos\) into "
                                         r"cache_k needs 0 <= cur_pos and cur_pos \+ n_new <= 12"):
        compiled(*args)
    args[names.index("cur_pos")] = torch.tensor(2)
    args[names.index("pos_ids")] = torch.tensor([2, 3, 4, 5, 6, 7, 128])  # the rotary tables hold 128 rows
    with pytest.raises(ValueError, match=r"argument pos_ids holds the position 128 \(element 6\), outside the 128 "
                                         r"rows of cos and sin"):
        compiled(*args)


def test_a_cache_passed_as_its_own_output_is_updated_in_place() -> None:
    fn = _family("qwen3").layer0.functions["attend"]
    compiled = jit(fn, target="cpu")
    names = [p.name for p in fn.params]
    args = _inputs(fn, 7, 3, 16)
    want = fn(*args)
    cache_k, cache_v = (args[names.index(n)].clone() for n in ("cache_k", "cache_v"))
    inputs = list(args)
    inputs[names.index("cache_k")], inputs[names.index("cache_v")] = cache_k, cache_v
    out = torch.full_like(args[0], float("nan"))
    got = compiled(*inputs, out, cache_k, cache_v)  # the caches are the outputs: written in place
    assert got[1] is cache_k and got[2] is cache_v
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    memory = torch.zeros(2 * cache_k.numel() + 1)
    inputs[names.index("cache_k")] = memory[:cache_k.numel()].view_as(cache_k)
    with pytest.raises(ValueError, match=r"attend: output out1 overlaps input cache_k without being it; pass the "
                                         r"input itself \(updated in place\) or an output tensor of its own"):
        compiled(*inputs, out, memory[1:cache_k.numel() + 1].view_as(cache_k), cache_v)


def test_an_embedding_refuses_a_token_id_outside_its_table() -> None:
    fn = _family("llama").functions["embed"]
    compiled = jit(fn, target="cpu")
    table = torch.randn(256, 64)
    assert torch.equal(compiled(torch.tensor([0, 255, 7]), table), table[[0, 255, 7]])
    with pytest.raises(ValueError, match=r"input_ids holds the position -1 \(element 1\), outside the 256 rows of "
                                         r"embed_tokens"):
        compiled(torch.tensor([3, -1]), table)


def test_the_moe_block_runs_every_expert_and_sums_them_across_rows() -> None:
    fn = _family("qwen3_moe").layer0.functions["moe"]
    kinds = [s.fn.schedule.placement for s in lower(fn, "cpu").functions["moe"].stages]
    assert kinds.count("matmul") == 4 and kinds.count("reduce_axis") == 1  # router, gate, up, down; the experts' sum


def test_a_reduction_across_several_rows_axes_runs_one_axis_after_the_other() -> None:
    @func
    def two_axes(x: Tensor[(4, 3, 8), "f32"]):
        return tf.reduce(x, axes=(0, 1), keepdim=False, kind="sum")

    kinds = [s.fn.schedule.placement for s in lower(two_axes, "cpu").functions["two_axes"].stages]
    assert kinds == ["reduce_axis", "reduce_axis"], kinds  # axis 1, then axis 0 (tests/test_compile_reduce_axes.py)
