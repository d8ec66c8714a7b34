"""An all-reduce across threads of a block, as IR: every thread of a reduction group
ends with the combination of the group's values.

The threads at the point of the reduction are the loops bound to ``threadIdx.*``
around it (:class:`ThreadSpace`: each axis's variable, the extent of its loop and the
block's launch extent); the *reduction axes* are some of them, a *group* is the
threads that differ only along those axes.  Two forms, chosen from the shape:

* **warp shuffles**: a one-buffer ``sum``/``max``/``min`` whose reduction axes are the
  fastest-varying ones of the block (``threadIdx.x``, or ``x`` and ``y`` when
  ``x`` is reduced whole), so that a group is ``G`` consecutive threads: ``G`` a
  power of two up to 32 is one ``warp_<op>(v, G)``; ``G`` a multiple of 32 reduces
  each warp, puts the warp results in ``shared`` memory and reduces them again in
  every warp;
* **a tree in shared memory**, for everything else (a product, a tuple such as
  argmax, a reduction over ``threadIdx.y`` with ``threadIdx.x`` kept, any group
  size): each thread stores its value at ``group * G + member``, then ``log2 G``
  steps combine ``member`` with ``member + offset`` (into a register, then back:
  reads and writes of one step never meet), and every thread reads the group's first
  slot.

Barriers are left to :func:`~cuvil_tir.transform.gpu_sync.insert_barriers`, which
sees the shared writes and reads.

Example::

    >>> import cuvil_tir as T
    >>> tx = T.var("tx")
    >>> space = ThreadSpace((("threadIdx.x", tx, 64, 64),))
    >>> stmts, bufs = allreduce("sum", None, (T.var("v", "float32"),), space,
    ...                         {"threadIdx.x"}, "red")
    >>> [b.scope for b in bufs]
    ['local', 'shared']
"""

from __future__ import annotations

from dataclasses import dataclass

from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import EQ, LT, Call, FloorDiv, FloorMod, IntImm, Var
from ..analysis.reducer import identity
from ..op import if_then_else
from ..stmt import BufferStore, IfThenElse, LetStmt, seq
from ..thread_axes import thread_axis

WARP = 32
_WARP_OPS = ("sum", "max", "min")


@dataclass(frozen=True)
class ThreadSpace:
    """``((tag, var, loop extent, launch extent), ...)`` of the ``threadIdx`` axes
    around a point of a kernel."""

    axes: tuple

    def ordered(self) -> list:
        """The axes fastest first (``x``, ``y``, ``z``)."""
        return sorted(self.axes, key=lambda a: thread_axis(a[0]).dim)

    def linear(self, tags) -> tuple:
        """``(index, count)``: the linear index over the axes ``tags`` (fastest first,
        by loop extent) and the number of threads it counts."""
        index, count = None, 1
        for tag, var, extent, _ in self.ordered():
            if tag in tags:
                term = var if count == 1 else var * IntImm(count, var.dtype)
                index = term if index is None else index + term
                count *= extent
        return (index if index is not None else IntImm(0, self.dtype)), count

    @property
    def dtype(self) -> str:
        """The index dtype of the thread variables."""
        return self.axes[0][1].dtype if self.axes else "int32"


def _warp(kind: str, value, width: int):
    return Call(value.dtype, f"warp_{kind}", (value, IntImm(width, "int32")))


def _shuffle_form(kind, space: ThreadSpace, red: set) -> int | None:
    """The group size when the warp-shuffle form applies, else None."""
    if kind not in _WARP_OPS:
        return None
    axes = space.ordered()
    if any(ext != launch for tag, _, ext, launch in axes if tag in red):
        return None
    # the reduction axes must be the fastest-varying ones of the block
    seen_other = False
    for tag, _, _, launch in axes:
        if tag in red:
            if seen_other:
                return None
        elif launch > 1:
            seen_other = True
    g = 1
    for tag, _, ext, _ in axes:
        if tag in red:
            g *= ext
    if (g <= WARP and g & (g - 1) == 0) or g % WARP == 0:
        return g
    return None


def allreduce(kind, reducer, values: tuple, space: ThreadSpace, red: set, name: str):
    """``(statements, buffers)``: the statements leave in ``buffers[:n]`` (one
    ``local`` element per value) the combination over each group of the ``values``
    (one per component of ``reducer``, or one value for a one-buffer ``kind``); the
    other buffers are the ``shared`` scratch they use."""
    dsts = tuple(Buffer((IntImm(1, "int32"),), v.dtype, f"{name}{k}" if len(values) > 1
                        else name, scope="local") for k, v in enumerate(values))
    zero = IntImm(0, "int32")
    g = _shuffle_form(kind, space, red) if len(values) == 1 else None
    if g is not None:
        stmts, scratch = _shuffles(kind, values[0], dsts[0], space, red, g, name)
        return stmts, list(dsts) + scratch
    if reducer is None:
        raise LoweringError(f"an all-reduce of {kind} needs its reducer")
    member, size = space.linear(red)
    group, groups = space.linear({a[0] for a in space.axes} - red)
    for tag, _, ext, launch in space.axes:
        if ext != launch:
            raise LoweringError(f"a cross-thread reduction over {sorted(red)} runs under a "
                                f"loop bound to {tag} with {ext} of the block's {launch} "
                                "threads: its barriers would not be reached by every "
                                f"thread; bind {tag} loops of one extent in this kernel")
    bufs = tuple(Buffer((IntImm(size * groups, "int32"),), v.dtype, f"{name}_tree{k}",
                        scope="shared") for k, v in enumerate(values))
    dt = space.dtype
    slot = group * IntImm(size, dt) + member if groups > 1 else member
    base = group * IntImm(size, dt) if groups > 1 else IntImm(0, dt)
    stmts = [BufferStore(b, v, (slot,)) for b, v in zip(bufs, values)]
    off = 1
    while off * 2 < size:
        off *= 2
    while off >= 1:
        c = IntImm(off, dt)
        cond = LT(member, c)
        if size & (size - 1):
            cond = cond & LT(member + c, IntImm(size, dt))
        # read both halves into registers first, then write: a step's reads and writes
        # never meet, and the barrier pass sees them in two statements
        a = [Var(f"a{k}", b.dtype) for k, b in enumerate(bufs)]
        b_ = [Var(f"b{k}", b.dtype) for k, b in enumerate(bufs)]
        out = reducer.combine(tuple(a), tuple(b_))
        step = seq(*[BufferStore(d, r, (zero,)) for d, r in zip(dsts, out)])
        for av, bv, buf in reversed(list(zip(a, b_, bufs))):
            step = LetStmt(av, buf[slot], LetStmt(bv, buf[slot + c], step))
        stmts.append(IfThenElse(cond, step))
        stmts.append(IfThenElse(cond, seq(*[BufferStore(buf, d[zero], (slot,))
                                            for buf, d in zip(bufs, dsts)])))
        off //= 2
    stmts += [BufferStore(d, b[base], (zero,)) for d, b in zip(dsts, bufs)]
    return stmts, list(dsts) + list(bufs)


def _shuffles(kind, value, dst, space, red, g, name):
    zero = IntImm(0, "int32")
    if g <= WARP:
        return [BufferStore(dst, _warp(kind, value, g), (zero,))], []
    tid, total = space.linear({a[0] for a in space.axes})
    member, _ = space.linear(red)
    dt = space.dtype
    w = IntImm(WARP, dt)
    nw = g // WARP
    warps = Buffer((IntImm(total // WARP, "int32"),), value.dtype, f"{name}_warps",
                   scope="shared")
    lane = FloorMod(tid, w)
    first = FloorDiv(tid - member, w) if len(space.axes) > 1 else IntImm(0, dt)
    # lane % nw keeps the index inside the group's slots where the value is not used
    pick = if_then_else(LT(lane, IntImm(nw, dt)),
                        warps[first + FloorMod(lane, IntImm(nw, dt))],
                        identity(kind, value.dtype))
    stmts = [BufferStore(dst, _warp(kind, value, WARP), (zero,)),
             IfThenElse(EQ(lane, IntImm(0, dt)),
                        BufferStore(warps, dst[zero], (FloorDiv(tid, w),))),
             BufferStore(dst, _warp(kind, pick, WARP), (zero,))]
    return stmts, [warps]


__all__ = ["ThreadSpace", "allreduce", "WARP"]
