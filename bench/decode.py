"""Batch-1 greedy decode speed: TileFoundry's runtime twin against Hugging Face transformers, same run.

A model of a real shape (default: Qwen3-0.6B's) with random weights is saved as a Hugging Face
checkpoint, then both generate the same number of tokens from the same prompt. Prints tokens/s of
both and the ratio, and writes JSON.

    python bench/decode.py --device cuda --json decode.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tilefoundry.models import generate, open_checkpoint  # noqa: E402
from tilefoundry.models.twins import build_twin  # noqa: E402

SHAPES = {
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=4096,
                       tie_word_embeddings=True),
    "tiny": dict(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, max_position_embeddings=1024),
}


def main() -> int:
    """Run the benchmark and print a table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    config = Qwen3Config(**SHAPES[args.shape], dtype=args.dtype)
    hf = AutoModelForCausalLM.from_config(config).to(dtype).eval()
    prompt = torch.randint(0, config.vocab_size, (args.prompt_tokens,))
    results: dict[str, object] = {"shape": args.shape, "device": args.device, "dtype": args.dtype,
                                  "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
                                  "parameters": sum(p.numel() for p in hf.parameters())}
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        hf = hf.to(args.device)
        with torch.no_grad():
            hf.generate(prompt[None].to(args.device), max_new_tokens=4, min_new_tokens=4, do_sample=False)
            sync(args.device)
            start = time.perf_counter()
            hf.generate(prompt[None].to(args.device), max_new_tokens=args.new_tokens,
                        min_new_tokens=args.new_tokens, do_sample=False)
            sync(args.device)
            results["hf_tokens_per_second"] = args.new_tokens / (time.perf_counter() - start)
        del hf
        opened = open_checkpoint(tmp, max_len=args.prompt_tokens + args.new_tokens, progress=False)
        twin = build_twin(opened.module, opened.config)
        twin.load(opened.resource(args.device))
        generate(twin, prompt, 4, device=args.device)
        sync(args.device)
        start = time.perf_counter()
        out = generate(twin, prompt, args.new_tokens, device=args.device)
        sync(args.device)
        results["twin_tokens_per_second"] = len(out.tokens) / (time.perf_counter() - start)
    results["ratio_twin_over_hf"] = results["twin_tokens_per_second"] / results["hf_tokens_per_second"]
    print(f"{'':24}{'tokens/s':>10}")
    print(f"{'Hugging Face (eager)':24}{results['hf_tokens_per_second']:>10.1f}")
    print(f"{'TileFoundry twin':24}{results['twin_tokens_per_second']:>10.1f}")
    print(f"twin / HF = {results['ratio_twin_over_hf']:.2f}  ({args.shape}, {args.dtype}, {args.device}, "
          f"{results['parameters'] / 1e6:.0f}M parameters, {args.new_tokens} tokens after {args.prompt_tokens})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def sync(device: str) -> None:
    """Wait for queued GPU work, so wall-clock timings include it."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
