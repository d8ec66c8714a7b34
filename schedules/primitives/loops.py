"""Loop transformations: split, fuse, reorder, tile, add_unit_loop.

Each primitive checks first (raising a ``ScheduleError`` subclass that names the
primitive and marks the loop), then rebuilds only the loops it changes, substituting
the old loop variables in the bodies.  Loops the primitive does not replace keep their
variables, so their ``LoopRV`` handles stay valid.

Split semantics: ``factors`` may hold one ``None``, inferred as
``ceildiv(extent, product of the others)``.  When the factors multiply to *more* than
the extent (a non-dividing factor) the blocks under the loop get the guard
``fused < extent`` added to their predicate, so the result stays exact; factors that
multiply to *less* than the extent would drop iterations and are refused.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import LoopRV
    >>> A = T.placeholder((10,), name="A")
    >>> f = T.create_prim_func([A, T.compute((10,), lambda i: A[i] * 2.0, name="B")])
    >>> i = f.body.block.body.loop_var
    >>> g, (outer, inner) = split(f, LoopRV(i), [None, 4])
    >>> [outer.var.name, inner.var.name]
    ['i_0', 'i_1']
    >>> g.body.block.body.extent.value, g.body.block.body.body.extent.value
    (3, 4)
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import FloorMod, IntImm, Var, const
from cuvil_tir.stmt import BlockRealize, For, IfThenElse, Range
from cuvil_tir.visitor import Mutator, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import bounds
from ..analysis import const_int, loop_path, stmt_path, uses_var
from .entry_checks import entry_check, with_entry_check
from .index_maps import function_vars
from .reorder_legality import reorder_blocker
from ..errors import (FactorError, LoopNestError, ScheduleArgumentError, ScheduleError,
                      schedule_error)
from ..handles import LoopRV
from ..primitive import BLOCK_OR_LOOP, BOOL, FACTORS, LOOP, LOOPS, POS_INT, primitive


def _loop(func, rv, name):
    path = loop_path(func, rv, name)
    return path, tree.get(func, path)


def _check_plain(node, prim, func):
    """Refuse to replace a loop whose kind, thread binding or annotations the new
    loops would silently lose."""
    lost = []
    if node.kind == "thread_binding" or node.thread_tag:
        lost.append(f"its binding to {node.thread_tag}")
    elif node.kind != "serial":
        lost.append(f"its kind {node.kind!r}")
    if node.annotations:
        lost.append(f"its annotations {[k for k, _ in node.annotations]}")
    if lost:
        raise schedule_error(LoopNestError, prim, f"loop {node.loop_var.name} would lose "
                             f"{' and '.join(lost)}: {prim} makes new serial loops. "
                             f"Apply {prim} first, then bind/parallelize/annotate the new "
                             "loops", func, node)


def _factor_value(f, k, factors):
    """A factor as a Python int (or None); refuses anything else."""
    if f is None:
        return None
    if isinstance(f, IntImm):
        f = f.value
    if f == -1 and not isinstance(f, bool):
        return None     # TensorIR's "inferred" (what sample_perfect_tile gives a symbolic loop)
    if isinstance(f, bool) or not isinstance(f, int):
        raise schedule_error(FactorError, "split", f"factor {k} of {list(factors)!r}: "
                             f"expected a positive int or None, got {f!r}")
    if f <= 0:
        raise schedule_error(FactorError, "split", f"factor {k} of {list(factors)!r}: "
                             f"expected a positive int, got {f}")
    return int(f)


def _linear(vars_, strides):
    """``v0 * s0 + v1 * s1 + ...`` skipping unit strides (deterministic, no simplifier)."""
    acc = None
    for v, s in zip(vars_, strides):
        term = v if (isinstance(s, int) and s == 1) else v * s
        acc = term if acc is None else acc + term
    return acc


def _horner(new_vars, lengths):
    """``(i_0 * n_1 + i_1) * n_2 + i_2``: the guard of a split in TensorIR's form (the
    bindings get the expanded ``i_0 * 6 + i_1 * 3 + i_2``)."""
    acc = new_vars[0]
    for v, n in zip(new_vars[1:], lengths[1:]):
        one = n == 1 if isinstance(n, int) else (isinstance(n, IntImm) and n.value == 1)
        acc = (acc if one else acc * n) + v
    return acc


def _always_inside(fused, new_vars, lengths, extent) -> bool:
    """Whether ``fused < extent`` holds for every value of the new loops (a symbolic
    extent the factors divide: ``k_0 * 32 + k_1 < n * 32`` with ``k_0 < n``)."""
    doms = {v: Range(const(0, v.dtype), n if not isinstance(n, int) else const(n, v.dtype))
            for v, n in zip(new_vars, lengths)}
    try:
        _, hi = bounds(fused, doms)
    except ScheduleError:       # a bound the analysis cannot give: keep the guard
        return False
    return Analyzer(index_no_overflow=True).can_prove(hi < extent)


class _Guard(Mutator):
    """Add ``cond`` to the predicate of every block realize (not descending into it)."""

    def __init__(self, cond):
        self.cond = cond

    def visit_BlockRealize(self, br):
        pred = br.predicate
        if isinstance(pred, IntImm) and pred.value:
            pred = self.cond
        else:
            pred = pred & self.cond
        return BlockRealize(br.iter_values, pred, br.block)

    def _leaf(self, s):
        return IfThenElse(self.cond, s)

    visit_BufferStore = _leaf
    visit_Evaluate = _leaf


@primitive("split", loop=LOOP, factors=FACTORS, disable_predication=BOOL, returns=LOOPS)
def split(func, loop, factors, disable_predication=False):
    """Split ``loop`` into ``len(factors)`` nested loops ``i_0, i_1, ...``.

    One factor may be ``None`` or ``-1`` (inferred: ``ceildiv(extent, others)``).  Factors
    multiplying to more than the extent add the guard ``T.where(... < extent)``;
    fewer would drop iterations and raise ``FactorError``.  Before/after::

        for i in T.serial(10):            for i_0, i_1 in T.grid(3, 4):
            with T.block("B"):                with T.block("B"):
                vi = T.axis.spatial(10, i)        vi = T.axis.spatial(10, i_0 * 4 + i_1)
                ...                               T.where(i_0 * 4 + i_1 < 10)

    ``disable_predication=True`` (TVM's option) adds no guard: the schedule's author
    states that the factors divide the extent.  A constant extent they do not divide
    is refused (``FactorError``: the unguarded loops would run past the block's
    domain); for a symbolic extent the statement is checked at run time, once, by a
    ``T.assert_`` at the top of the function, so a call that breaks it stops with
    ``T.RuntimeCheckError`` instead of computing out of bounds::

        for i in T.serial(n):             T.assert_(n % 4 == 0, "split of loop i ...", n)
            ...                           for i_0, i_1 in T.grid((n + 3) // 4, 4):
                                              vi = T.axis.spatial(n, i_0 * 4 + i_1)

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((10,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((10,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
        [LoopRV(i_0), LoopRV(i_1)]
        >>> n = T.size_var("n")
        >>> X = T.placeholder((n,), name="X")
        >>> sch = S.Schedule(T.create_prim_func([X, T.compute((n,), lambda i: X[i],
        ...                                                 name="Y")]))
        >>> _ = sch.split(sch.get_loops("Y")[0], [None, 4], disable_predication=True)
        >>> print(sch.func.body.block.body.seq[0])
        T.assert_(n % 4 == 0, "split of loop i with disable_predication=True: its extent n must be a multiple of 4; found {}", n)
    """
    path, node = _loop(func, loop, "split")
    _check_plain(node, "split", func)
    if not isinstance(factors, (list, tuple)) or len(factors) < 2:
        raise schedule_error(FactorError, "split", "expected a list of at least 2 "
                             f"factors, got {factors!r}", func, node)
    values = [_factor_value(f, k, factors) for k, f in enumerate(factors)]
    if values.count(None) > 1:
        raise schedule_error(FactorError, "split", f"at most one factor may be None or -1 "
                             f"(inferred), got {list(factors)!r}", func, node)
    extent = const_int(node.extent)
    known = 1
    for v in values:
        known *= v if v is not None else 1
    dt = node.loop_var.dtype
    if None in values:
        if extent is not None:
            lengths = [v if v is not None else -(-extent // known) for v in values]
        else:
            # index arithmetic does not wrap: (n * 32 + 31) // 32 is n
            inferred = Analyzer(index_no_overflow=True).simplify(
                (node.extent + (known - 1)) // known)
            lengths = [const(v, dt) if v is not None else inferred for v in values]
    else:
        if extent is None:
            raise schedule_error(FactorError, "split", f"the extent of loop "
                                 f"{node.loop_var.name} ({node.extent}) is symbolic: give "
                                 "one factor as None to infer it", func, node)
        lengths = values
    total = None
    if extent is not None:
        total = 1
        for n in lengths:
            total *= n
        if total < extent:
            raise schedule_error(FactorError, "split", f"factors {list(values)!r} multiply "
                                 f"to {total} but loop {node.loop_var.name} has extent "
                                 f"{extent}: {extent - total} iterations would be dropped; "
                                 "use None for one factor", func, node)
    base = node.loop_var.name
    new_vars = [Var(f"{base}_{k}", dt) for k in range(len(lengths))]
    strides = []
    for k in range(len(lengths)):
        s = 1
        for n in lengths[k + 1:]:
            c = const_int(n) if not isinstance(n, int) else n
            if c is not None and isinstance(s, int):
                s *= c
            elif c != 1:     # an unfolded 1 * (...) or (...) * 1 would reach the IR
                s = n if isinstance(s, int) and s == 1 else s * n
        strides.append(s)
    fused = _linear(new_vars, strides)
    value = fused if (isinstance(node.min, IntImm) and node.min.value == 0) else node.min + fused
    body = substitute(node.body, {node.loop_var: value})
    guarded = (total is None and not _always_inside(fused, new_vars, lengths, node.extent)) \
        or (total is not None and total != extent)
    promise = None
    if guarded and disable_predication:
        promise = _divisibility_promise(func, node, known, total)
    elif guarded:
        body = _Guard(_horner(new_vars, lengths) < node.extent).visit(body)
    for v, n in reversed(list(zip(new_vars, lengths))):
        body = For(v, const(0, dt), n if not isinstance(n, int) else const(n, dt),
                   "serial", body)
    new = tree.replace(func, path, body)
    if promise is not None:
        new = with_entry_check(new, promise)
    return new, [LoopRV(v) for v in new_vars]


def _divisibility_promise(func, node, known, total):
    """The run-time check of ``split(..., disable_predication=True)`` over a symbolic
    extent (see split); refuses what is sure to be wrong or cannot be checked once."""
    name = node.loop_var.name
    if total is not None:
        raise schedule_error(FactorError, "split", f"disable_predication=True: the factors "
                             f"multiply to {total} but loop {name} has extent "
                             f"{const_int(node.extent)}; without the guard the last "
                             f"{total - const_int(node.extent)} iterations would run past "
                             "the block's domain. Give factors whose product is the "
                             "extent, or leave disable_predication False", func, node)
    level = {id(v) for v in function_vars(func).values()}
    inner = [v.name for v in used_vars(node.extent) if id(v) not in level]
    if inner:
        raise schedule_error(FactorError, "split", f"disable_predication=True: the extent "
                             f"{node.extent} of loop {name} depends on "
                             f"{', '.join(inner)}, defined inside the function, so Cuvil "
                             f"cannot check once that it is a multiple of {known}; leave "
                             "disable_predication False (the guard keeps it correct)",
                             func, node)
    return entry_check(func, FloorMod(node.extent, const(known, node.extent.dtype)) == 0,
                       f"split of loop {name} with disable_predication=True: its extent "
                       f"{node.extent} must be a multiple of {known}; found {{}}",
                       (node.extent,), "split", FactorError, node)


@primitive("fuse", loops=LOOP, returns=LOOP)
def fuse(func, *loops):
    """Fuse adjacent, perfectly nested loops (outer first) into ``i_j_fused``.

    Before/after::

        for i, j in T.grid(2, 3):         for i_j_fused in T.serial(6):
            vi, vj = i, j                     vi, vj = i_j_fused // 3, i_j_fused % 3

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2, 3), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
        ...                                                 name="B")]))
        >>> sch.fuse(*sch.get_loops(sch.get_block("B")))
        LoopRV(i_j_fused)
    """
    if len(loops) < 2:
        raise schedule_error(ScheduleArgumentError, "fuse",
                             f"expected at least 2 loops, got {len(loops)}")
    path, outer = _loop(func, loops[0], "fuse")
    _check_plain(outer, "fuse", func)
    chain = [outer]
    for rv in loops[1:]:
        _, node = _loop(func, rv, "fuse")
        _check_plain(node, "fuse", func)
        if any(node is c for c in chain):
            raise schedule_error(LoopNestError, "fuse", f"loop {node.loop_var.name} is "
                                 "given twice", func, node)
        if chain[-1].body is not node:
            raise schedule_error(LoopNestError, "fuse", f"loops {chain[-1].loop_var.name} "
                                 f"and {node.loop_var.name} are not adjacent and perfectly "
                                 f"nested: the body of {chain[-1].loop_var.name} must be "
                                 f"exactly loop {node.loop_var.name}; give the loops outer "
                                 "first", func, node)
        chain.append(node)
    for node in chain:
        if not (isinstance(node.min, IntImm) and node.min.value == 0):
            raise schedule_error(LoopNestError, "fuse", f"loop {node.loop_var.name} starts "
                                 f"at {node.min}, expected 0", func, node)
        for other in chain:
            if uses_var(node.extent, other.loop_var):
                raise schedule_error(LoopNestError, "fuse", f"the extent of loop "
                                     f"{node.loop_var.name} depends on loop "
                                     f"{other.loop_var.name}", func, node)
    dt = chain[0].loop_var.dtype
    fused = Var("_".join(n.loop_var.name for n in chain) + "_fused", dt)
    # TensorIR's form: v_0 = f // (e_1 * .. e_n), v_k = f % (e_k * .. e_n) // (e_k+1 * ..
    # e_n), v_n = f % e_n; products outer to inner, constants folded
    exts = [n.extent for n in chain]
    vmap = {}
    for k, node in enumerate(chain):
        if k == len(chain) - 1:
            vmap[node.loop_var] = fused % node.extent
        elif k == 0:
            vmap[node.loop_var] = fused // _product(exts[1:])
        else:
            vmap[node.loop_var] = fused % _product(exts[k:]) // _product(exts[k + 1:])
    body = substitute(chain[-1].body, vmap)
    new = For(fused, const(0, dt), _product(exts), "serial", body)
    return tree.replace(func, path, new), LoopRV(fused)


def _product(exts):
    """``e_0 * e_1 * ...`` simplified: ``n * 16384``, ``T.min(31, x) * 128 + 128``."""
    acc = exts[0]
    for e in exts[1:]:
        acc = acc * e
    return Analyzer(index_no_overflow=True).simplify(acc)


def _chain(func, loops, name):
    """Check ``loops`` lie on one chain of nested loops; returns (top path, chain, nodes)."""
    if not loops:
        raise schedule_error(ScheduleArgumentError, name, "expected at least one loop")
    found = [_loop(func, rv, name) for rv in loops]
    for k, (p, node) in enumerate(found):
        for p2, node2 in found[:k]:
            if node2 is node:
                raise schedule_error(LoopNestError, name, f"loop {node.loop_var.name} is "
                                     "given twice", func, node)
    found.sort(key=lambda pn: len(pn[0]))
    top_path, top = found[0]
    deep_path, deep = found[-1]
    for p, node in found:
        if p[:len(top_path)] != top_path or deep_path[:len(p)] != p:
            names = ", ".join(n.loop_var.name for _, n in found)
            raise schedule_error(LoopNestError, name, f"loops {names} are in different "
                                 "loop nests; they must lie on one chain of nested loops",
                                 func, node)
    chain = [top]
    while chain[-1] is not deep:
        body = chain[-1].body
        if not isinstance(body, For):
            raise schedule_error(LoopNestError, name, f"the loops are not a single chain: "
                                 f"loop {chain[-1].loop_var.name} contains a "
                                 f"{type(body).__name__}, not only a loop, above loop "
                                 f"{deep.loop_var.name}", func, chain[-1])
        chain.append(body)
    return top_path, chain, [n for _, n in found]


@primitive("reorder", loops=LOOP)
def reorder(func, *loops):
    """Put loops of one chain in the given order (outer first).

    Before/after ``reorder(j, i)``::

        for i, j in T.grid(2, 3): ...     for j, i in T.grid(3, 2): ...

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2, 3), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
        ...                                                 name="B")]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> sch.reorder(j, i)
        >>> sch.get_loops(sch.get_block("B"))
        [LoopRV(j), LoopRV(i)]
    """
    top_path, chain, _ = _chain(func, loops, "reorder")
    given = [tree.get(func, loop_path(func, rv, "reorder")) for rv in loops]
    slots = [k for k, node in enumerate(chain) if any(node is g for g in given)]
    order = list(chain)
    for k, node in zip(slots, given):
        order[k] = node
    for k, node in enumerate(order):
        for inner in order[k + 1:]:
            if uses_var(node.min, inner.loop_var) or uses_var(node.extent, inner.loop_var):
                raise schedule_error(LoopNestError, "reorder", f"the range of loop "
                                     f"{node.loop_var.name} depends on loop "
                                     f"{inner.loop_var.name}, which would move inside it",
                                     func, node)
    if all(a is b for a, b in zip(order, chain)):
        return func, None
    _check_not_mixed([n for n, c in zip(order, chain) if n is not c], chain[-1].body, func)
    bad = reorder_blocker(chain[0], [n.loop_var for _, n in tree.loops_above(func, top_path)])
    if bad is not None:
        raise schedule_error(LoopNestError, "reorder", f"block {bad[0]!r} {bad[1]}; "
                             "reorder permutes only loops whose blocks have affine "
                             "bindings (TensorIR's rule). Reorder before the step that "
                             "made the binding, or leave these loops in order",
                             func, chain[0])
    body = chain[-1].body
    for node in reversed(order):
        body = For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_tag,
                   node.annotations)
    return tree.replace(func, top_path, body), None


def _check_not_mixed(moved, body, func) -> None:
    """A moved loop may not drive both a spatial and a reduce axis of one block: the
    reduction's iterations would be reordered around its init (TensorIR calls such a
    loop opaque and refuses to reorder it)."""
    for br in tree.blocks_under(body):
        for node in moved:
            driven = [iv for iv, val in zip(br.block.iter_vars, br.iter_values)
                      if uses_var(val, node.loop_var)]
            kinds = {iv.kind for iv in driven}
            odd = next((iv for iv in driven if iv.kind in ("scan", "opaque")), None)
            if odd is not None:
                # TensorIR's rule: only spatial and reduction instances may run in
                # another order
                raise schedule_error(LoopNestError, "reorder", f"loop "
                                     f"{node.loop_var.name} drives the {odd.kind} iterator "
                                     f"{odd.var.name} of block '{br.block.name}', whose "
                                     "instances may depend on their order; reorder moves "
                                     "only loops of spatial and reduction iterators",
                                     func, node)
            if {"spatial", "reduce"} <= kinds:
                raise schedule_error(LoopNestError, "reorder", f"loop "
                                     f"{node.loop_var.name} drives both a spatial and a "
                                     f"reduction axis of block '{br.block.name}' (it was "
                                     "fused from both kinds), so moving it would run "
                                     "reduction steps before the block's init; reorder "
                                     "before fusing, or fuse only loops of one kind",
                                     func, node)


@primitive("tile", loop_a=LOOP, loop_b=LOOP, factor_a=POS_INT, factor_b=POS_INT,
           returns=LOOPS)
def tile(func, loop_a, loop_b, factor_a, factor_b):
    """Split both loops by their inner factors and reorder to ``ao, bo, ai, bi``.

    Before/after ``tile(i, j, 2, 4)``::

        for i, j in T.grid(4, 8):         for i_0, j_0, i_1, j_1 in T.grid(2, 2, 2, 4):

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4, 8), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[i, j],
        ...                                                 name="B")]))
        >>> sch.tile(*sch.get_loops(sch.get_block("B")), 2, 4)
        [LoopRV(i_0), LoopRV(j_0), LoopRV(i_1), LoopRV(j_1)]
    """
    _, chain, _ = _chain(func, (loop_a, loop_b), "tile")
    if chain[0].loop_var is not loop_a.var:
        raise schedule_error(LoopNestError, "tile", f"loop {loop_a.var.name} must enclose "
                             f"loop {loop_b.var.name}; give the outer loop first", func,
                             chain[0])
    func, (ao, ai) = split(func, loop_a, [None, factor_a])
    func, (bo, bi) = split(func, loop_b, [None, factor_b])
    func, _ = reorder(func, ao, bo, ai, bi)
    return func, [ao, bo, ai, bi]


@primitive("add_unit_loop", target=BLOCK_OR_LOOP, returns=LOOP)
def add_unit_loop(func, target):
    """Wrap a block or a loop in a new loop ``u`` of extent 1; returns it.

    A unit loop gives a block with no loop around it (a scalar computation) a loop
    handle, which primitives such as ``compute_at`` or ``blockize`` need.  Before/after::

        with T.block("C"):                for u in T.serial(1):
            ...                               with T.block("C"): ...

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> u = sch.add_unit_loop("B")
        >>> sch.get_loops("B")[-1] == u
        True
    """
    path = stmt_path(func, target, "add_unit_loop")
    if not path:
        raise schedule_error(LoopNestError, "add_unit_loop", "the root block has no "
                             "parent to put a loop in; give a block inside it or a loop",
                             func, func.body)
    node = tree.get(func, path)
    var = Var("u", node.loop_var.dtype if isinstance(node, For) else "int32")
    return tree.replace(func, path, For(var, const(0, var.dtype), const(1, var.dtype),
                                        "serial", node)), LoopRV(var)
