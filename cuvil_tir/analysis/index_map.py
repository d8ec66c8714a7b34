"""Quasi-affine index maps of a block, and the block-variable values that cover a region.

``compute_at`` must find, for a producer writing ``B[vi * 16 + vj, vk]``, which values
of ``vi, vj, vk`` produce the tile ``B[lo0:hi0, lo1:hi1]`` its consumers read.  Each
index is read as an offset plus *digits* of block variables: ``c * ((v % m) // d)``
(``v``, ``v // d``, ``v % m``, and their sums and multiples, as TensorIR's iter maps).
The digits of one index must form a mixed radix (each coefficient at least the previous
one times its digit's range), so an index value determines its digits; the digits of
one variable must tile it (``v // 4`` and ``v % 4``), so the digits determine the
variable.  Then every variable's values over a box of index values is an interval.

:func:`solve` returns, per block variable, ``Span(lo, hi, extent)``: the inclusive
interval (over the variables outside the block) and a constant loop extent when one is
known (the interval's length, or a constant bound of it).  A map that is not
quasi-affine, or whose digits do not determine a variable, raises :class:`NotInvertible`
with the reason; callers turn it into their primitive's error.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import IterVar, Range
    >>> vi, vj, io = T.var("vi"), T.var("vj"), T.var("io")
    >>> ivs = [IterVar(vi, Range.from_extent(4)), IterVar(vj, Range.from_extent(16))]
    >>> spans = solve(ivs, [[vi * 16 + vj]], [[(io * 8, io * 8 + 7)]],
    ...               {io: Range.from_extent(8)})
    >>> [(str(s.lo), str(s.hi), s.extent.value) for s in spans]
    [('io // 2', 'io // 2', 1), ('io % 2 * 8', 'io % 2 * 8 + 7', 8)]
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..arith import Analyzer, bound_of
from ..arith.affine import Affine, is_index_dtype, Key
from ..expr import Expr, FloorDiv, FloorMod, IntImm, Max, Min, Var
from ..visitor import used_vars
from ..node import same


class NotInvertible(Exception):
    """The index map cannot be solved for the block variables (the message says why).

    Example::

        >>> str(NotInvertible("vi * vj is not quasi-affine"))
        'vi * vj is not quasi-affine'
    """


@dataclass(frozen=True)
class Digit:
    """``coef * ((var % mod) // div)`` inside one index (``mod`` None: no modulo).

    Example::

        >>> import cuvil_tir as T
        >>> Digit(T.var("v"), 4, 1, 8).mod
        8
    """

    var: Var
    coef: int
    div: int
    mod: int | None


@dataclass(frozen=True)
class Span:
    """Inclusive ``[lo, hi]`` of one block variable; ``extent`` at least
    ``hi - lo + 1`` and free of the outer loop variables (None when no such bound is
    known); ``exact`` when ``extent`` is that length.

    Example::

        >>> import cuvil_tir as T
        >>> Span(T.const(0), T.const(3), T.const(4), True).extent.value
        4
    """

    lo: Expr
    hi: Expr
    extent: Expr | None
    exact: bool


def _digits(e: Expr, c: int, ids: dict, out: list, rest: Affine) -> None:
    """Add ``c * e`` to the digits ``out`` (terms without block variables to ``rest``)."""
    if not any(id(v) in ids for v in used_vars(e)):
        rest.coeffs[_key(e)] = rest.coeffs.get(_key(e), 0) + c
        return
    if isinstance(e, Var):
        out.append(Digit(e, c, 1, None))
        return
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        k = e.b.value
        aff = Affine.of(e.a)
        q, r = aff.split(k)
        inner: list = []
        loose = Affine(e.dtype)
        _collect(r, ids, inner, loose)
        if r.const != 0 or loose.coeffs or len(inner) != 1 or inner[0].coef != 1:
            raise NotInvertible(f"{e} is not a digit of one block variable (the "
                                "divided part must be one variable, or its div/mod)")
        d = inner[0]
        if isinstance(e, FloorDiv):
            _collect(q, ids, out, rest, c)
            rest.const += c * q.const
            out.append(Digit(d.var, c, d.div * k, d.mod))
            return
        m = d.div * k
        if d.mod is not None and d.mod % m:
            raise NotInvertible(f"{e}: the modulus {k} does not divide the digit's range")
        out.append(Digit(d.var, c, d.div, m))
        return
    raise NotInvertible(f"{e} is not quasi-affine in the block variables (only sums, "
                        "constant multiples, // and % by constants are)")


def _collect(aff: Affine, ids: dict, out: list, rest: Affine, c: int = 1) -> None:
    for atom, k in aff.terms:
        _digits(atom, c * k, ids, out, rest)


def _key(e):
    return Key(e)


def parse(index: Expr, iter_vars) -> tuple:
    """``(offset, digits)`` of ``index`` over the block variables ``iter_vars``.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import IterVar, Range
        >>> v = T.var("v")
        >>> off, ds = parse(v // 4 * 8 + v % 4 + 3, [IterVar(v, Range.from_extent(16))])
        >>> str(off), [(d.coef, d.div, d.mod) for d in ds]
        ('3', [(8, 4, None), (1, 1, 4)])
    """
    if not is_index_dtype(index.dtype):
        raise NotInvertible(f"index {index} is not an integer")
    ids = {id(iv.var): iv for iv in iter_vars}
    out: list = []
    rest = Affine(index.dtype, const=0)
    aff = Affine.of(index)
    rest.const = aff.const
    _collect(aff, ids, out, rest)
    return rest.to_expr(), out


class _Ctx:
    def __init__(self, iter_vars, outer: dict):
        self.ana = Analyzer(index_no_overflow=True)
        for v, r in outer.items():
            self.ana.bind(v, r)
        self.outer = outer
        self.doms = {id(iv.var): iv.dom for iv in iter_vars}

    def simp(self, e):
        return self.ana.simplify(e)

    def const(self, e):
        e = self.simp(e)
        return e.value if isinstance(e, IntImm) else None

    def digit_range(self, d: Digit) -> tuple:
        """Constant ``(lo, hi)`` of the digit's value (hi None: unknown)."""
        dom = self.doms[id(d.var)]
        vmin, ext = self.const(dom.min), self.const(dom.extent)
        if vmin is None or vmin < 0:
            if d.div == 1 and d.mod is None:
                return None, None
            raise NotInvertible(f"block variable {d.var.name} may be negative; its "
                                "div/mod digits are not defined")
        if d.mod is not None:
            if ext is not None and vmin + ext <= d.mod:
                return vmin // d.div, (vmin + ext - 1) // d.div
            return 0, (d.mod - 1) // d.div
        if ext is None:
            return vmin // d.div, None
        return vmin // d.div, (vmin + ext - 1) // d.div


def _same_block(ctx: _Ctx, lo: Expr, hi: Expr, m: int) -> bool:
    """Whether ``lo // m == hi // m`` provably (``hi - lo`` constant, and ``lo % m``
    small enough: the gcd of ``lo``'s coefficients with ``m`` bounds it)."""
    if ctx.const(FloorDiv(hi, IntImm(m, hi.dtype)) - FloorDiv(lo, IntImm(m, lo.dtype))) == 0:
        return True
    k = ctx.const(hi - lo)
    if k is None or k < 0:
        return False
    aff = Affine.of(ctx.simp(lo))
    g = m
    for _, c in aff.terms:
        g = gcd(g, c)
    top = m - g + aff.const % g      # the largest value lo % m can take
    return top + k < m


def _scaled(ctx: _Ctx, y: Expr, c: int) -> tuple:
    """``(y / g, c / g)`` for the largest ``g`` dividing ``c`` and all of ``y``'s
    coefficients: ``io * 8 // 16`` is ``io // 2``."""
    aff = Affine.of(ctx.simp(y))
    g = c
    for _, k in aff.terms:
        g = gcd(g, k)
    g = gcd(g, aff.const)
    if g <= 1:
        return y, c
    return Affine(aff.dtype, {k: v // g for k, v in aff.coeffs.items()},
                  aff.const // g).to_expr(), c // g


def _fdiv(ctx: _Ctx, y: Expr, c: int) -> Expr:
    y, c = _scaled(ctx, y, c)
    return ctx.simp(y if c == 1 else FloorDiv(y, IntImm(c, y.dtype)))


def _fmod(ctx: _Ctx, y: Expr, c: int) -> Expr:
    y2, c2 = _scaled(ctx, y, c)
    if c2 == 1:
        return IntImm(0, y.dtype)
    m = FloorMod(y2, IntImm(c2, y.dtype))
    return ctx.simp(m if c2 == c else m * IntImm(c // c2, y.dtype))


def _sign(digits: list) -> int:
    sign = 1 if digits[0].coef > 0 else -1
    if any((d.coef > 0) != (sign > 0) for d in digits):
        raise NotInvertible("the index mixes positive and negative coefficients of "
                            "block variables")
    return sign


def _radix(ctx: _Ctx, digits: list) -> list:
    """The digits' positions by increasing coefficient, checked to form a mixed radix
    (each coefficient at least the one below times that digit's range)."""
    order = sorted(range(len(digits)), key=lambda k: abs(digits[k].coef))
    for k, nxt in zip(order, order[1:]):
        _, rhi = ctx.digit_range(digits[k])
        if rhi is None or abs(digits[nxt].coef) < abs(digits[k].coef) * (rhi + 1):
            raise NotInvertible("the block variables' digits overlap in one index (a "
                                "coefficient is smaller than the range of the digit "
                                "below it times its coefficient): the index does not "
                                "determine them")
    return order


def _dim_digit_ranges(ctx: _Ctx, digits: list, offset: Expr, lo: Expr, hi: Expr) -> dict:
    """``{digit index: (lo, hi)}`` of the digits of one index whose value lies in
    ``[lo, hi]`` (expressions)."""
    if not digits:
        return {}
    sign = _sign(digits)
    ylo, yhi = ctx.simp(lo - offset), ctx.simp(hi - offset)
    if sign < 0:
        ylo, yhi = ctx.simp(offset - hi), ctx.simp(offset - lo)
    span = ctx.const(yhi - ylo)
    order = _radix(ctx, digits)
    out = {}
    for pos, k in enumerate(order):
        d = digits[k]
        c = abs(d.coef)
        rlo, rhi = ctx.digit_range(d)
        if pos + 1 == len(order):
            if span is not None and _same_block(ctx, ylo, yhi, c):
                first = _fdiv(ctx, ylo, c)
                out[k] = (first, first)
                continue
            first = ylo if pos or c == 1 else ylo + (c - 1)   # ceil when alone
            out[k] = (_fdiv(ctx, first, c), _fdiv(ctx, yhi, c))
            continue
        nxt = abs(digits[order[pos + 1]].coef)
        if span is not None and _same_block(ctx, ylo, yhi, nxt):
            r = _fmod(ctx, ylo, nxt)
            out[k] = (_fdiv(ctx, r, c), _fdiv(ctx, r + IntImm(span, r.dtype), c))
        else:
            out[k] = (IntImm(rlo, ylo.dtype), IntImm(rhi, ylo.dtype))
    return out


def solve(iter_vars, indices, boxes, outer: dict) -> list:
    """Per block variable of ``iter_vars``: the :class:`Span` of values whose accesses
    ``indices`` (one list of index expressions per access) fall in ``boxes`` (per
    access, per dimension an inclusive ``(lo, hi)`` over the variables of ``outer``,
    a ``{var: Range}``), or None for a variable no index determines.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import IterVar, Range
        >>> v, i = T.var("v"), T.var("i")
        >>> (s,) = solve([IterVar(v, Range.from_extent(10))], [[9 - v]], [[(i, i)]],
        ...              {i: Range.from_extent(10)})
        >>> str(s.lo), s.extent.value
        ('9 - i', 1)
    """
    ctx = _Ctx(iter_vars, outer)
    found: dict = {}           # var id -> {(div, mod): (lo, hi)}
    for idx, box in zip(indices, boxes):
        idx, box = _fuse_split_dims(ctx, list(idx), list(box))
        for e, (lo, hi) in zip(idx, box):
            offset, digits = parse(e, iter_vars)
            for k, rng in _dim_digit_ranges(ctx, digits, offset, lo, hi).items():
                d = digits[k]
                found.setdefault(id(d.var), {}).setdefault((d.div, d.mod), rng)
    return [_span(ctx, iv, found.get(id(iv.var))) for iv in iter_vars]


def _fuse_split_dims(ctx: _Ctx, idx: list, box: list) -> tuple:
    """Join two dimensions ``E // c`` and ``E % c`` of one access (a layout that splits
    a fused index ``E = v1 * 8 + v4``, whose digits are not one variable's) into one
    index ``E`` whose box is ``[lo * c + lo', hi * c + hi']``: exact when the
    quotient's box is one value or the remainder's is all of ``[0, c - 1]``."""
    for j, q in enumerate(idx):
        if not (isinstance(q, FloorDiv) and isinstance(q.b, IntImm) and q.b.value > 0):
            continue
        c = q.b.value
        k = next((k for k, r in enumerate(idx) if isinstance(r, FloorMod)
                  and isinstance(r.b, IntImm) and r.b.value == c and same(r.a, q.a)), None)
        if k is None:
            continue
        (qlo, qhi), (rlo, rhi) = box[j], box[k]
        one = ctx.const(qhi - qlo) == 0
        full = ctx.const(rlo) == 0 and ctx.const(rhi) == c - 1
        if not (one or full):
            continue
        cc = IntImm(c, q.dtype)
        # E % c never leaves [0, c - 1], whatever the box around it says
        rlo = ctx.simp(Max(rlo, IntImm(0, q.dtype)))
        rhi = ctx.simp(Min(rhi, IntImm(c - 1, q.dtype)))
        joined = (ctx.simp(qlo * cc + rlo), ctx.simp(qhi * cc + rhi))
        keep = [n for n in range(len(idx)) if n not in (j, k)]
        return _fuse_split_dims(ctx, [idx[n] for n in keep] + [q.a],
                                [box[n] for n in keep] + [joined])
    return idx, box


def _tiles(ctx: _Ctx, iv, digits: dict) -> list:
    """The ``(div, mod)`` keys of one variable's digits by increasing ``div``, checked
    to determine the variable (``v // 4`` with ``v % 4``; ``v`` alone)."""
    order = sorted(digits, key=lambda dm: dm[0])
    if order[0][0] != 1:
        raise NotInvertible(f"block variable {iv.var.name} appears only as "
                            f"{iv.var.name} // {order[0][0]}: several of its values "
                            "access the same element")
    for (d0, m0), (d1, _) in zip(order, order[1:]):
        if m0 != d1:
            raise NotInvertible(f"the digits of block variable {iv.var.name} "
                                f"({', '.join(_show(iv.var, dm) for dm in order)}) do not "
                                "determine it")
    d_last, m_last = order[-1]
    if m_last is not None:
        vmin, ext = ctx.const(iv.dom.min), ctx.const(iv.dom.extent)
        if vmin is None or ext is None or vmin + ext > m_last:
            raise NotInvertible(f"block variable {iv.var.name} appears only modulo "
                                f"{m_last}: several of its values access the same element")
    return order


def _span(ctx: _Ctx, iv, digits: dict | None):
    if digits is None:
        return None
    try:
        order = _tiles(ctx, iv, digits)
    except NotInvertible:
        # several values of the variable access one element: cover all of them
        order = sorted(digits, key=lambda dm: dm[0])
        if order[-1][1] is not None or any(m0 != d1 for (_, m0), (d1, _)
                                           in zip(order, order[1:])):
            return None                  # a free higher part: the whole domain
        low = order[0][0]                # v % low is free: all of it
        digits = {**digits, (1, low): (IntImm(0, iv.var.dtype), IntImm(low - 1, iv.var.dtype))}
        order = [(1, low)] + order
    lo = hi = None
    for dm in reversed(order):
        dlo, dhi = digits[dm]
        scale = IntImm(dm[0], iv.var.dtype)
        tlo, thi = (dlo, dhi) if dm[0] == 1 else (dlo * scale, dhi * scale)
        lo, hi = (tlo, thi) if lo is None else (lo + tlo, hi + thi)
    lo, hi = ctx.simp(lo), ctx.simp(hi)
    n = ctx.simp(hi - lo + 1)
    if not any(v in ctx.outer for v in used_vars(n)):
        return Span(lo, hi, n, True)
    _, top = bound_of(n, ctx.outer, ctx.ana)
    top = ctx.simp(top)
    if any(v in ctx.outer for v in used_vars(top)):
        return Span(lo, hi, None, False)
    return Span(lo, hi, top, False)


def inverse(iter_vars, indices, values) -> dict:
    """``{block var: expression}`` such that the access ``indices`` (over the block
    variables) equals ``values``: the inverse of an invertible quasi-affine map.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import IterVar, Range
        >>> v, i, j = T.var("v"), T.var("i"), T.var("j")
        >>> inv = inverse([IterVar(v, Range.from_extent(16))], [v // 4, v % 4], [i, j])
        >>> str(inv[v])
        'i * 4 + j'
    """
    ctx = _Ctx(iter_vars, {})
    found: dict = {}
    for e, x in zip(indices, values):
        offset, digits = parse(e, iter_vars)
        if not digits:
            continue
        y = ctx.simp(x - offset) if _sign(digits) > 0 else ctx.simp(offset - x)
        order = _radix(ctx, digits)
        for pos, k in enumerate(order):
            d, c = digits[k], abs(digits[k].coef)
            if pos + 1 < len(order):
                nxt = abs(digits[order[pos + 1]].coef)
                val = _fdiv(ctx, _fmod(ctx, y, nxt), c)
            else:
                val = _fdiv(ctx, y, c)
            found.setdefault(id(d.var), {}).setdefault((d.div, d.mod), val)
    out = {}
    for iv in iter_vars:
        digits = found.get(id(iv.var))
        if digits is None:
            raise NotInvertible(f"block variable {iv.var.name} does not appear in the "
                                "indices: several of its values access the same element")
        acc = None
        for dm in reversed(_tiles(ctx, iv, digits)):
            t = digits[dm] if dm[0] == 1 else digits[dm] * IntImm(dm[0], iv.var.dtype)
            acc = t if acc is None else acc + t
        out[iv.var] = ctx.simp(acc)
    return out


def _show(v, dm) -> str:
    d, m = dm
    s = v.name if m is None else f"{v.name} % {m}"
    return s if d == 1 else f"{s} // {d}" if m is not None else f"{v.name} // {d}"


__all__ = ["NotInvertible", "Digit", "Span", "parse", "solve", "inverse"]
