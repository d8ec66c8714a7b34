"""The dot-product rule of the generated space: a GEMM block whose operand dtypes a
registered dot-product recipe computes (:func:`schedules.intrinsics.x86_gemm.dot_gemm`:
uint8 or int8 A x int8 B -> int32 on ``vpdpbusd``, bfloat16 x bfloat16 -> float32 on
``vdpbf16ps``), on a target whose intrinsic is available
(``TensorIntrin.available(target)``: read from its ``mcpu`` / ``mattr``, never the
host), becomes one more choice of the block's categorical beside the register tiling
(:func:`.space.generated_space`).  The intrinsic reads B packed in its panels, which
no other rule produces, so matching by description alone (:mod:`.autotensorize`)
never offers it.

Picked, the rule samples the register tile (rows x vectors of accumulators that fit
the vector registers), then schedules the block with ``dot_gemm`` (int8 x int8 through
``offset_to_unsigned``: the steps are ``u8s8``, the compensation one column sum per
call, :mod:`schedules.intrinsics.x86_offset`).

Example::

    >>> from schedules.intrinsics.x86_gemm import gemm_func
    >>> f = gemm_func(64, 64, 64, "int8", "int8", "int32")
    >>> [c.name for c in dot_choices(f, "C", "llvm -mcpu=znver4")]
    ['dot:x86.vnni_16x4_s8s8']
    >>> dot_choices(f, "C", "llvm -mcpu=haswell")     # no VNNI there
    []
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import Var
from cuvil_tir.target import as_target

from ..intrinsics.x86 import KINDS, intrin_name
from ..intrinsics.x86_gemm import dot_gemm, gemm_kind, lanes_for, tile_shape
from ..schedule import Schedule

#: the most accumulator vectors per row of a register tile
MOST_VECTORS = 4


@dataclass(frozen=True)
class DotChoice:
    """One dot-product recipe for one GEMM block: ``name`` (the categorical's label),
    the ``target`` it builds for, the register ``tiles`` ``(rows, vectors)`` worth
    sampling, and the ``groups`` of k per tensorized step.

    Example::

        >>> DotChoice("dot:x", "llvm", ((1, 1),), (1,)).name
        'dot:x'
    """

    name: str
    target: object
    tiles: tuple
    groups: tuple

    def apply(self, sch, block: str) -> None:
        """Sample the tile (and the groups) and schedule ``block`` with ``dot_gemm``.

        Example::

            >>> from schedules.intrinsics.x86_gemm import gemm_func
            >>> f = gemm_func(8, 32, 16, "uint8", "int8", "int32")
            >>> sch = Schedule(f, seed=0)
            >>> dot_choices(f, "C", "llvm -mcpu=znver4")[0].apply(sch, "C")
            >>> [i.name for i in sch.trace].count("tensorize")
            1
        """
        labels = [f"{r}x{v}" for r, v in self.tiles]
        rows, vectors = self.tiles[labels.index(sch.sample_categorical(
            labels, [r * v for r, v in self.tiles]))]
        groups = self.groups[0] if len(self.groups) == 1 else \
            sch.sample_categorical(list(self.groups), [1] * len(self.groups))
        dot_gemm(sch, block, self.target, rows=rows, vectors=vectors, groups=groups)


def _plain_gemm(block) -> bool:
    """``C[i, j] += A[i, k] * B[k, j]`` indexed by plain iterators (what ``dot_gemm``
    packs and tiles): two spatial iterators and one reduction, in that order."""
    ivs = block.iter_vars
    if [iv.kind for iv in ivs] != ["spatial", "spatial", "reduce"]:
        return False
    i, j, k = (iv.var for iv in ivs)
    reads = [r for r in block.reads if r.buffer not in [w.buffer for w in block.writes]]
    want = [(i, k), (k, j)]
    return len(reads) == 2 and all(
        len(r.region) == 2 and all(isinstance(rg.min, Var) for rg in r.region) and
        tuple(rg.min for rg in r.region) == w for r, w in zip(reads, want))


def dot_choices(func, block: str, target) -> list:
    """The dot-product recipes (:class:`DotChoice`) the space may use for reduction
    block ``block`` of ``func`` on ``target``: none unless the block is a plain GEMM
    of matching dtypes, K is a whole number of the intrinsic's groups, N of its
    lanes, and the target has the instruction.

    Example::

        >>> from schedules.intrinsics.x86_gemm import gemm_func
        >>> c = dot_choices(gemm_func(64, 64, 64, "uint8", "int8", "int32"), "C",
        ...                 "llvm -mcpu=znver4")[0]
        >>> (6, 4) in c.tiles, c.groups
        (True, (1,))
    """
    t = as_target(target)
    sch = Schedule(func)
    try:
        node = tree.get(sch.func, tree.find_block(sch.func, block)).block
        kind = gemm_kind(sch, block)
    except CuvilError:
        return []
    if not _plain_gemm(node):
        return []
    M, N, K = (int(iv.dom.extent.value) for iv in node.iter_vars)
    group = KINDS[kind][3]
    try:
        lanes = lanes_for(kind, N, t)
    except CuvilError:
        return []
    if K % group:
        return []
    registers = t.kind_obj.machine(t).vector_registers
    rows0, _ = tile_shape(kind, lanes, registers)
    tiles = []
    for vectors in range(1, MOST_VECTORS + 1):
        if (N // lanes) % vectors:
            continue
        extra = vectors + 1        # B's vectors and A's broadcast
        most = min(M, 8, max(1, (registers - extra) // vectors))
        tiles += [(rows, vectors) for rows in range(1, most + 1)]
    # one group per step: without a per-step compensation (the offset), more groups
    # per step measured no faster on Zen 4, and a smaller space searches faster
    groups = (1,)
    return [DotChoice(f"dot:{intrin_name(kind, lanes)}", t, tuple(tiles), groups)] \
        if tiles and rows0 else []


__all__ = ["DotChoice", "dot_choices"]
