"""``tilefoundry check``'s run: build both sides, draw or read the inputs, judge every output (the command's
options and help are :mod:`.check_cmd`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..ir.core.module import Module
from ..runtime.check import (
    CheckError,
    OutputCheck,
    Predicate,
    Report,
    ResultMismatchError,
    check,
    nan_inf,
    parse_predicate,
)
from ..runtime.check.check import wildcard_predicates
from ..runtime.check.flatten import clone_leaves, flatten
from ..runtime.check.report import render_table
from ..runtime.module import RuntimeModule
from .check_data import (
    choose_dims,
    int_plan,
    parse_dims,
    parse_int_range,
    random_inputs,
    random_weights,
    read_inputs,
    step_params,
    tree_dimvars,
)
from .check_family import family_check
from .check_target import Selection, UserCodeError, exception_text, resolve, twin_child
from .refusal import Refusal


def run_check(args: argparse.Namespace) -> int:
    """Run the check; 0 pass, 1 fail (a predicate, or the code under check), 2 refused (raises Refusal)."""
    try:
        outcome = _check(args)
    except UserCodeError as failure:  # the model file or the twin's construction failed: nothing to judge
        outcome = _Outcome(None, [_Raised(failure.label, failure.side, failure.error, failure.kind)],
                           _bare_setup(args))
    except (KeyboardInterrupt, Refusal, Exception):
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit & co from code under check that escaped
        outcome = _Outcome(None, [_Raised(_target_text(args), "code under check", exception_text(error),
                                          type(error).__name__)], _bare_setup(args))
    if args.json:
        print(json.dumps({**outcome.setup, **outcome.to_dict()}, indent=2, allow_nan=False))
    else:
        print(outcome.header())
        print(outcome.table())
    return 0 if outcome.passed else 1


# -- the run ---------------------------------------------------------------------------------------------------


@dataclass
class _Item:
    """One checked callable: its label, both sides, and its inputs."""

    label: str
    candidate: Callable[..., Any]
    reference: Callable[..., Any] | None
    inputs: tuple[Any, ...]


@dataclass(frozen=True)
class _Raised:
    """A checked callable (or the import / build before it) whose code failed: it raised, or returned a result
    that is not the reference's kind. Either way a FAIL row of that callable."""

    label: str
    side: str
    error: str  # one line
    kind: str | None = None  # the exception's type name; None when the side returned a wrong result

    def row(self) -> tuple[tuple[str, ...], list[str]]:
        """The table row and its note."""
        measured = f"raised {self.kind}" if self.kind else "wrong result"
        what = f"raised {self.error}" if self.kind else f"returned a wrong result: {self.error}"
        note = f"note: the {self.side} {what}; the code under check failed, so there is no output to judge"
        return (self.label, "-", "-", "-", "-", "-", measured, "FAIL"), [note]

    def to_dict(self) -> dict[str, str | None]:
        """The JSON form."""
        return {"label": self.label, "side": self.side, "exception": self.kind, "error": self.error}


@dataclass
class _Outcome:
    """What the command prints: the report of the outputs judged, and the callables that raised."""

    report: Report | None
    raised: list[_Raised]
    setup: dict[str, Any]

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed and not self.raised

    def summary(self) -> str:
        if not self.raised:
            assert self.report is not None
            return self.report.summary()
        n = len(self.raised)
        text = (f"FAIL: {n} checked callable{'s' if n != 1 else ''} raised "
                f"({', '.join(r.label for r in self.raised)})")
        if self.report is not None:
            failed = self.report.failed
            total = len(self.report.outputs)
            text += (f"; {len(failed)} of {total} outputs judged failed ({', '.join(o.path for o in failed)})"
                     if failed else f"; all {total} outputs judged meet their predicates")
        return text

    def table(self) -> str:
        rows = self.report.rows() if self.report is not None else []
        rows += [r.row() for r in self.raised]
        return render_table(rows, self.summary())

    def to_dict(self) -> dict[str, Any]:
        outputs = self.report.to_dict()["outputs"] if self.report is not None else []
        return {"passed": self.passed, "outputs": outputs, "raised": [r.to_dict() for r in self.raised]}

    def header(self) -> str:
        s = self.setup
        dims = ", ".join(f"{k}={v}" for k, v in s["dims"].items()) or "none"
        lines = [
            f"tilefoundry check {s['target']}",
            f"  candidate: {s['candidate']}",
            f"  reference: {s['reference'] or 'none (judged alone)'}",
            f"  weights:   {s['weights']}",
            f"  inputs:    {s['inputs']}",
            f"  dims:      {dims}{s['dims_note']}",
        ]
        if s.get("predicates"):
            lines.append(f"  predicates: {s['predicates']}")
        return "\n".join([*lines, ""])


def _target_text(args: argparse.Namespace) -> str:
    """The target as the report names it: FILE.py:Name..., or ``--ckpt DIR`` for a family check."""
    return args.target if args.target is not None else f"--ckpt {args.ckpt}"


def _bare_setup(args: argparse.Namespace) -> dict[str, Any]:
    """The setup when nothing could be set up (the file or the twin failed first)."""
    return {"target": _target_text(args), "candidate": "-", "reference": "-", "weights": "-", "inputs": "-",
            "dims": {}, "dims_note": "", "seed": args.seed}


@dataclass
class _Expectations:
    """The --expect options: by (label, path), by path, and the '*' wildcard; which ones were used.

    ``default`` (a family check's) gives the predicates of an output none of them covers, by its callable's
    label and its dtype.
    """

    qualified: dict[tuple[str, str], list[Predicate]] = field(default_factory=dict)
    plain: dict[str, list[Predicate]] = field(default_factory=dict)
    wildcard: list[Predicate] = field(default_factory=list)
    used: set[Any] = field(default_factory=set)
    default: Callable[[str, torch.dtype], list[Predicate]] | None = None

    @property
    def empty(self) -> bool:
        return not (self.qualified or self.plain or self.wildcard)

    def predicates(self) -> list[Predicate]:
        """Every predicate stated, wherever it applies."""
        preds = [p for ps in self.qualified.values() for p in ps] + [p for ps in self.plain.values() for p in ps]
        return preds + self.wildcard

    def for_outputs(self, label: str, leaves: Sequence[tuple[str, torch.Tensor]]) -> dict[str, list[Predicate]]:
        expect: dict[str, list[Predicate]] = {}
        produced = ", ".join(path for path, _ in leaves)
        for path, tensor in leaves:
            if (label, path) in self.qualified:
                expect[path] = self.qualified[(label, path)]
                self.used.add((label, path))
            elif path in self.plain:
                expect[path] = self.plain[path]
                self.used.add(path)
            elif self.wildcard:
                expect[path] = wildcard_predicates(self.wildcard, tensor.dtype)
            elif self.default is not None:
                expect[path] = self.default(label, tensor.dtype)
            else:
                names = {p for p, _ in leaves}
                unmatched = sorted(p for p in self.plain if p not in names)
                also = (f"; --expect named {', '.join(unmatched)}, which {label} does not produce" if unmatched
                        else "")
                which = "its one output, 'output'," if path == "output" else f"its output {path}"
                raise Refusal(
                    f"{label}: {which} has no predicate; add --expect '{path}=PRED' (or --expect '*=PRED' for every "
                    f"output not named); produced: {produced}{also}"
                )
        return expect


def _parse_expect(items: Sequence[str]) -> _Expectations:
    spec = _Expectations()
    for item in items:
        path, eq, text = item.partition("=")
        path = path.strip()
        if not eq or not path or not text.strip():
            raise Refusal(f"--expect {item!r} is not PATH=PRED, e.g. --expect 'output=rel_l2:max=1e-3'")
        try:
            predicate = parse_predicate(text)
        except ValueError as error:
            raise Refusal(f"--expect {item!r}: {error}") from None
        if path == "*":
            spec.wildcard.append(predicate)
        elif ":" in path:
            label, _, out = path.rpartition(":")
            spec.qualified.setdefault((label, out), []).append(predicate)
        else:
            spec.plain.setdefault(path, []).append(predicate)
    return spec


def _check(args: argparse.Namespace) -> _Outcome:
    expectations = _parse_expect(args.expect)
    if args.target is None:
        return _check_family(args, expectations)
    given_dims = parse_dims(args.dim)
    int_range = parse_int_range(args.int_range)
    if (args.alias or args.no_alias) and not args.ckpt:
        raise Refusal("--alias / --no-alias apply to --ckpt weights; without --ckpt the weights are random")
    sel = resolve(args.target)
    node = sel.node
    has_reference = sel.twin is not None
    if not has_reference:
        needing = [p for p in expectations.predicates() if p.needs_reference]
        if needing:
            kind = "a Module" if isinstance(sel.root, Module) else "a Function"
            raise Refusal(
                f"{sel.text} selects {kind} alone: there is no twin to compare, so {needing[0].name} (which compares "
                "two sides) cannot apply; use nan_inf, or select a @runtime_module class to compare it with the "
                "evaluator"
            )
        if expectations.empty:
            expectations.wildcard.append(nan_inf())
    elif expectations.empty:
        raise Refusal(
            "state the predicates: --expect PATH=PRED for each output, or --expect '*=PRED' for all of them "
            "(e.g. --expect '*=rel_l2:max=1e-3')"
        )
    params = step_params(node, sel.member, sel.member_kind)
    dims = choose_dims(tree_dimvars(node, [p.type for p in params if p.type is not None]), given_dims)
    resource, weights_text = _resource(args, sel, dims, int_range)
    loaded = _load(sel, node, resource, args)
    twin_node = sel.twin_node
    if twin_node is not None:
        _load_twin(twin_node, resource, args)
    dims_note = ""
    if args.inputs:
        inputs = read_inputs(args.inputs, params, args.device)
        inputs_text = args.inputs
        if dims:
            dims_note = " (random tensors only; the inputs come from the file)"
    else:
        inputs = random_inputs(sel.label, params, dims, args.seed, int_range, args.device)
        drawn = int_plan(params, dims).describe()
        inputs_text = f"random, seed {args.seed}" + (f"; integers for what they feed: {'; '.join(drawn)}" if drawn
                                                      else "")
    items = [_selected_item(sel, loaded, twin_node, inputs)]
    if args.per_node and sel.member_kind != "function":
        items += _node_items(sel, loaded, twin_node, dims, args.seed, int_range, args.device)
    report, raised = _judge(items, expectations, prefixed=args.per_node)
    setup = {
        "target": sel.text,
        "candidate": _candidate_text(sel, twin_node),
        "reference": f"evaluator on Module {node.name} (LoadedModule)" if has_reference else None,
        "weights": weights_text,
        "inputs": inputs_text,
        "dims": dims,
        "dims_note": dims_note,
        "seed": args.seed,
    }
    return _Outcome(report, raised, setup)


def _check_family(args: argparse.Namespace, expectations: _Expectations) -> _Outcome:
    """``check --ckpt DIR`` without a target: the family's twin against its Module (see check_family)."""
    if not args.ckpt:
        raise Refusal("a target is required: FILE.py:Name[.child...][.member] (see tilefoundry check --help), or "
                      "--ckpt DIR alone, a checkpoint of a supported family, to check its runtime twin against its "
                      "Module")
    family = family_check(args.ckpt, args)
    if not expectations.wildcard:
        expectations.default = family.default_predicates
    items = [_Item(i.label, i.candidate, _Replay(i.reference_result), i.inputs) for i in family.items]
    report, raised = _judge(items, expectations, prefixed=True)
    setup = dict(family.setup)
    setup["predicates"] = family.describe_defaults() or "as --expect states"
    return _Outcome(report, raised, setup)


def _candidate_text(sel: Selection, twin_node: RuntimeModule | None) -> str:
    if twin_node is None:
        return f"evaluator on Module {sel.node.name} (no twin)"
    return f"{type(twin_node).__name__} (runtime twin of {sel.node.name})"


def _resource(args: argparse.Namespace, sel: Selection, dims: Mapping[str, int],
              int_range: tuple[int, int]) -> tuple[Any, str]:
    if not args.ckpt:
        return random_weights(sel.node, dims, args.seed, int_range, args.device), f"random, seed {args.seed}"
    from ..models.hub import model_id_folder
    from ..runtime.resource import SafetensorsResource

    alias, alias_text = _alias_table(args, sel)
    try:
        folder = model_id_folder(args.ckpt) or args.ckpt  # a model id: its snapshot in the local hub cache
        resource: Any = SafetensorsResource(folder, device=args.device, alias=alias)
        for name in sel.path:
            resource = resource.subtree(name)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise Refusal(f"--ckpt {args.ckpt}: {_reason(error)}") from None
    return resource, f"checkpoint {args.ckpt}, {alias_text}"


def _alias_table(args: argparse.Namespace, sel: Selection) -> tuple[Mapping[str, Any] | None, str]:
    if args.no_alias:
        return None, "no alias table (--no-alias)"
    if args.alias:
        if args.alias not in sel.namespace:
            raise Refusal(f"--alias {args.alias}: the target's file defines no global {args.alias!r}")
        table, origin = sel.namespace[args.alias], f"global {args.alias}"
    else:
        table, origin = _root_alias(sel.root), f"{_display(sel.root)}.ALIAS"
        if table is None and "ALIAS" in sel.namespace:
            table, origin = sel.namespace["ALIAS"], "global ALIAS"
        if table is None:
            return None, "no alias table (the model defines no ALIAS)"
    if not isinstance(table, Mapping):
        raise Refusal(f"the alias table {origin} is a {type(table).__name__}; it must map canonical -> raw names")
    return table, f"alias table {origin} ({len(table)} entries)"


def _root_alias(root: Any) -> Any:
    """The ALIAS attribute of the selected root: a class attribute of a twin class, or set on a Module."""
    if isinstance(root, RuntimeModule):
        root = type(root)
    if isinstance(root, type):
        return getattr(root, "ALIAS", None)
    if isinstance(root, Module):
        return root.__dict__.get("ALIAS")
    return None


def _display(root: Any) -> str:
    if isinstance(root, type):
        return root.__name__
    if isinstance(root, RuntimeModule):
        return type(root).__name__
    return str(getattr(root, "name", "?"))


def _reason(error: BaseException) -> str:
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return f"{type(error).__name__}: {error}" if not isinstance(error, (ValueError, TypeError)) else str(error)


def _load(sel: Selection, node: Module, resource: Any, args: argparse.Namespace) -> Any:
    try:
        return node.load(resource)
    except (KeyError, ValueError, TypeError, OSError, RuntimeError) as error:
        raise Refusal(f"reading the weights of {node.name}: {_reason(error)}{_ckpt_hint(args)}") from None


def _load_twin(twin: RuntimeModule, resource: Any, args: argparse.Namespace) -> None:
    try:
        twin.load(resource)
    except (KeyError, ValueError, TypeError, OSError, RuntimeError) as error:
        raise Refusal(f"loading the twin {type(twin).__name__}: {_reason(error)}{_ckpt_hint(args)}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit & co: the twin's own load code failed
        raise UserCodeError(f"{type(twin).__name__}.load", "twin", error) from None


def _ckpt_hint(args: argparse.Namespace) -> str:
    if not args.ckpt or args.no_alias:
        return ""
    return ("; if the folder is a raw checkpoint whose weights need converters, write the prepared folder first "
            "(Module.prepare) and check against it with --no-alias")


def _selected_item(sel: Selection, loaded: Any, twin_node: RuntimeModule | None, inputs: tuple[Any, ...]) -> _Item:
    if sel.member is None:
        return _item(sel.label, twin_node, loaded, inputs)
    twin_side = getattr(twin_node, sel.member) if twin_node is not None else None
    return _item(sel.label, twin_side, getattr(loaded, sel.member), inputs)


def _node_items(sel: Selection, loaded: Any, twin_node: RuntimeModule | None, dims: Mapping[str, int],
                seed: int, int_range: tuple[int, int], device: str) -> list[_Item]:
    """For --per-node: the step of every node under the selection and every kernel, parents first.

    A node whose step is only its entry function (no forward method, no forward of the twin's own) is checked
    once, as that kernel.
    """
    items = []
    for rel, mod in sel.node._walk():
        parts = tuple(rel.split(".")) if rel else ()
        reading = loaded
        twin = twin_node
        for name in parts:
            reading = reading._child_reading(name)
            if twin is not None:
                twin = twin_child(twin, name)
        if twin is not None and twin.module is None:
            raise Refusal(
                f"--per-node: twin node {twin._tree_path()} ({type(twin).__name__}) stands for no authored "
                "Module (its module is None), so it cannot be judged; check the nodes around it one by one"
            )
        own_forward = twin is not None and bool(getattr(type(twin), "_tf_own_forward", False))
        if parts and ("forward" in mod.methods or (own_forward and mod.entry is not None)):
            label = ".".join((*sel.path, *parts, "forward"))
            inputs = random_inputs(label, step_params(mod, None, None), dims, seed, int_range, device)
            items.append(_item(label, twin, reading, inputs))
        for fn_name in mod.functions:
            label = ".".join((*sel.path, *parts, fn_name))
            if label == sel.label:
                continue
            inputs = random_inputs(label, step_params(mod, fn_name, "function"), dims, seed, int_range, device)
            items.append(_item(label, None if twin is None else getattr(twin, fn_name), getattr(reading, fn_name),
                               inputs))
    return items


def _item(label: str, twin_side: Callable[..., Any] | None, evaluator: Callable[..., Any],
          inputs: tuple[Any, ...]) -> _Item:
    if twin_side is None:
        return _Item(label, evaluator, None, inputs)
    return _Item(label, twin_side, evaluator, inputs)


class _Replay:
    """Gives back the result one side produced when it ran (once, on its own clone of the inputs).

    Each side runs before ``check`` so that the --expect paths can be resolved against the outputs it
    produced; ``check`` then judges those very results.
    """

    def __init__(self, result: Any) -> None:
        self.result = result

    def __call__(self, *inputs: Any) -> Any:
        return self.result


class _SideRaised(Exception):
    """One side of an item raised (or returned no tensors): the item fails; carries the row to print."""

    def __init__(self, raised: _Raised) -> None:
        super().__init__(raised.error)
        self.raised = raised


def _run_side(item: _Item, side: str, fn: Callable[..., Any]) -> tuple[Any, list[tuple[str, torch.Tensor]]]:
    """Run one side on its own clone of the inputs; anything it raises (SystemExit too) is its failure."""
    try:
        with torch.no_grad():
            result = fn(*clone_leaves(item.inputs))
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - the code under check failed: that item's FAIL row
        raise _SideRaised(_Raised(item.label, side, exception_text(error), type(error).__name__)) from None
    try:
        leaves = flatten(result, "output")
    except TypeError as error:
        raise _SideRaised(_Raised(item.label, side, f"its result is not tensors: {error}")) from None
    if not leaves:
        raise _SideRaised(_Raised(item.label, side, f"its result holds no tensor ({result!r})"))
    return result, leaves


def _judge(items: Sequence[_Item], expectations: _Expectations, *,
           prefixed: bool) -> tuple[Report | None, list[_Raised]]:
    """Run every item's sides once, resolve its predicates against what it produced, and check it.

    An item whose code raised (either side) or whose result differs from the reference's in structure,
    shape or dtype is a failure row; the other items are still judged.
    """
    outputs: list[OutputCheck] = []
    raised: list[_Raised] = []
    produced: list[str] = []
    for item in items:
        try:
            candidate, leaves = _run_side(item, "twin" if item.reference is not None else "evaluator",
                                          item.candidate)
            reference = None
            if item.reference is not None:
                reference, _ = _run_side(item, "evaluator", item.reference)
        except _SideRaised as failure:
            raised.append(failure.raised)
            continue
        expect = expectations.for_outputs(item.label, leaves)
        produced += [f"{item.label}:{path}" for path, _ in leaves]
        try:
            report = check(_Replay(candidate), None if item.reference is None else _Replay(reference), item.inputs,
                           expect=expect)
        except ResultMismatchError as error:
            raised.append(_Raised(item.label, "twin", " ".join(str(error).split())))
            continue
        except (CheckError, TypeError) as error:
            raise Refusal(f"{item.label}: {error}") from None
        for out in report.outputs:
            path = f"{item.label}:{out.path}" if prefixed else out.path
            outputs.append(OutputCheck(path, out.shape, out.dtype, out.ref_norm, out.results))
    failed_labels = {r.label for r in raised}
    unused = [f"{label}:{path}" for label, path in expectations.qualified
              if (label, path) not in expectations.used and label not in failed_labels]
    if not raised:  # a failed item may be the one that would have produced a plain path
        unused += [path for path in expectations.plain if path not in expectations.used]
    if unused:
        raise Refusal(f"--expect names {', '.join(unused)}, which no checked callable produced; produced: "
                      f"{', '.join(produced)}")
    return (Report(tuple(outputs)) if outputs else None), raised
