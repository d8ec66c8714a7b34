"""What a refused schedule primitive costs, with the IR in its message rendered lazily.

A tuner tries many candidates and most refusals are never read.  The error keeps a
renderer and prints the function only when its message is read; this measures a
refused ``compute_at`` (an output block, on a matmul + bias + relu of ``n``) when the
message is left unread (the tuner's case) and when it is read (what every refusal cost
when the IR was printed eagerly).

Run: ``python benchmarks/refusal.py [n] [repeats]`` (``--quick``, what CI runs: n = 8,
5 repeats)

Example::

    >>> r = measure(n=8, repeats=3)
    >>> r["unread_us"] > 0 and r["read_us"] > 0
    True
"""

from __future__ import annotations

import statistics
import sys
import time

import cuvil_tir as T
import schedules as S


def _workload(n: int):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = T.compute((n, n), lambda i, j: C[i, j] + 1.0, name="D")
    E = T.compute((n, n), lambda i, j: T.max(D[i, j], T.const(0.0, "float32")), name="E")
    return T.create_prim_func([A, B, E])


def _refusal_seconds(sch, read: bool) -> float:
    blk = sch.get_block("E")
    loop = sch.get_loops("C")[0]
    t0 = time.perf_counter()
    try:
        sch.compute_at(blk, loop)
    except S.ScheduleError as err:
        if read:
            str(err)
    else:
        raise AssertionError("compute_at of the output block was accepted")
    return time.perf_counter() - t0


def measure(n: int = 64, repeats: int = 50) -> dict:
    """Median microseconds of one refused ``compute_at``, message unread and read.

    Example::

        >>> sorted(measure(n=4, repeats=2))
        ['read_us', 'ratio', 'unread_us']
    """
    sch = S.Schedule(_workload(n))
    unread = [_refusal_seconds(sch, False) for _ in range(repeats)]
    read = [_refusal_seconds(sch, True) for _ in range(repeats)]
    u, r = statistics.median(unread) * 1e6, statistics.median(read) * 1e6
    return {"unread_us": u, "read_us": r, "ratio": r / u}


if __name__ == "__main__":
    quick = sys.argv[1:2] == ["--quick"]
    n = 8 if quick else int(sys.argv[1]) if len(sys.argv) > 1 else 64
    repeats = 5 if quick else int(sys.argv[2]) if len(sys.argv) > 2 else 50
    res = measure(n, repeats)
    print(f"refused compute_at (n={n}, median of {repeats}): message unread "
          f"{res['unread_us']:.1f} us, message read (eager IR) {res['read_us']:.1f} us, "
          f"{res['ratio']:.1f}x")
