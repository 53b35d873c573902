"""The worked example of ``tilefoundry check --help``: a two-layer Model, its faithful twin, and one wrong kernel.

``Model`` is authored in the DSL (embedding, two layers of attention + MLP, a head returning logits and their
argmax). ``ModelTwin`` is a faithful runtime twin, written in torch differently from the DSL (fused gate/up
projection, SDPA, addmm, F.rms_norm, F.embedding, a RuntimeFunction body). ``BrokenTwin`` is the same twin with
one bug: layer1's MLP computes gelu where the Model says silu. It ships so that the help's example runs as
printed, and shows what a failing check looks like:

    tilefoundry check tilefoundry.examples.check_twin:ModelTwin --per-node --expect '*=rel_l2:max=1e-5'    # exit 0
    tilefoundry check tilefoundry.examples.check_twin:BrokenTwin --per-node --expect '*=rel_l2:max=1e-5'   # exit 1
"""
# DSL annotations spell dtypes as strings (Tensor[(seq, HID), "f32"]), which ruff reads as forward references.
# ruff: noqa: F722, F821, UP037

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf
from tilefoundry.runtime import RuntimeFunction, entry_abi_of, runtime_func, runtime_module

HID, INTER, VOCAB, EPS = 8, 12, 11, 1e-6
seq = DimVar("seq", 1, 9)


@module(entry="attend")
class Attention:
    @func
    def attend(x: Tensor[(seq, HID), "f32"], attn_norm: ConstTensor[(HID,), "f32"],
               wqkv: ConstTensor[(HID, 3 * HID), "f32"], wo: ConstTensor[(HID, HID), "f32"]):
        h = tf.rms_norm(x, attn_norm, EPS)
        q, k, v = tf.split(tf.matmul(h, wqkv), 1, 3)
        probs = tf.softmax(tf.matmul(q, tf.transpose(k, (1, 0))) * (1.0 / math.sqrt(HID)))
        return x + tf.matmul(tf.matmul(probs, v), wo)


@module(entry="mlp")
class Mlp:
    @func
    def mlp(x: Tensor[(seq, HID), "f32"], mlp_norm: ConstTensor[(HID,), "f32"],
            w_gate: ConstTensor[(HID, INTER), "f32"], w_up: ConstTensor[(HID, INTER), "f32"],
            w_down: ConstTensor[(INTER, HID), "f32"]):
        h = tf.rms_norm(x, mlp_norm, EPS)
        return x + tf.matmul(tf.silu(tf.matmul(h, w_gate)) * tf.matmul(h, w_up), w_down)


@module
class Layer:
    attn = Attention
    ffn = Mlp

    def forward(self, x):
        return self.ffn(self.attn(x))


@module
class Model:
    layers = tuple(Layer.renamed(f"layer{i}") for i in range(2))

    @func
    def embed(ids: Tensor[(seq,), "i64"], table: ConstTensor[(VOCAB, HID), "f32"]):
        return tf.index_select(table, ids, 0)

    @func
    def head(x: Tensor[(seq, HID), "f32"], final_norm: ConstTensor[(HID,), "f32"],
             lm_head: ConstTensor[(HID, VOCAB), "f32"]):
        logits = tf.matmul(tf.rms_norm(x, final_norm, EPS), lm_head)
        return logits, tf.argmax(logits, -1)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.modules:
            x = layer(x)
        return self.head(x)


@runtime_module(Attention)
class AttentionTwin:
    @runtime_func
    def attend(self, x, attn_norm, wqkv, wo):
        h = F.rms_norm(x, (HID,), attn_norm, EPS)
        q, k, v = (h @ wqkv).chunk(3, dim=-1)
        o = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
        return torch.addmm(x, o, wo)


class FusedMlp(RuntimeFunction):
    """Gate and up projections fused into one matmul."""

    def __call__(self, x, mlp_norm, w_gate, w_up, w_down):
        h = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + EPS) * mlp_norm
        gate, up = (h @ torch.cat((w_gate, w_up), 1)).split(INTER, -1)
        return torch.addmm(x, F.silu(gate) * up, w_down)


class WrongMlp(FusedMlp):
    """The bug: gelu where the model says silu."""

    def __call__(self, x, mlp_norm, w_gate, w_up, w_down):
        h = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + EPS) * mlp_norm
        gate, up = (h @ torch.cat((w_gate, w_up), 1)).split(INTER, -1)
        return torch.addmm(x, F.gelu(gate) * up, w_down)


@runtime_module(Mlp)
class MlpTwin:
    mlp = FusedMlp(entry_abi_of(Mlp.functions["mlp"]))


@runtime_module(Mlp)
class WrongMlpTwin:
    mlp = WrongMlp(entry_abi_of(Mlp.functions["mlp"]))


@runtime_module(Layer)
class LayerTwin:
    attn = AttentionTwin
    ffn = MlpTwin


@runtime_module(Layer)
class WrongLayerTwin:
    attn = AttentionTwin
    ffn = WrongMlpTwin


@runtime_module(Model)
class ModelTwin:
    """The faithful twin of Model."""

    layers = (LayerTwin, LayerTwin)

    @runtime_func
    def embed(self, ids, table):
        return F.embedding(ids, table)

    @runtime_func
    def head(self, x, final_norm, lm_head):
        logits = F.linear(F.rms_norm(x, (HID,), final_norm, EPS), lm_head.t())
        return logits, logits.argmax(-1)


@runtime_module(Model)
class BrokenTwin:
    """ModelTwin with one wrong kernel: layer1's MLP computes gelu where the Model says silu."""

    layer0 = LayerTwin
    layer1 = WrongLayerTwin
    embed = ModelTwin.embed.impl  # the same kernel bodies as the faithful twin
    head = ModelTwin.head.impl
