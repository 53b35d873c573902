"""IR core: graphs, the op registry, tracing, Function and Module."""

from .dispatch import DimVarRangePat
from .errors import IRIndexError, IRTypeError, MissingWeightError, ModuleDefinitionError
from .function import Converter, Function, Param, Variant
from .graph import Graph, Node, Value
from .module import RESERVED_NAMES, Module

__all__ = ["RESERVED_NAMES", "Converter", "DimVarRangePat", "Function", "Graph", "IRIndexError", "IRTypeError",
           "MissingWeightError", "Module", "ModuleDefinitionError", "Node", "Param", "Value", "Variant"]
