"""``inject_software_pipeline``: N-stage pipelines and multi-buffered tiles, from TVM's
loop annotations ``software_pipeline_stage`` and ``software_pipeline_order``.

``sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])`` gives each statement of
the loop's body a stage: statement ``i`` of iteration ``k`` runs ``stage[i]`` steps of
the pipeline later than the stage-0 statements of iteration ``k``, so the copies of
tile ``k + 1`` are issued before the computation on tile ``k`` (double buffering);
``[0, 0, 2]`` keeps three tiles in flight.  ``software_pipeline_order`` (optional)
gives each statement its place within one step (``[0, 2, 1]``: statement 2 runs
second; TVM's meaning).  A pipelined loop inside another counts, in the outer loop's
annotations, as TVM's three statements: its prologue, its loop and its epilogue (the
last steps unrolled).  A tile the memory planner allocated in
the loop (one per iteration) gets as many versions as the stages it lives across (the
last stage reading it, minus the stage writing it, plus one), indexed by the
iteration modulo that count.  The same pass serves every target: on a GPU the copy of
the next tile overlaps the computation on this one; on an accelerator the DMA engine
writes one version while the compute unit reads another.

.. code-block:: text

    for k in range(n):                      fill(T[0], 0)
        T = alloc(tile)             ->      for k in range(n):
        fill(T, k)      # stage 0               if k + 1 < n: fill(T[(k + 1) % 2], k + 1)
        use(T, k)       # stage 1               use(T[k % 2], k)

With the largest stage ``S``, the loop runs one step per iteration of the last stage,
after a prologue of ``S`` steps; a statement of an earlier stage is guarded where its
iteration passes the end.  Runs after ``lower_blocks`` (on statements) and before
``flatten_buffers``.  The pass refuses what it could not keep exact: an annotation that
does not match the body, and a buffer that crosses stages without living in the loop.
The names of the two-stage annotations it replaces (``double_buffer``,
``accel.double_buffer``) are refused with the annotation to write instead.

Example::

    >>> import cuvil_tir as T
    >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
    >>> inject_software_pipeline(f) is f
    True
"""

from __future__ import annotations

from ..analysis.regions import simplify
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import LT, BufferLoad, Call, IntImm
from ..node import same
from ..op import floormod
from ..ops.gpu import tiles_of
from ..printer import to_text
from ..stmt import Allocate, BufferRegion, BufferStore, For, IfThenElse, Range, SeqStmt, seq
from ..visitor import Mutator, post_order_visit, substitute
from .pipeline_async import ASYNC, async_statement, commit, wait, wait_count

STAGE, ORDER = "software_pipeline_stage", "software_pipeline_order"
VERSIONS = "buffer_versions"
_LEGACY = ("double_buffer", "accel.double_buffer")


def touched(stmt) -> tuple:
    """``(buffers read, buffers written)`` of ``stmt`` by identity (a region handed to
    a call counts as both; a tile an op declares it writes, such as a ``tma_load``'s
    destination, as written).

    Example::

        >>> import cuvil_tir as T
        >>> A, S = T.decl_buffer((8,), "float32", "A"), T.decl_buffer((8,), "float32", "S")
        >>> reads, writes = touched(T.BufferStore(S, A[1], (T.const(1),)))
        >>> [b.name for b in reads.values()], [b.name for b in writes.values()]
        (['A'], ['S'])
    """
    reads, writes = {}, {}

    def look(n):
        if isinstance(n, BufferLoad):
            reads[id(n.buffer)] = n.buffer
        elif isinstance(n, BufferStore):
            writes[id(n.buffer)] = n.buffer
        elif isinstance(n, BufferRegion):
            reads[id(n.buffer)] = writes[id(n.buffer)] = n.buffer
        elif isinstance(n, Call):
            for t in tiles_of(n):
                arg = n.args[t.arg]
                if t.writes and isinstance(arg, BufferLoad):
                    writes[id(arg.buffer)] = arg.buffer

    post_order_visit(stmt, look)
    return reads, writes


class _Version(Mutator):
    """Every access of a versioned tile gets the version index first."""

    def __init__(self, bmap, slot):
        self.bmap, self.slot = bmap, slot

    def _slot(self, buf):
        new = self.bmap.get(id(buf))
        return None if new is None else (new, self.slot(id(buf)))

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        hit = self._slot(e.buffer)
        return e if hit is None else BufferLoad(hit[0], (hit[1],) + tuple(e.indices))

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        hit = self._slot(s.buffer)
        return s if hit is None else BufferStore(hit[0], s.value, (hit[1],) + tuple(s.indices))

    def visit_BufferRegion(self, r):
        r = self.generic_visit(r)
        hit = self._slot(r.buffer)
        if hit is None:
            return r
        return BufferRegion(hit[0], (Range(hit[1], IntImm(1, hit[1].dtype)),) + r.region)


class _Pipeline:
    """One annotated loop rewritten (module doc)."""

    def __init__(self, func, loop, stages, order, nested=None, asyncs=None):
        self.func, self.loop = func, loop
        body, self.tiles = loop.body, []
        while isinstance(body, Allocate):
            self.tiles.append(body.buffer)
            body = body.body
        self.stmts = []
        for stmt in (body.seq if isinstance(body, SeqStmt) else (body,)):
            # an inner pipeline counts as its prologue, body and epilogue (TVM's
            # statements), its tiles allocated for this loop's iteration
            tiles, parts = (nested or {}).get(id(stmt), ((), (stmt,)))
            self.tiles.extend(tiles)
            self.stmts.extend(parts)
        self._check(stages, order)
        low = min(stages)
        self.stages = [s - low for s in stages]
        # TVM's order gives each statement its place in the step (statement i runs
        # order[i]-th); the statements in the order they run:
        self.order = sorted(range(len(self.stmts)), key=lambda i: order[i]) if order \
            else list(range(len(self.stmts)))
        self.depth = max(self.stages)
        self._check_dependences()
        self.versions = self._versions()
        self.asyncs = self._async_stage(asyncs, low)

    def fail(self, why: str):
        raise LoweringError(f"software pipeline on loop {self.loop.loop_var.name}: {why}:\n"
                            + to_text(self.func, highlight=self.loop))

    def _check(self, stages, order):
        n = len(self.stmts)
        if not isinstance(stages, tuple) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in stages):
            self.fail(f"{STAGE} must be a list of ints >= 0, found {stages!r}")
        if len(stages) != n:
            self.fail(f"{STAGE} gives {len(stages)} stages, but the loop's body has {n} "
                      "statements (one stage per statement, in order)")
        if order and (not isinstance(order, tuple) or sorted(order) != list(range(n))):
            self.fail(f"{ORDER} must be an order of the {n} statements (a permutation of "
                      f"0..{n - 1}), found {order!r}")

    def _check_dependences(self):
        """Refuse stages or an order that run a statement before one it depends on
        (TVM's rule): for two statements touching one buffer, at least one writing it,
        the later one in the body needs a later stage, or the same stage and a later
        place in the order."""
        accesses = [touched(stmt) for stmt in self.stmts]
        place = {i: p for p, i in enumerate(self.order)}
        for j, (reads_j, writes_j) in enumerate(accesses):
            for i in range(j):
                reads_i, writes_i = accesses[i]
                shared = (writes_i.keys() & (reads_j.keys() | writes_j.keys())) | (
                    reads_i.keys() & writes_j.keys())
                if not shared:
                    continue
                si, sj = self.stages[i], self.stages[j]
                if si < sj or (si == sj and place[i] < place[j]):
                    continue
                name = {**reads_i, **writes_i}[next(iter(sorted(shared)))].name
                self.fail(f"statement {j} depends on statement {i} through buffer {name}, "
                          f"but runs before it (stages {si} and {sj}, places {place[i]} and "
                          f"{place[j]} in {ORDER}); give statement {j} a later stage than "
                          f"{i}, or the same stage and a later place in the order")

    def _async_stage(self, asyncs, low):
        """``(async statements, consumers, wait count, commit place)`` of
        ``software_pipeline_async_stages`` (:mod:`.pipeline_async`), or None."""
        if asyncs is None:
            return None
        if not (isinstance(asyncs, tuple) and len(asyncs) == 1 and isinstance(asyncs[0], int)
                and asyncs[0] - low in self.stages):
            self.fail(f"{ASYNC} must name one stage of {STAGE} (a list of one int), found "
                      f"{asyncs!r}")
        sa = asyncs[0] - low
        mine = [i for i, s in enumerate(self.stages) if s == sa]
        written = set()
        for i in mine:
            written |= touched(self.stmts[i])[1].keys()
        place = {i: p for p, i in enumerate(self.order)}
        users = [j for j in range(len(self.stmts))
                 if j not in mine and touched(self.stmts[j])[0].keys() & written]
        if not users:
            self.fail(f"{ASYNC} names stage {asyncs[0]}, whose statements write nothing a "
                      "later statement reads")
        at = max(place[i] for i in mine)
        n = wait_count([(self.stages[j], place[j]) for j in users], sa, at)
        if n < 0:
            self.fail(f"a statement reading what the asynchronous stage {asyncs[0]} copies "
                      "runs in the same step before its copies are issued")
        for i in mine:
            self.stmts[i] = async_statement(self.stmts[i])
        return set(mine), set(users), n, at

    def _groups(self, items, step_runs_async: bool) -> list:
        """One step's statements (``(index, statement)`` in order) with the async
        group ops: a commit after the async statements' place, a wait before the
        first statement reading what they copy."""
        if self.asyncs is None:
            return [st for _, st in items]
        mine, users, n, at = self.asyncs
        by = dict(items)
        out, waited = [], False
        for p, i in enumerate(self.order):
            if i in by:
                if i in users and not waited:
                    out.append(wait(n))
                    waited = True
                out.append(by[i])
            if p == at and step_runs_async:
                out.append(commit())
        return out

    def _versions(self) -> dict:
        """``{id(tile): versions}``; refuses a buffer outside the loop crossing stages."""
        tile_ids = {id(b) for b in self.tiles}
        first_write, last_use, stages_of, names = {}, {}, {}, {}
        for s, stmt in zip(self.stages, self.stmts):
            reads, writes = touched(stmt)
            for key, buf in {**reads, **writes}.items():
                names[key] = buf.name
                stages_of.setdefault(key, set()).add(s)
                last_use[key] = max(last_use.get(key, s), s)
            for key in writes:
                first_write[key] = min(first_write.get(key, s), s)
        for key, stages in stages_of.items():
            if key not in tile_ids and len(stages) > 1 and key in first_write:
                self.fail(f"buffer {names[key]} is written in one stage and used in another "
                          f"(stages {sorted(stages)}) but is not allocated in the loop, so "
                          "iterations in flight would share it; compute_at its producer "
                          "at this loop so that each iteration has its own tile")
        return {key: last_use[key] - first_write.get(key, last_use[key]) + 1
                for key in tile_ids if key in last_use}

    def rewrite(self, reorder: bool, parts: bool = False):
        """``(statement, versions)``; with ``parts`` (a loop inside another pipelined
        loop, whose stages count this one's prologue, body and epilogue as TVM writes
        them) and a constant extent above the depth, ``(statement, versions, (tiles,
        (prologue, body, epilogue)))``."""
        loop, v = self.loop, self.loop.loop_var
        lo, end = loop.min, loop.min + loop.extent
        bmap = {id(b): Buffer((IntImm(self.versions[id(b)], "int32"),) + tuple(b.shape),
                              b.dtype, b.name, scope=b.scope, align=b.align)
                for b in self.tiles if self.versions.get(id(b), 1) > 1}

        def step(i, it, guard):
            """Statement ``i`` at iteration ``it`` (an expression), guarded or not."""
            def slot(key):
                return simplify(floormod(it - lo, IntImm(self.versions[key], it.dtype)))
            stmt = _Version(bmap, slot).visit(substitute(self.stmts[i], {v: it}))
            return IfThenElse(LT(it, end), stmt) if guard else stmt

        if not reorder:         # engines that run ahead: versions, program order kept
            out = For(v, lo, loop.extent, loop.kind,
                      seq(*[step(i, v, False) for i in range(len(self.stmts))]),
                      loop.thread_tag, {k: x for k, x in loop.annotations
                                        if k not in (STAGE, ORDER, ASYNC)})
            return self._wrap(out, bmap)
        prologue = []
        sa = min(self.stages[i] for i in self.asyncs[0]) if self.asyncs else 0
        for q in range(self.depth):
            items = []
            for i in self.order:
                ahead = q - self.stages[i]
                if ahead < 0:
                    continue
                static = isinstance(loop.extent, IntImm)
                if static and ahead >= loop.extent.value:
                    continue
                items.append((i, step(i, lo + IntImm(ahead, v.dtype), not static)))
            prologue.extend(self._groups(items, q >= sa))
        ann = {k: x for k, x in loop.annotations if k not in (STAGE, ORDER, ASYNC)}
        if parts and isinstance(loop.extent, IntImm) and loop.extent.value > self.depth:
            if self.asyncs:
                self.fail(f"{ASYNC} on a pipeline nested in another pipelined loop is not "
                          "supported; annotate the outer loop's pipeline only")
            return self._parts(prologue, step, ann, bmap)
        body = _merge_guards(self._groups(
            [(i, step(i, v + IntImm(self.depth - self.stages[i], v.dtype)
                      if self.depth > self.stages[i] else v,
                      self.depth > self.stages[i])) for i in self.order], True))
        return self._wrap(seq(*prologue, For(v, lo, loop.extent, loop.kind, seq(*body),
                                             loop.thread_tag, ann)), bmap)

    def _parts(self, prologue, step, ann, bmap):
        """TVM's form: the steady loop without guards over the iterations whose every
        stage is in range, then the last steps unrolled (the epilogue)."""
        loop, v, lo, depth = self.loop, self.loop.loop_var, self.loop.min, self.depth
        n = loop.extent.value
        steady = For(v, lo, IntImm(n - depth, loop.extent.dtype), loop.kind,
                     seq(*[step(i, v + IntImm(depth - self.stages[i], v.dtype), False)
                           for i in self.order]), loop.thread_tag, ann)
        epilogue = [step(i, lo + IntImm(q + depth - self.stages[i], v.dtype), False)
                    for q in range(n - depth, n) for i in self.order
                    if q + depth - self.stages[i] < n]
        out, versions = self._wrap(seq(*prologue, steady, *epilogue), bmap)
        tiles = tuple(bmap.get(id(b), b) for b in self.tiles)
        return out, versions, (tiles, (seq(*prologue), steady, seq(*epilogue)))

    def _wrap(self, out, bmap):
        for b in reversed(self.tiles):
            out = Allocate(bmap.get(id(b), b), out)
        return out, {b.name: self.versions[id(b)] for b in self.tiles if id(b) in bmap}


def _merge_guards(stmts) -> list:
    """Adjacent statements under the same guard (the copies of one stage) share one
    ``if``."""
    out = []
    for s in stmts:
        prev = out[-1] if out else None
        if isinstance(s, IfThenElse) and isinstance(prev, IfThenElse) and \
                s.else_case is None and prev.else_case is None and \
                same(s.condition, prev.condition):
            out[-1] = IfThenElse(prev.condition, seq(prev.then_case, s.then_case))
        else:
            out.append(s)
    return out


class _Inject(Mutator):
    def __init__(self, func, reorder):
        self.func, self.versions, self.reorder = func, {}, reorder
        self.depth, self.nested = 0, {}

    def visit_For(self, loop):
        inside = self.depth > 0
        self.depth += STAGE in dict(loop.annotations)
        try:
            loop = self.generic_visit(loop)
        finally:
            self.depth -= STAGE in dict(loop.annotations)
        ann = dict(loop.annotations)
        for old in _LEGACY:
            if old in ann:
                raise LoweringError(
                    f"loop {loop.loop_var.name} is annotated {old!r}, which Cuvil no longer "
                    f"reads; write sch.annotate(loop, {STAGE!r}, [0, ..., 0, 1]) with one "
                    "stage per statement of the loop's body (0 for the copies into the "
                    "tiles, 1 for the statements using them; 2 or more for deeper "
                    "pipelines):\n" + to_text(self.func, highlight=loop))
        if STAGE not in ann:
            return loop
        out, versions, *parts = _Pipeline(
            self.func, loop, ann[STAGE], ann.get(ORDER), self.nested,
            ann.get(ASYNC) if self.reorder else None).rewrite(self.reorder, inside)
        if parts:
            self.nested[id(out)] = parts[0]
        self.versions.update(versions)
        return out


def versioned(stmt, tiles: dict, slot):
    """``stmt`` with every access of a tile in ``tiles`` (``{id(tile): the tile with
    a leading version axis}``) given the version index ``slot`` first.

    Example::

        >>> import cuvil_tir as T
        >>> S = T.decl_buffer((4,), "float32", "S", scope="shared")
        >>> S2 = T.decl_buffer((2, 4), "float32", "S", scope="shared")
        >>> print(versioned(T.BufferStore(S, T.float32(1), (T.const(3),)), {id(S): S2},
        ...                 T.const(1)))
        S[1, 3] = T.float32(1)
    """
    return _Version(tiles, lambda key: slot).visit(stmt)


def stage_versions(func, loop) -> dict:
    """``{id(tile): versions}`` of the tiles allocated in the pipelined ``loop`` (as
    :func:`inject_software_pipeline` will make them: the last stage using a tile,
    minus the stage writing it, plus one); the pass's own error where the loop's
    annotations do not fit its body.

    Example::

        >>> stage_versions.__name__
        'stage_versions'
    """
    ann = dict(loop.annotations)
    return _Pipeline(func, loop, ann[STAGE], ann.get(ORDER)).versions


def inject_software_pipeline(func, reorder: bool = True):
    """``func`` with its annotated loops pipelined and their tiles multi-buffered
    (module doc); the function attribute ``buffer_versions`` lists
    ``(tile name, versions)`` of each multi-buffered tile.

    ``reorder=False`` is for a target whose engines run ahead of the program order
    on their own (an accelerator's DMA and compute queues, ordered by tokens): the
    stages then overlap without moving any statement, so only the versions are made,
    each iteration using version ``k % N`` (the same results, a program half the
    size).

    Example::

        >>> inject_software_pipeline.__name__
        'inject_software_pipeline'
    """
    m = _Inject(func, reorder)
    body = m.visit(func.body)
    if body is func.body:
        return func
    out = func.with_body(body)
    if m.versions:
        merged = dict(func.attr(VERSIONS, ()))
        merged.update(m.versions)
        out = out.with_attr(VERSIONS, tuple(sorted(merged.items())))
    return out


__all__ = ["ORDER", "STAGE", "VERSIONS", "inject_software_pipeline", "stage_versions", "touched",
           "versioned"]
