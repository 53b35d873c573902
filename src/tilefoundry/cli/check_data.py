"""The data ``tilefoundry check`` feeds both sides: DimVar extents, random weights, random or file inputs.

Everything random is drawn on the CPU from a generator seeded by ``--seed`` and a stable label (``weights``,
or the checked callable's name), then moved to ``--device``, so one seed gives the same numbers everywhere.
An integer input is drawn for what it feeds, as the IR says (:mod:`.check_ints`): an index within the axis it
indexes, positions of one causal step within the rotary table and the cache.
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..ir.core.annotation import TensorSpec
from ..ir.core.binding import Binder, Mismatch
from ..ir.core.function import Function
from ..ir.core.module import Module
from ..ir.core.tables import positional_tables
from ..ir.types.dim import DimVar
from ..ir.types.tensor_type import TensorType
from ..runtime.resource import DictResource
from .check_cmd import DEFAULT_EXTENT
from .check_ints import IntPlan, IntUse, int_uses
from .refusal import Refusal

__all__ = [
    "StepParam",
    "choose_dims",
    "generator",
    "int_plan",
    "random_inputs",
    "random_weights",
    "read_inputs",
    "step_params",
    "tree_dimvars",
]



@dataclass(frozen=True)
class StepParam:
    """One positional parameter a checked callable is given: its name and type (None when unknown).

    ``function`` is the ``@func`` whose activation of the same name it is (the callable's own, or the one its
    type was found in), whose IR tells what an integer parameter feeds; None when there is none.
    """

    name: str
    type: TensorType | None
    origin: str  # where the type came from, for messages: "declared", "annotation", "same name in layer0.attn"
    function: Function | None = None


def generator(seed: int, label: str) -> torch.Generator:
    """A CPU generator seeded by ``seed`` and the stable ``label`` of what it draws."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(label.encode())) % (2**63))


# -- DimVars -------------------------------------------------------------------------------------------------


def tree_dimvars(node: Module, extra: Iterable[TensorType] = ()) -> dict[str, list[DimVar]]:
    """Every DimVar the node's tree declares (and ``extra`` types mention), by name."""
    found: dict[str, list[DimVar]] = {}
    types = [p.type for _, mod in node._walk() for fn in mod.functions.values() for p in fn.params]
    for ty in [*types, *extra]:
        for var in sorted(ty.dimvars(), key=lambda v: v.name):
            same = found.setdefault(var.name, [])
            if var not in same:
                same.append(var)
    return found


def choose_dims(dimvars: Mapping[str, list[DimVar]], given: Mapping[str, int]) -> dict[str, int]:
    """The extent of every DimVar (by name, sorted): the ``--dim`` value, else DEFAULT_EXTENT clamped into its range."""
    unknown = [n for n in given if n not in dimvars]
    if unknown:
        raise Refusal(
            f"--dim names {', '.join(unknown)}, which the selection does not declare; its DimVars: "
            f"{_dimvar_list(dimvars) or 'none'}"
        )
    chosen: dict[str, int] = {}
    for name, variants in sorted(dimvars.items()):
        lo = max(v.lo for v in variants)
        hi = min(v.hi for v in variants)
        if name in given:
            value = given[name]
            if not lo <= value < hi:
                raise Refusal(f"--dim {name}={value} is outside {name}'s range [{lo}, {hi})")
        else:
            if lo >= hi:
                raise Refusal(f"DimVar {name} is declared with disjoint ranges ({_dimvar_list({name: variants})})")
            value = min(max(lo, DEFAULT_EXTENT), hi - 1)
        chosen[name] = value
    return chosen


def parse_dims(items: Sequence[str]) -> dict[str, int]:
    """``["seq=4", "ctx=16"]`` -> ``{"seq": 4, "ctx": 16}``."""
    out: dict[str, int] = {}
    for item in items:
        name, eq, raw = item.partition("=")
        name = name.strip()
        try:
            value = int(raw)
        except ValueError:
            value = None
        if not eq or not name.isidentifier() or value is None:
            raise Refusal(f"--dim {item!r} is not NAME=INTEGER, e.g. --dim seq=4")
        if name in out:
            raise Refusal(f"--dim {name} is given twice")
        out[name] = value
    return out


def parse_int_range(text: str) -> tuple[int, int]:
    """``"0:2"`` -> ``(0, 2)`` (half-open, non-empty)."""
    lo, sep, hi = text.partition(":")
    try:
        bounds = (int(lo), int(hi))
    except ValueError:
        bounds = None
    if not sep or bounds is None or bounds[0] >= bounds[1]:
        raise Refusal(f"--int-range {text!r} is not LO:HI with LO < HI, e.g. --int-range 0:16")
    return bounds


def _dimvar_list(dimvars: Mapping[str, list[DimVar]]) -> str:
    return ", ".join(f"{v.name} in [{v.lo}, {v.hi})" for vs in dimvars.values() for v in vs)


# -- random tensors --------------------------------------------------------------------------------------------


def random_tensor(ty: TensorType, dims: Mapping[str, int], gen: torch.Generator, *, weight: bool,
                  int_range: tuple[int, int]) -> torch.Tensor:
    """A random CPU tensor of type ``ty`` (DimVars at ``dims``).

    Floats are N(0, 1); a weight of rank >= 2 is scaled by 1/sqrt(shape[-2]), its contraction extent in
    ``x @ w``, so products stay of order one. Integers are uniform in ``int_range``; booleans are 0 / 1.
    """
    shape = ty.concrete_shape(dims)
    dtype = ty.dtype
    if dtype.is_float:
        values = torch.randn(shape, generator=gen, dtype=torch.float32)
        if weight and len(shape) >= 2 and shape[-2] > 0:
            values = values / float(shape[-2]) ** 0.5
        return values.to(dtype.torch_dtype)
    if dtype.is_bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    lo, hi = int_range
    return torch.randint(lo, hi, shape, generator=gen, dtype=dtype.torch_dtype)


def random_weights(node: Module, dims: Mapping[str, int], seed: int, int_range: tuple[int, int],
                   device: str) -> DictResource:
    """Random values for every weight the node's tree declares, keyed by dotted path from the node."""
    gen = generator(seed, "weights")
    data: dict[str, torch.Tensor] = {}
    for path, mod in node._walk():
        for name, ty in mod.weights.items():
            key = f"{path}.{name}" if path else name
            data[key] = random_tensor(ty, dims, gen, weight=True, int_range=int_range).to(device)
    return DictResource(data)


# -- the parameters of a checked callable --------------------------------------------------------------------


def step_params(node: Module, member: str | None, member_kind: str | None) -> list[StepParam]:
    """The positional parameters the selected callable is given, with their types where they can be told.

    A function takes its declared activations. A method (``forward`` included) takes its required positional
    parameters after ``self``; each one's type is its ``Tensor[...]`` annotation, else that of the activation of
    the same name in the node's functions (its own first, then its children's, breadth first), else unknown.
    A node's step is its forward method, else its entry function.

    Raises:
        Refusal: the node has no step (neither forward nor entry).
    """
    if member_kind == "function":
        return _function_params(node.functions[member])
    if member_kind == "method":
        return _method_params(node, member)
    if "forward" in node.methods:
        return _method_params(node, "forward")
    if node.entry is not None:
        return _function_params(node.functions[node.entry])
    raise Refusal(
        f"{node.name} has no step to check (neither a forward method nor an entry function); select one of its "
        f"members instead: {node._member_list()}"
    )


def _function_params(fn: Function) -> list[StepParam]:
    return [StepParam(p.name, p.type, "declared", fn) for p in fn.activations]


def _method_params(node: Module, name: str) -> list[StepParam]:
    method = node.methods[name]
    try:
        annotations = inspect.get_annotations(method, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate is simply not used
        annotations = {}
    params: list[StepParam] = []
    for i, p in enumerate(inspect.signature(method).parameters.values()):
        if i == 0:
            continue  # self
        if p.kind is p.VAR_POSITIONAL:
            params.append(StepParam("*" + p.name, None, f"{node.name}.{name} takes *{p.name}"))
            break
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.default is not p.empty:
            break
        ann = annotations.get(p.name)
        found = _same_name(node, p.name)
        fn = found[2] if found else None
        if isinstance(ann, TensorSpec):
            params.append(StepParam(p.name, ann.type, "annotation", fn))
            continue
        params.append(StepParam(p.name, found[1] if found else None, f"same name in {found[0]}" if found else "", fn))
    return params


def _same_name(node: Module, name: str) -> tuple[str, TensorType, Function] | None:
    queue: list[tuple[str, Module]] = [(node.name, node)]
    while queue:
        where, mod = queue.pop(0)
        for fn in mod.functions.values():
            for p in fn.activations:
                if p.name == name:
                    return f"{where}.{fn.name}", p.type, fn
        queue.extend((f"{where}.{m.name}", m) for m in mod.modules)
    return None


def int_plan(params: Sequence[StepParam], dims: Mapping[str, int]) -> IntPlan:
    """The values valid for the integer parameters among ``params``, from what their functions' IR does with them.

    A function whose body does not trace says nothing here (its integers are drawn in the integer range): the
    failure is the code under check's, reported where the reference runs it.
    """
    uses: dict[str, list[IntUse]] = {}
    types: dict[str, TensorType] = {}
    for p in params:
        if p.type is None or p.function is None or not p.type.dtype.is_int:
            continue
        try:
            found = int_uses(p.function).get(p.name)
        except Exception:  # noqa: BLE001 - see above: the run of the reference reports it
            found = None
        if found:
            uses[p.name] = found
            types[p.name] = p.type
    return IntPlan(uses, dims, types)


def random_inputs(label: str, params: Sequence[StepParam], dims: Mapping[str, int], seed: int,
                  int_range: tuple[int, int], device: str) -> tuple[torch.Tensor, ...]:
    """One random tensor per parameter, seeded by ``seed`` and ``label``.

    An integer parameter whose use the IR tells gets values valid for it (:func:`int_plan`); any other integer
    is uniform in ``int_range``.

    Raises:
        Refusal: a parameter whose type cannot be told (the message names the two ways out).
    """
    unknown = [p for p in params if p.type is None]
    if unknown:
        names = ", ".join(p.name for p in unknown)
        raise Refusal(
            f"{label}: cannot tell the type of {names}, so no random input can be made for it; annotate the "
            f"parameter (name: Tensor[(dims), \"dtype\"]) or give the inputs with --inputs FILE"
        )
    gen = generator(seed, f"inputs:{label}")
    plan = int_plan(params, dims)
    return tuple(
        (plan.draw(p.name, gen) if plan.covers(p.name)
         else random_tensor(p.type, dims, gen, weight=False, int_range=int_range)).to(device)  # type: ignore[arg-type]
        for p in params
    )


# -- inputs from a file ----------------------------------------------------------------------------------------


def read_inputs(file: str, params: Sequence[StepParam], device: str) -> tuple[Any, ...]:
    """The arguments stored in ``file`` for the parameters ``params``.

    ``.safetensors``: one tensor per parameter name; a tuple argument as ``name.0``, ``name.1``, ... (nesting
    further as ``name.1.0``). ``.pt``: ``torch.load`` (weights only) of a tuple / list of arguments, a dict by
    parameter name, or one tensor for a single parameter. Every stored tensor must be used.
    """
    path = Path(file)
    if not path.is_file():
        raise Refusal(f"--inputs {file}: no such file")
    names = [p.name for p in params]
    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            stored: Any = load_file(str(path), device="cpu")
        elif suffix in (".pt", ".pth"):
            stored = torch.load(str(path), map_location="cpu", weights_only=True)
        else:
            raise Refusal(f"--inputs {file}: expected a .safetensors or .pt file")
    except Refusal:
        raise
    except Exception as error:  # noqa: BLE001 - a file that does not read is refused with torch's reason
        raise Refusal(f"--inputs {file} could not be read: {type(error).__name__}: {error}") from error
    if isinstance(stored, Mapping):
        args = _by_name(file, dict(stored), names)
    elif isinstance(stored, torch.Tensor):
        args = (stored,)
    elif isinstance(stored, (tuple, list)):
        args = tuple(_as_tuples(file, v, f"[{i}]") for i, v in enumerate(stored))
    else:
        raise Refusal(f"--inputs {file} holds a {type(stored).__name__}; store a tuple of arguments or a dict by name")
    if len(args) != len(names):
        raise Refusal(
            f"--inputs {file} holds {len(args)} argument(s); the selection takes {len(names)} ({', '.join(names)})"
        )
    _validate_inputs(file, params, args)
    return tuple(_to_device(a, device) for a in args)


def _validate_inputs(file: str, params: Sequence[StepParam], args: Sequence[Any]) -> None:
    """Hold every argument of a parameter whose type is known to that type, by the rule the reference runner binds
    its arguments with (:class:`~tilefoundry.ir.core.binding.Binder`: dtype, rank, static extents, DimVar ranges and
    agreement; a positional table, RoPE's cos / sin rows, may hold fewer rows), so a file the reference would refuse
    is refused here, naming the file, the parameter and its declaration, before either side runs.
    """
    binder = Binder("argument")
    try:
        for p, a in zip(params, args):
            if p.type is not None:
                table = p.function is not None and p.name in positional_tables(p.function)
                binder.bind(p.name, a, p.type, table=table)
        binder.finish(complete=False)
    except Mismatch as mismatch:
        raise Refusal(f"--inputs {file}: {mismatch}; store tensors of the declared types") from None


def _by_name(file: str, stored: dict[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    used: set[str] = set()
    args = []
    for name in names:
        if name in stored:
            args.append(_as_tuples(file, stored[name], name))
            used.add(name)
            continue
        nested = {k[len(name) + 1:]: v for k, v in stored.items() if k.startswith(name + ".")}
        if not nested:
            raise Refusal(
                f"--inputs {file} holds nothing for {name!r} (neither {name} nor {name}.0, ...); it holds "
                f"{', '.join(sorted(stored)) or 'nothing'}"
            )
        args.append(_nest(file, name, nested))
        used.update(f"{name}.{k}" for k in nested)
    unused = sorted(set(stored) - used)
    if unused:
        raise Refusal(
            f"--inputs {file} holds {', '.join(unused)}, which no parameter takes; the selection takes "
            f"{', '.join(names)}"
        )
    return tuple(args)


def _nest(file: str, name: str, flat: dict[str, Any]) -> tuple[Any, ...]:
    groups: dict[int, dict[str, Any]] = {}
    leaves: dict[int, Any] = {}
    for key, value in flat.items():
        head, _, rest = key.partition(".")
        if not head.isdigit():
            raise Refusal(f"--inputs {file}: key {name}.{key} is not {name}.<index>")
        if rest:
            groups.setdefault(int(head), {})[rest] = value
        else:
            leaves[int(head)] = value
    count = max([*groups, *leaves]) + 1
    items = []
    for i in range(count):
        if i in leaves and i in groups or (i not in leaves and i not in groups):
            raise Refusal(f"--inputs {file}: the tuple {name} needs exactly one entry for index {i}")
        items.append(_as_tuples(file, leaves[i], f"{name}.{i}") if i in leaves else _nest(file, f"{name}.{i}",
                                                                                            groups[i]))
    return tuple(items)


def _as_tuples(file: str, value: Any, where: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_as_tuples(file, v, f"{where}[{i}]") for i, v in enumerate(value))
    raise Refusal(f"--inputs {file}: {where} is a {type(value).__name__}; arguments are tensors or tuples of them")


def _to_device(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return tuple(_to_device(v, device) for v in value)
