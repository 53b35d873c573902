"""TileFoundry: author a network once, run it on a reference evaluator and on fast runtime twins."""

from .dsl.decorators import func, module

__all__ = ["func", "module"]
