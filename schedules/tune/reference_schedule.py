"""The reference schedule: the untuned function, its reduction loops swept outside the
innermost spatial loop, so the reference every candidate is checked against
(:func:`.measure.reference_outputs`) computes fast and gives the same values.

The unscheduled nest of a reduction block runs its reduction innermost: for a GEMM
``C[i, j] += A[i, k] * B[k, j]`` in ``i, j, k`` order, reading ``B`` down a column and
never vectorised (a vector of ``k`` would reassociate the sum).  4096^3 in fp32 took
475 s on one core of this 2-core Xeon, the first wait of every tuning after any change
to Cuvil.  In ``i, k, j`` order the innermost loop is spatial: ``B`` and ``C`` are read
along rows, ``A[i, k]`` is one value, and LLVM vectorises the ``j`` loop without any
fast-math flag.  The spatial loops are also tiled, so that each step of ``k`` updates
a tile of 8 rows by a panel of columns that fills a third of L1d (``i0, j0, k, i1,
j1``; 512 fp32 columns on a 48 KiB L1d): ``B``'s row of the panel is read once for 8
rows of ``C`` that stay in L1d.  Each element's sum still runs ``k = 0 .. K-1`` in
order (the reduction loops are never split, and keep their order among themselves;
only spatial loops move across them), so every element sees the same operations in
the same order.  In strict IEEE arithmetic (llvm's ``fast_math=False``) the result is
the untuned build's, bit for bit.  With llvm's default ``contract`` LLVM chooses in
each nest which multiply-add it fuses into an ``fma``: the GEMMs tested fuse every one
in both nests (the same bits), but the untuned conv2d's unrolled 3-wide window has its
products vectorised and rounded before the adds, so there elements differ by a few
ulp, well within the tolerance of :func:`.measure.agree`.  The first loop outside the
reduction with more than one iteration runs in parallel over the target's cores (each
element still computed by one thread, in the same order).

On one core of this 2-core Xeon an n^3 fp32 GEMM's reference took, untuned / ``i, k,
j`` alone / tiled: 2048^3 57 s / 1.5 s / 0.9 s of CPU, 4096^3 475 s / 21 s / 7 s.

Every step is a checked primitive; a block whose step is refused keeps its untuned
nest (its steps are taken on a copy of the schedule).  Reordered are the reduction blocks
whose innermost spatial iterator indexes the last dimension of the output and of an
input (rows it makes contiguous: not a row sum ``S[i] = sum_k A[i, k]``, whose rows
are already read along), each iterator bound to one loop of the block's own nest.  A
target whose kind is not a CPU (:func:`.rules.rule_for`: a GPU, an accelerator with
its own space) gets the function unchanged.

Example::

    >>> from cuvil_tir.analysis import tree
    >>> from schedules.tune.networks import matmul
    >>> ordered = reference_schedule(matmul(64, 64, 64), "llvm -num-cores=2")
    >>> [(lp.loop_var.name, lp.kind) for _, lp in tree.loops_above(
    ...     ordered, tree.find_block(ordered, "C"))]
    [('i_0', 'parallel'), ('k', 'serial'), ('i_1', 'serial'), ('j', 'serial')]
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import Var
from cuvil_tir.function import PrimFunc
from cuvil_tir.target import as_target

from ..analysis import loop_extent, uses_var
from ..errors import ScheduleError
from ..schedule import Schedule
from .rules import rule_for
from .space import reductions_of


def reference_schedule(func: PrimFunc, target) -> PrimFunc:
    """``func`` with every reduction block that fits (module doc) tiled and reordered so
    its reduction loops run outside a tile of its output, and the loop over the tiles
    parallel where the target declares several cores; ``func`` itself when the target
    is not a CPU or no block fits.  Each element's arithmetic runs in the untuned
    order: in strict IEEE its outputs equal the untuned build's exactly.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
        >>> reference_schedule(f, "llvm") is f, reference_schedule(f, "cuda") is f
        (True, True)
    """
    t = as_target(target)
    if rule_for(t) != "cpu":
        return func
    sch = Schedule(func, error_render="none")
    machine = t.kind_obj.machine(t)
    swept = False
    for name in reductions_of(func):
        tiled = _sweep_reduction_outside(sch, name, machine)
        if tiled is not None:
            sch, swept = tiled, True
    return sch.func if swept else func


#: rows of the output tile that each step of the reduction updates; its columns fill
#: a third of L1d (B's row and A's column beside it): 8 x 512 fp32 on a 48 KiB L1d
TILE_ROWS = 8


def _sweep_reduction_outside(sch, name: str, machine):
    """Block ``name``'s nest tiled, reordered and made parallel (module doc) in a
    copy of ``sch``; the copy, or None where the block does not fit or a step is
    refused (``sch`` is left as it was: no half-done nest)."""
    realize = tree.get(sch.func, tree.find_block(sch.func, name))
    trial = sch.copy()
    loops = trial.get_loops(trial.get_block(name))
    kinds = _loop_kinds(realize, loops)
    if kinds is None or kinds[-1] != "reduce" or "spatial" not in kinds:
        return None
    spatial = [lp for lp, k in zip(loops, kinds) if k == "spatial"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "reduce"]
    if not _makes_rows_contiguous(realize, spatial[-1].var):
        return None
    try:
        outer = _tile_and_reorder(trial, spatial, reduce, machine,
                                  str(realize.block.writes[0].buffer.dtype))
    except ScheduleError:
        return None   # the nest stays the untuned one, as exact and slower
    if machine.cores > 1:
        _parallel_outer(trial, outer)
    return trial


def _tile_and_reorder(sch, spatial, reduce, machine, dtype: str) -> list:
    """Split the innermost spatial loop into panels of columns and the one around it
    into blocks of :data:`TILE_ROWS` rows, and order the loops: the other spatial
    loops, the row blocks, the panels, the reduction loops (in their own order), the
    rows of a block, the columns of a panel.  Returns the loops outside the
    reduction, outer to inner."""
    width = max(1, D.bits(D.element(dtype)) // 8)
    cols = _columns(loop_extent(sch.func, spatial[-1]), machine.l1d_bytes // (3 * TILE_ROWS * width),
                    machine.lanes(dtype))
    panels, columns = _split(sch, spatial[-1], cols)
    outer, inner = [*spatial[:-1], *panels], columns
    if len(spatial) > 1:
        extent = loop_extent(sch.func, spatial[-2]) or 1
        rows = max(d for d in range(1, TILE_ROWS + 1) if extent % d == 0)
        blocks, in_block = _split(sch, spatial[-2], rows)
        outer, inner = [*spatial[:-2], *blocks, *panels], [*in_block, *columns]
    sch.reorder(*outer, *reduce, *inner)
    return outer


def _columns(extent, cap: int, least: int):
    """Columns of a panel: the whole ``extent`` where it is at most ``cap`` (or not a
    constant), else its largest divisor up to ``cap``, unless that is under ``least``
    (a vector's lanes) -- then the whole extent too."""
    if extent is None or extent <= cap:
        return None
    best = max(d for d in range(1, cap + 1) if extent % d == 0)
    return best if best >= least else None


def _split(sch, loop, inner):
    """``([outer], [inner])`` loops of ``loop`` split by ``inner`` (a divisor), or
    ``([loop], [])`` when ``inner`` is 1, ``([], [loop])`` when it is None or the
    whole extent (no split)."""
    if inner == 1:
        return [loop], []
    if inner is None or inner == loop_extent(sch.func, loop):
        return [], [loop]
    outer, rest = sch.split(loop, [None, inner])
    return [outer], [rest]


def _loop_kinds(realize, loops):
    """The iterator kind (``spatial``/``reduce``) each loop binds, outer to inner, or
    None unless every iterator is bound to exactly one loop of ``loops`` and every
    loop binds one."""
    values = realize.iter_values
    if len(values) != len(loops) or not all(isinstance(v, Var) for v in values):
        return None
    kind_of = {id(v): iv.kind for v, iv in zip(values, realize.block.iter_vars)}
    kinds = [kind_of.get(id(lp.var)) for lp in loops]
    if len(kind_of) != len(loops) or not set(kinds) <= {"spatial", "reduce"}:
        return None
    return kinds


def _makes_rows_contiguous(realize, loop_var) -> bool:
    """Whether the iterator bound to ``loop_var`` indexes the last dimension of the
    block's output and of one of its inputs (what the innermost loop then reads and
    writes along)."""
    block = realize.block
    var = next(iv.var for v, iv in zip(realize.iter_values, block.iter_vars)
               if v is loop_var)

    def last(regions):
        return [r for r in regions if r.region and uses_var(r.region[-1].min, var)]

    return len(block.writes) == 1 and bool(last(block.writes)) and bool(last(block.reads))


def _parallel_outer(sch, outer) -> None:
    """The first of the spatial loops outside the reduction (outer to inner) with
    more than one iteration in parallel (the loops around it run once)."""
    for lp in outer:
        if loop_extent(sch.func, lp) == 1:
            continue
        try:
            sch.parallel(lp)
        except CuvilError:
            pass   # refused: the nest stays serial, as exact
        return
