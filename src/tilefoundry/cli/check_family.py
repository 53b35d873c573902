"""``tilefoundry check --ckpt DIR`` with no target: a shipped family's runtime twin against its Module.

The folder (a Hugging Face checkpoint of a supported family, or what ``tilefoundry prepare`` wrote for one)
gives both sides: the family's semantic Module read by the evaluator (the reference, a LoadedModule) and its
runtime twin (``tilefoundry.models.twins.build_twin``), loaded from the same weights.

What is compared is what generation runs: the model's step on a random prompt (``prefill``), then on one more
token (``decode``), each made by the model's own ``init_caches`` / ``prepare_inputs_for_generation``, so every
position, length and cache is one the model itself would use. Within each step, every kernel the twin runs in
place of a Module function (``prefill.layer0.attend``...) is checked on the very arguments the reference gave
that function in that step; with ``--per-node`` every node's step (``prefill.layer0.forward``) too. A table row
then names the kernel that is off, and the step (prefill or decode) it is off in.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..ir.core.loaded import BoundFunction, LoadedModule
from ..runtime.check import Predicate, parse_predicate
from ..runtime.check.dtypes import dtype_name
from ..runtime.module import RuntimeModule
from .check_cmd import DEFAULT_EXTENT, DEFAULT_INT_RANGE
from .check_data import generator, parse_dims
from .check_target import UserCodeError, twin_child
from .refusal import Refusal

__all__ = ["DEFAULT_REL_L2", "FamilyCheck", "FamilyItem", "family_check"]

# The default bound of a family check on a kernel or a node's step, by output dtype: rel_l2, the measure the check
# documentation and the twin tests state twins with (1e-5 on f32 throughout). A faithful twin computes the
# Module's math in another order (fused attention, F.linear, fused norms): on SmolLM2-135M that moves a kernel's
# result by at most 1e-6 in f32, 6.5e-4 in f16 and 4.2e-3 in bf16 (one rounding is 2**-24, 2**-11, 2**-8 relative);
# a wrong op (gelu for silu) moves it by ~2e-2 and more. The model's whole step chains every layer, whose rounding
# differences add up like a random walk: its bound is this one times sqrt(layers) (SmolLM2's 30 layers in bf16:
# 3.7e-2 measured, 0.11 allowed; the kernels' rows, held to this bound, are what name a wrong kernel).
DEFAULT_REL_L2: Mapping[torch.dtype, float] = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    torch.float16: 5e-3,
    torch.bfloat16: 2e-2,
}
_FALLBACK_REL_L2 = 2e-2

# Options of a check with a target that a family check does not take, and why.
_NOT_FOR_FAMILY = {
    "alias": "--alias names an alias table of FILE.py; a family checkpoint is read with its family's own table "
             "(a Hugging Face folder) or as it is (a prepare output)",
    "no_alias": "--no-alias applies to a target's --ckpt folder; a family checkpoint is read with its family's "
                "own table (a Hugging Face folder) or as it is (a prepare output)",
    "inputs": "--inputs gives a target's inputs; a family check makes the model's own (a random prompt of "
              "--dim seq=N tokens, then one decode step)",
}


@dataclass
class FamilyItem:
    """One checked callable: the twin's side, the result the reference produced, and the arguments it was given."""

    label: str
    candidate: Callable[..., Any]
    reference_result: Any
    inputs: tuple[Any, ...]


@dataclass
class FamilyCheck:
    """What a family check compares, the header lines describing it, and its default predicates.

    ``steps`` are the labels of the model's whole steps (``prefill.forward``, ``decode.forward``), bounded
    ``sqrt(layers)`` times more loosely than a kernel by default (see DEFAULT_REL_L2).
    """

    items: list[FamilyItem]
    setup: dict[str, Any]
    steps: set[str] = field(default_factory=set)
    layers: int = 1
    defaulted: dict[str, None] = field(default_factory=dict)  # what the defaults covered, for the header

    def default_predicates(self, label: str, dtype: torch.dtype) -> list[Predicate]:
        """The predicates of the output of ``label`` (of ``dtype``) that no --expect covers."""
        bound = DEFAULT_REL_L2.get(dtype, _FALLBACK_REL_L2)
        if label in self.steps:
            bound *= math.sqrt(self.layers)
            self.defaulted[f"rel_l2:max={bound:.2g} on the model's {dtype_name(dtype)} steps (sqrt({self.layers}) "
                           "layers times a kernel's)"] = None
        else:
            self.defaulted[f"rel_l2:max={bound:.2g} on {dtype_name(dtype)} kernels and node steps"] = None
        return [parse_predicate(f"rel_l2:max={bound:.2g}")]

    def describe_defaults(self) -> str:
        """The header's account of the default predicates used (empty when --expect covered every output)."""
        if not self.defaulted:
            return ""
        return f"default {', '.join(self.defaulted)} (--expect '*=PRED' states others)"


@dataclass
class _Call:
    """One call the reference made during a step: where, of what, with which arguments, and its result."""

    path: tuple[str, ...]
    member: str  # "forward" (the node's step) or a function name
    inputs: tuple[Any, ...]
    result: Any = None


@dataclass
class _Recorder:
    """The first call of every (node, member) during one step, in the order the calls began."""

    calls: list[_Call] = field(default_factory=list)

    def record(self, path: tuple[str, ...], member: str, inputs: tuple[Any, ...], run: Callable[[], Any]) -> Any:
        if any(c.path == path and c.member == member for c in self.calls):
            return run()
        call = _Call(path, member, inputs)
        self.calls.append(call)
        call.result = run()
        return call.result


class _RecordingReading(LoadedModule):
    """A reading of the same constants that records what its step and its functions are called with."""

    def __init__(self, reading: LoadedModule, path: tuple[str, ...], recorder: _Recorder) -> None:
        children = tuple(_RecordingReading(c, (*path, c.name), recorder) for c in reading.modules)
        super().__init__(reading.module, reading.constants, children)
        self._tf_path = path
        self._tf_recorder = recorder

    def __getattr__(self, attr: str) -> Any:
        found = super().__getattr__(attr)
        if not isinstance(found, BoundFunction):
            return found

        def recorded(*acts: Any) -> Any:
            return self._tf_recorder.record(self._tf_path, attr, acts, lambda: found(*acts))

        return recorded

    def forward(self, *acts: Any) -> Any:
        mod = self.module
        # A node whose step is only its entry function is that kernel (as --per-node checks it on a target).
        member = mod.entry if "forward" not in mod.methods and mod.entry is not None else "forward"
        return self._tf_recorder.record(self._tf_path, member, acts, lambda: LoadedModule.forward(self, *acts))


def family_check(folder: str, args: Any) -> FamilyCheck:
    """Open the family checkpoint ``folder``, load both sides and record the two steps (see the module docstring).

    ``args`` are the command's options (seed, device, dim, per_node, and the ones a family check refuses).

    Raises:
        Refusal: an option a family check does not take, a folder that is no family checkpoint, weights that do
            not read, a --dim out of range.
        UserCodeError: building or loading the twin failed (the twin is the code under check).
    """
    for option, why in _NOT_FOR_FAMILY.items():
        if getattr(args, option, None):
            raise Refusal(f"{why}; leave it out, or name a target (FILE.py:Name) to check a model of your own")
    if args.int_range != f"{DEFAULT_INT_RANGE[0]}:{DEFAULT_INT_RANGE[1]}":
        raise Refusal("--int-range bounds a target's integer inputs; a family check draws its only integers, the "
                      "prompt's token ids, from the vocabulary: leave it out (--seed chooses the tokens)")
    dims = _dim_names(args.dim)
    from ..models.checkpoint import open_checkpoint
    from ..models.twins import build_twin

    try:
        with contextlib.redirect_stdout(sys.stderr):  # a MoE folder says it prepares once; stdout is the report's
            opened = open_checkpoint(folder, progress=False)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
        raise Refusal(f"--ckpt {folder}: {_reason(error)}; without a target, --ckpt names a family checkpoint (a "
                      "Hugging Face folder of a supported family, or a `tilefoundry prepare` output of one: see "
                      "`tilefoundry models`); for another safetensors folder name the model, "
                      "check FILE.py:Name --ckpt DIR") from None
    config = opened.config
    prompt, capacity = _dims(dims, config.max_position_embeddings)
    device = args.device
    try:
        resource = opened.resource(device)
        loaded = opened.module.load(resource)
        opened.refuse_unread(resource)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
        raise Refusal(f"--ckpt {folder}: reading the weights of {opened.module.name}: {_reason(error)}") from None
    try:
        twin = build_twin(opened.module, config)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - the twin's own construction failed: the code under check
        raise UserCodeError("build_twin", "twin", error) from None
    try:
        twin.load(opened.resource(device))
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - the reference read these weights: the twin's load failed
        raise UserCodeError(f"{type(twin).__name__}.load", "twin", error) from None

    gen = generator(args.seed, "inputs:prompt")
    tokens = torch.randint(0, config.vocab_size, (prompt + 1,), generator=gen)
    items: list[FamilyItem] = []
    steps: set[str] = set()
    caches = _reference("init_caches", loaded.init_caches, capacity=capacity, device=device)
    for step, (ids, start) in (("prefill", (tokens[:prompt], 0)), ("decode", (tokens, prompt))):
        inputs = tuple(_reference(f"{step}: prepare_inputs_for_generation", loaded.prepare_inputs_for_generation,
                                  ids, start, caches, device=device))
        recorder = _Recorder()
        outputs = _reference(f"{step}.forward", _RecordingReading(loaded, (), recorder), *inputs)
        items += _items(step, recorder.calls, twin, args.per_node)
        steps.add(f"{step}.forward")
        caches = _reference(f"{step}: append_cache", loaded.append_cache, caches, outputs)
    what = "every kernel and node step" if args.per_node else "every kernel"
    setup = {
        "target": f"--ckpt {folder}",
        "candidate": f"{type(twin).__name__}, the {config.family} family's runtime twin (build_twin)",
        "reference": f"evaluator on Module {opened.module.name} (LoadedModule)",
        "weights": f"checkpoint {opened.folder}, {_weights_text(opened)}",
        "inputs": (f"a random prompt of {prompt} token ids in [0, {config.vocab_size}) (seed {args.seed}): prefill, "
                   f"then one decode step, each made by the model's prepare_inputs_for_generation; {what} given "
                   "what the reference gave it in that step"),
        "dims": {"seq": prompt, "capacity": capacity},
        "dims_note": " (seq: prompt tokens; capacity: cache positions)",
        "seed": args.seed,
    }
    return FamilyCheck(items, setup, steps, max(1, len(twin.modules)))


def _reference(label: str, run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``run(*args, **kwargs)`` on the reference side; what it raises is the failure of the Module under check."""
    try:
        with torch.no_grad():
            return run(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - the Module's own code (its methods, the evaluator) failed
        raise UserCodeError(label, "evaluator", error) from None


def _items(step: str, calls: Sequence[_Call], twin: RuntimeModule, per_node: bool) -> list[FamilyItem]:
    items = []
    for call in calls:
        is_step = call.member == "forward"
        if is_step and call.path and not per_node:
            continue
        node = twin
        for name in call.path:
            node = twin_child(node, name)
        candidate = node if is_step else getattr(node, call.member)
        label = ".".join((step, *call.path, call.member))
        items.append(FamilyItem(label, candidate, call.result, call.inputs))
    return items


def _dim_names(given: Sequence[str]) -> dict[str, int]:
    """The --dim options, refused unless they name seq and capacity alone."""
    dims = parse_dims(given)
    unknown = sorted(set(dims) - {"seq", "capacity"})
    if unknown:
        raise Refusal(f"--dim {', '.join(unknown)}: a family check takes --dim seq=N (prompt tokens) and --dim "
                      "capacity=N (cache positions) only; every other extent follows from them")
    return dims


def _dims(dims: Mapping[str, int], max_positions: int) -> tuple[int, int]:
    """(prompt tokens, cache capacity) from --dim seq=N / capacity=N: default 3 and one more than the prompt."""
    if max_positions < 2:
        raise Refusal(f"the model has {max_positions} position(s) (max_position_embeddings); a check needs 2, one "
                      "prompt token and one decoded")
    prompt = dims.get("seq", min(DEFAULT_EXTENT, max_positions - 1))
    if not 1 <= prompt <= max_positions - 1:
        raise Refusal(f"--dim seq={prompt} is outside [1, {max_positions - 1}]: the prompt and one decoded token must "
                      f"fit the model's {max_positions} positions (max_position_embeddings)")
    capacity = dims.get("capacity", prompt + 1)
    if not prompt + 1 <= capacity <= max_positions:
        raise Refusal(f"--dim capacity={capacity} is outside [{prompt + 1}, {max_positions}]: the caches hold the "
                      f"prompt ({prompt} tokens) and one decoded token, within the model's {max_positions} positions")
    return prompt, capacity


def _weights_text(opened: Any) -> str:
    if opened.alias is not None:
        return f"a Hugging Face folder read through the {opened.config.family} alias table"
    if opened.weights_dir != opened.folder:
        return f"a Hugging Face folder prepared once into {opened.weights_dir}"
    return "a tilefoundry prepare output, read as it is"


def _reason(error: BaseException) -> str:
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error) if isinstance(error, (ValueError, TypeError, OSError)) else f"{type(error).__name__}: {error}"

