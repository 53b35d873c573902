"""TIR: the lowered program, one PrimFunction per kernel, ready for a target's code generator.

A PrimFunction has explicit outputs (trailing parameters), a :class:`Schedule` chosen by the placement
pass, and a body of statements: mesh scopes, buffers in gmem / smem / rmem with their CuTe layouts,
and calls of the runtime's ``tilefoundry::ops`` entries, each carrying the HIR op and source line it
came from. ``str()`` of any node prints it.
"""

from .buffer import Buffer, Literal, Operand
from .dispatch import Dispatch, DispatchCase
from .function import DimBinding, KernelParam, PrimFunc, Schedule, TirModule
from .layout import ShardAttr, TLayout
from .mesh import MeshAxis, TMesh
from .printer import print_function, print_module
from .stmt import AliasView, Alloc, GmemView, MeshScope, OpCall, Origin, RowLoop, RowOffset, Stmt, Sync, Tag

__all__ = [
    "AliasView", "Alloc", "Buffer", "DimBinding", "Dispatch", "DispatchCase", "GmemView", "KernelParam", "Literal",
    "MeshAxis", "MeshScope", "OpCall", "Operand", "Origin", "PrimFunc", "RowLoop", "RowOffset", "Schedule",
    "ShardAttr", "Stmt", "Sync", "TLayout", "TMesh", "Tag", "TirModule", "print_function", "print_module",
]
