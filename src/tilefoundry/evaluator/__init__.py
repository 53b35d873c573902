"""The reference evaluator: runs HIR on torch, one handler per op.

Importing it fills the IR's evaluator slots (:mod:`tilefoundry.ir.core.backends`), which is how
``Function.__call__`` and a LoadedModule's runners reach it without the IR importing it.
"""

from ..ir.core import backends as _backends
from . import handlers  # noqa: F401 - registers every op's handler
from .context import EvalContext
from .run import EvaluationError, agree_device, evaluate, run_function, run_reading
from .value import to_torch_dtype

_backends.provide_evaluator(evaluate, run_reading)

__all__ = ["EvalContext", "EvaluationError", "agree_device", "evaluate", "run_function", "run_reading",
           "to_torch_dtype"]
