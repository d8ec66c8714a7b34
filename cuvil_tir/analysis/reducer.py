"""Reductions: the combiners, their identities, and the reducer of a block.

A reduction block (TensorIR) has reduce iter vars, an ``init`` storing the combiner's
identity, and a body ``C[idx] = C[idx] <op> rhs`` with ``<op>`` one of the combiners
``sum`` (``+``), ``prod`` (``*``), ``max`` and ``min``.  The te reductions build such
blocks (:mod:`cuvil_tir.te.create_prim_func`); ``rfactor`` and ``decompose_reduction``
(schedules), the CUDA cross-thread reduction (targets) and the tuner's space read them
back with :func:`match_reducer` and :func:`reduction_block`: one definition for all.

Example::

    >>> from cuvil_tir.analysis import tree
    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> combiner, rhs = match_reducer(tree.get(f, tree.find_block(f, "C")).block)
    >>> combiner, str(identity(combiner, "float32"))
    ('sum', 'T.float32(0)')
"""

from __future__ import annotations

from .. import dtype as D
from ..expr import Add, BufferLoad, Expr, FloatImm, IntImm, Max, Min, Mul, const
from ..node import same
from ..op import max_value, maximum, min_value, minimum
from ..stmt import Block, BufferStore, For
from ..visitor import used_vars
from . import tree

#: the combiners, with the expression node each one is
COMBINERS = {"sum": Add, "prod": Mul, "max": Max, "min": Min}


class NotAReduction(Exception):
    """A block is not a reduction Cuvil can read; the message says why (callers add
    the block's name and raise their own coded error).

    Example::

        >>> str(NotAReduction("has no init"))
        'has no init'
    """


def identity(combiner: str, dtype: str) -> Expr:
    """The identity of ``combiner`` in ``dtype`` (``max`` of floats: ``-inf``).

    Example::

        >>> str(identity("max", "int8")), str(identity("min", "float32"))
        ('T.int8(-128)', 'T.float32("inf")')
    """
    if combiner == "sum":
        return const(0, dtype)
    if combiner == "prod":
        return const(1, dtype)
    if D.is_float(dtype):
        return const(float("-inf") if combiner == "max" else float("inf"), dtype)
    return min_value(dtype) if combiner == "max" else max_value(dtype)


def is_identity(combiner: str, value) -> bool:
    """True when the constant ``value`` is an identity of ``combiner`` (for ``max``,
    ``-inf`` or the dtype's lowest value; for ``min``, ``inf`` or its highest).

    Example::

        >>> is_identity("max", min_value("float32")), is_identity("sum", const(1))
        (True, False)
    """
    if not isinstance(value, (IntImm, FloatImm)):
        return False
    v, dt = value.value, value.dtype
    if combiner == "sum":
        return v == 0
    if combiner == "prod":
        return v == 1
    if combiner == "max":
        return v == float("-inf") or v == min_value(dt).value
    return v == float("inf") or v == max_value(dt).value


def combine(combiner: str, acc, x) -> Expr:
    """``acc <combiner> x``.

    Example::

        >>> import cuvil_tir as T
        >>> type(combine("max", T.var("a", "float32"), T.var("b", "float32"))).__name__
        'Max'
    """
    if combiner == "sum":
        return acc + x
    if combiner == "prod":
        return acc * x
    return maximum(acc, x) if combiner == "max" else minimum(acc, x)


def match_reducer(blk: Block) -> tuple:
    """``(combiner, rhs)`` of the reduction block ``C[idx] = C[idx] <op> rhs`` whose
    init stores the combiner's identity at the same indices; :class:`NotAReduction`
    saying what is missing otherwise.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> try:
        ...     match_reducer(tree.get(f, tree.find_block(f, "B")).block)
        ... except NotAReduction as why:
        ...     print(str(why)[:28])
        is not a reduction block (it
    """
    if blk.init is None or not any(iv.kind == "reduce" for iv in blk.iter_vars):
        raise NotAReduction("is not a reduction block (it needs reduce iter vars and an "
                            "init); apply it to a block computed with "
                            "T.sum/T.max/T.min/T.prod")
    st = blk.body
    if not isinstance(st, BufferStore):
        raise NotAReduction(f"has a {type(st).__name__} body; expected one store "
                            "C[idx] = C[idx] <op> rhs")

    def is_acc(e):
        return (isinstance(e, BufferLoad) and e.buffer is st.buffer
                and same(e.indices, st.indices))

    for name, cls in COMBINERS.items():
        if type(st.value) is not cls:
            continue
        if is_acc(st.value.a):
            rhs = st.value.b
        elif is_acc(st.value.b):
            rhs = st.value.a
        else:
            continue
        init = blk.init
        if not (isinstance(init, BufferStore) and init.buffer is st.buffer
                and is_identity(name, init.value)):
            raise NotAReduction(f"has init {init} which is not the identity of its {name} "
                                "reduction; only identity inits can be factored")
        if not same(init.indices, st.indices):
            raise NotAReduction(f"initialises {init.buffer.name}"
                                f"[{', '.join(map(str, init.indices))}] but updates "
                                f"{st.buffer.name}[{', '.join(map(str, st.indices))}]: "
                                "the init and the update must store at the same indices")
        return name, rhs
    raise NotAReduction(f"has body {st}; no recognised combiner (expected C = C + x, "
                        "C * x, T.max(C, x) or T.min(C, x))")


def has_reduce_axes(blk: Block) -> bool:
    """True when the block has a reduce iter var.

    Example::

        >>> from cuvil_tir.analysis import tree
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(2, 2, 2)
        >>> has_reduce_axes(tree.get(f, tree.find_block(f, "C")).block)
        True
    """
    return any(iv.kind == "reduce" for iv in blk.iter_vars)


def reduction_block(loop: For):
    """The name of a block under ``loop`` whose reduce iter var it drives, else None.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4, 4), name="A")
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k),
        ...                                      name="S")])
        >>> i_loop = tree.get(f, ("block", "body"))
        >>> reduction_block(i_loop), reduction_block(i_loop.body)
        (None, 'S')
    """
    for br in tree.blocks_under(loop.body):
        for iv, value in zip(br.block.iter_vars, br.iter_values):
            if iv.kind == "reduce" and any(v is loop.loop_var for v in used_vars(value)):
                return br.block.name
    return None


__all__ = ["COMBINERS", "NotAReduction", "combine", "has_reduce_axes", "identity",
           "is_identity", "match_reducer", "reduction_block"]
