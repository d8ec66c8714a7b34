"""Integer intervals with infinite ends, the arithmetic of :func:`const_int_bound`.

An interval is a pair ``(lo, hi)`` of Python ints (inclusive), where an end may be
:data:`NEG_INF` / :data:`POS_INF`.  Arithmetic is exact (no wrap-around); callers clamp
to a dtype with :func:`clamp_to_dtype`, which widens to the dtype's whole range when
the exact interval does not fit (the value then wraps, so nothing tighter is known).

Example::

    >>> mul((-2, 3), (4, 5))
    (-10, 15)
    >>> clamp_to_dtype((0, 300), "uint8")
    (0, 255)
"""

from __future__ import annotations

import math

from .. import dtype as D

#: the infinite ends of an interval
POS_INF = math.inf
NEG_INF = -math.inf


def everything() -> tuple:
    """The interval of all integers.

    Example::

        >>> everything()
        (-inf, inf)
    """
    return (NEG_INF, POS_INF)


def dtype_range(dt: str) -> tuple:
    """All values of an integer/bool dtype; unbounded for other dtypes.

    Example::

        >>> dtype_range("int8")
        (-128, 127)
    """
    e = D.element(dt)
    if D.is_integer(e) or D.is_bool(e):
        return D.int_range(e)
    return everything()


def fits(iv: tuple, dt: str) -> bool:
    """Whether the exact interval ``iv`` lies inside ``dt``'s range (no wrap-around).

    Example::

        >>> fits((0, 255), "uint8"), fits((-1, 3), "uint8")
        (True, False)
    """
    lo, hi = dtype_range(dt)
    return lo <= iv[0] and iv[1] <= hi


def clamp_to_dtype(iv: tuple, dt: str) -> tuple:
    """``iv`` if it fits ``dt``, else the whole range of ``dt`` (the value wrapped).

    Example::

        >>> clamp_to_dtype((-5, 5), "int8")
        (-5, 5)
    """
    return iv if fits(iv, dt) else dtype_range(dt)


def _mul1(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def add(a: tuple, b: tuple) -> tuple:
    """``a + b``.

    Example::

        >>> add((0, 3), (1, 1))
        (1, 4)
    """
    return (a[0] + b[0], a[1] + b[1])


def neg(a: tuple) -> tuple:
    """``-a``.

    Example::

        >>> neg((1, 4))
        (-4, -1)
    """
    return (-a[1], -a[0])


def sub(a: tuple, b: tuple) -> tuple:
    """``a - b``.

    Example::

        >>> sub((0, 3), (1, 2))
        (-2, 2)
    """
    return add(a, neg(b))


def mul(a: tuple, b: tuple) -> tuple:
    """``a * b`` (``0 * inf`` counts as 0).

    Example::

        >>> mul((0, 3), (-1, 2))
        (-3, 6)
    """
    cands = [_mul1(x, y) for x in a for y in b]
    return (min(cands), max(cands))


def scale(a: tuple, c: int) -> tuple:
    """``a * c`` for an int ``c``.

    Example::

        >>> scale((1, 2), -3)
        (-6, -3)
    """
    return mul(a, (c, c))


def _fdiv(x, y):
    if x in (POS_INF, NEG_INF):
        return x if y > 0 else -x
    if y in (POS_INF, NEG_INF):
        return 0 if (x >= 0) == (y > 0) else -1
    return x // y


def floordiv(a: tuple, b: tuple) -> tuple:
    """``a // b`` (floor); a divisor interval containing 0 gives ``everything()``.

    Example::

        >>> floordiv((0, 15), (4, 4))
        (0, 3)
    """
    if b[0] <= 0 <= b[1]:
        # x // 0 is 0 in Cuvil, but dividing by values near 0 may give anything
        return everything()
    cands = [_fdiv(x, y) for x in a for y in b]
    return (min(cands), max(cands))


def floormod(a: tuple, b: tuple) -> tuple:
    """``a % b`` (floor): in ``[0, b-1]`` for positive ``b``, tighter when ``a`` fits.

    Example::

        >>> floormod((0, 100), (8, 8)), floormod((2, 5), (8, 8))
        ((0, 7), (2, 5))
    """
    if b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        if b[0] == b[1] and a[0] not in (NEG_INF,) and a[1] != POS_INF \
                and a[0] // b[0] == a[1] // b[0]:
            k = a[0] // b[0] * b[0]
            return (a[0] - k, a[1] - k)
        return (0, b[1] - 1)
    if b[1] < 0:
        return (b[0] + 1, 0)
    # x % 0 is 0 (the Cuvil convention); otherwise |x % b| < |b|
    m = max(-b[0], b[1])
    return (-(m - 1) if m != POS_INF else NEG_INF, m - 1 if m != POS_INF else POS_INF)


def truncdiv(a: tuple, b: tuple) -> tuple:
    """``a / b`` rounding toward zero.

    Example::

        >>> truncdiv((-7, 7), (2, 2))
        (-3, 3)
    """
    if b[0] <= 0 <= b[1]:
        return everything()

    def td(x, y):
        if x in (POS_INF, NEG_INF):
            return x if y > 0 else -x
        if y in (POS_INF, NEG_INF):
            return 0
        q = abs(x) // abs(y)
        return q if (x >= 0) == (y > 0) else -q

    cands = [td(x, y) for x in a for y in b]
    return (min(cands), max(cands))


def truncmod(a: tuple, b: tuple) -> tuple:
    """``a`` truncmod ``b``: the sign of ``a``, magnitude below ``|b|``.

    Example::

        >>> truncmod((-7, 7), (4, 4))
        (-3, 3)
    """
    m = max(abs(b[0]), abs(b[1]))
    lim = m - 1 if m != POS_INF else POS_INF
    lo = 0 if a[0] >= 0 else max(a[0], -lim)
    hi = 0 if a[1] <= 0 else min(a[1], lim)
    return (lo, hi)


def union(a: tuple, b: tuple) -> tuple:
    """The smallest interval containing both.

    Example::

        >>> union((0, 1), (5, 6))
        (0, 6)
    """
    return (min(a[0], b[0]), max(a[1], b[1]))


def intersect(a: tuple, b: tuple) -> tuple:
    """The common part (may be empty: ``lo > hi``).

    Example::

        >>> intersect((0, 10), (5, 20))
        (5, 10)
    """
    return (max(a[0], b[0]), min(a[1], b[1]))


def vmin(a: tuple, b: tuple) -> tuple:
    """``min(a, b)`` elementwise.

    Example::

        >>> vmin((0, 10), (3, 4))
        (0, 4)
    """
    return (min(a[0], b[0]), min(a[1], b[1]))


def vmax(a: tuple, b: tuple) -> tuple:
    """``max(a, b)`` elementwise.

    Example::

        >>> vmax((0, 10), (3, 4))
        (3, 10)
    """
    return (max(a[0], b[0]), max(a[1], b[1]))
