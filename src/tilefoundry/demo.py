"""``make demo``: author a small SwiGLU block, evaluate it on the reference evaluator, print the result."""

from __future__ import annotations

import torch

from tilefoundry import func, module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, tf

HID, INTER = 64, 128
seq = DimVar("seq", 1, 4096)


@module(entry="block")
class SwiGLUBlock:
    """RMSNorm then a SwiGLU MLP with a residual connection."""

    @func
    def block(
        x: Tensor[(seq, HID), "f32"],
        norm: ConstTensor[(HID,), "f32"],
        w_gate: ConstTensor[(HID, INTER), "f32"],
        w_up: ConstTensor[(HID, INTER), "f32"],
        w_down: ConstTensor[(INTER, HID), "f32"],
    ):
        h = tf.rms_norm(x, norm, 1e-6)
        return x + tf.matmul(tf.silu(tf.matmul(h, w_gate)) * tf.matmul(h, w_up), w_down)


def main() -> None:
    """Run the block on random inputs and compare with the same math written in torch."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, HID, generator=gen)
    norm = torch.ones(HID)
    w_gate, w_up = torch.randn(HID, INTER, generator=gen) * 0.1, torch.randn(HID, INTER, generator=gen) * 0.1
    w_down = torch.randn(INTER, HID, generator=gen) * 0.1
    print("HIR of SwiGLUBlock.block:")
    print(SwiGLUBlock.block.graph)
    out = SwiGLUBlock(x, norm, w_gate, w_up, w_down)
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm
    ref = x + (torch.nn.functional.silu(h @ w_gate) * (h @ w_up)) @ w_down
    print(f"output {tuple(out.shape)} {out.dtype}; first row: {out[0, :6].tolist()}")
    print(f"max |evaluator - torch| = {(out - ref).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
