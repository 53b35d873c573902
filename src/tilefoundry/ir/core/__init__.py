"""IR core: graphs, the op registry, tracing, Function and Module."""

from .errors import IRTypeError, ModuleDefinitionError
from .function import Converter, Function, Param
from .graph import Graph, Node, Value
from .module import Module

__all__ = ["Converter", "Function", "Graph", "IRTypeError", "Module", "ModuleDefinitionError", "Node", "Param",
           "Value"]
