"""The reference evaluator: runs HIR on torch, one handler per op."""

from . import handlers  # noqa: F401 - registers every op's handler
from .context import EvalContext
from .run import EvaluationError, agree_device, evaluate, run_function

__all__ = ["EvalContext", "EvaluationError", "agree_device", "evaluate", "run_function"]
