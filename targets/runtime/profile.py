"""``mod.profile``: time per block of a built function.

The profiling build cuts the function into its top-level stages
(:func:`cuvil_tir.debug.stages.stages`), builds each for the module's target and runs
them in order on the caller's arrays, timing each one (median of ``repeat`` runs).
Intermediate buffers live in global memory during profiling, so a stage whose buffer
the normal build keeps in registers may look slower here; the shares still show
where the time goes.  ``T.graph(func, profile=mod.profile(...))`` colours the hot spot.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((64,), name="A")
    >>> B = T.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((64,), lambda i: B[i] + 1.0, name="C")
    >>> mod = targets.build(T.create_prim_func([A, C]))
    >>> prof = mod.profile(np.ones(64, "float32"), np.zeros(64, "float32"), repeat=2)
    >>> sorted(prof.blocks)
    ['B', 'C']
"""

from __future__ import annotations

import time

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.arith import simplify
from cuvil_tir.debug.stages import stages
from cuvil_tir.errors import ArgumentError
from cuvil_tir.expr import IntImm, const
from cuvil_tir.target import build
from cuvil_tir.visitor import substitute, used_vars


class ProfileResult:
    """Seconds per stage (``blocks``: ``{label: median seconds}``) and their sum.

    Example::

        >>> r = ProfileResult({"B": 0.002, "C": 0.001})
        >>> round(r.total, 3), "67%" in str(r)
        (0.003, True)
    """

    def __init__(self, blocks: dict):
        self.blocks = dict(blocks)
        self.total = sum(self.blocks.values())

    def __str__(self) -> str:
        width = max([len(k) for k in self.blocks] + [5])
        lines = [f"{'block':<{width}}  {'ms':>10}  share"]
        for k, v in self.blocks.items():
            share = v / self.total if self.total else 0.0
            lines.append(f"{k:<{width}}  {v * 1e3:>10.4f}  {share:>5.0%}")
        return "\n".join(lines)

    __repr__ = __str__


def profile(module, func, args, repeat: int = 5) -> ProfileResult:
    """Build ``func``'s stages for ``module.target`` and time them on ``args``.

    ``args`` are checked by the module first (a wrong argument is an ArgumentError);
    the outputs hold the function's results afterwards, as after ``module(*args)``.
    """
    module(*args)                           # checks the arguments, warms the caches
    parts = [(label, build(f, module.target)) for label, f in stages(func)]
    n_params = len(func.params)
    extra = []
    for p in parts[0][1].signature.params[n_params:] if parts else ():
        shape = tuple(_dim(d, module, args) for d in p.shape)
        extra.append(np.zeros(shape, D.to_numpy(p.dtype)))
    times = {}
    for label, mod in parts:
        samples = []
        for _ in range(max(1, int(repeat))):
            t0 = time.perf_counter()
            mod(*args, *extra)
            samples.append(time.perf_counter() - t0)
        times[label] = float(np.median(samples))
    return ProfileResult(times)


def _dim(d, module, args):
    if isinstance(d, int):
        return d
    sizes = {}
    for p, a in zip(module.signature.params, args):
        if p.kind == "buffer":
            for sd, n in zip(p.shape, np.shape(a)):
                if not isinstance(sd, int):
                    sizes.setdefault(id(sd), n)
    vals = {v: const(int(sizes[id(v)]), v.dtype) for v in used_vars(d) if id(v) in sizes}
    out = simplify(substitute(d, vals))
    if not isinstance(out, IntImm):
        raise ArgumentError(f"profile: cannot size the intermediate dimension {d} from the "
                            "arguments")
    return out.value
