"""Tensor copies from a schedule: a copy loop nest annotated ``"cuda.tma"`` becomes one
``tma_load`` (Hopper's ``cp.async.bulk.tensor``, :mod:`cuvil_tir.ops.tma`) completing
on an mbarrier phase, sm_90+.

A schedule stages a tile in shared memory as usual (``cache_read(..., "shared")``,
``compute_at`` a loop outside the block's thread loops, the copy's loops possibly
fused, split, bound to ``threadIdx`` and vectorized as for a copy by the threads) and
annotates the copy's outermost loop (``gemm_wgmma(..., tma=True)`` in
:mod:`targets.toolkit.cuda_recipes` does)::

    sh = sch.cache_read(blk, 0, "shared")
    sch.compute_at(sh, ko)
    sch.annotate(sch.get_loops(sh)[-2], "cuda.tma", 1)
    sch.transform_layout(sh, 0, swizzle.index_map())     # optional: 32/64/128-byte

:func:`lower_tma_copies` (a pass of the ``cuda`` target, after ``lower_blocks``)
checks, by enumerating the nest's points, that it copies each element of a ``rows x
cols`` box of a 2-D global tensor once to its place in the tile (row-major, through
the tile's recorded swizzle), and replaces it by: the block's first thread (the
nest's loops bound to ``threadIdx`` stay, and launch the threads) announcing the
box's bytes on an mbarrier of its own (``mbarrier_arrive``) and issuing the copy,
then every thread waiting on the phase (``mbarrier_wait``) whose parity a per-thread
counter keeps.  The barrier is initialised by the first thread once per block,
before a block barrier.  The copy is synchronous within its loop (the threads wait
right after it), except as a statement of a loop annotated
``software_pipeline_stage``: there the copies become a ring of shared stages, one
mbarrier each, waited for before the statement reading them
(:mod:`targets.cuda.tma_ring`).  What it cannot copy exactly is refused with a
``LoweringError``: a nest that is not a plain copy of a box, one inside a loop bound
to ``threadIdx``, a build before sm_90.

Example::

    >>> TMA_KEY
    'cuda.tma'
"""

from __future__ import annotations

import re

import numpy as np

import cuvil_tir as T
from cuvil_tir import dtype as D
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.arith.index_eval import eval_np
from cuvil_tir.errors import LoweringError
from cuvil_tir.expr import BufferLoad, IntImm, Var
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import Allocate, BufferStore, For, seq
from cuvil_tir.swizzle import swizzles_of
from cuvil_tir.thread_axes import thread_axis
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.transform.software_pipeline import stage_versions
from cuvil_tir.visitor import Mutator, post_order_visit, substitute

from .tma_ring import has_ring, ring_statements
from .warp_specialize import WS_KEY, warp_specialized

#: the loop annotation asking for a tensor copy
TMA_KEY = "cuda.tma"
#: the values the other variables of an index take when a copy is checked
_SAMPLES = (0, 1, 3, 6)


def _call(op: str, *args):
    return T.Evaluate(T.Call("int32", op, tuple(
        a if not isinstance(a, int) else T.const(a) for a in args)))


def _fail(loop, why: str, fix: str):
    raise LoweringError(f"the loop {loop.loop_var.name} annotated {TMA_KEY!r} must copy a "
                        f"box of a 2-D global tensor into a shared tile, row after row; "
                        f"{why}:\n{to_text(loop)}\n{fix}")


def _vars(*exprs) -> list:
    out = {}
    for e in exprs:
        post_order_visit(e, lambda n: out.setdefault(id(n), n) if isinstance(n, Var)
                         else None)
    return list(out.values())


def _nest(loop, fix):
    """The loops of an annotated nest down to its one store (``IfThenElse`` refused)."""
    loops, s = [], loop
    while isinstance(s, For):
        tag = s.thread_tag if s.kind == "thread_binding" else None
        if tag is not None and not tag.startswith("threadIdx"):
            _fail(loop, f"its loop {s.loop_var.name} is bound to {tag}", fix)
        if not (isinstance(s.min, IntImm) and isinstance(s.extent, IntImm)):
            _fail(loop, f"its loop {s.loop_var.name} does not run over constants", fix)
        loops.append(s)
        s = s.body
    if not isinstance(s, BufferStore):
        _fail(loop, f"its innermost statement is a {type(s).__name__}, not one store", fix)
    return loops, s


def _copy_parts(loop, swizzles):
    """``(loops, store, corner, rows, cols)`` of an annotated nest, checked: the nest
    copies each element of a ``rows x cols`` box of a 2-D global tensor once, to its
    place in the tile (row-major, through the tile's swizzle)."""
    fix = ("annotate the outermost loop of a plain copy (after compute_at: its loops may "
           "be split, fused, bound to threadIdx and vectorized; no cast, no predicate)")
    loops, store = _nest(loop, fix)
    src, dst = store.value, store.buffer
    if not (isinstance(src, BufferLoad) and src.buffer.scope == "global" and
            len(src.indices) == 2 and dst.scope == "shared" and len(dst.shape) >= 2
            and dst.dtype == src.buffer.dtype):
        _fail(loop, f"it stores {to_text(src)} into {dst.scope} {dst.name}", fix)
    shape = tuple(getattr(x, "value", None) for x in dst.shape[-2:])
    if None in shape:
        _fail(loop, f"the tile {dst.name} has a symbolic shape", fix)
    rows, cols = shape
    mine = {id(lp.loop_var) for lp in loops}
    if {id(x) for x in _vars(*store.indices[:-2])} & mine:
        _fail(loop, f"{dst.name}'s leading indices vary with the copy's loops", fix)
    corner = [simplify(substitute(ix, {lp.loop_var: lp.min.value for lp in loops}))
              for ix in src.indices]
    if {id(x) for x in _vars(*corner)} & mine:
        _fail(loop, f"its source corner {[to_text(k) for k in corner]} depends on the "
                    "copy's loops", fix)
    _check_box(loop, loops, store, corner, rows, cols, swizzles.get(dst.name), fix)
    return loops, store, corner, rows, cols


def _check_box(loop, loops, store, corner, rows, cols, swizzle, fix) -> None:
    """Every point of the nest copies ``src[r0 + r, c0 + c]`` to ``(r, swizzle(r, c))``
    of the tile, each element of the box once (checked at several values of the
    enclosing loops' variables)."""
    grids = np.meshgrid(*(np.arange(lp.min.value, lp.min.value + lp.extent.value)
                          for lp in loops), indexing="ij")
    count = int(np.prod([lp.extent.value for lp in loops]))
    exprs = list(store.indices[-2:]) + list(store.value.indices) + list(corner)
    mine = {id(lp.loop_var) for lp in loops}
    others = [v for v in _vars(*exprs) if id(v) not in mine]
    for sample in _SAMPLES:
        env = {id(v): np.int64(sample + k) for k, v in enumerate(others)}
        env.update({id(lp.loop_var): g for lp, g in zip(loops, grids)})
        got = [eval_np(e, env) for e in exprs]
        if any(g is None for g in got):
            _fail(loop, "its indices use more than integer arithmetic", fix)
        dr, dc, sr, sc, r0, c0 = (np.broadcast_to(g, grids[0].shape).ravel() if len(loops)
                                  else np.atleast_1d(g) for g in got)
        r, c = sr - r0, sc - c0
        inside = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
        want = c if swizzle is None else swizzle.apply(r, c)
        if not (count == rows * cols and inside.all() and np.array_equal(dr, r)
                and np.array_equal(dc, want)
                and np.unique(r * cols + c).size == count):
            _fail(loop, f"it writes {store.buffer.name}[{', '.join(to_text(i) for i in store.indices[-2:])}] "
                        f"from {to_text(store.value)}: not each element of a {rows} x "
                        f"{cols} box once, row-major" + (" through the tile's swizzle"
                                                         if swizzle is not None else ""),
                  fix)


def _all(conds):
    out = None
    for c in conds:
        out = c if out is None else T.And(out, c)
    return out


class _Lower(Mutator):
    def __init__(self, func):
        super().__init__()
        self.func = func
        self.swizzles = swizzles_of(func)
        self.threads: list = []        # threadIdx loops around the current statement
        self.kernel_axes: tuple = ()   # the threadIdx axes of the current kernel
        self.made: list = []           # (barrier, counter or None, arrivals) per kernel
        self.extents: dict = {}        # the largest extent of each threadIdx axis
        self.grids = 0                 # blockIdx loops around the current statement

    def visit_For(self, s):
        if s.kind == "thread_binding" and thread_axis(s.thread_tag).launched:
            if thread_axis(s.thread_tag).level == "grid":
                return self._grid(s)
            self.threads.append(s)
            try:
                return self.generic_visit(s)
            finally:
                self.threads.pop()
        if TMA_KEY in dict(s.annotations):
            return self._copy(s)
        if WS_KEY in dict(s.annotations):
            return self._specialized(s)
        if has_ring(s, TMA_KEY):
            return ring_statements(s, TMA_KEY, stage_versions(self.func, s), self._ring_issue,
                                   self.visit, _destination)
        return self.generic_visit(s)

    def _grid(self, s):
        outer = not self.grids
        if outer:
            ext = self.extents = {}

            def look(n):
                if isinstance(n, For) and n.kind == "thread_binding" and \
                        n.thread_tag.startswith("threadIdx"):
                    e = n.extent.value if isinstance(n.extent, IntImm) else None
                    ext[n.thread_tag] = None if e is None or ext.get(n.thread_tag, 0) is None \
                        else max(ext.get(n.thread_tag, 0), e)
            post_order_visit(s, look)
            self.kernel_axes = tuple(sorted(ext))
        self.grids += 1
        try:
            out = self.generic_visit(s)
        finally:
            self.grids -= 1
        if not outer:
            return out
        made, self.made = self.made, []
        if not made:
            self.kernel_axes = ()
            return out
        # the innermost grid loop holds the barriers and counters of its copies
        loops = [out]
        while isinstance(loops[-1].body, For) and loops[-1].body.kind == "thread_binding" \
                and thread_axis(loops[-1].body.thread_tag).level == "grid":
            loops.append(loops[-1].body)
        body = seq(*(self._first_thread(_call("mbarrier_init", bar[k], n))
                     for bar, _, n in made for k in range(bar.shape[0].value)),
                   T.Evaluate(T.Call("int32", "tvm_storage_sync", (T.StringImm("shared"),))),
                   *(BufferStore(cnt, T.const(0), (T.const(0),)) for _, cnt, _ in made
                     if cnt is not None),
                   loops[-1].body)
        self.kernel_axes = ()
        for bar, cnt, _ in made:
            body = Allocate(bar, body if cnt is None else Allocate(cnt, body))
        for lp in reversed(loops):
            body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_tag,
                       lp.annotations)
        return body

    def _first_thread(self, stmt, skip=frozenset()):
        # loops of extent 1 bound to each of the kernel's thread axes: the block's
        # first thread (normalize_thread_bindings turns them into guards)
        for tag in reversed([t for t in self.kernel_axes if t not in skip]):
            stmt = For(T.var(f"{tag.split('.')[1]}_tma"), T.const(0), T.const(1),
                       "thread_binding", stmt, tag)
        return stmt

    def _copy(self, s):
        bar, cnt = self._barrier(s, 1, True)
        return seq(self._issue(s, bar[0]), _call("mbarrier_wait", bar[0], cnt[0]),
                   BufferStore(cnt, T.const(1) - cnt[0], (T.const(0),)))

    def _specialized(self, s):
        """The pipelined loop ``s`` split between a producer and consumer warpgroups
        (:mod:`targets.cuda.warp_specialize`)."""
        if self.threads or not self.grids:
            raise LoweringError(f"the loop {s.loop_var.name} annotated {WS_KEY!r} must lie "
                                "in a kernel, outside its threadIdx loops:\n" + to_text(s))
        # the producer warpgroup is a threadIdx.y index: the barriers' initialiser is
        # the block's first thread along it too
        self.kernel_axes = tuple(sorted({*self.kernel_axes, "threadIdx.y"}))
        return warp_specialized(self.func, s, self.extents, self._ring_barriers,
                                self._issue_ops, _destination, self.visit)

    def _ring_barriers(self, s, count: int, arrivals: int, role: str):
        """``count`` mbarriers for the copy nest ``s``, each expecting ``arrivals``
        (``role``: their name's part, ``"full"`` or ``"empty"``)."""
        dst = _destination(s)
        bar = T.decl_buffer((count,), "uint64", f"{dst.name}_{role}{len(self.made)}",
                            scope="shared")
        self.made.append((bar, None, arrivals))
        return bar

    def _ring_issue(self, s, slot, parity, count):
        """The issue of the copy nest ``s`` on stage ``slot`` of a ring of ``count``
        barriers, and the wait for it (:mod:`targets.cuda.tma_ring`)."""
        bar, _ = self._barrier(s, count, False)
        return self._issue(s, bar[slot]), _call("mbarrier_wait", bar[slot], parity)

    def _barrier(self, s, count: int, counted: bool):
        """``count`` new mbarriers for the copy nest ``s`` (initialised once per block)
        and, if ``counted``, a per-thread phase counter."""
        dst = _destination(s)
        k = len(self.made)
        bar = T.decl_buffer((count,), "uint64", f"{dst.name}_tma_bar{k}", scope="shared")
        cnt = T.decl_buffer((1,), "int32", f"{dst.name}_tma_phase{k}", scope="local") \
            if counted else None
        self.made.append((bar, cnt, 1))
        return bar, cnt

    def _issue(self, s, bar):
        """The block's first thread announcing the bytes of the copy nest ``s`` on the
        barrier element ``bar`` and issuing it."""
        issue, loops = self._issue_ops(s, bar)
        # the nest's thread loops stay (they launch the block's threads); their first
        # thread issues the copy
        bound = [lp for lp in loops if lp.kind == "thread_binding"]
        if bound:
            issue = T.IfThenElse(_all(lp.loop_var == lp.min for lp in bound), issue)
        issue = self._first_thread(issue, {lp.thread_tag for lp in bound})
        for lp in reversed(bound):
            issue = For(lp.loop_var, lp.min, lp.extent, lp.kind, issue, lp.thread_tag)
        return issue

    def _issue_ops(self, s, bar):
        """``(ops, the nest's loops)``: the arrival announcing the bytes of the copy nest
        ``s`` on the barrier element ``bar`` and the ``tma_load``, for one thread."""
        if self.threads:
            _fail(s, f"it lies inside the loop {self.threads[-1].loop_var.name} bound to "
                     f"{self.threads[-1].thread_tag}",
                  "compute_at the copy at a loop outside the block's threadIdx loops: "
                  "one thread of the block issues it")
        if not self.grids:
            _fail(s, "it lies outside every kernel", "compute_at it inside a blockIdx loop")
        loops, store, corner, rows, cols = _copy_parts(s, self.swizzles)
        dst, src = store.buffer, store.value
        nbytes = rows * cols * D.bits(dst.dtype) // 8
        at = tuple(store.indices[:-2]) + (T.const(0), T.const(0))
        return seq(_call("mbarrier_arrive", bar, nbytes),
                   _call("tma_load", BufferLoad(dst, at), BufferLoad(src.buffer, tuple(corner)),
                         bar, rows, cols)), loops


def _destination(nest):
    s = nest
    while isinstance(s, For):
        s = s.body
    if not isinstance(s, BufferStore):
        _fail(nest, f"its innermost statement is a {type(s).__name__}, not one store",
              "annotate the outermost loop of a plain copy")
    return s.buffer


def lower_tma_copies(func):
    """The pass of the module doc.

    Example::

        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> lower_tma_copies(f) is f
        True
    """
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, For) and
                     {TMA_KEY, WS_KEY} & set(dict(n.annotations)) else None)
    if not found:
        return func
    target = PassContext.current().target
    arch = str(target.options.get("arch", "sm_80")) if target is not None else "sm_90"
    if int(re.sub(r"\D", "", arch) or 0) < 90:
        raise LoweringError(f"{func.name}: the loop {found[0].loop_var.name} annotated "
                            f"{TMA_KEY!r} asks for a tensor copy, which needs sm_90 or later; "
                            f"the target is {arch}: build for Target('cuda', arch='sm_90a') "
                            "or drop the annotation")
    return func.with_body(_Lower(func).visit(func.body))


__all__ = ["TMA_KEY", "lower_tma_copies"]
