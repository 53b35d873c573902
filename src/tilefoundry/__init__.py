"""TileFoundry: author a network once, run it on a reference evaluator and on fast runtime twins, and
compile its kernels to C++ on the runtime headers.

Public verbs: ``func`` and ``module`` author; ``lower`` (HIR to TIR), ``build`` (TIR or IR to a loaded
CompiledModule), ``compile`` (the whole pipeline) and ``jit`` (``compile`` with an in-process cache)
compile; ``CompilerOptions`` configures the build step.
"""

# The IR runs and prepares through slots that the layers above it fill when imported (ir.core.backends);
# importing those layers here gives every user of tilefoundry a filled slot.
from . import evaluator as _evaluator  # noqa: F401 - fills the evaluator slots
from .codegen.options import CompilerOptions
from .dsl.decorators import func, module
from .ir.types.dtype import DType
from .lower import lower
from .runtime import prepare as _prepare  # noqa: F401 - fills the prepare slot
from .runtime.jit import jit
from .runtime.pipeline import build, compile  # noqa: A004 - the public verb

__all__ = ["CompilerOptions", "DType", "build", "compile", "func", "jit", "lower", "module"]
