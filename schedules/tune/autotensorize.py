"""Auto-tensorization: the registered tensor intrinsics (:class:`cuvil_tir.TensorIntrin`)
whose description a block computes, and that the target can build, become a choice of
the generated space (MetaSchedule's auto-tensorization: matching by description).

:func:`matches` compares a block with the one block of each intrinsic's ``desc``: the
same update expression up to renaming (node types and dtypes equal, each buffer and
iterator of the description mapped to one of the block, iterator kinds equal), with
every matched iterator's extent a multiple of the description's.  An intrinsic is
*supported* by a target when its ``impl`` builds for it (an instruction the CPU lacks
fails in LLVM's instruction selection), checked once per process.  No intrinsic is
named here: one registered later (a VNNI int8 dot product) is picked up the same way.

:func:`tensorized` schedules one block around an intrinsic: every matched loop split
by the description's extent, the outer spatial loops tiled on two levels (the first
parallel), the outer reduction loops next, the inner loops in the description's order
replaced by the intrinsic.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((64, 64), name="A"); B = T.placeholder((64, 64), name="B")
    >>> k = T.reduce_axis((0, 64), name="k")
    >>> f = T.create_prim_func([A, B, T.compute((64, 64), lambda i, j: T.sum(
    ...     A[i, k] * B[k, j], axis=k), name="C")])
    >>> [m.name for m in matches(f, "C", "llvm -mcpu=haswell") if m.name.startswith("cpu.")]
    ['cpu.gemm_4x8x4_f32']

(the shipped intrinsics only: one registered elsewhere, such as a test's, matches too)
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import BufferLoad, Var
from cuvil_tir.node import Node, field_names
from cuvil_tir.stmt import BlockRealize, BufferStore
from cuvil_tir.target import as_target, build
from cuvil_tir.tensor_intrin import TensorIntrin

from cuvil_tir.analysis import tree

_SUPPORTED: dict = {}


@dataclass(frozen=True)
class Match:
    """An intrinsic ``name`` a block computes: ``extents``, per block iterator (in the
    block's order), the description's extent of the iterator it maps to (None: not
    covered), ``order``, the block iterators in the description's loop order, and
    ``scopes``: ``(block buffer name, memory scope)`` of each operand, the scope the
    description declares it in (where the intrinsic reads or writes it).

    Example::

        >>> Match("x", (4, None), (0,)).name
        'x'
    """

    name: str
    extents: tuple
    order: tuple
    scopes: tuple = ()


def leaf_block(func):
    """The one block (a ``BlockRealize``) of ``func`` besides the root, else None.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> leaf_block(f).block.name
        'B'
    """
    blocks = [s for _, s in tree.walk(func) if isinstance(s, BlockRealize)
              and s.block.name != "root"]
    return blocks[0] if len(blocks) == 1 else None


def _same(a, b, vmap: dict, bmap: dict) -> bool:
    """Whether ``a`` (the block's) is ``b`` (the description's) up to renaming."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Var):
        return vmap.setdefault(b, a) is a
    if isinstance(a, (BufferLoad, BufferStore)):
        if str(a.buffer.dtype) != str(b.buffer.dtype) or \
                bmap.setdefault(b.buffer, a.buffer) is not a.buffer or \
                len(a.indices) != len(b.indices):
            return False
        if not all(_same(x, y, vmap, bmap) for x, y in zip(a.indices, b.indices)):
            return False
        return not isinstance(a, BufferStore) or _same(a.value, b.value, vmap, bmap)
    if not isinstance(a, Node):
        return a == b
    for f in field_names(type(a)):
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, tuple):
            if not isinstance(y, tuple) or len(x) != len(y) or \
                    not all(_same(p, q, vmap, bmap) for p, q in zip(x, y)):
                return False
        elif isinstance(x, Node) or isinstance(y, Node):
            if not _same(x, y, vmap, bmap):
                return False
        elif x != y and f not in ("name", "span"):
            return False
    return True


def match_one(block, intrin):
    """The :class:`Match` of ``intrin`` on ``block`` (a ``Block``: what its
    description computes, up to renaming), else None (module doc).

    Example::

        >>> import schedules as S
        >>> gemm = S.TensorIntrin.get("cpu.gemm_4x8x4_f32")   # matches its own description
        >>> match_one(leaf_block(gemm.desc).block, gemm).extents
        (4, 8, 4)
    """
    desc = leaf_block(intrin.desc)
    if desc is None or not isinstance(block.body, BufferStore) or \
            not isinstance(desc.block.body, BufferStore):
        return None
    vmap: dict = {}
    bmap: dict = {}
    if not _same(block.body, desc.block.body, vmap, bmap):
        return None
    ivs = {iv.var: iv for iv in block.iter_vars}
    extents = [None] * len(block.iter_vars)
    order = []
    for div in desc.block.iter_vars:
        mine = vmap.get(div.var)
        if mine not in ivs or ivs[mine].kind != div.kind:
            return None
        n = [iv.var for iv in block.iter_vars].index(mine)
        e = getattr(div.dom.extent, "value", None)
        have = getattr(ivs[mine].dom.extent, "value", None)
        if not isinstance(e, int) or not isinstance(have, int) or have % e:
            return None
        extents[n] = e
        order.append(n)
    return Match(intrin.name, tuple(extents), tuple(order),
                 tuple((mine.name, theirs.scope) for theirs, mine in bmap.items()))


def supported(name: str, target) -> bool:
    """Whether intrinsic ``name``'s ``impl`` builds for ``target`` (once per process).

    Example::

        >>> supported("cpu.gemm_4x8x4_f32", "llvm -mcpu=haswell")
        True
    """
    t = as_target(target)
    key = (name, str(t))
    if key not in _SUPPORTED:
        try:
            build(TensorIntrin.get(name).impl, t)
            _SUPPORTED[key] = True
        except Exception:  # noqa: BLE001 - any failure: this target cannot emit it
            _SUPPORTED[key] = False
    return _SUPPORTED[key]


def matches(func, block_name: str, target) -> list:
    """The :class:`Match` of every registered intrinsic that block ``block_name`` of
    ``func`` computes and ``target`` supports (module doc)."""
    block = tree.get(func, tree.find_block(func, block_name)).block
    out = []
    for name in TensorIntrin.names():
        m = match_one(block, TensorIntrin.get(name))
        if m is not None and supported(name, target):
            out.append(m)
    return out


def tensorized(sch, name: str, match: Match) -> None:
    """Schedule block ``name`` of ``sch`` around ``match``'s intrinsic (module doc);
    its decisions are the two-level tiling of the outer spatial loops."""
    block = sch.get_block(name)
    node = tree.get(sch.func, tree.find_block(sch.func, name))
    kinds = [iv.kind for iv in node.block.iter_vars]
    loops = sch.get_loops(block)
    outer_s, mid_s, outer_r, inner = [], [], [], {}
    for n, (lp, kind) in enumerate(zip(loops, kinds)):
        o = lp
        if match.extents[n] is not None:
            o, inner[n] = sch.split(lp, [None, match.extents[n]])
        if kind == "spatial":
            a, b = sch.split(o, sch.sample_perfect_tile(o, 2))
            outer_s.append(a)
            mid_s.append(b)
        else:
            outer_r.append(o)
    sch.reorder(*outer_s, *mid_s, *outer_r, *[inner[n] for n in match.order])
    sch.tensorize(inner[match.order[0]], match.name)
    for lp in outer_s:   # the first outer loop with more than one iteration runs parallel
        if tree.get(sch.func, tree.find_loop(sch.func, lp.var)).extent.value > 1:
            try:
                sch.parallel(lp)
            except CuvilError:
                pass     # refused (left unchanged, not recorded): the nest stays serial
            break


__all__ = ["Match", "leaf_block", "match_one", "matches", "supported", "tensorized"]
