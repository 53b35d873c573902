"""The options ``tilefoundry generate`` and ``tilefoundry chat`` share: the model to load, how tokens are chosen,
where generation stops, and the CPU threads; each parsed and checked here, once.
"""

from __future__ import annotations

import argparse
from typing import Any

from .options import SEED, add_device_option, checked
from .refusal import Refusal

__all__ = ["add_model_options", "add_text_options", "open_session", "sampling_of", "use_threads"]


def _positive(value: int) -> None:
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")


def _temperature(value: float) -> float:
    from ..models.generation import check_temperature

    return check_temperature(value)


def _top_k(value: int) -> int:
    from ..models.generation import check_top_k

    return check_top_k(value)


def _top_p(value: float) -> float:
    from ..models.generation import check_top_p

    return check_top_p(value)


def _stop(value: str) -> str:
    if not value:
        raise ValueError("a stop string is empty; it would end generation before any text")
    return value


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--ckpt, --device, --backend, --allow-unused, --threads: what is loaded and where it runs."""
    parser.add_argument("--ckpt", required=True,
                        help="a checkpoint folder (config.json, tokenizer, safetensors), or a Hugging Face model id "
                             "already in the local Hugging Face cache")
    add_device_option(parser, "where the model runs")
    parser.add_argument("--backend", choices=("reference", "twin"), default="twin",
                        help="reference evaluator or runtime twin (default twin)")
    parser.add_argument("--allow-unused", action="store_true",
                        help="accept checkpoint tensors no declared weight reads (refused by default)")
    parser.add_argument("--threads", type=checked(int, _positive, "an integer"), default=None,
                        help="CPU threads for torch and the compiled kernels (default: $OMP_NUM_THREADS where it "
                             "is set, else the physical cores this process may run on)")


def add_text_options(parser: argparse.ArgumentParser) -> None:
    """--system, --max-new-tokens, --truncate, sampling and --stop: what is asked and how the answer is chosen."""
    parser.add_argument("--system", default=None,
                        help="a system prompt, before the user's turn in the chat template (implies --chat)")
    parser.add_argument("--max-new-tokens", type=checked(int, _positive, "an integer"), default=64,
                        help="tokens to generate at most, >= 1 (default 64)")
    parser.add_argument("--truncate", choices=("none", "left"), default="none",
                        help="a prompt too long for the model's positions: refused (none, default), or its oldest "
                             "tokens dropped (left)")
    parser.add_argument("--temperature", type=checked(float, _temperature, "a number"), default=0.0,
                        help="a finite number >= 0; 0 (default) is greedy")
    parser.add_argument("--top-k", type=checked(int, _top_k, "an integer"), default=0,
                        help="keep the k most likely tokens (0: all)")
    parser.add_argument("--top-p", type=checked(float, _top_p, "a number"), default=1.0,
                        help="keep the smallest set of mass >= p, p in (0, 1] (1: all)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the sampler, in [0, 2**64) (default 0)")
    parser.add_argument("--stop", action="append", default=[], type=checked(str, _stop, "a string"),
                        metavar="TEXT",
                        help="end generation when the text reaches TEXT (not printed); may be given several times")


def sampling_of(args: argparse.Namespace) -> Any:
    """The Sampling the options ask for."""
    from ..models.generation import Sampling

    return Sampling(args.temperature, args.top_k, args.top_p, args.seed)


def use_threads(args: argparse.Namespace) -> int:
    """Set the CPU thread count the options ask for (or the default); returns it."""
    from ..runtime.threads import set_threads

    return set_threads(args.threads)


# What opening a checkpoint and generating from it raise for a request that cannot be served.
REFUSED = (OSError, ValueError, KeyError, TypeError, ImportError, RuntimeError)


def reason(error: BaseException) -> str:
    """The refusal text of an error raised while opening or generating."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    if isinstance(error, (ValueError, OSError)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def open_session(args: argparse.Namespace, prompt: Any, *, chat: bool) -> Any:
    """The TextSession the options and ``prompt`` (text or chat messages) ask for; a Refusal when it cannot be."""
    from ..models.session import TextSession

    try:
        return TextSession.open(args.ckpt, device=args.device, backend=args.backend,
                                max_new_tokens=args.max_new_tokens, prompt=prompt, chat=chat, system=args.system,
                                truncate=args.truncate, allow_unused=args.allow_unused)
    except REFUSED as error:
        raise Refusal(reason(error)) from None
