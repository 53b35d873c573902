"""CompiledModule: the RuntimeModule a compiled entry is bound to, calling it by the out-param
convention (spec 1.1.3, 1.2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..ir.types.dim import DimVar, evaluate_dim
from .abi import EntryABI
from .module import RuntimeModule

__all__ = ["CompiledModule"]


class CompiledModule(RuntimeModule):
    """A compiled entry as a RuntimeModule: ``name`` and ``entry`` are the entry's name, ``module`` is None.

    ``forward(*args)`` follows the out-param calling convention (spec 1.2):

    * auto-alloc, ``len(args) == type.input_count``: every input a torch.Tensor; the outputs are
      allocated on the first input's device with the dtype and shape of ``type.output_params`` (DimVar
      extents read from the inputs), the entry is called and the outputs returned;
    * pre-alloc, ``len(args) == len(type.params)``: the caller's outputs are written and returned
      (any DLPack-compatible tensors);
    * any other count between the two (some outputs only) is a TypeError.

    Arguments may be given by their parameters' names after the positional ones, as torch users call a module
    (``f(x, w=w)``); an unknown name, one given twice, or a gap before a named one is a TypeError naming them.

    One output comes back bare, several as a tuple. The entry itself checks every argument (device,
    dtype, rank, extents, DimVars, contiguity) and raises TypeError / ValueError naming the parameter.

    A Module of several ``@func`` kernels compiles each into the same library: every one of them is a
    CompiledModule of its own in ``functions`` (by name, the entry included: ``functions[entry] is self``) and is
    reachable as an attribute of the entry's, ``compiled.<function name>(...)``, by the same convention.

    Attributes:
        type: the entry's EntryABI.
        fn: the bound tvm-ffi function.
        source: the generated source the library was built from.
        library: the shared library's path.
        tir: the printed TIR the source was generated from.
    """

    def __init__(self, type: EntryABI, fn: Callable[..., Any], *, source: str = "",  # noqa: A002 - spec 1.1.3
                 library: Path | None = None, tir: str = "", keep_alive: Any = None,
                 functions: dict[str, CompiledModule] | None = None) -> None:
        if not isinstance(type, EntryABI):
            raise TypeError(f"CompiledModule(type=...) takes the entry's EntryABI, got {type.__class__.__name__}")
        if not callable(fn):
            raise TypeError(f"CompiledModule(fn=...) takes the bound entry function, got {fn.__class__.__name__}")
        super().__init__(type.name, entry=type.name)
        self.type = type
        self.fn = fn
        self.source = source
        self.library = library
        self.tir = tir
        self._keep_alive = keep_alive  # the loaded library, so the function stays valid
        self.functions: dict[str, CompiledModule] = {**(functions or {}), type.name: self}

    def __getattr__(self, attr: str) -> Any:
        # Reached only when ordinary lookup fails: another function of the same compiled Module, by name.
        functions = self.__dict__.get("functions", {})
        if attr in functions:
            return functions[attr]
        if not attr.startswith("__") and functions:
            raise AttributeError(f"CompiledModule {self.__dict__.get('name', '?')!r} has no attribute or function "
                                 f"{attr!r}; its functions: {', '.join(functions)}")
        return super().__getattr__(attr)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the entry by the out-param convention (see the class docstring). Arguments may also be passed by
        their parameters' names, after the positional ones (``f(x, w=w)``, ``f(x=x, w=w, out=out)``)."""
        abi = self.type
        if kwargs:
            args = self._by_name(args, kwargs)
        n_in, n_all = abi.input_count, len(abi.params)
        for i, (p, a) in enumerate(zip(abi.params, args)):
            if type(a) is torch.Tensor and not a.is_meta and a.layout is torch.strided:
                continue  # the common case, tested without the attribute reads below (a call's fixed cost)
            role = "input" if i < n_in else "output"
            if a is None:
                way = ("pass a tensor" if i < n_in else
                       f"pass a tensor for every output, or none of them ({_names(abi.output_params)}) to have them "
                       "allocated")
                raise TypeError(f"{abi.name}: {role} {p.name} is None; {way}")
            if not _is_tensor(a):
                raise TypeError(f"{abi.name}: {role} {p.name} is not a tensor but {type(a).__name__} {_short(a)}, "
                                f"declared {p.type}; pass a tensor (a torch.Tensor, or any DLPack tensor)")
            if isinstance(a, torch.Tensor) and (a.layout != torch.strided or a.device.type == "meta"):
                what = "on the meta device (it holds no data)" if a.device.type == "meta" else f"of layout {a.layout}"
                raise ValueError(f"{abi.name}: {role} {p.name} is a tensor {what}, declared {p.type}; pass a dense "
                                 "tensor in memory (.to_dense(), or one made on 'cpu' or 'cuda')")
        if len(args) == n_in:
            outputs = self._allocate(args)
            self.fn(*args, *outputs)
        elif len(args) == n_all:
            outputs = tuple(args[n_in:])
            self.fn(*args)
        elif n_in < len(args) < n_all:
            given = ", ".join(p.name for p in abi.output_params[: len(args) - n_in])
            missing = ", ".join(p.name for p in abi.output_params[len(args) - n_in:])
            raise TypeError(f"{abi.name}: {len(args) - n_in} of {abi.output_count} outputs given ({given}); pass "
                            f"every output ({missing} missing) or none (then they are allocated)")
        else:
            raise TypeError(f"{abi.name} takes its {n_in} inputs ({_names(abi.input_params)}), optionally followed "
                            f"by its {abi.output_count} outputs ({_names(abi.output_params)}); got {len(args)} "
                            "arguments")
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _by_name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """``args`` followed by ``kwargs`` in the parameters' order: every input, and every output or none."""
        abi = self.type
        names = [p.name for p in abi.params]
        for name in kwargs:
            if name not in names:
                raise TypeError(f"{abi.name} has no parameter {name!r}; its inputs: {_names(abi.input_params)}, its "
                                f"outputs: {_names(abi.output_params)}")
            if names.index(name) < len(args):
                raise TypeError(f"{abi.name}: {name} is given twice, by position and by name")
        merged = list(args)
        for name in names[len(args):]:
            if name not in kwargs:
                break
            merged.append(kwargs[name])
        if len(merged) - len(args) != len(kwargs):
            missing = ", ".join(n for n in names[len(args):] if n not in kwargs and names.index(n) < abi.input_count)
            later = ", ".join(n for n in kwargs if names.index(n) >= len(merged))
            raise TypeError(f"{abi.name}: {later} given by name while "
                            f"{missing or 'an output before it'} is not; pass every input, and every output or none")
        return tuple(merged)

    def _allocate(self, args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        abi = self.type
        for p, a in zip(abi.input_params, args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{abi.name}: input {p.name} is a {type(a).__name__}; allocating the outputs needs "
                                f"torch tensors (auto-alloc is torch-only): pass torch.Tensor inputs, or pass the "
                                f"outputs too ({_names(abi.output_params)})")
        device = args[0].device if args else torch.device("cpu")
        bindings: dict[str, int] = {}
        for p, a in zip(abi.input_params, args):
            if a.dim() != p.type.rank:
                continue  # the entry refuses the rank, naming the parameter
            for d, n in zip(p.type.shape, a.shape):
                if isinstance(d, DimVar):
                    bindings.setdefault(d.name, int(n))
        outputs = []
        for p in abi.output_params:
            try:
                shape = tuple(max(0, evaluate_dim(d, bindings)) for d in p.type.shape)
            except KeyError:
                shape = (0,) * p.type.rank  # some input is malformed: the entry refuses it before this output
            outputs.append(torch.empty(shape, dtype=p.type.dtype.torch_dtype, device=device))
        return tuple(outputs)

    def __repr__(self) -> str:
        return f"<CompiledModule {self.type}>"


def _is_tensor(value: Any) -> bool:
    """Whether ``value`` is what the entry's tensor parameters take: a torch tensor or a DLPack exporter."""
    return isinstance(value, torch.Tensor) or (hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"))


def _short(value: Any) -> str:
    """``value``'s repr, cut to a line's worth."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _names(params: tuple[Any, ...]) -> str:
    return ", ".join(p.name for p in params) or "none"
