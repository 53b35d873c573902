"""Weight layouts the engine's fused kernels read, made once when an engine is built.

* q, k and v projections side by side: one GEMV computes all three (``pack_qkv``), and the rope/cache
  kernel reads its output as q heads, then k heads, then v heads.
* gate and up projections interleaved row by row (``pack_gate_up``): the GEMV's SwiGLU epilogue finds
  gate_j and up_j in one warp (rows 2j and 2j + 1) and writes silu(gate_j) * up_j directly.
"""

from __future__ import annotations

import torch


def pack_qkv(q_proj: torch.Tensor, k_proj: torch.Tensor, v_proj: torch.Tensor) -> torch.Tensor:
    """The (H + 2 KV) * D x hidden weight computing q, k and v in one GEMV (nn.Linear layout, rows stacked)."""
    _same_inputs("pack_qkv", {"q_proj": q_proj, "k_proj": k_proj, "v_proj": v_proj})
    return torch.cat((q_proj, k_proj, v_proj), dim=0).contiguous()


def pack_gate_up(gate_proj: torch.Tensor, up_proj: torch.Tensor) -> torch.Tensor:
    """The 2I x hidden weight whose row 2j is gate_proj[j] and row 2j + 1 is up_proj[j]."""
    _same_inputs("pack_gate_up", {"gate_proj": gate_proj, "up_proj": up_proj})
    if gate_proj.shape != up_proj.shape:
        raise ValueError(f"pack_gate_up: gate_proj has shape {tuple(gate_proj.shape)} and up_proj "
                         f"{tuple(up_proj.shape)}; they must be equal")
    return torch.stack((gate_proj, up_proj), dim=1).reshape(2 * gate_proj.shape[0], gate_proj.shape[1])


def _same_inputs(what: str, weights: dict[str, torch.Tensor]) -> None:
    first_name, first = next(iter(weights.items()))
    for name, w in weights.items():
        if w.ndim != 2:
            raise ValueError(f"{what}: {name} has shape {tuple(w.shape)}; expected (out features, in features)")
        if w.shape[1] != first.shape[1] or w.dtype != first.dtype or w.device != first.device:
            raise ValueError(f"{what}: {name} is {tuple(w.shape)} {w.dtype} on {w.device} but {first_name} is "
                             f"{tuple(first.shape)} {first.dtype} on {first.device}; the in features, dtype and "
                             "device must agree")
