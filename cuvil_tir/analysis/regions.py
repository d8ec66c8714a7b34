"""Region analysis for the block primitives: which part of a buffer a block touches.

A block's ``reads``/``writes`` regions are written over its block variables.  The
primitives that move or stage computation (``compute_at``, ``cache_read`` …) need them
over the *loop* variables instead, and "relaxed" over the loops between a chosen loop
and the block: the region that all iterations of those inner loops touch, as a
function of the loops above.  Bounds come from :func:`cuvil_tir.arith.bound_of`.

The module also answers the scope questions the primitives share: the child blocks of
a scope, which of them read or write a buffer, and how a block is classified.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((4,), lambda i: B[2 * i] + B[2 * i + 1], name="C")
    >>> f = T.create_prim_func([A, C])
    >>> r = needed_region(f, (), f.body.block.alloc_buffers[0], [tree.find_block(f, "C")])
    >>> (r.region[0].min.value, r.region[0].extent.value)
    (0, 8)
"""

from __future__ import annotations

from ..expr import IntImm, Var, const
from ..function import PrimFunc
from ..op import maximum, minimum
from ..stmt import Block, BlockRealize, BufferRegion, Range, Stmt
from ..visitor import substitute, used_vars

from .. import thread_axes
from . import tree
from .index_bounds import bounds, provably_le, simplify
from .predicate_doms import tighten
from ..dtype import int_range
from ..node import same, field_names


# regions --------------------------------------------------------------------------------

def iter_map(realize: BlockRealize) -> dict:
    """``{block var: iter value}`` of a block realize.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> br = tree.get(f, tree.find_block(f, "B"))
        >>> [(k.name, v.name) for k, v in iter_map(br).items()]
        [('v_i', 'i')]
    """
    return {iv.var: val for iv, val in zip(realize.block.iter_vars, realize.iter_values)}


def accessed_region(block: Block, buffer) -> BufferRegion | None:
    """The bounding box of what ``block`` declares it reads and writes of ``buffer``
    (over its iter vars), or None.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> blk = tree.get(f, tree.find_block(f, "B")).block
        >>> str(accessed_region(blk, f.params[0]))
        'A[v_i]'
    """
    out = None
    for r in block.reads + block.writes:
        if r.buffer is buffer:
            out = union(out, r)
    return out


def region_of(regions, buffer):
    """The entry of ``regions`` (a block's reads or writes) for ``buffer``, or None.

    Example::

        >>> region_of((), None) is None
        True
    """
    for r in regions:
        if r.buffer is buffer:
            return r
    return None


def bound_region(realize: BlockRealize, region: BufferRegion) -> BufferRegion:
    """``region`` (over block vars) rewritten over the realize's iter values.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> br = tree.get(f, tree.find_block(f, "B"))
        >>> bound_region(br, br.block.reads[0]).region[0].min.name
        'i'
    """
    vm = iter_map(realize)
    return BufferRegion(region.buffer, tuple(Range(substitute(r.min, vm),
                                                   substitute(r.extent, vm))
                                             for r in region.region))


def relax(region: BufferRegion, doms: dict) -> BufferRegion:
    """The region covered when the variables of ``doms`` range over their domains.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((16,), "float32", "A")
        >>> i, j = T.var("i"), T.var("j")
        >>> r = relax(BufferRegion(A, (Range(i * 4 + j, T.const(1)),)),
        ...           {j: Range.from_extent(4)})
        >>> r.region[0].extent.value
        4
    """
    if not doms:
        return region
    out = []
    for r in region.region:
        # a dimension free of the relaxed variables stays as it is: bounding it
        # would only simplify it (most of what planning allocations costs)
        if not any(v in doms for v in used_vars(r.min)) and \
                not any(v in doms for v in used_vars(r.extent)):
            out.append(r)
            continue
        lo, _ = bounds(r.min, doms)
        _, hi = bounds(simplify(r.min + r.extent - 1), doms)
        if _dtype_extreme(lo) or _dtype_extreme(hi):
            # an index bounded only by its dtype (e.g. cast from a float): its extent
            # would wrap; an access stays inside the buffer, so the dimension covers it
            d = len(out)
            out.append(Range(const(0, r.min.dtype), region.buffer.shape[d]))
            continue
        out.append(Range(lo, simplify(hi - lo + 1)))
    return BufferRegion(region.buffer, tuple(out))


def _dtype_extreme(e) -> bool:
    return isinstance(e, IntImm) and e.value in int_range(e.dtype)


def union(a: BufferRegion | None, b: BufferRegion) -> BufferRegion:
    """The bounding box of two regions of one buffer (``a`` may be None).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((16,), "float32", "A")
        >>> u = union(BufferRegion(A, (Range(T.const(0), T.const(4)),)),
        ...           BufferRegion(A, (Range(T.const(8), T.const(2)),)))
        >>> (u.region[0].min.value, u.region[0].extent.value)
        (0, 10)
    """
    if a is None:
        return b
    out = []
    for ra, rb in zip(a.region, b.region):
        if tree_same(ra.min, rb.min) and tree_same(ra.extent, rb.extent):
            out.append(ra)
            continue
        lo = _pick(ra.min, rb.min, minimum, lambda d: d >= 0)
        hi = _pick(simplify(ra.min + ra.extent), simplify(rb.min + rb.extent), maximum,
                   lambda d: d <= 0)
        out.append(Range(lo, simplify(hi - lo)))
    return BufferRegion(a.buffer, tuple(out))


def _pick(a, b, combine, a_wins):
    """``a`` or ``b`` when their difference is a constant (``vi`` rather than
    ``min(vi, vi + 1)``), else ``combine(a, b)``."""
    d = simplify(b - a)
    if isinstance(d, IntImm):
        return a if a_wins(d.value) else b
    return simplify(combine(a, b))


def tree_same(a, b) -> bool:
    """Exact structural equality (variables by identity).

    Example::

        >>> import cuvil_tir as T
        >>> tree_same(T.const(1), T.const(1))
        True
    """
    return same(a, b)


def loop_doms(loops) -> dict:
    """``{loop var: Range}`` of ``(path, For)`` pairs.

    Example::

        >>> loop_doms([])
        {}
    """
    return {f.loop_var: Range(f.min, f.extent) for _, f in loops}


def scope_doms(func: PrimFunc, path: tuple) -> dict:
    """``{var: Range}`` of the iter vars of every block enclosing ``path`` (within one
    instance of those blocks they are fixed, but bounded by their domains).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> scope_doms(f, tree.find_block(f, "B"))
        {}
    """
    return {iv.var: iv.dom for _, s in tree.ancestors(func, path)
            if isinstance(s, BlockRealize) for iv in s.block.iter_vars}


def inner_loops(func: PrimFunc, loop_path: tuple, block_path: tuple) -> list:
    """``(path, For)`` of the loops strictly between ``loop_path`` and the block.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
        >>> p = tree.find_block(f, "B")
        >>> [l.loop_var.name for _, l in inner_loops(f, p[:2], p)]
        ['j']
    """
    n = len(loop_path)
    return [(p, s) for p, s in tree.loops_above(func, block_path) if len(p) > n]


def shared_by_threads(scope: str) -> tuple:
    """The thread tags whose loops all share one buffer of ``scope``: a ``shared``
    buffer is one per thread block, so every iteration of a ``thread`` or ``virtual``
    axis (:mod:`cuvil_tir.thread_axes`) uses the same allocation; a ``warp`` buffer is
    one per warp, shared by its lanes (the ``thread`` axis of dimension 0; the others
    tell warps apart); ``local`` is one per thread (nothing is shared); ``global`` is
    not relaxed by threads (as in TensorIR).

    Example::

        >>> shared_by_threads("shared")[:4], shared_by_threads("local")
        (('threadIdx.x', 'threadIdx.y', 'threadIdx.z', 'vthread.x'), ())
    """
    base = scope.split(".")[0] if scope else "global"
    if base == "shared":
        return thread_axes.tags("thread") + thread_axes.tags("virtual")
    if base == "warp":
        return (thread_axes.launch_index("thread", 0),)
    return ()


def thread_relaxed_loops(func: PrimFunc, loop_path: tuple, scope: str) -> dict:
    """``{loop var: Range}`` of the thread-bound loops at and above ``loop_path`` that a
    buffer of ``scope`` is shared by (:func:`shared_by_threads`).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> thread_relaxed_loops(f, ("block", "body"), "shared")
        {}
    """
    tags = shared_by_threads(scope)
    if not tags or not loop_path:
        return {}
    loops = tree.loops_above(func, loop_path) + [(loop_path, tree.get(func, loop_path))]
    return {f.loop_var: Range(f.min, f.extent) for _, f in loops
            if f.kind == "thread_binding" and f.thread_tag.startswith(tags)}


def needed_region(func: PrimFunc, loop_path: tuple, buffer, block_paths,
                  kind: str = "reads", relax_threads: bool = False,
                  by_predicate: bool = False) -> BufferRegion | None:
    """The region of ``buffer`` that the blocks at ``block_paths`` (all under the loop at
    ``loop_path``) read (``kind="reads"``) or write (``"writes"``) during one iteration
    of that loop: over the loop variables from ``loop_path`` up.  None when none of the
    blocks accesses ``buffer``.  With ``relax_threads``, the thread-bound loops at and
    above ``loop_path`` that share ``buffer`` (by its scope) are relaxed too: a
    ``shared`` tile covers what all threads of the block need.  With ``by_predicate``,
    each block's ``T.where`` cuts the loops it bounds (:mod:`.predicate_doms`): only
    the instances that run count.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
        >>> p = tree.find_block(f, "B")
        >>> r = needed_region(f, p[:2], f.params[0], [p])
        >>> [x.extent.value for x in r.region]
        [1, 4]
    """
    out = None
    threads = thread_relaxed_loops(func, loop_path, buffer.scope) if relax_threads else {}
    for bp in block_paths:
        br = tree.get(func, bp)
        reg = region_of(getattr(br.block, kind), buffer)
        if reg is None:
            continue
        doms = {**threads, **loop_doms(inner_loops(func, loop_path, bp))}
        if by_predicate:
            doms = tighten(doms, br.predicate)
        out = union(out, relax(bound_region(br, reg), doms))
    return out


# scopes and blocks --------------------------------------------------------------------

def child_blocks(func: PrimFunc, scope_path: tuple) -> list:
    """``(path, BlockRealize)`` of the blocks directly in the scope at ``scope_path``
    (not nested inside another block), in program order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [b.block.name for _, b in child_blocks(f, ())]
        ['B']
    """
    scope = tree.get(func, scope_path)
    out = []

    def visit(path, node):
        for p, s in _children(path, node):
            if isinstance(s, BlockRealize):
                out.append((p, s))
            else:
                visit(p, s)

    visit(scope_path + ("block",), scope.block)
    return out


def _children(path, node):
    for f in field_names(type(node)):
        v = getattr(node, f)
        if isinstance(v, Stmt):
            yield path + (f,), v
        elif isinstance(v, tuple) and f == "seq":
            for k, s in enumerate(v):
                yield path + ((f, k),), s


def readers(func: PrimFunc, scope_path: tuple, buffer) -> list:
    """``(path, BlockRealize)`` of the scope's child blocks that read ``buffer``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [b.block.name for _, b in readers(f, (), f.params[0])]
        ['B']
    """
    return [(p, b) for p, b in child_blocks(func, scope_path)
            if region_of(b.block.reads, buffer) is not None]


def writers(func: PrimFunc, scope_path: tuple, buffer) -> list:
    """``(path, BlockRealize)`` of the scope's child blocks that write ``buffer``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [b.block.name for _, b in writers(f, (), f.params[1])]
        ['B']
    """
    return [(p, b) for p, b in child_blocks(func, scope_path)
            if region_of(b.block.writes, buffer) is not None]


def is_reduction(block: Block) -> bool:
    """A block with reduction iter vars (and usually an ``init``).

    Example::

        >>> is_reduction(Block("B", (), (), (), None))
        False
    """
    return any(iv.kind == "reduce" for iv in block.iter_vars)


def is_complete(block: Block) -> bool:
    """All iter vars spatial, no init, and it does not read what it writes.

    Example::

        >>> is_complete(Block("B", (), (), (), None))
        True
    """
    if block.init is not None or any(iv.kind != "spatial" for iv in block.iter_vars):
        return False
    written = {id(w.buffer) for w in block.writes}
    return not any(id(r.buffer) in written for r in block.reads)


def is_param(func: PrimFunc, buffer) -> bool:
    """Whether ``buffer`` is one of the function's parameters.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> is_param(f, f.params[0])
        True
    """
    return any(p is buffer for p in func.params)


def precedes(p: tuple, q: tuple) -> bool:
    """Whether the statement at path ``p`` runs before the one at ``q`` (neither inside
    the other): they part at one ``SeqStmt``, ``p`` at the smaller index.

    Example::

        >>> precedes((("seq", 0),), (("seq", 1), "body"))
        True
    """
    for a, b in zip(p, q):
        if a == b:
            continue
        return isinstance(a, tuple) and isinstance(b, tuple) and a[1] < b[1]
    return False


def encloses(outer: tuple, inner: tuple) -> bool:
    """Whether the statement at path ``outer`` contains the one at ``inner`` (or is it).

    Example::

        >>> encloses(("block",), ("block", "body"))
        True
    """
    return inner[:len(outer)] == outer


def loop_var(name: str, dtype: str = "int32") -> Var:
    """A fresh loop variable (the ``ax0, ax1 …`` of regenerated nests).

    Example::

        >>> loop_var("ax0").name
        'ax0'
    """
    return Var(name, dtype)


def uses_loop(e, loops) -> bool:
    """Whether expression ``e`` uses one of the loop variables of ``(path, For)`` pairs.

    Example::

        >>> import cuvil_tir as T
        >>> uses_loop(T.const(1), [])
        False
    """
    ids = {id(f.loop_var) for _, f in loops}
    return any(id(v) in ids for v in used_vars(e))


__all__ = ["bounds", "simplify", "provably_le", "iter_map", "region_of", "bound_region",
           "relax", "union", "loop_doms", "scope_doms", "inner_loops", "shared_by_threads",
           "thread_relaxed_loops", "needed_region", "child_blocks",
           "readers", "writers", "is_reduction", "is_complete", "is_param", "precedes",
           "encloses", "loop_var", "uses_loop"]
