"""The canonical affine form of integer index expressions: ``sum(c_k * t_k) + c0``.

``t_k`` are *atoms*: any expression that is not an addition, subtraction or a product
with a constant (variables, divisions, loads, products of variables …).  Collecting the
terms of an expression cancels ``(i*4 + j) - i*4`` to ``j``.  Coefficients are kept
modulo ``2**bits`` (as the wrapping integer arithmetic they model), as representatives
in the signed range, so the form is exact for every integer dtype.

Example::

    >>> import cuvil_tir as T
    >>> i, j = T.var("i"), T.var("j")
    >>> f = Affine.of((i * 4 + j) - i * 4)
    >>> [(str(t), c) for t, c in f.terms], f.const
    ([('j', 1)], 0)
    >>> str(f.to_expr())
    'j'
"""

from __future__ import annotations

from .. import dtype as D
from ..expr import Add, Expr, IntImm, Mul, Sub, Var, Cast, FloorDiv, FloorMod
from ..node import node_hash, same
from ..visitor import used_vars


class Key:
    """A dict key for an expression: structural hash and equality (vars by identity).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> Key(i + 1) == Key(i + 1)
        True
    """

    __slots__ = ("expr", "_h")

    def __init__(self, expr):
        self.expr = expr
        self._h = node_hash(expr)

    def __hash__(self):
        return self._h

    def __eq__(self, other):
        return isinstance(other, Key) and self._h == other._h and same(self.expr, other.expr)


def is_index_dtype(dt: str) -> bool:
    """Scalar signed or unsigned integer: the dtypes the affine form applies to.

    Example::

        >>> is_index_dtype("int64"), is_index_dtype("int32x4"), is_index_dtype("bool")
        (True, False, False)
    """
    return D.is_integer(dt) and D.lanes(dt) == 1


class Affine:
    """``terms`` (list of ``(atom, coeff)``, first-appearance order) plus ``const``.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(Affine.of((i + 2) * 3).to_expr())
        'i * 3 + 6'
    """

    __slots__ = ("dtype", "coeffs", "const")

    def __init__(self, dtype: str, coeffs: dict | None = None, const: int = 0):
        self.dtype = dtype
        self.coeffs: dict = coeffs if coeffs is not None else {}
        self.const = const

    # construction ------------------------------------------------------------------
    @staticmethod
    def of(e: Expr) -> "Affine":
        """Collect the terms of an integer expression."""
        out = Affine(e.dtype)
        out._add(e, 1)
        out._normalize()
        return out

    def _add(self, e: Expr, c: int) -> None:
        if isinstance(e, IntImm):
            self.const += c * e.value
        elif isinstance(e, Add):
            self._add(e.a, c)
            self._add(e.b, c)
        elif isinstance(e, Sub):
            self._add(e.a, c)
            self._add(e.b, -c)
        elif isinstance(e, Mul) and isinstance(e.b, IntImm):
            self._add(e.a, c * e.b.value)
        elif isinstance(e, Mul) and isinstance(e.a, IntImm):
            self._add(e.b, c * e.a.value)
        else:
            k = Key(e)
            self.coeffs[k] = self.coeffs.get(k, 0) + c

    def _wrap(self, v: int) -> int:
        return D.wrap_int(v, f"int{D.bits(self.dtype)}")

    def _normalize(self) -> None:
        self.coeffs = {k: w for k, v in self.coeffs.items() if (w := self._wrap(v)) != 0}
        self.const = self._wrap(self.const)

    # queries ----------------------------------------------------------------------------
    @property
    def terms(self) -> list:
        """``[(atom, coeff), …]`` in first-appearance order."""
        return [(k.expr, c) for k, c in self.coeffs.items()]

    def is_const(self) -> bool:
        """No terms left."""
        return not self.coeffs

    def split(self, c: int) -> tuple["Affine", "Affine"]:
        """``(q, r)`` with ``self = c * q + r``: terms whose coefficient ``c`` divides go
        to ``q``; the constant is split by floor division.

        Example::

            >>> import cuvil_tir as T
            >>> i, j = T.var("i"), T.var("j")
            >>> q, r = Affine.of(i * 8 + j + 9).split(8)
            >>> str(q.to_expr()), str(r.to_expr())
            ('i + 1', 'j + 1')
        """
        q, r = Affine(self.dtype), Affine(self.dtype)
        for k, v in self.coeffs.items():
            if v % c == 0:
                q.coeffs[k] = v // c
            else:
                r.coeffs[k] = v
        q.const, r.const = self.const // c, self.const % c
        return q, r

    def combine(self, other: "Affine", c: int = 1, normalize: bool = True) -> "Affine":
        """``self + c * other`` (coefficients kept exact when ``normalize`` is False).

        Example::

            >>> import cuvil_tir as T
            >>> i = T.var("i")
            >>> str(Affine.of(i + 3).combine(Affine.of(i), -1).to_expr())
            '3'
        """
        out = Affine(self.dtype, dict(self.coeffs), self.const + c * other.const)
        for k, v in other.coeffs.items():
            out.coeffs[k] = out.coeffs.get(k, 0) + c * v
        if normalize:
            out._normalize()
        else:
            out.coeffs = {k: v for k, v in out.coeffs.items() if v != 0}
        return out

    # rebuilding ----------------------------------------------------------------------------
    def to_expr(self) -> Expr:
        """The expression ``t1*c1 + t2*c2 … + c0``; subtraction for negative terms."""
        dt = self.dtype
        pos = [(t, c) for t, c in self.terms if c > 0]
        negs = [(t, -c) for t, c in self.terms if c < 0]
        acc = None
        for t, c in pos:
            term = t if c == 1 else Mul(t, IntImm(c, dt))
            acc = term if acc is None else Add(acc, term)
        if acc is None and negs:
            acc = IntImm(self.const, dt) if self.const > 0 else IntImm(0, dt)
            const = 0 if self.const > 0 else self.const
        else:
            const = self.const
        for t, c in negs:
            term = t if c == 1 else Mul(t, IntImm(c, dt))
            acc = Sub(acc, term)
        if acc is None:
            return IntImm(const, dt)
        if const > 0 or (const < 0 and -const > D.int_range(f"int{D.bits(dt)}")[1]):
            return Add(acc, IntImm(const, dt))
        if const < 0:
            return Sub(acc, IntImm(-const, dt))
        return acc


def linear_form(e: Expr):
    """``({id(var): (var, coeff)}, const)`` when the integer expression ``e`` is affine
    in its variables (every term a variable times a constant), else None: the form the
    schedule primitives and backends divide into outer and inner parts.

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> terms, c = linear_form(i * 4 + j - 1)
        >>> sorted(k for _, k in terms.values()), c
        ([1, 4], -1)
        >>> linear_form(i * j) is None, linear_form(i // 4) is None
        (True, True)
    """
    if not is_index_dtype(e.dtype):
        return None
    aff = Affine.of(e)
    terms = {}
    for atom, c in aff.terms:
        if not isinstance(atom, Var):
            return None
        terms[id(atom)] = (atom, c)
    return terms, aff.const


def from_linear_form(terms: dict, c: int, dtype: str = "int32") -> Expr:
    """``sum coeff * var + c`` from :func:`linear_form`'s ``terms``, as the simplifier
    writes it (``i - j * 2 - 3``).

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> str(from_linear_form({id(i): (i, 1), id(j): (j, -2)}, -3))
        'i - j * 2 - 3'
    """
    return Affine(dtype, {Key(v): k for v, k in terms.values() if k}, c).to_expr()


def quasi_affine(e: Expr, over=None) -> bool:
    """Whether the index expression ``e`` is quasi-affine: variables and constants
    combined by ``+``, ``-``, products with a constant, ``//`` and ``%`` by a positive
    constant (and casts).  With ``over`` (a collection of variables), a sub-expression
    free of them counts as a constant (``n * i`` is quasi-affine over ``{i}``).

    Example::

        >>> import cuvil_tir as T
        >>> i, k, n = T.var("i"), T.var("k"), T.var("n")
        >>> quasi_affine(i * 4 + k // 2), quasi_affine(k * k // 2)
        (True, False)
        >>> quasi_affine(n * i), quasi_affine(n * i, over={i})
        (False, True)
    """

    def free(x) -> bool:
        return over is not None and not any(v in over for v in used_vars(x))

    if isinstance(e, (IntImm, Var)) or free(e):
        return True
    if isinstance(e, (Add, Sub)):
        return quasi_affine(e.a, over) and quasi_affine(e.b, over)
    if isinstance(e, Mul):
        return ((isinstance(e.a, IntImm) or free(e.a)) and quasi_affine(e.b, over)) or \
            ((isinstance(e.b, IntImm) or free(e.b)) and quasi_affine(e.a, over))
    if isinstance(e, (FloorDiv, FloorMod)):
        return isinstance(e.b, IntImm) and e.b.value > 0 and quasi_affine(e.a, over)
    if isinstance(e, Cast):
        return quasi_affine(e.value, over)
    return False
