"""How many bytes a loop nest fetches from beyond the L2 cache: the cache-blocking
term of the analytic prior (:mod:`.prior`), read from the loop nest the schedule made
(each access's strides per loop, :mod:`.features`) and the L2 size the target's
:class:`~cuvil_tir.target.Machine` declares.

Walking out from the innermost loop, the first loop whose iterations together touch
more than L2 is where reuse stops: each of its iterations fetches again what the
accesses that move with it touch inside it, while an access that does not move with
it (the operand it reuses) is fetched once per run of that loop; every loop outside
repeats the whole.  A nest that fits L2 fetches each byte once.

On a 2048^3 fp32 GEMM with a 6 x 64 register tile (one core of this 2-core Xeon), 342
row tiles inside each panel of B's columns fetch 0.5 GB and ran at 0.85x numpy, 18
row tiles of 19 blocks 0.3 GB at 0.92x, and one row tile per block (B's panels
streamed again for every row tile) 5.6 GB at 0.46x.

Example::

    >>> a = ({"i": 1.0, "k": 1.0}, 4)       # A[i, k]: moves with i and k, 4 bytes
    >>> b = ({"k": 1.0, "j": 1.0}, 4)       # B[k, j]
    >>> loops = [("j", 64), ("i", 64), ("k", 256)]
    >>> beyond_l2([a, b], loops, 1 << 20)   # 128 KiB: fits, each byte once
    131072
    >>> beyond_l2([a, b], loops, 64 << 10)  # the i loop overflows: A again per j
    4259840
"""

from __future__ import annotations


def _footprint(access, loops) -> int:
    strides, width = access
    n = width
    for var, extent in loops:
        if strides.get(var, 0):
            n *= extent
    return n


def beyond_l2(accesses, loops, l2_bytes: int) -> int:
    """Bytes fetched from beyond L2 (module doc) by ``accesses`` (``(strides, width)``:
    loop var -> stride, bytes per element) under ``loops`` (``(var, extent)``,
    outermost first)."""
    def touched(k):
        return sum(_footprint(a, loops[k:]) for a in accesses)

    for k in range(len(loops) - 1, -1, -1):
        if touched(k) <= l2_bytes:
            continue
        var, extent = loops[k]
        inner = loops[k + 1:]
        per_run = sum(_footprint(a, inner) * (extent if a[0].get(var, 0) else 1)
                      for a in accesses)
        outer = 1
        for _, e in loops[:k]:
            outer *= e
        return per_run * outer
    return touched(0)


__all__ = ["beyond_l2"]
