"""The Schedule: the current PrimFunc, the trace, and one method per primitive.

The class is thin on purpose: each method documents its primitive and calls
``self._apply(name, ...)``, which looks the pure primitive function up in the registry
(:mod:`schedules.primitive`), applies it to ``sch.func``, and only when it succeeded
replaces ``sch.func`` and appends the instruction to ``sch.trace``.  A refused
primitive raises a :class:`ScheduleError` and leaves both unchanged.  With
``debug=True`` every step is also checked (verifier + reference interpreter, see
:mod:`schedules.debug`).

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((16,), name="A")
    >>> f = T.create_prim_func([A, T.compute((16,), lambda i: A[i] * 2.0, name="B")])
    >>> sch = S.Schedule(f)
    >>> (i,) = sch.get_loops(sch.get_block("B"))
    >>> io, ii = sch.split(i, [None, 4])
    >>> sch.vectorize(ii)
    >>> [l.var.name for l in sch.get_loops(sch.get_block("B"))]
    ['i_0', 'i_1']
    >>> len(sch.trace)
    6
"""

from __future__ import annotations

import random

from cuvil_tir.deep import deep_ok
from cuvil_tir.block_regions import verify_block_regions
from cuvil_tir.function import PrimFunc

from . import primitives as _primitives  # noqa: F401  (registers every primitive)
from .errors import (RENDER_LEVELS, ForeignHandleError, ScheduleArgumentError, ScheduleError,
                     UnknownPrimitiveError, condense, schedule_error)
from .handles import BlockRV, LoopRV
from .primitive import PRIMITIVES, install_methods
from .sampling import Sampled
from .trace import Instruction, Trace, encode, flatten


def _key(rv):
    if isinstance(rv, BlockRV):
        return ("block", rv.name)
    if isinstance(rv, LoopRV):
        return ("loop", id(rv.var))
    return ("value", id(rv))


class Schedule:
    """Schedule ``func``; ``debug=True`` checks every step, ``seed`` fixes sampling,
    ``error_render`` says how much a refusal's message says: ``"detail"`` (the reason,
    then the IR with the culprit marked, rendered only when the message is read),
    ``"fast"`` (the kind of refusal in one fixed line: refusals can be counted by
    message) or ``"none"`` (``(not rendered)``); the error's class and code are the same.

    Every primitive is a method generated from its registration (see
    :func:`schedules.primitive.install_methods`): ``help(sch.split)`` shows the
    primitive's own docstring.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> Schedule(f).func is f
        True
    """

    @deep_ok
    def __init__(self, func: PrimFunc, debug: bool = False, seed=None,
                 error_render: str = "detail"):
        if not isinstance(func, PrimFunc):
            raise schedule_error(ScheduleArgumentError, "Schedule", f"expected a PrimFunc "
                                 f"(e.g. from T.create_prim_func), got "
                                 f"{type(func).__name__}")
        if error_render not in RENDER_LEVELS:
            raise schedule_error(ScheduleArgumentError, "Schedule", f"error_render: "
                                 f"expected one of {', '.join(map(repr, RENDER_LEVELS))}, "
                                 f"got {error_render!r}")
        self.error_render = error_render
        # primitives trust declared regions: a block whose T.reads under-states its
        # body would be scheduled into wrong results
        verify_block_regions(func)
        self._func = func
        self._trace = Trace()
        self.debug = debug
        self.seed = seed
        self._rng = random.Random(seed)
        self._rvs: list = []          # every handle the trace produced (keeps ids alive)
        self._index: dict = {}        # _key(handle) -> trace index
        self._retired: dict = {}      # id(handle) -> handle removed by remove_rv (kept alive)
        self._checker = None          # debug mode's DebugChecker, made at the first step
        self._origin = func           # the unscheduled function (debug mode's twin)

    # state ------------------------------------------------------------------------------

    @property
    def func(self) -> PrimFunc:
        """The current PrimFunc (immutable; each primitive makes a new one)."""
        return self._func

    @property
    def trace(self) -> Trace:
        """The instructions applied so far."""
        return self._trace

    def copy(self) -> "Schedule":
        """An independent schedule at the same point (the immutable IR is shared).

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> other = sch.copy()
            >>> _ = other.split(other.get_loops(other.get_block("B"))[0], [2, 4])
            >>> len(sch.trace), len(other.trace)
            (0, 3)
        """
        new = Schedule.__new__(Schedule)
        new._func = self._func
        new._trace = self._trace
        new.debug = self.debug
        new.error_render = self.error_render
        new.seed = self.seed
        new._rng = random.Random()
        new._rng.setstate(self._rng.getstate())
        new._rvs = list(self._rvs)
        new._index = dict(self._index)
        new._retired = dict(self._retired)
        new._checker = self._checker.fork() if self._checker is not None else None
        new._origin = self._origin
        return new

    def show(self) -> None:
        """Print the current function (its text form)."""
        print(self._func)

    def __repr__(self) -> str:
        return f"Schedule({self._func.name}, {len(self._trace)} instructions)"

    # the one path every primitive takes --------------------------------------------------

    @deep_ok
    def _apply(self, name: str, *args, **kwargs):
        return self._run(name, list(args), kwargs)

    def _run(self, name: str, args: list, kwargs: dict):
        try:
            return self._step(name, args, kwargs)
        except ScheduleError as err:
            condense(err, self.error_render, name)
            raise

    def _step(self, name: str, args: list, kwargs: dict):
        fn = PRIMITIVES.get(name)
        if fn is None:
            raise schedule_error(UnknownPrimitiveError, name, "this primitive is not "
                                 "registered (its module is not imported by "
                                 "schedules/primitives/__init__.py); registered: "
                                 f"{', '.join(sorted(PRIMITIVES))}")
        spec = fn.spec
        decision = kwargs.pop("decision", None) if spec.sampler else None
        self._check_not_removed(name, list(args) + list(kwargs.values()))
        # checked and normalised first: the trace records block names as handles
        args, kwargs = spec.check(args, kwargs)
        self._check_own_loops(name, args)
        if spec.sampler:
            rng_state = self._rng.getstate()
            result, decision = fn.raw(self._func, self._rng, *args, decision=decision,
                                      **kwargs)
            new_func = self._func
        else:
            new_func, result = fn.raw(self._func, *args, **kwargs)
        try:
            # after the primitive, so that its legality message comes first
            inputs = encode(args, self._index_of, name)
            attrs = {k: encode(v, self._index_of, name) for k, v in kwargs.items()}
        except Exception:
            if spec.sampler:
                self._rng.setstate(rng_state)
            raise
        if self.debug and new_func is not self._func:
            from .debug import DebugChecker
            if self._checker is None:
                self._checker = DebugChecker(self._origin)
            start = len(self._rvs)
            made = [k for k, rv in enumerate(rv for rv in flatten(result)
                                             if isinstance(rv, (BlockRV, LoopRV, Sampled)))]
            step = Instruction(name, inputs, attrs, [start + k for k in made], decision)
            self._checker.check(name, self._func, new_func, self._trace.insts, step)
        outputs = []
        for rv in flatten(result):
            if isinstance(rv, (BlockRV, LoopRV, Sampled)):
                outputs.append(self._register(rv))
        self._func = new_func
        self._trace = self._trace._recorded(Instruction(name, inputs, attrs, outputs,
                                                        decision))
        return result

    def _check_own_loops(self, name, args):
        # before the primitive: resolving a foreign loop in this function would
        # misreport it as a loop a primitive replaced
        for rv in flatten(args):
            if isinstance(rv, LoopRV) and self._index_of(rv) is None:
                raise schedule_error(ForeignHandleError, name, f"{rv!r} was not produced "
                                     "by this schedule (it is a handle of another "
                                     "Schedule, or was built by hand); get loop handles "
                                     "from this schedule's get_loops or its primitives' "
                                     "results")

    def _check_not_removed(self, name, args):
        for rv in flatten(args):
            if isinstance(rv, (BlockRV, LoopRV, Sampled)) and id(rv) in self._retired:
                raise schedule_error(ForeignHandleError, name, f"{rv!r} was removed from "
                                     "this schedule by remove_rv; get a new handle (for "
                                     "a block, get_block by its name)")

    def remove_rv(self, handle) -> None:
        """Retire ``handle`` (a BlockRV, LoopRV or sampled value of this schedule): using
        it afterwards, in ``get`` or a primitive, raises ``ForeignHandleError`` (an
        ``IndexError``).  The function and the trace are unchanged; a block stays
        reachable through a new ``get_block``.  Not traced.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> (i,) = sch.get_loops("B")
            >>> sch.remove_rv(i)
            >>> sch.get(i)
            Traceback (most recent call last):
            ...
            schedules.errors.ForeignHandleError: [CVL-E103] get: LoopRV(i) was removed ...
        """
        if not isinstance(handle, (BlockRV, LoopRV, Sampled)):
            raise schedule_error(ScheduleArgumentError, "remove_rv", "expected a BlockRV, "
                                 f"a LoopRV or a sampled value, found "
                                 f"{type(handle).__name__} {handle!r}")
        # a later get_block / get_loops returns a handle equal to this one, which stays
        # usable: what is removed is this one object
        self._retired[id(handle)] = handle

    # inspecting ----------------------------------------------------------------------------

    def get(self, handle):
        """What ``handle`` names in the current function: a BlockRV (or a block name)
        its ``Block``, a LoopRV its ``For``, a sampled value its int.  Not traced.

        A loop handle this schedule did not produce raises ``ForeignHandleError``; a
        loop a primitive replaced (``split``'s input) raises ``ScheduleError``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> io, ii = sch.split(sch.get_loops("B")[0], [2, 4])
            >>> sch.get(ii).extent.value, sch.get("B").name
            (4, 'B')
        """
        from cuvil_tir.analysis import tree
        from .analysis import block_path, loop_path
        self._check_not_removed("get", [handle])
        if isinstance(handle, (BlockRV, str)):
            rv = BlockRV(handle) if isinstance(handle, str) else handle
            return tree.get(self._func, block_path(self._func, rv, "get")).block
        if isinstance(handle, Sampled):
            if self._index_of(handle) is None:
                raise schedule_error(ForeignHandleError, "get", f"sampled value {handle!r} "
                                     "was not drawn by this schedule")
            return int(handle)
        if isinstance(handle, LoopRV):
            self._check_own_loops("get", [handle])
            return tree.get(self._func, loop_path(self._func, handle, "get"))
        raise schedule_error(ScheduleArgumentError, "get", f"expected a BlockRV, a block "
                             f"name, a LoopRV or a sampled value, found "
                             f"{type(handle).__name__} {handle!r}")

    def _index_of(self, rv):
        return self._index.get(_key(rv))

    def _register(self, rv) -> int:
        idx = len(self._rvs)
        self._rvs.append(rv)
        self._index[_key(rv)] = idx
        return idx


install_methods(Schedule)
