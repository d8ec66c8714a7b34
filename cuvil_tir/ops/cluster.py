"""Thread-block clusters (Hopper, sm_90+): blocks launched together on neighbouring
multiprocessors, synchronised by a cluster barrier, each reading the others' shared
memory (distributed shared memory, DSMEM).

A kernel declares its cluster shape on its grid loops: the annotation
``{"cluster": n}`` on a loop bound to ``blockIdx.x`` (``y``, ``z``) groups ``n``
consecutive blocks along that axis into one cluster (the axis's extent must be a
multiple of ``n``).  A block's *rank* in its cluster is CUDA's ``%cluster_ctarank``,
``x + cx * (y + cy * z)`` from its position ``(x, y, z) = blockIdx % (cx, cy, cz)``
in the cluster: :func:`cta_rank`.  Two ops of the registry work on clusters:

* ``cluster_sync()``: every thread of every block of the cluster arrives before any
  goes on, and shared-memory writes before it are seen by the cluster's reads after
  it (``barrier.cluster.arrive.release`` + ``wait.acquire``; it orders the threads
  of one block too, so it also ends a phase of the block barrier's checks);
* ``cluster_arrive()`` and ``cluster_wait()``: the two halves of it, so that work
  goes on in between: what a thread did before its arrive is ordered with what every
  thread of the cluster does after its next wait (not what it does in between).  A
  second arrive before the wait, or a wait without an arrive, is refused.  Neither
  is a block barrier for the barrier pass (it places ``__syncthreads()`` as without
  them);
* ``dsmem_load(S[i], rank)``: the element ``S[i]`` of the copy of the shared buffer
  ``S`` that belongs to the block of rank ``rank`` in this cluster (``mapa`` then
  ``ld.shared::cluster``).

A block must not exit while another block of its cluster may still read its shared
memory: a ``cluster_sync()`` after the last ``dsmem_load`` (or a ``cluster_arrive()``
after it and a ``cluster_wait()`` before the end) keeps every block alive until all
have read.  The interpreter runs the blocks of a cluster together and
checks both rules (``T.interpret(..., check_races=True)``).

The limit of a cluster is :data:`PORTABLE_CLUSTER_SIZE` blocks (8, CUDA's portable
size): larger clusters (16 on an H100) need a non-portable launch attribute that
Cuvil's launcher does not set, so they are refused.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def k(A: T.Buffer((8,), "float32")):
    ...     for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 4}):
    ...         for t in T.thread_binding(1, thread="threadIdx.x"):
    ...             A[b] = T.float32(1)
    ... ''')
    >>> cluster_shape(f.body)
    (4, 1, 1)
    >>> cta_rank((6, 0, 0), (4, 1, 1))
    2
"""

from __future__ import annotations

from ..errors import LoweringError
from ..expr import BufferLoad, Call, IntImm
from ..stmt import Evaluate, For
from ..thread_axes import thread_axis
from ..visitor import post_order_visit
from . import OpDef, register_op

#: the loop annotation declaring the blocks of a cluster along a grid axis
CLUSTER_KEY = "cluster"
#: the most blocks in one cluster every sm_90 GPU launches (CUDA's portable size)
PORTABLE_CLUSTER_SIZE = 8
SYNC_OP, DSMEM_OP = "cluster_sync", "dsmem_load"
ARRIVE_OP, WAIT_OP = "cluster_arrive", "cluster_wait"


def _grid_loops(kernel) -> list:
    # the thread loops of a kernel (the transform package's thread_loops imports ops)
    out = []
    post_order_visit(kernel, lambda n: out.append(n) if isinstance(n, For) and
                     n.kind == "thread_binding" and thread_axis(n.thread_tag).launched
                     else None)
    return out


def cluster_shape(kernel) -> tuple | None:
    """``(cx, cy, cz)``: the blocks of one cluster along x, y, z, from the ``cluster``
    annotations of ``kernel``'s grid loops, or None for a kernel without clusters.
    A cluster annotation off a grid loop, not a positive int, over
    :data:`PORTABLE_CLUSTER_SIZE` blocks in all or not dividing its axis's extent is a
    ``LoweringError`` saying what to change.

    Example::

        >>> cluster_shape(None) is None
        True
    """
    if kernel is None:
        return None
    shape, found, seen = [1, 1, 1], False, {}
    for loop in _grid_loops(kernel):
        n = dict(loop.annotations or ()).get(CLUSTER_KEY)
        if n is None:
            continue
        axis = thread_axis(loop.thread_tag)
        where = f"loop {loop.loop_var.name} bound to {loop.thread_tag}"
        if axis.level != "grid":
            raise LoweringError(f"{where} has the annotation {CLUSTER_KEY}={n!r}; a "
                                "cluster groups blocks: annotate the loop bound to "
                                "blockIdx.x (y, z) instead")
        if isinstance(n, IntImm):
            n = n.value
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise LoweringError(f"{where}: the cluster annotation is the number of blocks "
                                f"of a cluster along the axis, a positive int; found {n!r}")
        if not isinstance(loop.extent, IntImm) or loop.extent.value % n:
            raise LoweringError(f"{where} has the extent {loop.extent}, which is not a "
                                f"constant multiple of its cluster size {n}: the grid is "
                                "made of whole clusters; pad the axis to a multiple of "
                                f"{n} or choose a cluster size dividing it")
        if seen.setdefault(axis.dim, n) != n:
            raise LoweringError(f"{where} declares clusters of {n} blocks along "
                                f"{loop.thread_tag}, another loop bound to it "
                                f"{seen[axis.dim]}: one kernel has one cluster shape; "
                                "annotate the loops alike")
        shape[axis.dim], found = n, True
    if not found:
        return None
    total = shape[0] * shape[1] * shape[2]
    if total > PORTABLE_CLUSTER_SIZE:
        raise LoweringError(f"a cluster of {total} blocks {tuple(shape)}; Cuvil launches "
                            f"portable clusters of at most {PORTABLE_CLUSTER_SIZE} blocks "
                            "(16 needs a non-portable launch attribute it does not set): "
                            "use a smaller cluster annotation")
    return tuple(shape)


def cta_rank(block: tuple, shape: tuple) -> int:
    """The rank in its cluster of the block at grid position ``block`` (x, y, z) in
    clusters of ``shape`` (CUDA's ``%cluster_ctarank``).

    Example::

        >>> cta_rank((3, 1, 0), (2, 2, 1))
        3
    """
    x, y, z = (b % s for b, s in zip(block, shape))
    return x + shape[0] * (y + shape[1] * z)


def cluster_of(block: tuple, shape: tuple) -> tuple:
    """The grid position of the cluster holding ``block``.

    Example::

        >>> cluster_of((5, 3, 0), (4, 2, 1))
        (1, 1, 0)
    """
    return tuple(b // s for b, s in zip(block, shape))


def is_cluster_sync(s, op: str = SYNC_OP) -> bool:
    """Whether statement ``s`` is ``T.evaluate(T.call_intrin("int32", op))`` (by
    default ``cluster_sync``; :data:`ARRIVE_OP`, :data:`WAIT_OP`).

    Example::

        >>> import cuvil_tir as T
        >>> is_cluster_sync(T.Evaluate(T.Call("int32", SYNC_OP, ())))
        True
    """
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op == op


def dsmem_parts(call) -> tuple:
    """``(element, rank)`` of a ``dsmem_load``, checked: the element a scalar load of
    a ``shared`` buffer of the call's dtype.

    Example::

        >>> import cuvil_tir as T
        >>> S = T.decl_buffer((2,), "float32", "S", scope="shared")
        >>> dsmem_parts(T.Call("float32", DSMEM_OP, (S[1], T.const(3))))[1].value
        3
    """
    if len(call.args) != 2 or not isinstance(call.args[0], BufferLoad):
        raise LoweringError(f"dsmem_load takes (an element of a shared buffer, the rank of "
                            f"the block owning it), found {call}")
    elem, rank = call.args
    if elem.buffer.scope != "shared" or elem.dtype != call.dtype or elem.dtype.count("x"):
        raise LoweringError(f"dsmem_load reads one {call.dtype} element of a shared buffer; "
                            f"found {elem.buffer.name} ({elem.buffer.scope}, "
                            f"{elem.buffer.dtype}) in {call}")
    return elem, rank


register_op(OpDef(SYNC_OP, 0, "any", effect="barrier", collective="cluster",
                  doc="cluster_sync(): every thread of every block of the cluster arrives "
                      "before any goes on; shared writes before it are seen after it"))
# opaque, not barriers: neither waits for the whole block (cuvil_tir.ops.gpu)
register_op(OpDef(ARRIVE_OP, 0, "any", effect="opaque", collective="cluster",
                  doc="cluster_arrive(): this thread arrives on the cluster barrier "
                      "(release) and goes on"))
register_op(OpDef(WAIT_OP, 0, "any", effect="opaque", collective="cluster",
                  doc="cluster_wait(): wait until every thread of the cluster arrived "
                      "(acquire)"))
register_op(OpDef(DSMEM_OP, 2, "any", effect="reads",
                  doc="dsmem_load(S[i], rank): S[i] of the block of that rank in the "
                      "cluster (distributed shared memory)"))

__all__ = ["ARRIVE_OP", "CLUSTER_KEY", "DSMEM_OP", "WAIT_OP", "PORTABLE_CLUSTER_SIZE", "SYNC_OP", "cluster_of",
           "cluster_shape", "cta_rank", "dsmem_parts", "is_cluster_sync"]
