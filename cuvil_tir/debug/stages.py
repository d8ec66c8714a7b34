"""Cut a function into its top-level stages, for per-block profiling.

Each statement of the root block's body (a loop nest holding one or more blocks)
becomes a function of its own whose parameters are the original ones plus every
intermediate buffer (promoted to global memory, see
:func:`~cuvil_tir.debug.diff.promote_intermediates`).  Running the stages in order on
the same arrays computes what the whole function computes, so each one can be built
and timed by itself with any target -- no timer inside the generated code.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((4,), lambda i: B[i] + 1.0, name="C")
    >>> [(label, len(f.params)) for label, f in stages(T.create_prim_func([A, C]))]
    [('B', 3), ('C', 3)]
"""

from __future__ import annotations

from ..stmt import Block, BlockRealize, SeqStmt
from ..visitor import Visitor
from .diff import promote_intermediates


class _Names(Visitor):
    def __init__(self):
        self.names: list = []

    def visit_Block(self, blk):
        self.names.append(blk.name)
        self.generic_visit(blk)


def stages(func) -> list:
    """``[(label, PrimFunc)]``: one function per top-level statement, in order; the
    label joins the names of the blocks the statement holds (``"Cp_init+Cp+C"``).
    The functions all take ``func``'s parameters followed by its intermediates."""
    promoted, _, _ = promote_intermediates(func)
    body = promoted.body
    if not isinstance(body, BlockRealize):
        return [(func.name, promoted)]
    root = body.block
    parts = list(root.body.seq) if isinstance(root.body, SeqStmt) else [root.body]
    out = []
    for k, stmt in enumerate(parts):
        names = _Names()
        names.visit(stmt)
        label = "+".join(names.names) or f"stmt{k}"
        blk = Block(root.name, root.iter_vars, root.reads, root.writes, stmt, None,
                    root.alloc_buffers, root.annotations)
        out.append((label, promoted.with_body(BlockRealize(body.iter_values,
                                                           body.predicate, blk))))
    return out
