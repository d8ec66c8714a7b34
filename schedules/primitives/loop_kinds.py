"""Loop kinds and annotations: parallel, vectorize, unroll, bind, annotate, unannotate.

``parallel`` and ``vectorize`` refuse a loop that carries a reduction (a block under
it has a reduce iter var whose value uses the loop variable): its iterations are not
independent.  ``bind`` refuses to bind such a loop to ``blockIdx.*``/``vthread.*``;
binding it to ``threadIdx.*`` is a cross-thread reduction; the loop is not marked (as
in TensorIR): the CUDA lowering recognises it from the IR, so a thread-bound
reduction read from text lowers the same way.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import LoopRV
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> g, _ = vectorize(f, LoopRV(f.body.block.body.loop_var))
    >>> g.body.block.body.kind
    'vectorized'
"""

from __future__ import annotations

from cuvil_tir.stmt import Block, BlockRealize, For
from cuvil_tir.thread_axes import is_thread_axis, tags, thread_axis as axis_of

from cuvil_tir.analysis import tree
from ..analysis import (const_int, loop_path, non_affine_block, ordered_block,
                        reduction_block, stmt_path)
from ..errors import (AnnotationError, NonConstantExtentError, ReductionLoopError,
                      ScheduleArgumentError, schedule_error)
from ..dependence import carried_dependence
from ..errors import LoopCarriedError
from ..primitive import BLOCK_OR_LOOP, LOOP, STR, primitive


def _with_kind(node: For, kind: str, tag=None) -> For:
    return For(node.loop_var, node.min, node.extent, kind, node.body, tag,
               node.annotations)


def _refuse_ordered(func, node, name):
    hit = ordered_block(node)
    if hit is not None:
        raise schedule_error(LoopCarriedError, name, f"loop {node.loop_var.name} drives "
                             f"the ordered iterator {hit[1]} of block {hit[0]!r} "
                             "(T.axis.scan): its iterations must run one after another. "
                             "Keep the loop serial", func, node)


def _set_kind(func, loop, name: str, kind: str):
    path = loop_path(func, loop, name)
    node = tree.get(func, path)
    if kind in ("parallel", "vectorized"):
        _refuse_ordered(func, node, name)
        blk = reduction_block(node)
        if blk is not None:
            raise schedule_error(ReductionLoopError, name, f"loop {node.loop_var.name} "
                                 f"carries the reduction of block {blk!r}: its iterations "
                                 "are not independent; use rfactor first, or pick a "
                                 "spatial loop", func, node)
    if kind in ("parallel", "vectorized"):
        bad = non_affine_block(node.body)
        if bad is not None:
            raise schedule_error(LoopCarriedError, name, f"block {bad[0]!r} under loop "
                                 f"{node.loop_var.name} {bad[1]}: different iterations "
                                 f"may write one element, so {name} cannot prove them "
                                 "independent. Keep the loop serial", func, node)
        why = carried_dependence(func, path)
        if why is not None:
            raise schedule_error(LoopCarriedError, name, f"{why}; {name} needs "
                                 "independent iterations. Keep the loop serial, or "
                                 "restructure the computation (e.g. a scan per tile)",
                                 func, node)
    if kind == "vectorized" and const_int(node.extent) is None:
        raise schedule_error(NonConstantExtentError, name, f"loop {node.loop_var.name} "
                             f"has the symbolic extent {node.extent}; vectorize needs a "
                             "constant extent (split it by a constant first)", func, node)
    return tree.replace(func, path, _with_kind(node, kind)), None


@primitive("parallel", loop=LOOP)
def parallel(func, loop):
    """Make ``loop`` parallel; refused on a loop carrying a reduction.

    Before/after: ``for i in T.serial(8)`` -> ``for i in T.parallel(8)``.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.parallel(sch.get_loops(sch.get_block("B"))[0])
        >>> sch.func.body.block.body.kind
        'parallel'
    """
    return _set_kind(func, loop, "parallel", "parallel")


@primitive("vectorize", loop=LOOP)
def vectorize(func, loop):
    """Vectorize ``loop`` (constant extent; refused on a reduction loop).

    Before/after: ``for i in T.serial(8)`` -> ``for i in T.vectorized(8)``.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
        >>> sch.func.body.block.body.kind
        'vectorized'
    """
    return _set_kind(func, loop, "vectorize", "vectorized")


@primitive("unroll", loop=LOOP)
def unroll(func, loop):
    """Unroll ``loop``.

    Before/after: ``for i in T.serial(4)`` -> ``for i in T.unroll(4)``.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.unroll(sch.get_loops(sch.get_block("B"))[0])
        >>> sch.func.body.block.body.kind
        'unrolled'
    """
    return _set_kind(func, loop, "unroll", "unrolled")


@primitive("bind", loop=LOOP, thread_axis=STR)
def bind(func, loop, thread_axis):
    """Bind ``loop`` to ``blockIdx.x/y/z``, ``threadIdx.x/y/z`` or ``vthread.*``.

    A reduction loop may be bound to ``threadIdx.*`` only (a cross-thread
    reduction, which the CUDA lowering recognises from the IR).  Before/after::

        for i in T.serial(8):     ->     for i in T.thread_binding(8, thread="threadIdx.x"):

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.bind(sch.get_loops(sch.get_block("B"))[0], "blockIdx.x")
        >>> sch.func.body.block.body.thread_tag
        'blockIdx.x'
    """
    path = loop_path(func, loop, "bind")
    node = tree.get(func, path)
    if not is_thread_axis(thread_axis):
        raise schedule_error(ScheduleArgumentError, "bind", f"unknown thread axis "
                             f"{thread_axis!r}; expected one of {', '.join(tags())}")
    _refuse_ordered(func, node, "bind")
    blk = reduction_block(node)
    if blk is not None and axis_of(thread_axis).level != "thread":
        raise schedule_error(ReductionLoopError, "bind", f"loop {node.loop_var.name} "
                             f"carries the reduction of block {blk!r} and cannot be "
                             f"bound to {thread_axis}: different thread blocks cannot "
                             "reduce together; bind it to threadIdx.* or use rfactor",
                             func, node)
    return tree.replace(func, path, _with_kind(node, "thread_binding", thread_axis)), None


def _check_value(value, where):
    # plain built-in types only: a sampled int (an int subclass) must print and
    # parse back to the same IR
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, (list, tuple)):
        return tuple(_check_value(v, where) for v in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _check_value(v, where) for k, v in value.items()}
    raise schedule_error(AnnotationError, where, f"annotation values must be bool, int, "
                         f"float, str, or lists or str-keyed dicts of them (so the trace "
                         f"can record them), got {type(value).__name__} {value!r}")


def _rebuild_annotations(node, annotations):
    if isinstance(node, For):
        return For(node.loop_var, node.min, node.extent, node.kind, node.body,
                   node.thread_tag, annotations)
    blk = node.block
    new = Block(blk.name, blk.iter_vars, blk.reads, blk.writes, blk.body, blk.init,
                blk.alloc_buffers, annotations)
    return BlockRealize(node.iter_values, node.predicate, new)


def _annotations_of(node):
    return dict(node.annotations if isinstance(node, For) else node.block.annotations)


@primitive("annotate", loop_or_block=BLOCK_OR_LOOP, key=STR, error=AnnotationError)
def annotate(func, loop_or_block, key, value):
    """Set annotation ``key = value`` (bool/int/float/str, or lists or str-keyed dicts
    of them) on a loop/block.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.annotate(sch.get_loops(sch.get_block("B"))[0], "pragma_unroll", 4)
        >>> sch.func.body.block.body.annotations
        (('pragma_unroll', 4),)
    """
    path = stmt_path(func, loop_or_block, "annotate")
    if not isinstance(key, str) or not key:
        raise schedule_error(AnnotationError, "annotate", f"the key must be a non-empty "
                             f"str, got {key!r}")
    node = tree.get(func, path)
    ann = _annotations_of(node)
    ann[key] = _check_value(value, "annotate")
    return tree.replace(func, path, _rebuild_annotations(node, ann)), None


@primitive("unannotate", loop_or_block=BLOCK_OR_LOOP, key=STR, error=AnnotationError)
def unannotate(func, loop_or_block, key):
    """Remove annotation ``key`` from a loop or a block.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> b = sch.get_block("B")
        >>> sch.annotate(b, "k", 1); sch.unannotate(b, "k")
        >>> sch.func.body.block.body.body.block.annotations
        ()
    """
    path = stmt_path(func, loop_or_block, "unannotate")
    node = tree.get(func, path)
    ann = _annotations_of(node)
    if key not in ann:
        what = (f"loop {node.loop_var.name}" if isinstance(node, For)
                else f"block {node.block.name!r}")
        raise schedule_error(AnnotationError, "unannotate", f"{what} has no annotation "
                             f"{key!r}; it has {sorted(ann) or 'none'}", func, node)
    del ann[key]
    return tree.replace(func, path, _rebuild_annotations(node, ann)), None
