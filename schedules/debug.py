"""Debug mode: check every primitive's result against the IR before it.

After each primitive that changed the function, ``Schedule(func, debug=True)`` runs
the IR verifier (``cuvil_tir.transform.verify``) on the new function,
and, for small functions (fewer than :data:`MAX_ITERATIONS` block instances), runs
the reference interpreter ``T.interpret`` on the same random inputs before and after:
different outputs raise :class:`DebugCheckError` naming the primitive.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> [a.shape for a in random_inputs(f, 0)]
    [(8,), (8,)]
"""

from __future__ import annotations

import numpy as np

import cuvil_tir
from cuvil_tir import dtype as D
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import IntImm
from cuvil_tir.transform import verify

from .analysis import total_iterations
from .errors import DebugCheckError, schedule_error

MAX_ITERATIONS = 20_000
"""Functions running more block instances than this are not interpreted."""

RTOL, ATOL = 1e-4, 1e-5


def random_inputs(func, seed: int):
    """Random arrays for every buffer parameter (None when a shape is symbolic or a
    parameter is a scalar).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2, 3), "int8", name="A")])
        >>> random_inputs(f, 0)[0].dtype
        dtype('int8')
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        shape = getattr(p, "shape", None)
        if shape is None or not all(isinstance(s, IntImm) for s in shape):
            return None
        dims = tuple(s.value for s in shape)
        dt = p.dtype
        if D.is_float(dt):
            arr = rng.standard_normal(dims).astype(D.to_numpy(dt))
        elif D.is_bool(dt):
            arr = rng.integers(0, 2, dims).astype(bool)
        else:
            lo = 0 if D.is_uint(dt) else -8
            arr = rng.integers(lo, 8, dims).astype(D.to_numpy(dt))
        out.append(arr)
    return out


def _verify(name, func):
    try:
        verify(func)
    except CuvilError as err:
        raise schedule_error(DebugCheckError, name, "produced ill-formed IR (debug "
                             f"mode verifier): {err.message}", func) from None


def _run(func, inputs):
    arrays = [a.copy() for a in inputs]
    cuvil_tir.interpret(func, *arrays)
    return arrays


def check_step(name: str, old, new, checker):
    """Verify ``new`` and compare it with ``old`` on random inputs; returns the
    checker state to pass to the next step (it caches the outputs of ``new``).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> state = check_step("noop", f, f, None)   # raises DebugCheckError on a mismatch
        >>> state is None or state[0] is f
        True
    """
    _verify(name, new)
    small = total_iterations(new.body)
    before = total_iterations(old.body)
    if small is None or before is None or max(small, before) > MAX_ITERATIONS:
        return checker
    inputs = random_inputs(new, 0)
    if inputs is None:
        return checker
    if checker is not None and checker[0] is old:
        expected = checker[1]
    else:
        expected = _run(old, inputs)
    try:
        got = _run(new, inputs)
    except CuvilError as err:
        raise schedule_error(DebugCheckError, name, "the reference interpreter failed "
                             f"on the scheduled IR: {err.message}", new) from None
    for p, want, have in zip(new.params, expected, got):
        if want.dtype.kind == "f":
            ok = np.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(have, want)
        if not ok:
            bad = int(np.sum(~np.isclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True)))
            raise schedule_error(DebugCheckError, name, f"changed the results: buffer "
                                 f"{p.name} differs from before the primitive in {bad} of "
                                 f"{want.size} elements (checked with the reference "
                                 "interpreter on random inputs)", new)
    return (new, got)
