"""Runtime layer: runtime twins, function bodies and their ABI, and the weight resources they load from."""

from .abi import EntryABI, ParamABI, entry_abi_of, param_abi_of
from .decorator import runtime_func, runtime_module
from .errors import NotLoadedError, TwinDefinitionError
from .function import RuntimeFunction
from .module import RuntimeModule

__all__ = [
    "EntryABI",
    "NotLoadedError",
    "ParamABI",
    "RuntimeFunction",
    "RuntimeModule",
    "TwinDefinitionError",
    "entry_abi_of",
    "param_abi_of",
    "runtime_func",
    "runtime_module",
]
