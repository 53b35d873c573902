"""What IR objects run on, supplied by the layers above the IR (which the IR never imports).

The IR is the ground floor: it imports neither the evaluator nor any file format. Yet the spec spells
running and preparing as methods of IR objects (``Function.__call__``, a ``LoadedModule``'s runners,
``Module.prepare``, spec 1.1.2). Each of these is a slot here that the layer owning the work fills when
it is imported:

* ``evaluate`` / ``run_reading``: the reference evaluator (``tilefoundry.evaluator``);
* ``prepare``: weight preparation and the prepared-folder format (``tilefoundry.runtime.prepare``).

A slot found empty is filled on first use: the package root names the layers that fill them
(``tilefoundry.SLOT_PROVIDERS``), and they are imported then, so a user always finds the slots filled
whichever module they imported first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["evaluate", "prepare", "provide_evaluator", "provide_preparer", "run_reading"]

_evaluate: Callable[..., Any] | None = None
_run_reading: Callable[..., Any] | None = None
_prepare: Callable[..., None] | None = None


def provide_evaluator(evaluate_fn: Callable[..., Any], run_reading_fn: Callable[..., Any]) -> None:
    """Fill the evaluator's slots: ``evaluate(fn, *inputs)`` and ``run_reading(fn, args, device, reading)``."""
    global _evaluate, _run_reading
    _evaluate, _run_reading = evaluate_fn, run_reading_fn


def provide_preparer(prepare_fn: Callable[..., None]) -> None:
    """Fill the prepare slot: ``prepare(mod, raw, out_dir, *, device, allow_unused)``."""
    global _prepare
    _prepare = prepare_fn


def _fill() -> None:
    """Import the layers the package root names as the slots' providers (each fills its slots when imported)."""
    import importlib

    import tilefoundry

    for provider in getattr(tilefoundry, "SLOT_PROVIDERS", ()):
        importlib.import_module(provider)


def _missing(what: str, package: str) -> RuntimeError:
    return RuntimeError(f"{what} needs {package}, and the slot providers the package root names "
                        "(tilefoundry.SLOT_PROVIDERS) did not fill its slot")


def evaluate(fn: Any, *inputs: Any) -> Any:
    """Evaluate the Function ``fn`` on the reference evaluator, one input per declared parameter."""
    if _evaluate is None:
        _fill()
    if _evaluate is None:
        raise _missing("evaluating a Function", "tilefoundry.evaluator")
    return _evaluate(fn, *inputs)


def run_reading(fn: Any, args: list[Any], device: Any, reading: Any) -> Any:
    """Run the Function ``fn`` of a LoadedModule ``reading`` on ``device`` with every declared argument."""
    if _run_reading is None:
        _fill()
    if _run_reading is None:
        raise _missing("running a LoadedModule", "tilefoundry.evaluator")
    return _run_reading(fn, args, device, reading)


def prepare(mod: Any, raw: Any, out_dir: Any, **options: Any) -> None:
    """Prepare ``mod``'s weights from the resource ``raw`` into the folder ``out_dir``."""
    if _prepare is None:
        _fill()
    if _prepare is None:
        raise _missing("Module.prepare", "tilefoundry.runtime.prepare")
    _prepare(mod, raw, out_dir, **options)
