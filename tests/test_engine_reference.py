"""The torch meaning the engine's kernels are held to (tilefoundry.engine.reference) is Hugging Face's Qwen3
and Llama: a prefill and a cached decode step give the same logits, in f32 on the CPU. The GPU tests compare
the kernels with these functions, so this is what ties the kernels to the models."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.engine import DecoderLayerWeights, DecoderWeights, pack_decoder, pack_gate_up, pack_qkv, reference
from tilefoundry.models.config import parse_config
from tilefoundry.models.rope import rope_tables

from .hf_models import CONFIGS

PROMPT = torch.tensor([3, 17, 42, 99, 5, 250, 7])


def _layers(hf, qk_norm: bool) -> list[dict[str, torch.Tensor]]:
    layers = []
    for layer in hf.model.layers:
        a, mlp = layer.self_attn, layer.mlp
        w = {"q_proj": a.q_proj.weight, "k_proj": a.k_proj.weight, "v_proj": a.v_proj.weight,
             "o_proj": a.o_proj.weight, "gate_proj": mlp.gate_proj.weight, "up_proj": mlp.up_proj.weight,
             "down_proj": mlp.down_proj.weight, "input_norm": layer.input_layernorm.weight,
             "post_norm": layer.post_attention_layernorm.weight}
        if qk_norm:
            w |= {"q_norm": a.q_norm.weight, "k_norm": a.k_norm.weight}
        layers.append({k: v.detach() for k, v in w.items()})
    return layers


@pytest.mark.parametrize("family", ["qwen3", "llama_tied"])
def test_reference_decoder_matches_hugging_face(family: str) -> None:
    torch.manual_seed(0)
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_config(CONFIGS[family]()).eval()
    config = parse_config(hf.config.to_dict())
    d = config.head_dim
    cos, sin = rope_tables(config.rope, d, 64, torch.float32, "cpu")
    layers = _layers(hf, family == "qwen3")
    caches = [(torch.zeros(64, config.num_kv_heads, d), torch.zeros(64, config.num_kv_heads, d))
              for _ in layers]
    embed, norm = hf.model.embed_tokens.weight.detach(), hf.model.norm.weight.detach()
    head = hf.lm_head.weight.detach()
    step = dict(heads=config.num_heads, eps=config.rms_norm_eps)
    with torch.no_grad():
        want = hf(PROMPT[None]).logits[0]
        got = reference.decoder_logits(PROMPT, embed, layers, norm, head, cos, sin, 0, caches, **step)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        token = torch.tensor([int(got[-1].argmax())])
        want = hf(torch.cat((PROMPT, token))[None]).logits[0, -1:]
        got = reference.decoder_logits(token, embed, layers, norm, head, cos, sin, len(PROMPT), caches, **step)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_packed_weights_hold_the_projections_where_the_kernels_read_them() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, 16, generator=g) for n in (32, 8, 8))
    gate, up = torch.randn(12, 16, generator=g), torch.randn(12, 16, generator=g)
    x = torch.randn(3, 16, generator=g)
    qkv = pack_qkv(q, k, v)
    torch.testing.assert_close(x @ qkv.T, torch.cat((x @ q.T, x @ k.T, x @ v.T), dim=-1), rtol=1e-5, atol=1e-5)
    gate_up = pack_gate_up(gate, up)
    assert torch.equal(gate_up[0::2], gate) and torch.equal(gate_up[1::2], up)
    torch.testing.assert_close(reference.gemv(x, gate_up, epilogue="swiglu"),
                               torch.nn.functional.silu(x @ gate.T) * (x @ up.T), rtol=1e-5, atol=1e-5)
    embed = torch.randn(10, 16, generator=g)
    layer = DecoderLayerWeights(input_norm=torch.ones(16), q_proj=q, k_proj=k, v_proj=v, o_proj=torch.zeros(16, 32),
                                post_norm=torch.ones(16), gate_proj=gate, up_proj=up, down_proj=torch.zeros(16, 12))
    packed = pack_decoder(DecoderWeights(embed=embed, layers=(layer,), final_norm=torch.ones(16), lm_head=embed,
                                         cos=torch.ones(8, 8), sin=torch.zeros(8, 8)))
    got = packed.layers[0]
    assert torch.equal(got.qkv, qkv) and torch.equal(got.gate_up, gate_up) and got.q_norm is None
    assert packed.lm_head is packed.embed, "a tied lm_head stays the embedding tensor"


def test_packing_refuses_mismatched_projections() -> None:
    with pytest.raises(ValueError, match="pack_qkv: k_proj is \\(8, 12\\) torch.float32 on cpu but q_proj is"):
        pack_qkv(torch.zeros(32, 16), torch.zeros(8, 12), torch.zeros(8, 16))
    with pytest.raises(ValueError, match="pack_gate_up: gate_proj has shape \\(12, 16\\) and up_proj \\(10, 16\\)"):
        pack_gate_up(torch.zeros(12, 16), torch.zeros(10, 16))
    with pytest.raises(ValueError, match="DecoderLayerWeights: give all of q_norm, k_norm or none"):
        DecoderLayerWeights(input_norm=torch.ones(4), q_proj=torch.zeros(4, 4), k_proj=torch.zeros(4, 4),
                            v_proj=torch.zeros(4, 4), o_proj=torch.zeros(4, 4), post_norm=torch.ones(4),
                            q_norm=torch.ones(4), gate_proj=torch.zeros(4, 4), up_proj=torch.zeros(4, 4),
                            down_proj=torch.zeros(4, 4))
