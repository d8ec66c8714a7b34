"""Where ``rfactor`` puts its two blocks when the block's outermost loop is shared.

When the loops above the reduction block hold only that block, the rfactor block takes
their place and the write-back follows in fresh loops.  When an outer loop also holds
other blocks (``for i: C (reduction); D``), the rfactor block gets a copy of the whole
loop nest, placed before the outermost loop, and the write-back takes the block's place
inside the shared loops (keeping the rfactor loop, dropping the other reduction loops).

Hoisting the partial results out of the shared loops computes them before every other
block of those loops: legal only when none of those blocks writes a buffer the
reduction reads (``for i: C; D`` where ``D`` reads ``C``: rfactoring ``D`` would read
``C`` before it is computed), which :func:`check_hoistable` refuses with a coded error.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32"),
    ...       D: T.Buffer((4,), "float32")):
    ...     for i in range(4):
    ...         for k in range(8):
    ...             with T.block("C"):
    ...                 vi, vk = T.axis.remap("SR", [i, k])
    ...                 with T.init():
    ...                     C[vi] = T.float32(0)
    ...                 C[vi] = C[vi] + A[vi, vk]
    ...         with T.block("D"):
    ...             vi = T.axis.S(4, i)
    ...             D[vi] = A[vi, 0]
    ... ''')
    >>> path = tree.find_block(f, "C")
    >>> check_hoistable(f, tree.get(f, path), tree.loops_above(f, path)[0][1])
"""

from __future__ import annotations

from cuvil_tir.expr import Var
from cuvil_tir.stmt import BlockRealize, For
from cuvil_tir.visitor import substitute

from cuvil_tir.analysis import tree
from ..errors import LoopNestError, schedule_error
from .insertion import insert_before


def check_hoistable(func, realize: BlockRealize, top: For) -> None:
    """Refuse when another block under ``top`` writes a buffer ``realize`` reads (its
    own output aside: the write-back stays in place)."""
    blk = realize.block
    out = {id(w.buffer) for w in blk.writes}
    reads = {id(r.buffer): r.buffer.name for r in blk.reads if id(r.buffer) not in out}
    for br in tree.blocks_under(top):
        if br.block is blk:
            continue
        hit = [reads[id(w.buffer)] for w in br.block.writes if id(w.buffer) in reads]
        if hit:
            raise schedule_error(
                LoopNestError, "rfactor",
                f"the outermost loop {top.loop_var.name!r} above block {blk.name!r} also "
                f"holds block {br.block.name!r}, which writes {hit[0]!r} that "
                f"{blk.name!r} reads: the partial results, computed in a copy of the loop "
                f"nest before {top.loop_var.name!r}, would read {hit[0]!r} before it is "
                "written. Apply rfactor before compute_at moves the producer into this "
                "loop, or give this block a loop nest of its own",
                func, top)


def place_shared(func, bpath, above, rf_realize: BlockRealize, wb_realize: BlockRealize,
                 wb_loops, rf_loop):
    """The function with ``rf_realize`` under a fresh copy of all loops ``above``
    (inserted before the outermost one) and ``wb_realize`` in the block's place, under
    fresh copies of the loops of ``wb_loops`` (the loops only the block uses whose
    variables the write-back needs).  ``wb_realize`` is written over the original
    loop variables."""
    loops = [l for _, l in above]
    fresh = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in loops}
    rf = BlockRealize(tuple(substitute(x, fresh) for x in rf_realize.iter_values),
                      substitute(rf_realize.predicate, fresh), rf_realize.block)
    for l in reversed(loops):
        rf = For(fresh[l.loop_var], l.min, l.extent, l.kind, rf, l.thread_tag, l.annotations)
    own = next(k for k, (_, l) in enumerate(above) if len(tree.blocks_under(l)) == 1)
    inner = [l for l in loops[own:] if l in wb_loops]
    wmap = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in inner}
    wb = BlockRealize(tuple(substitute(x, wmap) for x in wb_realize.iter_values),
                      substitute(wb_realize.predicate, wmap), wb_realize.block)
    for l in reversed(inner):
        # the rf loop now carries the final reduction: it must run serially
        kind = "serial" if l is rf_loop else l.kind
        wb = For(wmap[l.loop_var], l.min, l.extent, kind, wb,
                 l.thread_tag if kind == "thread_binding" else None, l.annotations)
    g = tree.replace(func, above[own][0], wb)
    return insert_before(g, above[0][0], rf)


__all__ = ["check_hoistable", "place_shared"]
