"""Symbolic dimensions: ``DimVar`` and the small arithmetic reshape / concat / slice need.

A dimension is an ``int`` or a ``DimExpr``. Every expression is kept in one canonical form, a sum of
monomials with integer coefficients (``3*a*b + a + 4``), so two spellings of one extent compare equal:
``(a * b) // b == a`` and ``a + a == 2 * a``. Floor division that does not divide exactly stays an
opaque atom. Results that fold to a constant come back as plain ``int`` and a lone variable comes back
as that ``DimVar``, so callers mostly see ints and DimVars.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from math import gcd
from typing import Union

Dim = Union[int, "DimExpr"]

# A monomial is a sorted tuple of atoms (with repetition for powers); the empty tuple is the constant.
_Monomial = tuple["DimAtom", ...]


class DimExpr:
    """A canonical sum of monomials over DimVars (and opaque floor divisions)."""

    __slots__ = ("_terms",)

    def __init__(self, terms: Mapping[_Monomial, int]) -> None:
        self._terms: dict[_Monomial, int] = {m: c for m, c in terms.items() if c != 0}

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def lift(value: Dim) -> DimExpr:
        """The canonical polynomial of an int, an atom or an expression."""
        if isinstance(value, bool):
            raise TypeError(f"a dimension must be an int or DimVar, not {value!r}")
        if isinstance(value, int):
            return DimExpr({(): value})
        if isinstance(value, DimAtom):
            return DimExpr({(value,): 1})
        if isinstance(value, DimExpr):
            return value
        raise TypeError(f"a dimension must be an int or DimVar expression, not {type(value).__name__}")

    def simplify(self) -> Dim:
        """Collapse to ``int`` when constant and to the atom itself when a lone atom."""
        if not self._terms:
            return 0
        if len(self._terms) == 1:
            ((mono, coef),) = self._terms.items()
            if mono == ():
                return coef
            if coef == 1 and len(mono) == 1:
                return mono[0]
        return self

    # -- arithmetic ---------------------------------------------------------------------------
    def _add(self, other: DimExpr) -> DimExpr:
        terms = dict(self._terms)
        for m, c in other._terms.items():
            terms[m] = terms.get(m, 0) + c
        return DimExpr(terms)

    def _mul(self, other: DimExpr) -> DimExpr:
        terms: dict[_Monomial, int] = {}
        for m1, c1 in self._terms.items():
            for m2, c2 in other._terms.items():
                m = tuple(sorted(m1 + m2, key=_atom_key))
                terms[m] = terms.get(m, 0) + c1 * c2
        return DimExpr(terms)

    def _exact_div(self, other: DimExpr) -> DimExpr | None:
        """self / other when other is a single monomial dividing every term, else None."""
        if len(other._terms) != 1:
            return None
        ((dmono, dcoef),) = other._terms.items()
        if dcoef == 0:
            raise ZeroDivisionError("dimension divided by zero")
        out: dict[_Monomial, int] = {}
        for m, c in self._terms.items():
            rest = list(m)
            for atom in dmono:
                if atom not in rest:
                    return None
                rest.remove(atom)
            if c % dcoef:
                return None
            out[tuple(rest)] = c // dcoef
        return DimExpr(out)

    def __add__(self, other: Dim) -> Dim:
        return self._add(DimExpr.lift(other)).simplify()

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return DimExpr({m: -c for m, c in self._terms.items()}).simplify()

    def __sub__(self, other: Dim) -> Dim:
        return self._add(DimExpr.lift(other)._mul(DimExpr.lift(-1))).simplify()

    def __rsub__(self, other: Dim) -> Dim:
        return DimExpr.lift(other)._add(self._mul(DimExpr.lift(-1))).simplify()

    def __mul__(self, other: Dim) -> Dim:
        return self._mul(DimExpr.lift(other)).simplify()

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        return floordiv(self, other)

    def __rfloordiv__(self, other: Dim) -> Dim:
        return floordiv(other, self)

    # -- queries ------------------------------------------------------------------------------
    def atoms(self) -> set[DimAtom]:
        """Every atom the expression mentions."""
        return {a for m in self._terms for a in m}

    def dimvars(self) -> set[DimVar]:
        """Every DimVar the expression mentions, also inside opaque divisions."""
        out: set[DimVar] = set()
        for a in self.atoms():
            out |= a.dimvars()
        return out

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        """The integer value under ``{dimvar name: extent}``; KeyError names an unbound DimVar."""
        total = 0
        for m, c in self._terms.items():
            prod = c
            for atom in m:
                prod *= atom.evaluate(bindings)
            total += prod
        return total

    def _key(self) -> tuple:
        return tuple(sorted(((tuple(_atom_key(a) for a in m), c) for m, c in self._terms.items())))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, DimExpr, DimAtom)) and not isinstance(other, bool):
            return self._key() == DimExpr.lift(other)._key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        parts = []
        for m, c in sorted(self._terms.items(), key=lambda mc: (-len(mc[0]), str(mc[0]))):
            body = "*".join(str(a) for a in m)
            if not body:
                parts.append(str(c))
            elif c == 1:
                parts.append(body)
            elif c == -1:
                parts.append(f"-{body}")
            else:
                parts.append(f"{c}*{body}")
        return " + ".join(parts).replace("+ -", "- ") or "0"

    __repr__ = __str__


class DimAtom(DimExpr):
    """An indivisible symbolic extent: a DimVar, or a floor division that did not simplify."""

    __slots__ = ()

    def evaluate(self, bindings: Mapping[str, int]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def dimvars(self) -> set[DimVar]:  # pragma: no cover - abstract
        raise NotImplementedError

    def atoms(self) -> set[DimAtom]:
        return {self}

    def _atom_identity(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DimAtom):
            return self._atom_identity() == other._atom_identity()
        if isinstance(other, (int, DimExpr)) and not isinstance(other, bool):
            return DimExpr.lift(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._atom_identity())


class DimVar(DimAtom):
    """A named dimension bound at run time, within the half-open range ``[lo, hi)``.

    Two DimVars are equal when their names and ranges are equal.
    """

    __slots__ = ("name", "lo", "hi")

    def __init__(self, name: str, lo: int = 1, hi: int = 2**31) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"DimVar name must be an identifier, got {name!r}")
        if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 0 or hi <= lo:
            raise ValueError(f"DimVar {name!r}: range [lo={lo}, hi={hi}) must satisfy 0 <= lo < hi")
        super().__init__({})
        self.name = name
        self.lo = lo
        self.hi = hi
        self._terms = {(self,): 1}

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        if self.name not in bindings:
            raise KeyError(f"DimVar {self.name!r} is not bound")
        return bindings[self.name]

    def dimvars(self) -> set[DimVar]:
        return {self}

    def contains(self, extent: int) -> bool:
        """True when ``extent`` lies in ``[lo, hi)``."""
        return self.lo <= extent < self.hi

    def _atom_identity(self) -> tuple:
        return ("var", self.name, self.lo, self.hi)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DimVar({self.name!r}, {self.lo}, {self.hi})"


class FloorDiv(DimAtom):
    """``num // den`` kept symbolic because it does not divide exactly."""

    __slots__ = ("num", "den")

    def __init__(self, num: DimExpr, den: DimExpr) -> None:
        super().__init__({})
        self.num = num
        self.den = den
        self._terms = {(self,): 1}

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        return self.num.evaluate(bindings) // self.den.evaluate(bindings)

    def dimvars(self) -> set[DimVar]:
        return self.num.dimvars() | self.den.dimvars()

    def _atom_identity(self) -> tuple:
        return ("floordiv", self.num._key(), self.den._key())

    def __str__(self) -> str:
        return f"({self.num})//({self.den})"

    __repr__ = __str__


def _atom_key(atom: DimAtom) -> tuple:
    return atom._atom_identity()


def floordiv(num: Dim, den: Dim) -> Dim:
    """``num // den``: exact when den divides every term (or both are constant), else opaque."""
    n, d = DimExpr.lift(num), DimExpr.lift(den)
    ns, ds = n.simplify(), d.simplify()
    if isinstance(ns, int) and isinstance(ds, int):
        return ns // ds
    exact = n._exact_div(d)
    if exact is not None:
        return exact.simplify()
    if isinstance(ds, int):
        # Divide out the common integer factor, so (4*a + 2) // 2 == 2*a + 1 stays exact.
        g = 0
        for c in n._terms.values():
            g = gcd(g, c)
        if g and g % ds == 0:
            return DimExpr({m: c // ds for m, c in n._terms.items()}).simplify()
    return FloorDiv(n, d)


def product(dims: Iterable[Dim]) -> Dim:
    """The symbolic product of dims (1 for none)."""
    out: DimExpr = DimExpr.lift(1)
    for d in dims:
        out = out._mul(DimExpr.lift(d))
    return out.simplify()


def total(dims: Iterable[Dim]) -> Dim:
    """The symbolic sum of dims (0 for none)."""
    out: DimExpr = DimExpr.lift(0)
    for d in dims:
        out = out._add(DimExpr.lift(d))
    return out.simplify()


def dims_equal(a: Dim, b: Dim) -> bool:
    """True when two dims are the same extent in canonical form."""
    return DimExpr.lift(a) == DimExpr.lift(b)


def is_static(d: Dim) -> bool:
    """True for a plain int extent."""
    return isinstance(d, int) and not isinstance(d, bool)


def evaluate_dim(d: Dim, bindings: Mapping[str, int]) -> int:
    """The integer extent of ``d`` under DimVar bindings."""
    return d if isinstance(d, int) else d.evaluate(bindings)


def dimvars_of(dims: Iterable[Dim]) -> set[DimVar]:
    """Every DimVar mentioned by a shape."""
    out: set[DimVar] = set()
    for d in dims:
        if not isinstance(d, int):
            out |= d.dimvars()
    return out


def check_dim(d: object, what: str) -> Dim:
    """Validate one annotation / attribute dimension, returning it in canonical form."""
    if isinstance(d, bool) or not isinstance(d, (int, DimExpr)):
        raise TypeError(f"{what}: a dimension must be an int or DimVar, got {d!r}")
    if isinstance(d, int) and d < 0:
        raise ValueError(f"{what}: a dimension must be >= 0, got {d}")
    return DimExpr.lift(d).simplify()


def substitute(d: Dim, mapping: Mapping[DimVar, Dim]) -> Dim:
    """``d`` with each DimVar in ``mapping`` replaced by its dim (symbolically)."""
    if isinstance(d, int):
        return d
    out: DimExpr = DimExpr.lift(0)
    for mono, coef in DimExpr.lift(d)._terms.items():
        term: DimExpr = DimExpr.lift(coef)
        for atom in mono:
            if isinstance(atom, DimVar):
                repl = mapping.get(atom, atom)
            elif isinstance(atom, FloorDiv):
                repl = floordiv(substitute(atom.num, mapping), substitute(atom.den, mapping))
            else:  # pragma: no cover - no other atom kinds exist
                repl = atom
            term = term._mul(DimExpr.lift(repl))
        out = out._add(term)
    return out.simplify()


def dim_range(d: Dim) -> tuple[int, int] | None:
    """Bounds ``(least, greatest)`` every value of ``d`` lies within, from its DimVars' ranges; None when unknown.

    Interval arithmetic over the canonical form (every atom is non-negative), so the bounds are sound but
    may be loose for expressions mentioning one DimVar in several monomials.
    """
    if isinstance(d, int):
        return d, d
    lo_total, hi_total = 0, 0
    for mono, coef in DimExpr.lift(d)._terms.items():
        lo, hi = 1, 1
        for atom in mono:
            r = _atom_range(atom)
            if r is None:
                return None
            lo, hi = lo * r[0], hi * r[1]
        if coef >= 0:
            lo_total, hi_total = lo_total + coef * lo, hi_total + coef * hi
        else:
            lo_total, hi_total = lo_total + coef * hi, hi_total + coef * lo
    return lo_total, hi_total


def _atom_range(atom: DimAtom) -> tuple[int, int] | None:
    if isinstance(atom, DimVar):
        return atom.lo, atom.hi - 1
    if isinstance(atom, FloorDiv):
        num, den = dim_range(atom.num.simplify()), dim_range(atom.den.simplify())
        if num is None or den is None or num[0] < 0 or den[0] < 1:
            return None
        return num[0] // den[1], num[1] // den[0]
    return None  # pragma: no cover - no other atom kinds exist


def provably_nonnegative(d: Dim) -> bool:
    """True when ``d >= 0`` for every binding of its DimVars within their ranges."""
    r = dim_range(d)
    return r is not None and r[0] >= 0
