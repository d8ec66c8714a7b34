"""Index maps that split indices by a divisor, constant or symbolic:
``i -> (i // n, i % n)`` (and ``((i + o) // c, (i + o) % c)``), the other indices kept.

Each result of such a map is an index ``p`` alone, one half of a split of ``p``, or a
constant.  For a positive divisor ``c`` the split numbers ``[0, E)`` one to one (Euclid:
``p + o = (p + o) // c * c + (p + o) % c``), its inverse is ``p = a * c + b - o``, and its
image is the box ``ceildiv(E + o, c) x c``.  A constant divisor is checked positive
here; a symbolic one (a scalar parameter ``n``) is positive only by the caller's word,
which ``transform_layout`` checks on entry (see :mod:`.entry_checks`).

Example::

    >>> import cuvil_tir as T
    >>> i, n, a, b = T.var("i"), T.var("n"), T.var("a"), T.var("b")
    >>> str(split_inverse((T.const(16),), [i], [i // n, i % n], [a, b])[i])
    'a * n + b'
    >>> [str(s) for s in split_shape((T.const(16),), [i], [i // n, i % n])]
    ['(16 + n - 1) // n', 'n']
"""

from __future__ import annotations

from cuvil_tir.expr import Add, FloorDiv, FloorMod, IntImm, const
from cuvil_tir.node import same
from cuvil_tir.visitor import used_vars


def split_of(exprs, outs, p, params=()):
    """``(div_position, mod_position, c, o)`` when the results at ``outs`` are
    ``(p + o) // c`` and ``(p + o) % c`` (``o`` a constant >= 0, ``c`` a positive
    constant or an expression of none of ``params``); else None.

    Example::

        >>> import cuvil_tir as T
        >>> i, n = T.var("i"), T.var("n")
        >>> split_of([i % n, i // n], [0, 1], i, [i])[:2]
        (1, 0)
    """
    if len(outs) != 2:
        return None
    div = next((k for k in outs if isinstance(exprs[k], FloorDiv)), None)
    mod = next((k for k in outs if isinstance(exprs[k], FloorMod)), None)
    if div is None or mod is None:
        return None
    d, m = exprs[div], exprs[mod]
    if not same(d.a, m.a) or not same(d.b, m.b):
        return None
    c = d.b
    if isinstance(c, IntImm):
        if c.value <= 0:
            return None
    elif any(v is q for v in used_vars(c) for q in list(params) + [p]):
        return None
    base, o = d.a, 0
    if isinstance(base, Add) and isinstance(base.b, IntImm):
        base, o = base.a, base.b.value
    if base is not p or o < 0:
        return None
    return div, mod, c, o


def _structure(params, exprs):
    """Per param ``None`` (alone, at its result) or its split; None if the map is not
    made of splits, kept indices and constants."""
    out = {}
    taken = set()
    for p in params:
        outs = [k for k, x in enumerate(exprs) if any(v is p for v in used_vars(x))]
        if len(outs) == 1 and exprs[outs[0]] is p:
            out[p] = outs[0]
        else:
            split = split_of(exprs, outs, p, params)
            if split is None:
                return None
            out[p] = split
        taken |= set(outs)
    if any(k not in taken and not isinstance(x, IntImm) for k, x in enumerate(exprs)):
        return None
    return out


def symbolic_divisors(params, exprs) -> list:
    """The divisors of a split map that are not constants (``[n]`` for ``i // n``);
    ``[]`` when there are none or the map is no split map.

    Example::

        >>> import cuvil_tir as T
        >>> i, n = T.var("i"), T.var("n")
        >>> [str(c) for c in symbolic_divisors([i], [i // n, i % n])]
        ['n']
    """
    found = _structure(params, exprs)
    if found is None:
        return []
    return [s[2] for s in found.values() if isinstance(s, tuple) and
            not isinstance(s[2], IntImm)]


def split_inverse(old_shape, params, exprs, idx):
    """``{param: expression over idx}`` for a split map (see the module docstring);
    None for another map.

    Example::

        >>> import cuvil_tir as T
        >>> i, j, a, b, c = (T.var(n) for n in "ijabc")
        >>> inv = split_inverse((T.const(4), T.const(8)), [i, j], [j // 4, i, j % 4],
        ...                     [a, b, c])
        >>> str(inv[i]), str(inv[j])
        ('b', 'a * 4 + c')
    """
    found = _structure(params, exprs)
    if found is None:
        return None
    inv = {}
    for p, s in found.items():
        if not isinstance(s, tuple):
            inv[p] = idx[s]
            continue
        div, mod, c, o = s
        back = idx[div] * c + idx[mod]
        inv[p] = back - const(o, back.dtype) if o else back
    return inv


def split_shape(old_shape, params, exprs):
    """The image box of a split map with a symbolic divisor (``ceildiv(E + o, c)`` and
    ``c`` for a split, the extent for a kept index, 1 for a constant); None otherwise.

    Example::

        >>> import cuvil_tir as T
        >>> i, n = T.var("i"), T.var("n")
        >>> split_shape((T.const(16),), [i], [i // 4, i % 4]) is None
        True
    """
    found = _structure(params, exprs)
    if found is None or not symbolic_divisors(params, exprs):
        return None
    shape = [None] * len(exprs)
    for (p, s), extent in zip(found.items(), old_shape):
        if not isinstance(s, tuple):
            shape[s] = extent
            continue
        div, mod, c, o = s
        total = extent + const(o, extent.dtype) if o else extent
        shape[div] = (total + c - const(1, c.dtype)) // c
        shape[mod] = c
    for k, x in enumerate(exprs):
        if shape[k] is None:
            if x.value < 0:
                return None
            shape[k] = const(x.value + 1, x.dtype)
    return tuple(shape)


__all__ = ["split_of", "split_inverse", "split_shape", "symbolic_divisors"]
