"""The CPU target's code generator: CTAs run as an OpenMP loop (``cpu::launch``), one thread per CTA."""

from .emit import emit_cpu

__all__ = ["emit_cpu"]
