"""TileFoundry: author a network once, run it on a reference evaluator and on fast runtime twins."""

# The IR runs and prepares through slots that the layers above it fill when imported (ir.core.backends);
# importing those layers here gives every user of tilefoundry a filled slot.
from . import evaluator as _evaluator  # noqa: F401 - fills the evaluator slots
from .dsl.decorators import func, module
from .ir.types.dtype import DType
from .runtime import prepare as _prepare  # noqa: F401 - fills the prepare slot

__all__ = ["DType", "func", "module"]
