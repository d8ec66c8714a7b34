"""Whether an expression moved by inlining can still see what it names.

``compute_inline`` moves the producer's stored value into every reader of its
buffer; ``reverse_compute_inline`` moves the consumer's into the producer.  The value
may name a buffer allocated by a block around its old place (a cache inside a
blockized block) or a variable bound there (the outer block's iterators, a loop of an
opaque block): moved to a block outside that one, those are undefined (the printed
function names a buffer no block allocates).  :func:`out_of_reach` lists them.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
    >>> p = tree.find_block(f, "B")
    >>> out_of_reach(f, p, tree.get(f, p).block.body.value, [tree.find_block(f, "C")])
    []
"""

from __future__ import annotations

from cuvil_tir.expr import BufferLoad
from cuvil_tir.stmt import BlockRealize, For
from cuvil_tir.visitor import post_order_visit, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import region_of
from ..errors import InlineError, fail


def out_of_reach(func, from_path: tuple, value, to_paths) -> list:
    """The names of the buffers and variables ``value`` (at the block ``from_path``)
    uses that a block around ``from_path`` allocates or binds, and that some block of
    ``to_paths`` is not inside; ``[]`` when every destination sees them all."""
    own = {id(iv.var) for iv in tree.get(func, from_path).block.iter_vars}
    names = {id(v): v.name for v in used_vars(value) if id(v) not in own}
    loaded: dict = {}

    def visit(n):
        if isinstance(n, BufferLoad):
            loaded[id(n.buffer)] = n.buffer.name
    post_order_visit(value, visit)
    out = []
    for path, node in tree.ancestors(func, from_path):
        if isinstance(node, BlockRealize):
            here = [b.name for b in node.block.alloc_buffers if id(b) in loaded]
            here += [names[id(iv.var)] for iv in node.block.iter_vars
                     if id(iv.var) in names]
        elif isinstance(node, For):
            here = [names[id(node.loop_var)]] if id(node.loop_var) in names else []
        else:
            continue
        if here and any(p[:len(path)] != path for p in to_paths):
            out += here
    return out


def refuse_out_of_reach(func, bpath: tuple, value, buf, prim: str) -> None:
    """Raise ``InlineError`` when ``value`` (stored by the block at ``bpath`` into
    ``buf``) names something a reader of ``buf`` cannot see (:func:`out_of_reach`).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
        >>> p = tree.find_block(f, "B")
        >>> st = tree.get(f, p).block.body
        >>> refuse_out_of_reach(f, p, st.value, st.buffer, "compute_inline") is None
        True
    """
    readers = [(p, b.block.name) for p, b in tree.walk(func) if isinstance(b, BlockRealize)
               and p != bpath and region_of(b.block.reads, buf) is not None]
    hidden = out_of_reach(func, bpath, value, [p for p, _ in readers])
    if hidden:
        name = tree.get(func, bpath).block.name
        raise fail(InlineError, prim, f"block {name!r} reads or names {hidden}, which a "
                   f"block around it allocates or binds, and its readers "
                   f"{[n for _, n in readers]} are not all inside that block: inlined "
                   "there, those would be undefined; inline before blockize or "
                   "cache_read, or compute_at the readers into that block", func)


__all__ = ["out_of_reach", "refuse_out_of_reach"]
