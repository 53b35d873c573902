"""Dispatch variants: a base ``@func`` whose body is ``pass`` runs one of several specialised bodies, chosen by
the runtime extent of one DimVar.

::

    @func
    def attend(x: Tensor[(seq, HID), "bf16"], w: ConstTensor[(HID, HID), "bf16"]):
        pass

    @attend.specialize(DimVarRangePat(seq, 1, 2))
    def decode(x, w):            # seq == 1 here; parameters without annotations take the base's
        ...

    @attend.specialize(DimVarRangePat(seq, 2, MAX))
    def prefill(x, w):
        ...

The patterns' half-open ranges must partition the DimVar's own range: an overlap is refused when the variant
is declared, a gap when the Module is (or, for a bare function, when it is first used). Inside a variant the
DimVar is narrowed to the variant's range, so shape reasoning (slicing, reshapes) may rely on it. A variant
takes the base's activations (same names, same order, same types); its weights are its own, so a reading
needs only the selected variant's weights when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..types.dim import DimVar
from .errors import ModuleDefinitionError

if TYPE_CHECKING:
    from .function import Function

__all__ = ["DimVarRangePat", "check_overlap", "check_partition", "select_variant"]


@dataclass(frozen=True)
class DimVarRangePat:
    """The half-open range ``[lo, hi)`` of one DimVar's extent a variant serves (``hi=None``: the DimVar's end).

    The DimVar may be given by its name (``DimVarRangePat("n_resource", 1, 5)``, as model sources written for the
    reference implementation do): ``specialize`` resolves it to the function's DimVar of that name, and checks the
    range against it then.
    """

    dim_var: DimVar | str
    lo: int
    hi: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.dim_var, str):
            if not self.dim_var:
                raise ValueError("DimVarRangePat takes a DimVar or a DimVar's name first, got an empty name")
            for bound in (self.lo, self.hi):
                if isinstance(bound, bool) or not isinstance(bound, int):
                    raise TypeError(f"DimVarRangePat({self.dim_var!r}, ...): bounds must be ints (hi too, where the "
                                    f"DimVar is given by name), got {bound!r}")
            if not self.lo < self.hi:  # type: ignore[operator]
                raise ValueError(f"DimVarRangePat({self.dim_var!r}, {self.lo}, {self.hi}) is empty: lo must be < hi")
            return
        if not isinstance(self.dim_var, DimVar):
            raise TypeError(f"DimVarRangePat takes a DimVar or a DimVar's name first, got {self.dim_var!r}")
        if self.hi is None:
            object.__setattr__(self, "hi", self.dim_var.hi)
        for bound in (self.lo, self.hi):
            if isinstance(bound, bool) or not isinstance(bound, int):
                raise TypeError(f"DimVarRangePat({self.dim_var.name}, ...): bounds must be ints, got {bound!r}")
        if not self.lo < self.hi:  # type: ignore[operator]
            raise ValueError(f"DimVarRangePat({self.dim_var.name}, {self.lo}, {self.hi}) is empty: lo must be < hi")
        if self.lo < self.dim_var.lo or self.hi > self.dim_var.hi:  # type: ignore[operator]
            raise ValueError(
                f"DimVarRangePat({self.dim_var.name}, {self.lo}, {self.hi}) reaches outside {self.dim_var.name}'s "
                f"range [{self.dim_var.lo}, {self.dim_var.hi})"
            )

    @property
    def name(self) -> str:
        """The DimVar's name."""
        return self.dim_var if isinstance(self.dim_var, str) else self.dim_var.name

    def resolved(self, dimvars: list[DimVar]) -> DimVarRangePat | None:
        """This pattern over the DimVar of its name among ``dimvars`` (itself when it holds a DimVar already; None
        when no DimVar has its name)."""
        if isinstance(self.dim_var, DimVar):
            return self
        found = next((d for d in dimvars if d.name == self.dim_var), None)
        return None if found is None else DimVarRangePat(found, self.lo, self.hi)

    def contains(self, extent: int) -> bool:
        """True when ``lo <= extent < hi``."""
        return self.lo <= extent < self.hi  # type: ignore[operator]

    def narrowed(self) -> DimVar:
        """The DimVar as a variant sees it: same name, this range."""
        return DimVar(self.name, self.lo, self.hi)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.name} in [{self.lo}, {self.hi})"


def check_overlap(base: Function, pattern: DimVarRangePat, label: str) -> None:
    """Refuse a new variant whose DimVar differs from its siblings' or whose range overlaps one of theirs."""
    for other in base.variants:
        if other.pattern.dim_var != pattern.dim_var:
            raise ModuleDefinitionError(
                f"{base.name}.specialize: variant {label} dispatches on {pattern.dim_var!r} but {other.name} on "
                f"{other.pattern.dim_var!r}; the variants of one function partition one DimVar"
            )
        lo, hi = max(other.pattern.lo, pattern.lo), min(other.pattern.hi, pattern.hi)  # type: ignore[type-var]
        if lo < hi:
            raise ModuleDefinitionError(
                f"{base.name}.specialize: variants {other.name} ({other.pattern}) and {label} ({pattern}) overlap on "
                f"[{lo}, {hi}) of {pattern.dim_var.name}; the variants must partition its range "
                f"[{pattern.dim_var.lo}, {pattern.dim_var.hi})"
            )


def check_partition(base: Function) -> None:
    """Refuse variants that leave part of the DimVar's range uncovered, naming the gap."""
    variants = sorted(base.variants, key=lambda v: v.pattern.lo)
    dv = variants[0].pattern.dim_var
    at = dv.lo
    for v in [*variants, None]:
        end = dv.hi if v is None else v.pattern.lo
        if at < end:
            covered = ", ".join(f"{w.name} {w.pattern}" for w in variants)
            raise ModuleDefinitionError(
                f"{base.name}: its variants leave [{at}, {end}) of {dv.name} uncovered ({covered}); the variants must "
                f"partition {dv.name}'s range [{dv.lo}, {dv.hi}): add a variant for the gap"
            )
        if v is not None:
            at = v.pattern.hi  # type: ignore[assignment]


def select_variant(base: Function, extent: int) -> Function:
    """The variant whose range holds ``extent`` (after checking the variants partition the range)."""
    check_partition(base)
    for v in base.variants:
        if v.pattern.contains(extent):
            return v
    dv = base.variants[0].pattern.dim_var
    raise ValueError(f"{base.name}: {dv.name} = {extent} is outside its range [{dv.lo}, {dv.hi}); no variant serves it")
