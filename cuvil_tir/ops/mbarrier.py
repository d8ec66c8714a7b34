"""Bulk copies that complete on an mbarrier's phase (Hopper's ``cp.async.bulk`` and
``mbarrier``, sm_90+), as ops of the registry, each run by one thread:

* ``mbarrier_init(bar[i], count)``: barrier ``bar[i]`` (a ``uint64`` in shared
  memory) expects ``count`` arrivals per phase; its phase 0 is open;
* ``mbarrier_arrive(bar[i], tx)``: the thread arrives on the open phase, first adding
  ``tx`` bytes the phase also waits for (``mbarrier.arrive.expect_tx``; 0: a plain
  arrival);
* ``bulk_copy(dst[i], src[j], nbytes, bar[k])``: copy ``nbytes`` (a multiple of 16)
  from global ``src`` to shared ``dst``; the bytes count against ``bar[k]``'s open
  phase, which completes once all its arrivals and bytes are in;
* ``mbarrier_wait(bar[i], parity)``: wait until the phase of parity ``parity`` has
  completed (``mbarrier.try_wait.parity`` in a loop).

The interpreter gives them their meaning (:mod:`cuvil_tir.interp.mbarrier`): a bulk
copy's destination is written when its phase completes, and a thread may touch it
only after waiting on that phase (or after a block barrier that follows another
thread's wait); before that, with ``check_races=True``, the access is a
:class:`~cuvil_tir.errors.RaceError` naming the copy and the access.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op("bulk_copy").asynchronous, ops.get_op("mbarrier_wait").asynchronous
    ('bulk_copy', 'mbarrier_wait')
"""

from __future__ import annotations

from .. import dtype as D
from ..errors import CuvilError
from ..expr import BufferLoad, IntImm
from . import OpDef, register_op
from .gpu import Tile

BULK_OP, INIT_OP, ARRIVE_OP, WAIT_OP = ("bulk_copy", "mbarrier_init", "mbarrier_arrive",
                                        "mbarrier_wait")
#: a bulk copy moves a multiple of this many bytes, between addresses aligned to it
BULK_ALIGN = 16


def bulk_parts(call) -> tuple:
    """``(dst element, src element, bytes, barrier element)`` of a ``bulk_copy``,
    checked.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((64,), "float32", "A")
        >>> S = T.decl_buffer((64,), "float32", "S", scope="shared")
        >>> M = T.decl_buffer((1,), "uint64", "M", scope="shared")
        >>> bulk_parts(T.Call("int32", "bulk_copy", (S[0], A[0], T.const(256), M[0])))[2]
        256
    """
    if len(call.args) != 4 or not all(isinstance(a, BufferLoad) for a in
                                      (call.args[0], call.args[1], call.args[3])):
        raise CuvilError("bulk_copy takes (dst element, src element, bytes, barrier "
                         f"element), found {len(call.args)} arguments")
    dst, src, n, bar = call.args
    if not (isinstance(n, IntImm) and n.value > 0 and n.value % BULK_ALIGN == 0):
        raise CuvilError(f"bulk_copy: the bytes must be a positive constant multiple of "
                         f"{BULK_ALIGN}, found {n}")
    if dst.buffer.dtype != src.buffer.dtype:
        raise CuvilError(f"bulk_copy: {dst.buffer.name} is {dst.buffer.dtype} but "
                         f"{src.buffer.name} is {src.buffer.dtype}; the dtypes must agree")
    check_barrier(bar, "bulk_copy")
    if n.value * 8 % D.bits(dst.buffer.dtype):
        raise CuvilError(f"bulk_copy: {n.value} bytes is not a whole number of "
                         f"{dst.buffer.dtype} elements")
    return dst, src, n.value, bar


def check_barrier(bar, what: str) -> None:
    """Refuse a barrier argument that is not a ``uint64`` element of shared memory.

    Example::

        >>> import cuvil_tir as T
        >>> check_barrier(T.decl_buffer((1,), "uint64", "M", scope="shared")[0], "x")
    """
    buf = getattr(bar, "buffer", None)
    if buf is None or buf.dtype != "uint64" or buf.scope != "shared":
        raise CuvilError(f"{what}: the barrier must be an element of a uint64 buffer in "
                         f"shared memory, found {bar}")


def _bulk_tiles(args) -> tuple:
    n = args[2].value * 8 // D.bits(args[0].buffer.dtype)
    return (Tile(0, 1, n, access="write"), Tile(1, 1, n))


register_op(OpDef(BULK_OP, 4, "any", effect="writes", asynchronous="bulk_copy",
                  tiles=_bulk_tiles,
                  doc="bulk_copy(dst[i], src[j], nbytes, bar[k]): copy nbytes from global "
                      "to shared memory; lands when bar[k]'s phase completes"))
register_op(OpDef(INIT_OP, 2, "any", effect="barrier", asynchronous="mbarrier_init",
                  doc="mbarrier_init(bar[i], count): count arrivals per phase"))
register_op(OpDef(ARRIVE_OP, 2, "any", effect="barrier", asynchronous="mbarrier_arrive",
                  doc="mbarrier_arrive(bar[i], tx): arrive, the phase also waiting for "
                      "tx more bytes"))
register_op(OpDef(WAIT_OP, 2, "any", effect="barrier", asynchronous="mbarrier_wait",
                  doc="mbarrier_wait(bar[i], parity): wait for the phase of that parity"))

__all__ = ["ARRIVE_OP", "BULK_ALIGN", "BULK_OP", "INIT_OP", "WAIT_OP", "bulk_parts",
           "check_barrier"]
