"""GPU ops: the block barrier, warp reductions, and how an op on matrix tiles is
declared.

These are entries of the op registry like any other; what makes them GPU ops is
declared data, which the core's passes and the interpreter read (never an op's name):

* ``collective="block"`` with ``effect="barrier"``: every thread of a block reaches
  it before any goes on (``tvm_storage_sync``, TVM's name); the barrier pass
  (:mod:`cuvil_tir.transform.gpu_sync`) inserts it, the interpreter ends a phase of
  its race checker there;
* ``collective="warp"``: the lanes of a warp run it together.  Without ``tiles`` it is
  a reduction over groups of ``width`` lanes, ``warp_sum(value, width)`` (also
  ``warp_max``, ``warp_min``; :func:`register_warp_reduction` adds others): every lane
  gets the combination of the values of its group (a butterfly of shuffles on a GPU).  With ``tiles`` it is a
  tile operation (a tensor-core step): ``tiles(args)`` lists the :class:`Tile` s it
  reads and writes, ``reference(t)`` computes the written tiles from all of them.

A backend spells each op in its own language (CUDA: ``__syncthreads()``, a
``__shfl_xor_sync`` butterfly); the core has no spelling for them.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op("tvm_storage_sync").collective, ops.get_op("warp_sum").collective
    ('block', 'warp')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CuvilError
from . import OpDef, get_op, has_op, register_op

#: the block-wide barrier (TVM's ``tvm_storage_sync("shared")``)
SYNC_OP = "tvm_storage_sync"
#: the binary IR nodes a warp reduction may combine lanes with, and numpy's spelling
COMBINERS = {"Add": np.add, "Mul": np.multiply, "Max": np.maximum, "Min": np.minimum}
_WARP_COMBINER: dict[str, str] = {}
#: what a tile op may do to a tile
TILE_ACCESS = ("read", "write", "readwrite")


@dataclass(frozen=True)
class Tile:
    """One tile an op touches: argument ``arg`` loads its first element, it spans
    ``rows`` x ``cols`` elements row-major with leading dimension ``args[ld_arg]``
    (None: the row length of the buffer, which is then 2-D), and the op does
    ``access`` to it.

    Example::

        >>> Tile(2, 16, 16, access="readwrite").writes
        True
    """

    arg: int
    rows: int
    cols: int
    ld_arg: int | None = None
    access: str = "read"
    #: the argument holding the tile's XOR swizzle (``(bits << 16) | (base << 8) |
    #: shift`` of its flattened offsets, 0: none; :mod:`cuvil_tir.swizzle`)
    swizzle_arg: int | None = None

    def __post_init__(self):
        if self.access not in TILE_ACCESS:
            raise CuvilError(f"Tile: access must be one of {TILE_ACCESS}, found "
                             f"{self.access!r}")

    @property
    def writes(self) -> bool:
        """Whether the op writes this tile."""
        return self.access != "read"


def collective(call) -> str | None:
    """The group of threads that runs ``call`` together (``"block"``, ``"warp"``)
    or None (one thread, or not a call of a registered op).

    Example::

        >>> import cuvil_tir as T
        >>> collective(T.exp(T.var("x", "float32"))) is None
        True
    """
    op = getattr(call, "op", None)
    if not isinstance(op, str) or not has_op(op):
        return None
    return get_op(op).collective


def is_block_barrier(call) -> bool:
    """Whether ``call`` is a barrier of the whole block (a cluster barrier is one too:
    it orders the threads of each block of the cluster, :mod:`cuvil_tir.ops.cluster`).

    Example::

        >>> import cuvil_tir as T
        >>> is_block_barrier(T.Call("int32", SYNC_OP, (T.StringImm("shared"),)))
        True
    """
    return collective(call) in ("block", "cluster") and get_op(call.op).effect == "barrier"


def warp_combiner(call) -> str | None:
    """The binary node (``"Add"`` …) a warp reduction ``call`` combines lanes with,
    or None for any other expression.

    Example::

        >>> import cuvil_tir as T
        >>> warp_combiner(T.Call("float32", "warp_max", (T.float32(1), T.const(32))))
        'Max'
    """
    return _WARP_COMBINER.get(getattr(call, "op", None))


def register_warp_reduction(name: str, combiner: str) -> OpDef:
    """Register the warp reduction ``name(value, width)`` combining lanes with the
    binary node ``combiner`` (a key of :data:`COMBINERS`).

    Example::

        >>> register_warp_reduction("warp_sum", "Add").collective
        'warp'
    """
    if combiner not in COMBINERS:
        raise CuvilError(f"register_warp_reduction({name!r}): the combiner must be one of "
                         f"{', '.join(COMBINERS)}, found {combiner!r}")
    fn = COMBINERS[combiner]
    op = register_op(OpDef(name, 2, "any", effect="barrier", collective="warp",
                           reference=lambda t: fn,
                           doc=f"{name}(value, width): value combined by {combiner} over "
                               "each group of width lanes of a warp, in every lane"),
                     replace=name in _WARP_COMBINER)
    _WARP_COMBINER[name] = combiner
    return op


def tiles_of(call) -> tuple:
    """The tiles ``call`` touches (empty for an op that declares none).

    Example::

        >>> import cuvil_tir as T
        >>> tiles_of(T.exp(T.var("x", "float32")))
        ()
    """
    op = getattr(call, "op", None)
    if not isinstance(op, str) or not has_op(op) or get_op(op).tiles is None:
        return ()
    return tuple(get_op(op).tiles(call.args))


#: threads of each group a collective op or a per-group memory spans
GROUP_LANES = {"warp": 32, "warpgroup": 128}


def group_lanes(name) -> int:
    """Threads in one group of ``name``: a collective (``"warp"``, ``"warpgroup"``)
    or a per-group scope (``"warpgroup"``: Hopper's 4 warps issuing one ``wgmma``;
    any other per-warp scope: 32).

    Example::

        >>> group_lanes("warpgroup"), group_lanes("wmma.accumulator")
        (128, 32)
    """
    return GROUP_LANES.get(name, 32)


def per_warp(scope) -> bool:
    """Whether one allocation in ``scope`` serves a warp: TVM's storage ranks
    ``warp`` and ``wmma.*`` (a tensor-core fragment lives in the registers of the 32
    lanes together).  Such a buffer is sized by what one warp touches (``threadIdx.x``
    relaxed) and touched only by warp-wide tile ops.

    Example::

        >>> per_warp("wmma.accumulator"), per_warp("shared")
        (True, False)
    """
    return isinstance(scope, str) and (scope in GROUP_LANES or scope.startswith("wmma."))


register_op(OpDef(SYNC_OP, 1, "any", effect="barrier", collective="block",
                  doc="every thread of the block arrives before any goes on"))
for _name, _kind in (("warp_sum", "Add"), ("warp_max", "Max"), ("warp_min", "Min")):
    register_warp_reduction(_name, _kind)

__all__ = ["COMBINERS", "SYNC_OP", "TILE_ACCESS", "Tile", "collective", "is_block_barrier",
           "GROUP_LANES", "group_lanes", "per_warp", "register_warp_reduction", "tiles_of",
           "warp_combiner"]
