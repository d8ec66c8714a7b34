"""Block and loop queries shared by the schedule primitives.

Resolving handles to paths (with errors naming the primitive), the child blocks of a
block or loop, whether a loop carries a reduction, and the loop nest of a block
(producers and consumers among sibling blocks are dependence queries:
:mod:`schedules.block_scope`).

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((4,), lambda i: B[i] + 1.0, name="C")
    >>> f = T.create_prim_func([A, C])
    >>> scope = tree.enclosing_block(f, block_path(f, BlockRV("C"), "get_block"))
    >>> [b.block.name for b in child_blocks(tree.get(f, scope))]
    ['B', 'C']
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, Var, And, Not, Or, EQ, GE, GT, LE, LT, NE
from cuvil_tir.stmt import Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt, Allocate
from cuvil_tir.visitor import Visitor

from cuvil_tir.analysis import tree
from cuvil_tir.arith.affine import quasi_affine  # noqa: F401 - re-exported
from cuvil_tir.analysis.reducer import reduction_block  # noqa: F401 - re-exported
from .errors import BlockNotFoundError, ScheduleArgumentError, schedule_error
from .handles import BlockRV, LoopRV


def block_path(func, rv, primitive: str) -> tuple:
    """The path of the ``BlockRealize`` that ``rv`` (a BlockRV) names.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> block_path(f, BlockRV("root"), "get_loops")
        ()
    """
    if not isinstance(rv, BlockRV):
        raise schedule_error(ScheduleArgumentError, primitive,
                             f"expected a BlockRV (from sch.get_block), got {rv!r}")
    try:
        return tree.find_block(func, rv.name)
    except Exception as err:
        raise schedule_error(BlockNotFoundError, primitive,
                             str(getattr(err, "message", err)).split(": ", 1)[-1]) from None


def loop_path(func, rv, primitive: str) -> tuple:
    """The path of the ``For`` that ``rv`` (a LoopRV) names.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> loop = tree.get(f, ("block", "body"))
        >>> loop_path(f, LoopRV(loop.loop_var), "split")
        ('block', 'body')
    """
    if not isinstance(rv, LoopRV):
        raise schedule_error(ScheduleArgumentError, primitive,
                             f"expected a LoopRV (from sch.get_loops), got {rv!r}")
    return tree.find_loop(func, rv.var, primitive)


def stmt_path(func, rv, primitive: str) -> tuple:
    """The path of a loop or block handle.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> stmt_path(f, BlockRV("root"), "annotate")
        ()
    """
    if isinstance(rv, LoopRV):
        return loop_path(func, rv, primitive)
    if isinstance(rv, BlockRV):
        return block_path(func, rv, primitive)
    raise schedule_error(ScheduleArgumentError, primitive,
                         f"expected a LoopRV or a BlockRV, got {rv!r}")


def non_affine_block(stmt, loop_vars=None):
    """``(block name, why)`` of the first block under ``stmt`` whose bindings (or
    predicate) are not quasi-affine in the loop variables, or None.  Primitives that
    reorder or parallelise iterations rely on each iteration writing its own element,
    which a binding such as ``i * j % 8`` does not give.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> non_affine_block(f.body.block.body) is None
        True
    """

    def affine_pred(c):
        if isinstance(c, IntImm):
            return True
        if isinstance(c, (And, Or)):
            return affine_pred(c.a) and affine_pred(c.b)
        if isinstance(c, Not):
            return affine_pred(c.a)
        if isinstance(c, (LT, LE, GT, GE, EQ, NE)):
            return quasi_affine(c.a) and quasi_affine(c.b)
        return False

    for br in tree.blocks_under(stmt):
        for iv, val in zip(br.block.iter_vars, br.iter_values):
            if not quasi_affine(val):
                return br.block.name, (f"binds {iv.var.name} to {val}, which is not "
                                       "quasi-affine in its loops")
        if not affine_pred(br.predicate):
            return br.block.name, (f"has the predicate {br.predicate}, which is not a "
                                   "condition on quasi-affine expressions")
    return None


def fresh_name(base: str, taken) -> str:
    """``base``, or ``base_1``, ``base_2`` ... the first not in ``taken``: the one way
    primitives name the blocks and buffers they create.

    Example::

        >>> fresh_name("C_init", {"C", "C_init"}), fresh_name("A_local", set())
        ('C_init_1', 'A_local')
    """
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def fresh_block_name(func, base: str) -> str:
    """A block name from ``base`` that no block of ``func`` has (see :func:`fresh_name`).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> fresh_block_name(matmul(4, 4, 4), "C")
        'C_1'
    """
    return fresh_name(base, {b.block.name for b in tree.blocks_under(func.body)})


def child_blocks(stmt) -> list:
    """The ``BlockRealize`` statements under ``stmt`` that no other block encloses.

    For a ``BlockRealize`` the search starts in its block's body.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [b.block.name for b in child_blocks(f.body)]
        ['B']
    """
    if isinstance(stmt, BlockRealize):
        stmt = stmt.block
    if isinstance(stmt, Block):
        stmt = stmt.body
    out: list = []
    _collect_blocks(stmt, out)
    return out


def _collect_blocks(stmt, out: list) -> None:
    if isinstance(stmt, BlockRealize):
        out.append(stmt)
    elif isinstance(stmt, SeqStmt):
        for s in stmt.seq:
            _collect_blocks(s, out)
    elif isinstance(stmt, (For, LetStmt, Allocate)):
        _collect_blocks(stmt.body, out)
    elif isinstance(stmt, IfThenElse):
        _collect_blocks(stmt.then_case, out)
        if stmt.else_case is not None:
            _collect_blocks(stmt.else_case, out)


def uses_var(node, var: Var) -> bool:
    """Whether ``var`` (by identity) occurs in ``node``.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> uses_var(i * 2 + 1, i), uses_var(T.var("j") + 1, i)
        (True, False)
    """
    found = []

    class _Find(Visitor):
        def visit_Var(self, v):
            if v is var:
                found.append(v)

    _Find().visit(node)
    return bool(found)


def ordered_block(loop: For, kinds=("scan",)):
    """``(block name, iter var name)`` of a block under ``loop`` whose iter var of a kind
    in ``kinds`` (``scan``: TensorIR's ordered iterator) the loop drives, else None:
    such a loop must run its iterations in order.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.parse('''@T.prim_func
        ... def f(A: T.Buffer((4,), "float32")):
        ...     for k in T.serial(4):
        ...         with T.block("S"):
        ...             vk = T.axis.scan(4, k)
        ...             A[vk] = A[vk] + T.float32(1)
        ... ''')
        >>> ordered_block(f.body.block.body)
        ('S', 'vk')
    """
    for br in tree.blocks_under(loop.body):
        for iv, value in zip(br.block.iter_vars, br.iter_values):
            if iv.kind in kinds and uses_var(value, loop.loop_var):
                return br.block.name, iv.var.name
    return None


def loop_nest(func, path: tuple) -> list:
    """The ``For`` loops between the block at ``path`` and its parent block, outer first.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
        >>> [l.loop_var.name for l in loop_nest(f, tree.find_block(f, "B"))]
        ['i', 'j']
    """
    return [loop for _, loop in tree.loops_above(func, path)]


def const_int(e):
    """The Python int of a constant expression, else None.

    Example::

        >>> import cuvil_tir as T
        >>> const_int(T.const(4)), const_int(T.var("n"))
        (4, None)
    """
    return e.value if isinstance(e, IntImm) else None


def loop_extent(func, rv):
    """The constant extent of the loop ``rv`` (a LoopRV) names in ``func``, else None.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> loop_extent(f, LoopRV(tree.get(f, ("block", "body")).loop_var))
        4
    """
    return const_int(tree.get(func, loop_path(func, rv, "loop_extent")).extent)


def total_iterations(stmt, extent=None):
    """How many block instances ``stmt`` runs (loop extents multiplied), or None.

    None when some extent is not constant (``extent(expr) -> int | None`` reads an
    extent; default: its constant value).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 8), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[i, j], name="B")])
        >>> total_iterations(f.body)
        33
    """
    if isinstance(stmt, BlockRealize):
        inner = total_iterations(stmt.block.body, extent)
        init = total_iterations(stmt.block.init, extent) if stmt.block.init is not None else 0
        return None if inner is None or init is None else 1 + inner + init
    if isinstance(stmt, For):
        n = (extent or const_int)(stmt.extent)
        inner = total_iterations(stmt.body, extent)
        return None if n is None or inner is None else n * inner
    if isinstance(stmt, SeqStmt):
        total = 0
        for s in stmt.seq:
            t = total_iterations(s, extent)
            if t is None:
                return None
            total += t
        return total
    if isinstance(stmt, (LetStmt, Allocate)):
        return total_iterations(stmt.body, extent)
    if isinstance(stmt, IfThenElse):
        a = total_iterations(stmt.then_case, extent)
        b = total_iterations(stmt.else_case, extent) if stmt.else_case is not None else 0
        return None if a is None or b is None else max(a, b)
    return 0
