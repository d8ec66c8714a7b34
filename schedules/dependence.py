"""Loop-carried dependences: may the iterations of a loop run at the same time?

``parallel`` and ``vectorize`` need iterations that touch disjoint memory wherever
one of them writes.  For every buffer written under the loop (and not allocated under
it), every pair of a write and another access of it by the blocks under the loop is
compared, with both regions relaxed over the loops inside: some dimension must index
the two by the same affine function of the loop variable, with a coefficient at least
as large as the tiles, so that different iterations never meet.  ``B[vi] = B[vi - 1]
+ A[vi]`` fails (``vi`` against ``vi - 1``), and so does any non-affine index of a
written buffer: the check is conservative, never optimistic.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> carried_dependence(f, tree.find_loop(f, f.body.block.body.loop_var)) is None
    True
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, Add, FloorDiv, FloorMod, Mul, Var
from cuvil_tir.stmt import BlockRealize

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import bound_region, loop_doms, relax, simplify, tree_same
from cuvil_tir.arith.affine import linear_form
from cuvil_tir.visitor import used_vars


def _accesses(func, lpath):
    """``(block name, kind, region over the loop vars)`` of the blocks under the loop,
    and the buffers allocated under it (private to one iteration)."""
    loop = tree.get(func, lpath)
    private = set()
    out = []
    for br in tree.blocks_under(loop):
        private |= {id(b) for b in br.block.alloc_buffers}
    for bpath, br in _direct_blocks(func, lpath):
        doms = loop_doms([(p, f) for p, f in tree.loops_above(func, bpath)
                          if len(p) > len(lpath)])
        for kind in ("writes", "reads"):
            for r in getattr(br.block, kind):
                out.append((br.block.name, kind, relax(bound_region(br, r), doms),
                            (br, r)))
    return out, private


def _direct_blocks(func, lpath):
    found = []
    for p, node in tree.walk(func):
        if isinstance(node, BlockRealize) and p[:len(lpath)] == lpath and \
                tree.enclosing_block(func, p) == tree.enclosing_block(func, lpath):
            found.append((p, node))
    return found


def _separated(w, a, var) -> bool:
    """Some dimension indexes ``w`` and ``a`` by the same affine function of ``var``
    with a coefficient no smaller than either tile."""
    for dw, da in zip(w.region, a.region):
        if not (isinstance(dw.extent, IntImm) and isinstance(da.extent, IntImm)):
            continue
        diff = simplify(dw.min - da.min)
        lin = linear_form(dw.min)
        if not (isinstance(diff, IntImm) and diff.value == 0) or lin is None:
            continue
        coeff = lin[0].get(id(var), (None, 0))[1]
        if coeff != 0 and max(dw.extent.value, da.extent.value) <= abs(coeff):
            return True
    return _same_point(w, a, var) or _fused_tiles(w, a, var)


def _tile_term(e, var):
    """``(key, step)`` when ``e`` is ``X * step`` (plus nothing that uses ``var``) with
    ``X`` one of ``var``, ``var // m``, ``var % m``; else None."""
    rest_ok = True
    if isinstance(e, Add):
        for main, rest in ((e.a, e.b), (e.b, e.a)):
            if not any(u is var for u in used_vars(rest)):
                e, rest_ok = main, True
                break
        else:
            rest_ok = False
    if not rest_ok or not isinstance(e, Mul) or not isinstance(e.b, IntImm):
        return None
    x, step = e.a, e.b.value
    if x is var:
        return ("id", None), step
    if isinstance(x, (FloorDiv, FloorMod)) and x.a is var and isinstance(x.b, IntImm) \
            and x.b.value > 0 and isinstance(var, Var):
        return ("div" if isinstance(x, FloorDiv) else "mod", x.b.value), step
    return None


def _fused_tiles(w, a, var) -> bool:
    """Identical tiles whose corner is ``(var // m) * s0, (var % m) * s1, ...`` with each
    step at least the tile's extent: a fused loop walking a grid of tiles, so different
    iterations own different tiles (``var`` is recovered from ``var // m, var % m``)."""
    keys = set()
    for dw, da in zip(w.region, a.region):
        diff = simplify(dw.min - da.min)
        if not (isinstance(diff, IntImm) and diff.value == 0):
            return False
        if not (isinstance(dw.extent, IntImm) and isinstance(da.extent, IntImm)):
            return False
        term = _tile_term(simplify(dw.min), var)
        if term is None:
            continue
        (key, step) = term
        if max(dw.extent.value, da.extent.value) > abs(step) or step == 0:
            return False
        keys.add(key)
    if ("id", None) in keys:
        return True
    return any(k == "div" and ("mod", m) in keys for k, m in keys)


def _own_element(br, w, a, var) -> bool:
    """Both accesses are the block's own element: indexed by its spatial iter vars,
    each once, all of them, and the loop drives one of them.  Spatial bindings map
    loop iterations one to one onto block instances (TensorIR's affine bindings), so
    different iterations own different elements."""
    spatial = [iv.var for iv in br.block.iter_vars if iv.kind == "spatial"]
    if not all(tree_same(x.min, y.min) and isinstance(x.extent, IntImm) and
               x.extent.value == 1 for x, y in zip(w.region, a.region)):
        return False
    if not all(tree_same(y.extent, x.extent) for x, y in zip(w.region, a.region)):
        return False
    idx = [d.min for d in w.region]
    if sorted(id(e) for e in idx) != sorted(id(v) for v in spatial):
        return False
    return any(any(u is var for u in used_vars(val)) for iv, val in zip(br.block.iter_vars,
                                                        br.iter_values)
               if iv.kind == "spatial")


def _same_point(w, a, var) -> bool:
    """Both regions are the same single element, whose row-major offset is affine in
    ``var`` with a non-zero coefficient (a fused loop's ``f // 8, f % 8``)."""
    if not all(isinstance(d.extent, IntImm) and d.extent.value == 1
               for d in w.region + a.region):
        return False
    flat = [None, None]
    for n, reg in enumerate((w, a)):
        off = None
        for d, dim in enumerate(reg.region):
            stride = 1
            for s in w.buffer.shape[d + 1:]:
                stride = stride * s
            term = dim.min * stride
            off = term if off is None else off + term
        flat[n] = simplify(off)
    diff = simplify(flat[0] - flat[1])
    lin = linear_form(flat[0])
    return isinstance(diff, IntImm) and diff.value == 0 and lin is not None and \
        lin[0].get(id(var), (None, 0))[1] != 0


def carried_dependence(func, lpath, pairs=None):
    """None when the iterations of the loop at ``lpath`` are independent, else a
    sentence naming the two accesses that meet across iterations.  ``pairs(a, b)``,
    given, limits the check to the pairs of block names it accepts (``merge`` checks
    only blocks of different merged nests).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i], name="B")])
        >>> carried_dependence(f, tree.find_loop(f, f.body.block.body.loop_var))
    """
    var = tree.get(func, lpath).loop_var
    accesses, private = _accesses(func, lpath)
    for name, kind, w, (br, raw) in accesses:
        if kind != "writes" or id(w.buffer) in private:
            continue
        for other, okind, a, (obr, oraw) in accesses:
            if a.buffer is not w.buffer or (pairs is not None and not pairs(name, other)):
                continue
            if obr is br and _own_element(br, raw, oraw, var):
                continue
            if not _separated(w, a, var):
                what = "reads" if okind == "reads" else "writes"
                return (f"block {name!r} writes {w} and block {other!r} {what} {a}: "
                        f"different iterations of loop {var.name!r} may touch the same "
                        "element (a loop-carried dependence)")
    return None


__all__ = ["carried_dependence"]
