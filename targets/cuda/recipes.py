"""GPU schedules for common workloads, shared by the tests, tutorial 07 and
``benchmarks/cuda.py``.  Each takes a :class:`schedules.Schedule` of the te function
and binds it for the ``cuda`` target; each is a handful of ordinary primitives, meant
to be read as examples.

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> A = T.placeholder((256,), name="A")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((256,), lambda i: A[i] + 1.0, name="B")]))
    >>> elementwise(sch, "B", threads=128)
    >>> [l.thread_tag for l in __import__("cuvil_tir").transform.gpu_threads.thread_loops(sch.func.body.block.body)]
    ['blockIdx.x', 'threadIdx.x']
"""

from __future__ import annotations


def elementwise(sch, block: str, threads: int = 256) -> None:
    """Fuse all loops of ``block``, split by ``threads``, bind blocks and threads.

    Example::

        >>> elementwise.__name__
        'elementwise'
    """
    loops = sch.get_loops(sch.get_block(block))
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def gemm(sch, block: str = "C", bm: int = 32, bn: int = 32, bk: int = 8, tm: int = 4,
         tn: int = 4, vector: int = 1) -> None:
    """Shared-memory tiled GEMM: a ``bm x bn`` tile per thread block, ``tm x tn`` per
    thread accumulated in ``local`` registers, ``bk``-deep slices of A and B staged
    through ``shared`` memory by all threads together (``vector`` elements per thread
    and copy: 4 gives 16-byte loads).

    Example::

        >>> gemm.__name__
        'gemm'
    """
    blk = sch.get_block(block)
    i, j, k = sch.get_loops(blk)
    by, ty, ti = sch.split(i, [None, bm // tm, tm])
    bx, tx, tj = sch.split(j, [None, bn // tn, tn])
    ko, ki = sch.split(k, [None, bk])
    sch.reorder(by, bx, ko, ty, tx, ki, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    cl = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(cl, bx)
    wi, wj = sch.get_loops(cl)[-2:]
    wy, wi = sch.split(wi, [bm // tm, tm])
    wx, wj = sch.split(wj, [bn // tn, tn])
    sch.reorder(wy, wx, wi, wj)
    sch.bind(wy, "threadIdx.y")
    sch.bind(wx, "threadIdx.x")
    for idx in (0, 1):
        sh = sch.cache_read(blk, idx, "shared")
        sch.compute_at(sh, ko)
        ax0, ax1 = sch.get_loops(sh)[-2:]
        if vector > 1:
            # the vector is the innermost axis, so its offsets stay provably aligned
            ax1, vec = sch.split(ax1, [None, vector])
            sch.vectorize(vec)
        fused = sch.fuse(ax0, ax1)
        _, t1, t0 = sch.split(fused, [None, bm // tm, bn // tn])
        sch.bind(t1, "threadIdx.y")
        sch.bind(t0, "threadIdx.x")


__all__ = ["elementwise", "gemm"]
