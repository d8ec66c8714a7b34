"""``StepMemo``: the results of schedule steps, kept to be given again.

A primitive is a pure function of the immutable function it is applied to and of its
arguments (handles name blocks by name and loops by loop variable).  Candidates of a
search share long prefixes of steps (a child differs from its parent in one or two
decisions, and the space runs again from the start): with a memo, a step already
taken from the same function object with the same arguments returns the function it
made then, so the next step starts from that same object and is found too; only the
steps after the first differing decision run again (and are checked again).

What is kept: successful steps of non-sampling primitives, at most ``capacity`` of
them (least recently used leave first).  A step that raises is never kept: run
again, it raises again, with the same message.  Handles in a remembered result are
given as fresh objects (``remove_rv`` retires one handle object, as without the
memo).  A step whose arguments cannot be keyed exactly (an expression, an index map
naming variables of its own) is not remembered.  A memo serves the schedules of one
search: :class:`Schedule` takes it as ``memo=`` (never in debug mode, nor on a
module of several functions).

Example::

    >>> import cuvil_tir as T
    >>> from schedules import Schedule
    >>> A = T.placeholder((64,), name="A")
    >>> f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] + 1.0, name="B")])
    >>> memo = StepMemo()
    >>> def space(sch):
    ...     (i,) = sch.get_loops("B")
    ...     sch.split(i, [None, 8])
    >>> a, b = Schedule(f, memo=memo), Schedule(f, memo=memo)
    >>> space(a); space(b)
    >>> a.func is b.func, memo.hits
    (True, 2)
"""

from __future__ import annotations

import json
from collections import OrderedDict

import cuvil_tir.expr as E

from .handles import BlockRV, LoopRV
from .primitive import Renamed
from .trace_values import encode_index_map

#: steps a memo keeps by default (a GEMM candidate takes about 50)
CAPACITY = 4096


class _Unkeyable(Exception):
    """An argument the memo cannot key exactly: the step is not remembered."""


def _key(v):
    """An exact, hashable stand-in for a primitive's argument ``v`` (loops by the
    identity of their variable: the memo entry keeps the arguments alive)."""
    if v is None:
        return None
    if isinstance(v, BlockRV):
        return ("block", v.name, v.func)
    if isinstance(v, LoopRV):
        return ("loop", id(v.var), v.func)
    if isinstance(v, bool):
        return ("bool", bool(v))
    if isinstance(v, int):        # a sampled or derived int acts as its value
        return ("int", int(v))
    if isinstance(v, float):
        return ("float", float(v))
    if isinstance(v, str):
        return ("str", str(v))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((_key(k), _key(x)) for k, x in v.items()))
    if callable(v) and not isinstance(v, E.Expr):
        try:
            text = json.dumps(encode_index_map(v), sort_keys=True)
        except Exception as err:  # noqa: BLE001 - the primitive reports it: not kept
            raise _Unkeyable() from err
        if '"free"' in text:      # names variables of its own: not keyed by text
            raise _Unkeyable()
        return ("index_map", text)
    raise _Unkeyable()


def _handles(v, out: list) -> list:
    if isinstance(v, (BlockRV, LoopRV)):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _handles(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            _handles(x, out)
    return out


def _fresh(v, given: dict):
    """``v`` with new containers and new handle objects (an input handle given back
    is the caller's own input)."""
    if isinstance(v, (BlockRV, LoopRV)):
        got = given.get(id(v))
        if got is not None:
            return got
        return BlockRV(v.name, v.func) if isinstance(v, BlockRV) else LoopRV(v.var, v.func)
    if isinstance(v, Renamed):
        return Renamed(_fresh(v.result, given), dict(v.renames))
    if isinstance(v, (list, tuple)):
        return type(v)(_fresh(x, given) for x in v)
    if isinstance(v, dict):
        return {k: _fresh(x, given) for k, x in v.items()}
    return v


class StepMemo:
    """Remembered steps (see the module doc); ``hits`` and ``misses`` count lookups.

    Example::

        >>> m = StepMemo(capacity=2)
        >>> len(m), m.capacity
        (0, 2)
    """

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.hits = self.misses = 0
        self._steps: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._steps)

    def key(self, fn, func, args, kwargs):
        """The key of applying primitive ``fn`` to ``func`` with ``args``/``kwargs``,
        or None when they cannot be keyed exactly."""
        try:
            return (id(fn), id(func), _key(list(args)), _key(dict(kwargs)))
        except _Unkeyable:
            return None

    def get(self, key, args, kwargs):
        """``(new function, result)`` remembered under ``key``, the result's handles
        fresh, or None."""
        entry = self._steps.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._steps.move_to_end(key)
        self.hits += 1
        _, _, old_args, new_func, result = entry
        # the remembered call's input handles stand for this call's (same positions)
        given = {id(a): b for a, b in zip(_handles(old_args, []),
                                          _handles([list(args), dict(kwargs)], []))}
        return new_func, _fresh(result, given)

    def put(self, key, fn, func, args, kwargs, new_func, result) -> None:
        """Remember a successful step (the entry keeps ``fn``, ``func`` and the
        arguments alive, so the identities in its key stay theirs)."""
        inputs = [list(args), dict(kwargs)]
        mine = {id(h): h for h in _handles(inputs, [])}
        # containers copied (the caller may change its lists), handles kept: a result
        # handle that is an input stays that input, the others are copies
        self._steps[key] = (fn, func, _fresh(inputs, mine), new_func, _fresh(result, mine))
        self._steps.move_to_end(key)
        while len(self._steps) > self.capacity:
            self._steps.popitem(last=False)


__all__ = ["StepMemo", "CAPACITY"]
