"""The streaming rule of the generated space: a reduction block whose spatial axes are
all of extent 1 but the last (a GEMV: ``C[0, j] += A[0, k] * B[k, j]``) sweeps the
reduction outside a vector loop over its columns, so each row of the operand is read
once, contiguously, and the partial sums stay in L1.  The register tiling holds at
most 4 vectors of columns across the whole reduction, reading the operand in 256-byte
pieces a row apart; on one core of this 2-core Xeon, 1 x 1024 x 1024 fp32 ran at 0.52x
numpy that way and 0.87x streamed (1 x 1000 x 2048: 0.26x packed and padded, 0.73x
streamed, the last vector guarded).

Picked (one more choice of the block's categorical, :func:`.space.generated_space`),
it samples the vector width (1, 2 or 4 vectors of the target's lanes) and how many
parallel pieces the columns' vectors are cut into (at least one per declared core
where the extent allows, :func:`.space.parallel_counts`).

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> from cuvil_tir.target import Machine
    >>> A = T.placeholder((1, 64), name="A"); B = T.placeholder((64, 256), name="B")
    >>> k = T.reduce_axis((0, 64), name="k")
    >>> f = T.create_prim_func([A, B, T.compute((1, 256), lambda i, j: T.sum(
    ...     A[i, k] * B[k, j], axis=k), name="C")])
    >>> rule, = stream_choices(f, "C", Machine(512, 32, 49152, 1 << 21, 2))
    >>> sch = S.Schedule(f, seed=0); rule.apply(sch, "C")
    >>> "T.parallel(" in str(sch.func) and "T.vectorized(" in str(sch.func)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir import dtype as D
from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import Var

from ..analysis import loop_extent
from .space import parallel_counts

#: the vector widths sampled, in vectors of the target's lanes
VECTORS = (1, 2, 4)


@dataclass(frozen=True)
class StreamChoice:
    """The streaming schedule of one reduction block for a machine of ``lanes`` lanes
    (of the block's dtype) and ``cores`` cores; ``name`` is the categorical's label.

    Example::

        >>> StreamChoice(16, 2).name
        'stream'
    """

    lanes: int
    cores: int
    name: str = "stream"

    def apply(self, sch, block: str) -> None:
        """Sample the width and the parallel pieces, and schedule ``block`` (module
        doc): ``parallel pieces / reduction / vectors of a piece / lanes``."""
        node = tree.get(sch.func, tree.find_block(sch.func, block))
        kinds = [iv.kind for iv in node.block.iter_vars]
        loops = sch.get_loops(sch.get_block(block))
        spatial = [lp for lp, k in zip(loops, kinds) if k == "spatial"]
        reduce = [lp for lp, k in zip(loops, kinds) if k == "reduce"]
        extent = loop_extent(sch.func, spatial[-1])
        widths = [v * self.lanes for v in VECTORS if v == 1 or v * self.lanes <= extent]
        width = sch.sample_categorical(widths, [1] * len(widths))
        outer, vec = sch.split(spatial[-1], [None, width])
        counts = parallel_counts(loop_extent(sch.func, outer), self.cores)
        par, rest = sch.split(outer, [sch.sample_categorical(counts, [1] * len(counts)),
                                      None])
        sch.reorder(*spatial[:-1], par, *reduce, rest, vec)
        init = sch.decompose_reduction(sch.get_block(block), reduce[0])
        for blk in (init, sch.get_block(block)):
            sch.vectorize(sch.get_loops(blk)[-1])
        sch.parallel(par)


def stream_choices(func, block: str, machine) -> list:
    """``[StreamChoice]`` for reduction block ``block`` of ``func`` on ``machine`` when
    every spatial iterator but the last has extent 1, the last spans a vector of the
    machine's lanes, the write indexes the iterators in order and every read that uses
    the last one uses it in its last dimension (contiguous rows); else ``[]``.

    Example::

        >>> from schedules.tune.networks import matmul
        >>> from cuvil_tir.target import Machine
        >>> m = Machine(512, 32, 49152, 1 << 21, 2)
        >>> len(stream_choices(matmul(1, 256, 64), "C", m)), stream_choices(
        ...     matmul(4, 256, 64), "C", m)
        (1, [])
    """
    try:
        node = tree.get(func, tree.find_block(func, block)).block
    except CuvilError:
        return []
    spatial = [iv for iv in node.iter_vars if iv.kind == "spatial"]
    if not spatial or len(spatial) == len(node.iter_vars) or not node.writes:
        return []
    extents = [getattr(iv.dom.extent, "value", None) for iv in spatial]
    dtype = str(node.writes[0].buffer.dtype)
    lanes = machine.lanes(dtype) if D.is_float(dtype) or D.is_integer(dtype) else 0
    last = spatial[-1].var
    if any(e != 1 for e in extents[:-1]) or not isinstance(extents[-1], int) or \
            not lanes or extents[-1] < lanes:
        return []
    if [rg.min for rg in node.writes[0].region] != [iv.var for iv in spatial]:
        return []
    for read in node.reads:
        dims = [rg.min for rg in read.region]
        uses = [n for n, d in enumerate(dims) if isinstance(d, Var) and d is last]
        if uses and uses != [len(dims) - 1]:
            return []
    return [StreamChoice(lanes, max(1, machine.cores))]


__all__ = ["StreamChoice", "stream_choices"]
