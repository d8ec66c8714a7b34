"""A fixed-length feature vector of a candidate's lowered IR, for the cost model.

:func:`features` lowers the scheduled function for the target and describes its loop
nests from the stores: for the *dominant* store (the one executed most often) its
iteration count, parallel extent, vector lanes, unroll factor, innermost serial extent
and depth, the bytes it touches within the innermost 1..4 loops, the share of its loads
that are loop-invariant / contiguous / strided in the innermost loop, and its arithmetic
intensity; for the whole function the work of all other stores (copies, packing) and the
bytes of local allocations.  Counts enter as ``log2(1 + x)`` so the model sees ratios.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((64,), name="A")
    >>> f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
    >>> v = features(f, "llvm")
    >>> len(v) == len(NAMES), round(v[NAMES.index("iterations")], 2)
    (True, 6.02)
"""

from __future__ import annotations

import math

from cuvil_tir import dtype as D
from cuvil_tir.arith.affine import Affine
from cuvil_tir.expr import (Add, BufferLoad, Div, FloorDiv, FloorMod, Mod, Mul, Ramp, Sub,
                            Var)
from cuvil_tir.stmt import Allocate, BufferStore, For
from cuvil_tir.target import lower
from cuvil_tir.transform.inline import inline_launches
from cuvil_tir.visitor import post_order_visit

#: what each position of the vector means
NAMES = ("iterations", "parallel", "lanes", "unroll", "inner_serial", "depth",
         "bytes_l1", "bytes_l2", "bytes_l3", "bytes_l4", "bytes_all",
         "invariant_loads", "contiguous_loads", "strided_loads", "intensity",
         "ops_per_iter", "other_work", "stores", "local_bytes", "allocs",
         "outer_parallel_share", "vector_inner")

_LEVELS = 4


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _extent(loop) -> int:
    v = getattr(loop.extent, "value", None)
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def _nests(stmt, loops=()):
    """(store, enclosing loops outermost first) for every store under ``stmt``."""
    out = []
    stack = [(stmt, tuple(loops))]
    while stack:
        s, above = stack.pop()
        if isinstance(s, BufferStore):
            out.append((s, above))
            continue
        if isinstance(s, For):
            stack.append((s.body, above + (s,)))
            continue
        for name in ("body", "then_case", "else_case", "seq"):
            child = getattr(s, name, None)
            if isinstance(child, tuple):
                stack.extend((c, above) for c in reversed(child))
            elif child is not None and not isinstance(child, (int, float, str)):
                stack.append((child, above))
    return out


def _accesses(store) -> list:
    """(buffer, flat index, lanes) of the store and of every load in its value."""
    out = [(store.buffer, store.indices[-1], store.value.lanes)]

    def visit(e):
        if isinstance(e, BufferLoad):
            out.append((e.buffer, e.indices[-1], getattr(e, "lanes", 1)))
    post_order_visit(store.value, visit)
    return out


def _coefficients(index) -> dict:
    """Loop var -> its coefficient in ``index`` (None for a var used non-linearly)."""
    base = index.base if isinstance(index, Ramp) else index
    try:
        form = Affine.of(base)
    except Exception:  # noqa: BLE001 - a non-integer index: no strides known
        return {}
    out: dict = {}
    for atom, c in form.terms:
        if isinstance(atom, Var):
            out[atom] = c
        else:
            post_order_visit(atom, lambda e: out.__setitem__(e, None)
                             if isinstance(e, Var) else None)
    return out


def _footprint(access, loops) -> int:
    """Elements ``access`` touches while ``loops`` run (distinct, roughly)."""
    _, index, lanes = access
    coeffs = _coefficients(index)
    n = lanes
    for lp in loops:
        if lp.loop_var in coeffs:
            n *= _extent(lp)
    return n


def _ops(expr) -> int:
    """Floating-point arithmetic in ``expr`` (index arithmetic is not the work)."""
    count = [0]

    def visit(e):
        if isinstance(e, (Add, Sub, Mul, Div, FloorDiv, FloorMod, Mod)) and \
                D.is_float(e.dtype):
            count[0] += 1
    post_order_visit(expr, visit)
    return count[0]


def _store_vector(store, loops) -> list:
    iters = 1
    par = unroll = 1
    for lp in loops:
        iters *= _extent(lp)
        if lp.kind == "parallel":
            par *= _extent(lp)
        elif lp.kind == "unrolled":
            unroll *= _extent(lp)
    lanes = store.value.lanes
    serial = [lp for lp in loops if lp.kind in ("serial", "vectorized")]
    inner = serial[-1] if serial else None
    accs = _accesses(store)
    width = D.bits(D.element(str(store.buffer.dtype))) // 8
    levels = []
    for lvl in range(1, _LEVELS + 1):
        sub = loops[-lvl:] if len(loops) >= lvl else loops
        levels.append(sum(_footprint(a, sub) for a in accs) * width)
    every = sum(_footprint(a, loops) for a in accs) * width
    kinds = [0, 0, 0]
    for _, index, _ in accs[1:]:
        c = _coefficients(index).get(inner.loop_var, 0) if inner is not None else 0
        kinds[0 if c == 0 else 1 if c == 1 else 2] += 1
    nloads = max(1, len(accs) - 1)
    ops = max(1, _ops(store.value)) * lanes
    outer_par = 1.0 if loops and loops[0].kind == "parallel" else 0.0
    return [_log(iters * lanes), _log(par), _log(lanes), _log(unroll),
            _log(_extent(inner) if inner is not None else 1), float(len(loops)),
            *[_log(b) for b in levels], _log(every),
            kinds[0] / nloads, kinds[1] / nloads, kinds[2] / nloads,
            _log(ops * iters / max(1, every)), _log(ops),
            outer_par, 1.0 if lanes > 1 else 0.0]


def vector_of(lowered) -> list:
    """The feature vector (see :data:`NAMES`) of a lowered function or module (its
    entry, with each parallel launch seen as the loop it came from).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((4,), name="A")])
        >>> vector_of(T.lower(f, "llvm"))[NAMES.index("stores")]
        0.0
    """
    # a module's parallel tasks are seen inside the loops they came from
    funcs = [inline_launches(lowered)]
    nests, local_bytes, allocs = [], 0, 0
    for fn in funcs:
        body = getattr(fn, "body", None)
        if body is None:
            continue
        nests += _nests(body)

        def visit(s):
            nonlocal local_bytes, allocs
            if isinstance(s, Allocate):
                allocs += 1
                n = max(1, D.bits(D.element(str(s.buffer.dtype))) // 8)
                for e in s.buffer.shape:
                    n *= getattr(e, "value", 1) or 1
                local_bytes += n
        post_order_visit(body, visit)
    if not nests:
        return [0.0] * len(NAMES)
    weights = []
    for store, loops in nests:
        n = store.value.lanes
        for lp in loops:
            n *= _extent(lp)
        weights.append(n)
    top = max(range(len(nests)), key=weights.__getitem__)
    v = _store_vector(*nests[top])
    other = sum(weights) - weights[top]
    out = v[:16] + [_log(other), _log(len(nests)), _log(local_bytes), _log(allocs)] + v[16:]
    return [float(x) for x in out]


def features(func_or_sch, target="llvm") -> list:
    """Lower ``func_or_sch`` for ``target`` and return its :func:`vector_of`.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((4,), name="A")])
        >>> len(features(f))
        22
    """
    func = getattr(func_or_sch, "func", func_or_sch)
    return vector_of(lower(func, target))
