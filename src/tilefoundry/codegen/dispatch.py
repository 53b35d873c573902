"""The host entry of a dispatching function (tir/dispatch.py): it reads the DimVar the variants partition from its
argument (its rank checked, the extent inside the DimVar's whole range), then calls the entry of the variant serving
that extent over the arguments the variant takes, which checks every one of them as its own entry does."""

from __future__ import annotations

from ..tir.dispatch import Dispatch
from . import cxx
from .host import declared_of


class DispatchEmitter:
    """Emits one Dispatch's entry; ``entries`` names each variant's host entry function by PrimFunction name."""

    def __init__(self, dispatch: Dispatch, entries: dict[str, str]) -> None:
        self.dispatch = dispatch
        self.entries = entries
        self.names = cxx.Names(("check",))
        self.views = {p.name: self.names(("view", p.name), p.name) for p in dispatch.params}
        self.dim = self.names(("dim", dispatch.binding.dimvar.name), dispatch.binding.dimvar.name)

    @property
    def entry_name(self) -> str:
        """The C++ function of the entry."""
        return self.names(("entry", self.dispatch.name), f"{self.dispatch.name}_entry")

    def emit(self) -> list[str]:
        """The entry function's lines."""
        d = self.dispatch
        b = d.binding
        p = next(q for q in d.params if q.name == b.param)
        name, decl = cxx.string(p.name), cxx.string(declared_of(p))
        params = ", ".join(f"tvm::ffi::TensorView {self.views[q.name]}" for q in d.params)
        body = [f"host::ArgChecker check({cxx.string(d.name)});",
                f"// the variant serving {b.dimvar.name} ({p.name}.shape[{b.axis}]) runs, checking every argument",
                f"check.rank({self.views[p.name]}, {name}, {p.type.rank}, {decl});",
                f"int64_t const {self.dim} = check.bind({self.views[p.name]}, {name}, {b.axis}, "
                f"{cxx.string(b.dimvar.name)}, {b.dimvar.lo}, {b.dimvar.hi}, {decl});"]
        for k, case in enumerate(d.cases):
            call = f"{self.entries[case.function]}({', '.join(self.views[a] for a in case.args)});"
            if k == len(d.cases) - 1:  # the cases partition the range the bind checked
                opening = "{" if k == 0 else "} else {"
                body += [f"{opening}  // {case.lo} <= {b.dimvar.name} < {case.hi}", f"  {call}", "}"]
            else:
                opening = "if" if k == 0 else "} else if"
                body += [f"{opening} ({self.dim} < {case.hi}) {{  // {case.lo} <= {b.dimvar.name} < {case.hi}",
                         f"  {call}"]
        return [f"void {self.entry_name}({params}) {{", *("  " + line for line in body), "}"]
