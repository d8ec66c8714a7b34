"""The reference schedule: the untuned function, its reduction loops swept outside the
innermost spatial loop, so the reference every candidate is checked against
(:func:`.measure.reference_outputs`) computes fast and gives the same values.

The unscheduled nest of a reduction block runs its reduction innermost: for a GEMM
``C[i, j] += A[i, k] * B[k, j]`` in ``i, j, k`` order, reading ``B`` down a column and
never vectorised (a vector of ``k`` would reassociate the sum).  4096^3 in fp32 took
475 s on one core of this 2-core Xeon, the first wait of every tuning after any change
to Cuvil.  In ``i, k, j`` order the innermost loop is spatial: ``B`` and ``C`` are read
along rows, ``A[i, k]`` is one value, and LLVM vectorises the ``j`` loop without any
fast-math flag.  Each element's sum still runs ``k = 0 .. K-1`` in order (the
reduction loops keep their order among themselves; only spatial loops move across
them), so every element sees the same operations in the same order.  In strict
IEEE arithmetic (llvm's ``fast_math=False``) the result is the untuned build's, bit
for bit.  With llvm's default ``contract`` LLVM chooses in each nest which multiply-add
it fuses into an ``fma``: the GEMMs tested fuse every one in both nests (the same
bits), but the untuned conv2d's unrolled 3-wide window has its products vectorised and
rounded before the adds, so there elements differ by a few ulp, well within the
tolerance of :func:`.measure.agree`.  The first spatial loop with more than one
iteration runs in parallel over the target's cores (each element still computed by
one thread, in the same order).

Every step is a checked primitive; a block whose step is refused keeps its nest (a
refused primitive leaves the schedule unchanged).  Reordered are the reduction blocks
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
    [('i', 'parallel'), ('k', 'serial'), ('j', 'serial')]
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import Var
from cuvil_tir.function import PrimFunc
from cuvil_tir.target import as_target

from ..analysis import uses_var
from ..errors import ScheduleError
from ..schedule import Schedule
from .rules import rule_for
from .space import reductions_of


def reference_schedule(func: PrimFunc, target) -> PrimFunc:
    """``func`` with every reduction block that fits (module doc) reordered so its
    reduction loops run outside its innermost spatial loop, and its outer spatial loop
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
    cores = t.kind_obj.machine(t).cores
    swept = [_sweep_reduction_outside(sch, name, cores) for name in reductions_of(func)]
    return sch.func if any(swept) else func


def _sweep_reduction_outside(sch, name: str, cores: int) -> bool:
    """Reorder block ``name``'s nest (module doc); whether it did."""
    realize = tree.get(sch.func, tree.find_block(sch.func, name))
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = _loop_kinds(realize, loops)
    if kinds is None or kinds[-1] != "reduce" or "spatial" not in kinds:
        return False
    spatial = [lp for lp, k in zip(loops, kinds) if k == "spatial"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "reduce"]
    if not _makes_rows_contiguous(realize, spatial[-1].var):
        return False
    try:
        sch.reorder(*spatial[:-1], *reduce, spatial[-1])
    except ScheduleError:
        return False   # the nest stays the untuned one, as exact and slower
    if cores > 1:
        _parallel_outer(sch, spatial[:-1])
    return True


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


def _parallel_outer(sch, outer_spatial) -> None:
    """The first of the spatial loops outside the reduction (outer to inner) with
    more than one iteration in parallel (the loops around it run once)."""
    for lp in outer_spatial:
        node = tree.get(sch.func, tree.find_loop(sch.func, lp.var))
        if getattr(node.extent, "value", None) == 1:
            continue
        try:
            sch.parallel(lp)
        except CuvilError:
            pass   # refused: the nest stays serial, as exact
        return
