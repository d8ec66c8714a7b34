"""Three facts about a block that decide which primitives may touch it.

- ``affine_binding``: the block's iter values are quasi-affine, unit-stride maps of the
  loops between it and its scope, and its ``T.where`` only bounds loops that feed one
  iter value (:func:`schedules.primitives.reorder_legality.binding_blocker`, the rule
  ``reorder`` applies).  The root block has it when it has no iter vars.
- ``region_cover``: its producers (in its scope) write every element it reads from
  them (:mod:`schedules.region_cover`; proven, never assumed).  A block with no
  producer has it.
- ``stage_pipeline``: its own scope is a pipeline of stages: no child overwrites what
  an earlier child read (no ``WAR`` dependence, :mod:`schedules.block_scope`) and every
  child has ``region_cover``.  A block with no children has it.

TensorIR keeps these as the cached flags of its schedule state; ``compute_at`` and
``compute_inline`` need a stage pipeline and covered regions.  Here they are computed on
demand from the (immutable) function.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: B[i] + 1.0, name="C")])
    >>> block_flags(f, "C")
    BlockFlags(affine_binding=True, region_cover=True, stage_pipeline=True)
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import is_param

from .block_scope import DepKind, block_of, func_of, scope_dependences
from .primitives.reorder_legality import binding_blocker
from .region_cover import region_covered


@dataclass(frozen=True)
class BlockFlags:
    """The three flags of one block (see :mod:`schedules.block_flags`).

    Example::

        >>> BlockFlags(True, True, False).stage_pipeline
        False
    """

    affine_binding: bool
    region_cover: bool
    stage_pipeline: bool


def affine_binding(func, path: tuple) -> bool:
    """Whether the block at ``path`` binds its iter vars affinely to its loops.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> affine_binding(f, ()), affine_binding(f, tree.find_block(f, "C"))
        (True, True)
    """
    br = tree.get(func, path)
    if not path:
        return not br.block.iter_vars
    loops = {f.loop_var for _, f in tree.loops_above(func, path)}
    return binding_blocker(br, loops) is None


def stage_pipeline(func, path: tuple) -> bool:
    """Whether the scope of the block at ``path`` is a stage pipeline.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> stage_pipeline(matmul(4, 4, 4), ())
        True
    """
    return pipeline_blocker(func, path) is None


def pipeline_blocker(func, path: tuple):
    """Why the children of the block at ``path`` are not a stage pipeline (a sentence
    for an error message), or None when they are.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> pipeline_blocker(matmul(4, 4, 4), ()) is None
        True
    """
    scope = scope_dependences(func, path)
    war = next((d for d in scope.deps if d.kind is DepKind.WAR), None)
    if war is not None:
        return (f"block {war.dst.name!r} overwrites {list(war.buffers)}, which the "
                f"earlier block {war.src.name!r} read (a write-after-read)")
    for c in scope.children:
        if not region_covered(func, tree.find_block(func, c.name), scope):
            return (f"block {c.name!r} reads elements that its producers in the scope "
                    "do not write")
    return None


def block_flags(func_or_sch, block) -> BlockFlags:
    """The flags of ``block`` (a handle or a name) in a PrimFunc or a Schedule's
    current function.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: B[i // 2] + 1.0,
        ...                                      name="C")])
        >>> block_flags(f, "C").region_cover, block_flags(f, "root").stage_pipeline
        (True, True)
    """
    func = func_of(func_or_sch, "block_flags")
    path = block_of(func, block, "block_flags")
    return BlockFlags(affine_binding(func, path), region_covered(func, path),
                      stage_pipeline(func, path))


def is_output_block(func_or_sch, block) -> bool:
    """Whether ``block`` (a handle or a name) writes a function parameter: its results
    leave the function, so ``compute_inline`` and ``compute_at`` refuse it (the
    "output block" of their messages).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: B[i] + 1.0, name="C")])
        >>> is_output_block(f, "C"), is_output_block(f, "B")
        (True, False)
    """
    func = func_of(func_or_sch, "is_output_block")
    return writes_param(func, tree.get(func, block_of(func, block, "is_output_block")).block)


def writes_param(func, blk) -> bool:
    """Whether the Block ``blk`` of ``func`` writes one of its parameters (the one
    definition of an output block, :func:`is_output_block`).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(2, 2, 2)
        >>> writes_param(f, tree.get(f, tree.find_block(f, "C")).block)
        True
    """
    return any(is_param(func, w.buffer) for w in blk.writes)


__all__ = ["BlockFlags", "block_flags", "affine_binding", "stage_pipeline", "pipeline_blocker",
           "is_output_block", "writes_param"]
