"""Asynchronous copies: a copy that lands later, at the wait that covers it.

Three ops of the registry, each run by one thread (as ``cp.async`` runs on sm_80+):

* ``async_copy(dst[i], src[j], nbytes)``: start copying ``nbytes`` bytes (4, 8 or 16)
  from ``src`` at element ``j`` to ``dst`` at element ``i`` (``dst`` on-chip, of the
  same dtype as ``src``); the copy joins the thread's open *group*;
* ``async_commit_group()``: close the open group (a later wait counts it);
* ``async_wait_group(n)``: wait until at most ``n`` of the thread's closed groups are
  still in flight: the copies of every older group have landed.

What declares them is ``OpDef.asynchronous`` (``"copy"``, ``"commit"``, ``"wait"``),
which the interpreter and the passes read (never the op's name).  The interpreter
gives them their exact meaning (:mod:`cuvil_tir.interp.async_copy`): the source is
read when the copy starts, the destination written when a wait covers it; with
``check_races=True`` touching a destination before that wait is a
:class:`~cuvil_tir.errors.RaceError` naming the copy and the access, and another
thread reading it before a barrier that follows the wait is a race as for any shared
write.  A backend spells them (CUDA: ``cp.async.ca/cg.shared.global``,
``cp.async.commit_group``, ``cp.async.wait_group``); an accelerator may spell them as
its DMA queue.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op("async_copy").asynchronous, ops.get_op("async_wait_group").asynchronous
    ('copy', 'wait')
"""

from __future__ import annotations

from .. import dtype as D
from ..errors import CuvilError
from ..expr import BufferLoad, IntImm
from . import OpDef, get_op, has_op, register_op
from .gpu import Tile

#: the bytes one asynchronous copy may move
COPY_BYTES = (4, 8, 16)
COPY_OP, COMMIT_OP, WAIT_OP = "async_copy", "async_commit_group", "async_wait_group"


def asynchronous(call) -> str | None:
    """The role of ``call`` in asynchronous copies (``"copy"``, ``"commit"``,
    ``"wait"``), or None.

    Example::

        >>> import cuvil_tir as T
        >>> asynchronous(T.Call("int32", "async_commit_group", ())), asynchronous(None)
        ('commit', None)
    """
    op = getattr(call, "op", None)
    if not isinstance(op, str) or not has_op(op):
        return None
    return get_op(op).asynchronous


def copy_parts(call) -> tuple:
    """``(dst element, src element, bytes)`` of an ``async_copy`` call, checked.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> S = T.decl_buffer((8,), "float32", "S", scope="shared")
        >>> copy_parts(T.Call("int32", "async_copy", (S[0], A[4], T.const(16))))[2]
        16
    """
    if len(call.args) != 3:
        raise CuvilError(f"async_copy takes (dst element, src element, bytes), found "
                         f"{len(call.args)} arguments")
    dst, src, n = call.args
    if not (isinstance(dst, BufferLoad) and isinstance(src, BufferLoad)):
        raise CuvilError("async_copy: its first two arguments are buffer elements "
                         f"(dst[i], src[j]), found {type(dst).__name__}, {type(src).__name__}")
    if not (isinstance(n, IntImm) and n.value in COPY_BYTES):
        raise CuvilError(f"async_copy: the bytes must be a constant among {COPY_BYTES}, "
                         f"found {n}")
    if dst.buffer.dtype != src.buffer.dtype:
        raise CuvilError(f"async_copy: {dst.buffer.name} is {dst.buffer.dtype} but "
                         f"{src.buffer.name} is {src.buffer.dtype}; an asynchronous copy "
                         "moves bytes, the dtypes must agree")
    elem = D.bits(dst.buffer.dtype) // 8
    if n.value % elem:
        raise CuvilError(f"async_copy: {n.value} bytes is not a whole number of "
                         f"{dst.buffer.dtype} elements")
    return dst, src, n.value


def _copy_tiles(args) -> tuple:
    # one row of nbytes: the barrier pass and the memory planner see what it writes
    n = args[2].value * 8 // max(8, D.bits(args[0].buffer.dtype))
    return (Tile(0, 1, n, access="write"), Tile(1, 1, n))


register_op(OpDef(COPY_OP, 3, "any", effect="writes", asynchronous="copy", tiles=_copy_tiles,
                  doc="async_copy(dst[i], src[j], nbytes): start copying nbytes from src "
                      "to dst; it lands at the async_wait_group that covers its group"))
register_op(OpDef(COMMIT_OP, 0, "any", effect="barrier", asynchronous="commit",
                  doc="close the thread's open group of asynchronous copies"))
register_op(OpDef(WAIT_OP, 1, "any", effect="barrier", asynchronous="wait",
                  doc="async_wait_group(n): every group of the thread but the n newest "
                      "has landed"))

__all__ = ["COMMIT_OP", "COPY_BYTES", "COPY_OP", "WAIT_OP", "asynchronous", "copy_parts"]
