"""Runtime layer: runtime twins, function bodies and their ABI, and the weight resources they load from."""

from .abi import EntryABI, ParamABI, entry_abi_of, param_abi_of
from .check import (
    PREDICATES,
    AllClose,
    Cosine,
    Equal,
    MaxAbs,
    MaxRel,
    NanInf,
    Predicate,
    RelL2,
    Report,
    Ulp,
    check,
)
from .compiled import CompiledModule
from .decorator import bound_weights, runtime_func, runtime_module
from .errors import NotLoadedError, TwinDefinitionError
from .function import RuntimeFunction
from .module import RuntimeModule
from .resource import Absolute, DictResource, Preprocessed, RuntimeResource, SafetensorsResource

__all__ = [
    "PREDICATES",
    "Absolute",
    "AllClose",
    "CompiledModule",
    "Cosine",
    "DictResource",
    "EntryABI",
    "Equal",
    "MaxAbs",
    "MaxRel",
    "NanInf",
    "NotLoadedError",
    "ParamABI",
    "Predicate",
    "Preprocessed",
    "RelL2",
    "Report",
    "RuntimeFunction",
    "RuntimeModule",
    "RuntimeResource",
    "SafetensorsResource",
    "TwinDefinitionError",
    "Ulp",
    "bound_weights",
    "check",
    "entry_abi_of",
    "param_abi_of",
    "runtime_func",
    "runtime_module",
]
