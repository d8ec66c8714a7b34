"""Debug mode: check every primitive's result against the IR before it.

After each primitive that changed the function, ``Schedule(func, debug=True)`` runs the
IR verifier (``cuvil_tir.transform.verify``) on the new function, then runs the
reference interpreter ``T.interpret`` on the same random inputs before and after:
different outputs raise :class:`DebugCheckError` naming the primitive.  The
interpreter runs a few ten thousand block instances a second, so the check is made on
a small instance of the function:

* symbolic sizes are bound to small values (:data:`SIZE_CHOICES`; another one is tried
  when the function refuses one, e.g. a ``T.assert_`` on divisibility);
* a function of constant shapes running more than :data:`MAX_ITERATIONS` instances is
  checked on a *twin*: the unscheduled function with its large constant extents divided
  (:func:`shrink`), scheduled by the same trace, step by step.  A step whose explicit
  factors do not fit the smaller extents (``split(i, [4, 16])`` of a loop of 64 that is
  now 16) ends the twin.

Where neither works the primitive is checked by the verifier only, and a warning says
so, once per schedule: debug mode never skips its check silently.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> [a.shape for a in random_inputs(f, 0)]
    [(8,), (8,)]
"""

from __future__ import annotations

import warnings

import numpy as np

import cuvil_tir
from cuvil_tir import dtype as D
from cuvil_tir.arith import Analyzer
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import IntImm, Var
from cuvil_tir.function import PrimFunc
from cuvil_tir.transform import verify
from cuvil_tir.transform.serial_threads import has_thread_loops, serial_threads
from cuvil_tir.visitor import substitute, used_vars

from .analysis import total_iterations
from .errors import DebugCheckError, ScheduleError, schedule_error
from .shrink import shrink
from .trace import decode, flatten

MAX_ITERATIONS = 20_000
"""Block instances the interpreter runs for one check, at most."""

SIZE_CHOICES = (13, 16, 8, 5)
"""Values tried for the symbolic sizes (the same for all of them)."""

RTOL, ATOL = 1e-4, 1e-5


def random_inputs(func, seed: int, sizes: dict | None = None):
    """Random arrays for the parameters (scalars: their value in ``sizes``, else 3);
    None when a shape is symbolic and ``sizes`` (``{id(var): int}``) does not fix it.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2, 3), "int8", name="A")])
        >>> random_inputs(f, 0)[0].dtype
        dtype('int8')
    """
    rng = np.random.default_rng(seed)
    binding = {v: IntImm(n, v.dtype) for v in _size_vars(func)
               for k, n in (sizes or {}).items() if k == id(v)}
    ana = Analyzer()
    out = []
    for p in func.params:
        if not isinstance(p, Buffer):
            value = (sizes or {}).get(id(p), 3)
            out.append(float(value) if D.is_float(p.dtype) else int(value))
            continue
        dims = [ana.simplify(substitute(s, binding)) for s in p.shape]
        if not all(isinstance(s, IntImm) for s in dims):
            return None
        dims = tuple(s.value for s in dims)
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


def _size_vars(func) -> list:
    found = []
    for p in func.params:
        for v in (used_vars(p.shape) if isinstance(p, Buffer) else [p]):
            if isinstance(v, Var) and all(v is not f for f in found):
                found.append(v)
    return found


def _instances(func, sizes: dict):
    """Block instances of ``func`` with its sizes bound, or None (not constant)."""
    binding = {v: IntImm(sizes[id(v)], v.dtype) for v in _size_vars(func) if id(v) in sizes}
    if not binding:
        return total_iterations(func.body)
    ana = Analyzer()

    def extent(e):
        e = ana.simplify(substitute(e, binding))
        return e.value if isinstance(e, IntImm) else None
    return total_iterations(func.body, extent)


def _verify(name, func):
    try:
        verify(func)
    except CuvilError as err:
        raise schedule_error(DebugCheckError, name, "produced ill-formed IR (debug "
                             f"mode verifier): {err.message}", func) from None


def _run(func, inputs):
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    # a GPU schedule means what its thread loops compute run serially (the barriers
    # that make the parallel run agree come with lowering)
    if isinstance(func, PrimFunc) and has_thread_loops(func):
        func = serial_threads(func)
    cuvil_tir.interpret(func, *arrays)
    return arrays


def _compare(name, new, expected, got) -> None:
    for p, want, have in zip(new.params, expected, got):
        if not isinstance(want, np.ndarray):
            continue
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


def _check_pair(name, old, new, inputs, cached):
    """Interpret ``old`` (or take ``cached`` outputs) and ``new`` on ``inputs``;
    DebugCheckError when they differ; the outputs of ``new``."""
    expected = cached if cached is not None else _run(old, inputs)
    try:
        got = _run(new, inputs)
    except CuvilError as err:
        raise schedule_error(DebugCheckError, name, "the reference interpreter failed "
                             f"on the scheduled IR: {err.message}", new) from None
    _compare(name, new, expected, got)
    return got


class _Twin:
    """The unscheduled function made small, scheduled along by the same trace."""

    def __init__(self, origin, trace_insts, new_schedule):
        small, why = shrink(origin, MAX_ITERATIONS)
        if small is None:
            raise _NoCheck(why)
        if new_schedule is None:
            raise _NoCheck("no schedule class was given to replay the steps on a twin")
        self.sch = new_schedule(small)
        self.values: dict = {}
        self.applied = 0
        self.last = None            # (func, outputs) of the twin's last check
        self.inputs = random_inputs(small, 0)
        self.advance(trace_insts)

    def advance(self, insts) -> None:
        for inst in insts:
            k = self.applied
            args = [decode(a, self.values, k) for a in inst.inputs]
            kwargs = {key: decode(v, self.values, k) for key, v in inst.attrs.items()}
            if inst.decision is not None:
                kwargs["decision"] = inst.decision
            try:
                out = self.sch._run(inst.name, args, kwargs)
            except ScheduleError as err:
                raise _NoCheck(f"{inst.name} does not apply to the smaller function "
                               f"({err.message.splitlines()[0]})") from None
            produced = [r for r in flatten(out) if not isinstance(r, bool)]
            for idx, rv in zip(inst.outputs, produced):
                self.values[idx] = rv
            self.applied += 1


class _NoCheck(Exception):
    """Why a step cannot be checked with the interpreter."""


class DebugChecker:
    """Debug mode's state for one schedule: the unscheduled function, the outputs of
    the last function checked, the twin, and whether it already warned.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> DebugChecker(f).check("noop", f, f)     # raises DebugCheckError on a mismatch

    ``new_schedule`` makes the twin's schedule from a function: the schedule being
    checked passes its own class (which imports this module).
    """

    def __init__(self, origin, new_schedule=None):
        self.origin = origin
        self.new_schedule = new_schedule
        self.last = None
        self.sizes = None
        self.twin = None
        self.warned = False

    def fork(self) -> "DebugChecker":
        """A checker for a copy of the schedule (the twin is rebuilt when needed)."""
        new = DebugChecker(self.origin, self.new_schedule)
        new.last, new.sizes, new.warned = self.last, self.sizes, self.warned
        return new

    def check(self, name, old, new, trace=(), inst=None) -> None:
        """Verify ``new``, then compare it with ``old`` (``trace``: the instructions
        before this step, ``inst``: this step, for the twin)."""
        _verify(name, new)
        try:
            if not self._direct(name, old, new):
                self._on_twin(name, trace, inst)
        except _NoCheck as why:
            self.twin = False
            self._warn(name, str(why))

    def _direct(self, name, old, new) -> bool:
        """Check on the function itself (sizes bound small); False when too big."""
        choices = [self.sizes] if self.sizes is not None else \
            [{id(v): n for v in _size_vars(new)} for n in SIZE_CHOICES]
        for sizes in choices:
            counts = [_instances(f, sizes) for f in (old, new)]
            if any(c is None for c in counts):
                raise _NoCheck("some loop extent is neither constant nor a size of a "
                               "parameter")
            if max(counts) > MAX_ITERATIONS:
                if self.sizes is None and _size_vars(new):
                    continue                  # a smaller choice may fit
                return False
            inputs = random_inputs(new, 0, sizes)
            if inputs is None:
                raise _NoCheck("a parameter's shape depends on a variable that is not "
                               "a size")
            cached = self.last[1] if self.last and self.last[0] is old else None
            try:
                expected = cached if cached is not None else _run(old, inputs)
            except CuvilError as err:
                if self.sizes is None and len(choices) > 1:
                    continue                  # e.g. a check refuses this size
                raise _NoCheck(f"the function before it fails on sizes {sorted(sizes.values())} "
                               f"({err.message.splitlines()[0]})") from None
            self.last = (new, _check_pair(name, old, new, inputs, expected))
            self.sizes = sizes
            return True
        return False

    def _on_twin(self, name, trace, inst) -> None:
        if self.twin is False:
            raise _NoCheck("an earlier step ended the smaller twin")
        if inst is None:
            raise _NoCheck("the step is not recorded in a trace")
        if not isinstance(self.origin, PrimFunc):
            raise _NoCheck("the schedule works on a module of several functions, "
                           "which has no smaller twin")
        if self.twin is None:
            self.twin = _Twin(self.origin, list(trace), self.new_schedule)
        else:
            self.twin.advance(list(trace)[self.twin.applied:])
        twin = self.twin
        old = twin.sch.func
        twin.advance([inst])
        new = twin.sch.func
        if new is old:
            return
        cached = twin.last[1] if twin.last and twin.last[0] is old else None
        try:
            expected = cached if cached is not None else _run(old, twin.inputs)
        except CuvilError as err:
            raise _NoCheck("the smaller function fails in the interpreter "
                           f"({err.message.splitlines()[0]})") from None
        twin.last = (new, _check_pair(name, old, new, twin.inputs, expected))

    def _warn(self, name, why) -> None:
        if self.warned:
            return
        self.warned = True
        warnings.warn(f"Schedule(debug=True): {name} and the steps after it are checked "
                      f"by the IR verifier only, not by the interpreter: {why}",
                      stacklevel=5)


def check_step(name: str, old, new, checker, trace=(), inst=None):
    """Verify ``new`` and compare it with ``old``; ``checker`` is the schedule's
    :class:`DebugChecker` (None: one for ``old``); returns it.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> isinstance(check_step("noop", f, f, None), DebugChecker)
        True
    """
    checker = checker if checker is not None else DebugChecker(old)
    checker.check(name, old, new, trace, inst)
    return checker
