"""Tensor copies in a software-pipelined loop: a ring of shared stages, one mbarrier
per stage (Hopper's TMA pipelines, sm_90+).

A loop annotated ``software_pipeline_stage`` (TVM's annotation; with
``software_pipeline_order`` and ``software_pipeline_async_stages`` as the pass reads
them, :mod:`cuvil_tir.transform.software_pipeline`) may hold, as statements of its
body, copy nests annotated ``"cuda.tma"`` (:mod:`targets.cuda.tma_copy`)::

    sch.annotate(ko, "software_pipeline_stage", [0, 0, 2])    # copy A, copy B, mma
    sch.annotate(sch.get_loops(sh)[-2], "cuda.tma", 1)

Each such copy writes a tile the pipeline gives ``V`` versions (the stages it lives
across).  :func:`ring_statements` (called by ``lower_tma_copies``, before the
pipeline is injected) gives the copy a ring of ``V`` mbarriers in shared memory
and replaces the nest by its issue only: the block's first thread announces the
box's bytes on barrier ``bar[(k - lo) % V]`` (``mbarrier_arrive``) and issues the
``tma_load`` completing on it.  Before each statement of the loop that reads the
tile it inserts, as a statement of that statement's stage placed just before it,
``mbarrier_wait(bar[(k - lo) % V], (k - lo) // V % 2)``: iteration ``k``'s copy
is the ``(k - lo) // V``-th to complete on its stage's barrier, so its phase has
that parity.  The pipeline then moves the issue ``V - 1`` steps ahead and versions
the tile: the copies of the next tiles are in flight while the threads compute on
this one, and a thread reads a stage only after waiting on its phase.  Rewriting a
stage reuses it ``V`` iterations later, after every thread went through a block
barrier (the target's barrier insertion keeps the reads of one step apart from the
next step's copies).

An ``async_stages`` annotation naming the stage of the copies is dropped (a tensor
copy is asynchronous by itself); one naming a stage that also holds other statements
is refused.  A copy nested deeper than a statement of the loop's body, and one whose
tile no statement of the loop reads, are refused: its wait would have no place.

Example::

    >>> ring_parity.__name__
    'ring_parity'
"""

from __future__ import annotations

from cuvil_tir.errors import LoweringError
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.op import floordiv, floormod
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import Allocate, For, SeqStmt, seq
from cuvil_tir.transform.pipeline_async import ASYNC
from cuvil_tir.transform.software_pipeline import ORDER, STAGE, touched
from cuvil_tir.visitor import post_order_visit


def ring_slot(loop, versions: int):
    """The ring stage iteration ``loop.loop_var`` uses: ``(k - lo) % versions``.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.var("k")
        >>> print(ring_slot(T.For(k, T.const(0), T.const(8), "serial", T.Evaluate(0)), 3))
        k % 3
    """
    return simplify(floormod(loop.loop_var - loop.min, versions))


def ring_parity(loop, versions: int):
    """The parity of the barrier phase iteration ``loop.loop_var``'s copy completes:
    ``(k - lo) // versions % 2``.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.var("k")
        >>> print(ring_parity(T.For(k, T.const(0), T.const(8), "serial", T.Evaluate(0)), 2))
        k // 2 % 2
    """
    return simplify(floormod(floordiv(loop.loop_var - loop.min, versions), 2))


def loop_statements(loop):
    """``(tiles allocated in the loop, its body's statements)``.

    Example::

        >>> import cuvil_tir as T
        >>> loop_statements(T.For(T.var("k"), T.const(0), T.const(2), "serial", T.Evaluate(0)))[0]
        []
    """
    allocs, body = [], loop.body
    while isinstance(body, Allocate):
        allocs.append(body.buffer)
        body = body.body
    return allocs, list(body.seq) if isinstance(body, SeqStmt) else [body]


def _is_copy(stmt, key: str) -> bool:
    return isinstance(stmt, For) and key in dict(stmt.annotations)


def _has_copy(stmt, key: str) -> bool:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if _is_copy(n, key) else None)
    return bool(found)


def _fail(loop, why: str, fix: str):
    raise LoweringError(f"the tensor copies of the software-pipelined loop "
                        f"{loop.loop_var.name}: {why}:\n{to_text(loop)}\n{fix}")


def ring_statements(loop, key: str, versions: dict, issue, visit, destination):
    """The pipelined ``loop`` with its tensor copies made a ring (module doc).

    ``key``: the annotation of a copy nest; ``versions``: ``{id(tile): versions}`` as the pipeline will make them;
    ``issue(nest, slot, parity, count) -> (statement, wait)`` lowers one copy nest
    to its issue on a ring of ``count`` barriers and gives the wait for it;
    ``visit(stmt)`` lowers any other statement; ``destination(nest)`` is the tile a
    copy nest writes.

    Example::

        >>> ring_statements.__name__
        'ring_statements'
    """
    ann = dict(loop.annotations)
    allocs, stmts = loop_statements(loop)
    stages = list(ann[STAGE])
    order = list(ann.get(ORDER) or range(len(stmts)))
    waits: dict = {}
    out = []
    copies = set()
    for i, st in enumerate(stmts):
        if not _is_copy(st, key):
            if _has_copy(st, key):
                _fail(loop, f"statement {i} holds a copy annotated {key!r} below "
                            "its top", "compute_at the copy at the pipelined loop, so "
                            "that the copy's nest is a statement of the loop's body")
            out.append(visit(st))
            continue
        dst = destination(st)
        readers = [j for j, other in enumerate(stmts)
                   if j != i and id(dst) in touched(other)[0]]
        if not readers:
            _fail(loop, f"no statement of the loop reads {dst.name}, which the copy "
                        f"{st.loop_var.name} writes", "read the tile in the loop "
                        "(a copy is waited for before the statement reading it)")
        v = versions.get(id(dst), 1)
        stmt, wait = issue(st, ring_slot(loop, v), ring_parity(loop, v), v)
        out.append(stmt)
        copies.add(i)
        for j in readers:
            waits.setdefault(j, []).append(wait)
    new_ann = dict(ann)
    if ASYNC in ann:
        mine = [i for i, s in enumerate(stages) if s in tuple(ann[ASYNC])]
        if not mine or not set(mine) <= copies:
            _fail(loop, f"{ASYNC}={list(ann[ASYNC])} names a stage holding statements "
                        "that are not tensor copies", "a tensor copy is asynchronous by "
                        f"itself: drop {ASYNC}, or keep the other copies in another stage")
        del new_ann[ASYNC]
    # the waits: statements of their reader's stage, placed just before it
    body, new_stages, keys = [], [], []
    for j, st in enumerate(out):
        for w in waits.get(j, ()):
            body.append(w)
            new_stages.append(stages[j])
            keys.append((order[j], 0))
        body.append(st)
        new_stages.append(stages[j])
        keys.append((order[j], 1))
    rank = {k: r for r, k in enumerate(sorted(set(keys)))}
    new_ann[STAGE] = tuple(new_stages)
    if ORDER in ann:
        # waits before the same reader share its place: number them apart
        seen: dict = {}
        places = []
        for k in keys:
            places.append((rank[k], seen.get(k, 0)))
            seen[k] = seen.get(k, 0) + 1
        flat = {p: r for r, p in enumerate(sorted(places))}
        new_ann[ORDER] = tuple(flat[p] for p in places)
    out_body = seq(*body)
    for b in reversed(allocs):
        out_body = Allocate(b, out_body)
    return For(loop.loop_var, loop.min, loop.extent, loop.kind, out_body, loop.thread_tag,
               tuple(new_ann.items()))


def has_ring(loop, key: str) -> bool:
    """Whether ``loop`` is pipelined and holds a copy nest annotated ``key``.

    Example::

        >>> import cuvil_tir as T
        >>> has_ring(T.For(T.var("k"), T.const(0), T.const(2), "serial", T.Evaluate(0)),
        ...          "cuda.tma")
        False
    """
    return STAGE in dict(loop.annotations) and _has_copy(loop.body, key)


__all__ = ["has_ring", "loop_statements", "ring_parity", "ring_slot", "ring_statements"]
