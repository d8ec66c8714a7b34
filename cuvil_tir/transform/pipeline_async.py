"""Asynchronous stages of a software pipeline: TVM's ``software_pipeline_async_stages``.

``sch.annotate(ko, "software_pipeline_async_stages", [0])`` beside
``software_pipeline_stage`` makes the statements of stage 0 (the copies of the next
tiles into shared memory) asynchronous copies (:mod:`cuvil_tir.ops.async_copy`:
``cp.async`` on sm_80+), so that the copies of later iterations are in flight while
the computation runs on this one.  :func:`async_statement` rewrites one copy
statement; :func:`inject_pipeline.rewrite <cuvil_tir.transform.software_pipeline>`
places the group ops: every step commits one group right after the async stage's
statements (an empty group where a guard skips them, so that every step counts one),
and waits before the first statement reading a tile they write, leaving in flight
the groups committed since the one it reads: ``consumer stage - async stage``
groups, one fewer when the consumer comes before the commit in the step.

A store ``S[...] = A[...]`` from global to shared memory of the same dtype becomes
``async_copy``: of the whole innermost ``vectorized`` loop when its lanes are
contiguous in both buffers and make 4, 8 or 16 bytes, else of the one element when it
is 4 or 8 bytes.  Any other store stays as it is (TVM's rule: a copy the engine
cannot take is done by the thread; it has landed at the wait all the same).

Example::

    >>> ASYNC
    'software_pipeline_async_stages'
"""

from __future__ import annotations

import numpy as np

from .. import dtype as D
from ..arith.index_eval import eval_np
from ..expr import BufferLoad, Call, IntImm, Var
from ..ops.async_copy import COMMIT_OP, COPY_BYTES, WAIT_OP
from ..stmt import BufferStore, Evaluate
from ..visitor import Mutator, post_order_visit, substitute

ASYNC = "software_pipeline_async_stages"
#: values the other variables of an index take when lanes are checked contiguous
_SAMPLES = (0, 1, 5)


def commit() -> Evaluate:
    """``async_commit_group()``.

    Example::

        >>> commit().value.op
        'async_commit_group'
    """
    return Evaluate(Call("int32", COMMIT_OP, ()))


def wait(n: int) -> Evaluate:
    """``async_wait_group(n)``.

    Example::

        >>> wait(1).value.args[0].value
        1
    """
    return Evaluate(Call("int32", WAIT_OP, (IntImm(n, "int32"),)))


def _is_copy(s) -> bool:
    v = s.value
    return (isinstance(v, BufferLoad) and v.buffer.scope == "global" and
            s.buffer.scope == "shared" and s.buffer.dtype == v.buffer.dtype)


def _vars(exprs) -> list:
    out = {}
    for e in exprs:
        post_order_visit(e, lambda n: out.setdefault(id(n), n) if isinstance(n, Var)
                         else None)
    return list(out.values())


def _contiguous(indices, lane, n: int) -> bool:
    """Whether ``indices`` move by one element along the last axis per step of
    ``lane`` (``0 .. n - 1``) and stay put along the others, whatever the other
    variables (checked at several values)."""
    others = [v for v in _vars(indices) if v is not lane]
    steps = np.arange(n)
    for sample in _SAMPLES:
        env = {id(v): np.int64(sample + k) for k, v in enumerate(others)}
        env[id(lane)] = steps
        got = [eval_np(ix, env) for ix in indices]
        if any(g is None for g in got):
            return False
        got = [np.broadcast_to(g, steps.shape) for g in got]
        if not (all((g == g[0]).all() for g in got[:-1]) and
                np.array_equal(got[-1] - got[-1][0], steps)):
            return False
    return True


class _Async(Mutator):
    def visit_For(self, s):
        store = s.body
        if s.kind == "vectorized" and isinstance(store, BufferStore) and _is_copy(store) \
                and isinstance(s.extent, IntImm):
            n = s.extent.value
            nbytes = n * D.bits(store.buffer.dtype) // 8
            lane = s.loop_var
            if nbytes in COPY_BYTES and _contiguous(store.indices, lane, n) and \
                    _contiguous(store.value.indices, lane, n):
                first = {lane: s.min}
                return Evaluate(Call("int32", "async_copy", (
                    BufferLoad(store.buffer, tuple(substitute(i, first) for i in store.indices)),
                    substitute(store.value, first), IntImm(nbytes, "int32"))))
        return self.generic_visit(s)

    def visit_BufferStore(self, s):
        nbytes = D.bits(s.buffer.dtype) // 8
        if _is_copy(s) and nbytes in COPY_BYTES:
            return Evaluate(Call("int32", "async_copy", (BufferLoad(s.buffer, s.indices),
                                                          s.value, IntImm(nbytes, "int32"))))
        return s


def async_statement(stmt):
    """``stmt`` with its copies from global to shared memory made asynchronous (module
    doc).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> S = T.decl_buffer((8,), "float32", "S", scope="shared")
        >>> print(async_statement(T.BufferStore(S, A[1], (T.const(1),))))
        T.evaluate(T.call_intrin("int32", "async_copy", S[1], A[1], 4))
    """
    return _Async().visit(stmt)


def wait_count(consumers, stage: int, commit_place: int) -> int:
    """The groups a step's wait leaves in flight: ``consumers`` are ``(stage, place in
    the step)`` of the statements reading what the async ``stage`` writes, the commit
    at ``commit_place``.

    Example::

        >>> wait_count([(1, 1)], 0, 0), wait_count([(2, 0)], 0, 1)
        (1, 1)
    """
    return min(sc - stage - (0 if commit_place < place else 1) for sc, place in consumers)


__all__ = ["ASYNC", "async_statement", "commit", "wait", "wait_count"]
