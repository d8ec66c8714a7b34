"""``compute_inline`` and ``reverse_compute_inline``: fuse a block into its neighbours.

``compute_inline(B)`` substitutes B's computation into every load of B's buffer, then
removes B and the buffer.  ``reverse_compute_inline(C)`` does the converse: it folds
the consumer C into its single producer, which then writes C's output directly.

Before ``compute_inline(B)``::

    with T.block("B"): B[vi] = A[vi] * 2
    with T.block("C"): C[vi] = B[vi] + 1

after::

    with T.block("C"): C[vi] = A[vi] * 2 + 1

Before ``reverse_compute_inline(C)`` the same, after::

    with T.block("B"): C[vi] = A[vi] * 2 + 1

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: B[i] + 1.0, name="C")])
    >>> g, _ = compute_inline(f, BlockRV("B"))
    >>> [b.block.name for b in tree.blocks_under(g.body)], g.body.block.alloc_buffers
    (['root', 'C'], ())
"""

from __future__ import annotations

from cuvil_tir.expr import Add, BufferLoad, FloatImm, IntImm
from cuvil_tir.op import all as all_of, conjuncts
from cuvil_tir.stmt import Block, BlockRealize, BufferStore, For, Range, SeqStmt
from cuvil_tir.te import access_regions
from cuvil_tir.stmt import BufferRegion
from cuvil_tir.visitor import Mutator, Visitor, post_order_visit, substitute

from cuvil_tir.analysis import tree
from ..analysis import block_path
from ..primitive import BLOCK, primitive
from ..errors import InlineError, fail
from cuvil_tir.analysis import map_inverse as access_inverse
from cuvil_tir.analysis.regions import (bounds, child_blocks, is_complete, is_param, provably_le,
                                        region_of, simplify, tree_same, union, bound_region, relax)
from cuvil_tir.arith import Analyzer
from .block_predicates import predicate_conditions
from .nests import Relocate, exclusive_nest, nest_loops, with_fields
from .inline_cut import refuse_cut_producer
from .inline_reach import refuse_out_of_reach


def _store_of(func, blk, prim, role):
    """``(store, inverse)``: the block's single BufferStore, checked to write its one
    buffer at an injective quasi-affine map of its block variables, and that map's
    inverse ``{block var: expression over index_vars(store)}``."""
    if not isinstance(blk.body, BufferStore) or len(blk.writes) != 1:
        raise fail(InlineError, prim, f"{role} {blk.name!r} has a non-trivial body: only a "
                   "block whose body is one BufferStore to one buffer can be inlined",
                   func)
    st = blk.body
    return st, _inverse(func, blk, st.indices, prim, f"{role} {blk.name!r} stores to")


def _inverse(func, blk, indices, prim, what) -> dict:
    """``{block var: expression over placeholders}`` inverting ``indices``; the
    placeholders are ``access_inverse.index_vars(indices)``."""
    try:
        return access_inverse.inverse(blk.iter_vars, indices)
    except access_inverse.NotInvertible as why:
        raise fail(InlineError, prim, f"{what} "
                   f"{_show(indices)}: the index map is not injective ({why}). Only "
                   "an injective quasi-affine map of the block variables (sums, multiples, "
                   "// and % by constants, each variable determined) can be inlined",
                   func) from None


def _show(indices) -> str:
    return "[" + ", ".join(str(e) for e in indices) + "]"


class SimplifyIndices(Mutator):
    """Simplify the indices of loads and stores (``x // 16 * 16 + x % 16`` is ``x``),
    leaving the arithmetic on values as written; ``simp`` (an ``Analyzer``'s
    ``simplify`` that knows variable ranges, say) replaces the plain simplifier.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((16,), "float32", "A")
        >>> x = T.var("x")
        >>> str(SimplifyIndices().visit(A[x // 4 * 4 + x % 4]))
        'A[x]'
    """

    def __init__(self, simp=None):
        self.simp = simp or simplify

    def _indices(self, indices):
        idx = tuple(self.simp(i) for i in indices)
        return None if all(a is b for a, b in zip(idx, indices)) else idx

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        idx = self._indices(ld.indices)
        return ld if idx is None else BufferLoad(ld.buffer, idx)

    def visit_BufferStore(self, st):
        st = self.generic_visit(st)
        idx = self._indices(st.indices)
        return st if idx is None else with_fields(st, indices=idx)


class _InlineLoads(Mutator):
    """Replace every load of ``buffer`` by ``value`` with the store's index vars bound,
    drop ``buffer`` from allocations, and refresh the reads of the blocks touched."""

    def __init__(self, buffer, inverse, value):
        self.buffer = buffer
        self.inverse = inverse
        self.value = value

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        if ld.buffer is not self.buffer:
            return ld
        return SimplifyIndices().visit(substitute(self.value, access_inverse.at(self.inverse,
                                                                          ld.indices)))

    def visit_Block(self, blk):
        new = self.generic_visit(blk)
        allocs = tuple(b for b in new.alloc_buffers if b is not self.buffer)
        if region_of(blk.reads, self.buffer) is not None:
            new = with_fields(new, reads=refresh_reads(new, new.reads, self.buffer))
        if len(allocs) != len(new.alloc_buffers):
            new = with_fields(new, alloc_buffers=allocs)
        return new


def refresh_reads(blk: Block, old_reads, removed) -> tuple:
    """``old_reads`` without ``removed``, widened by the loads now in the block body.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> C = T.decl_buffer((4,), "float32", "C")
        >>> blk = Block("C", (), (), (), BufferStore(C, A[1] + A[2], (T.const(0),)))
        >>> r = refresh_reads(blk, (), None)[0]
        >>> (r.buffer.name, r.region[0].min.value, r.region[0].extent.value)
        ('A', 1, 2)
    """
    out = [r for r in old_reads if r.buffer is not removed]
    # buffers read anew take the place of the removed one (TensorIR's order)
    at = next((n for n, r in enumerate(old_reads) if r.buffer is removed), len(out))
    written = [w.buffer for w in blk.writes]
    if tree.blocks_under(blk.body):
        # a blockized outer block: its reads are its inner blocks' reads relaxed over
        # the loops and iter vars inside it (never naming an inner variable)
        found = [r for r in _nested_reads(blk.body, {})
                 if r.buffer is not removed and all(r.buffer is not w for w in written)]
    else:
        found = access_regions(blk.body, exclude=written + [removed])
    if blk.init is not None:
        found += access_regions(blk.init, exclude=written + [removed])
    # a buffer allocated in the block or a block inside it is no access of the block (a
    # cache stage inside a blockized block: named above its allocation, it is unbound)
    local = {id(b) for b in blk.alloc_buffers}
    local |= {id(b) for br in tree.blocks_under(blk.body) for b in br.block.alloc_buffers}
    found = [r for r in found if id(r.buffer) not in local]
    for r in found:
        k = next((n for n, o in enumerate(out) if o.buffer is r.buffer), None)
        if k is None:
            out.insert(at, r)
            at += 1
        elif not tree_same(out[k], r):
            out[k] = union(out[k], r)
    return tuple(out)


def _nested_reads(stmt, doms) -> list:
    """The reads of the blocks directly inside ``stmt``, over the variables outside
    it: bound through each realize and relaxed over the loops in between."""
    if isinstance(stmt, BlockRealize):
        return [relax(bound_region(stmt, r), doms) for r in stmt.block.reads]
    if isinstance(stmt, For):
        return _nested_reads(stmt.body, {**doms, stmt.loop_var: Range(stmt.min,
                                                                     stmt.extent)})
    if isinstance(stmt, SeqStmt):
        return [r for s in stmt.seq for r in _nested_reads(s, doms)]
    body = getattr(stmt, "body", None)
    return _nested_reads(body, doms) if body is not None else []


@primitive("compute_inline", block=BLOCK)
def compute_inline(func, block):
    """Inline a spatial block into its consumers and remove it and its buffer.

    Legal when the block is not a reduction, its body is one BufferStore at its block
    variables (injective), its buffer is not a function parameter and no other block
    writes it.

    Before/after::

        B[i] = A[i] * 2.0                 C[i] = A[i] * 2.0 + 1.0
        C[i] = B[i] + 1.0

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
        >>> g, _ = compute_inline(f, BlockRV("B"))
        >>> [r.buffer.name for r in tree.get(g, tree.find_block(g, "C")).block.reads]
        ['A']
    """
    prim = "compute_inline"
    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    if blk.init is not None or any(iv.kind != "spatial" for iv in blk.iter_vars):
        raise fail(InlineError, prim, f"block {blk.name!r} is a reduction block (it has "
                   "reduce iter vars or an init); only a spatial block can be inlined. "
                   "Use reverse_compute_inline on its consumer instead", func)
    st, inv = _store_of(func, blk, prim, "block")
    buf = st.buffer
    if is_param(func, buf):
        raise fail(InlineError, prim, f"block {blk.name!r} is an output block: it writes "
                   f"the function parameter {buf.name!r}, which must stay", func)
    _refuse_opaque_use(func, buf, prim)
    if region_of(blk.reads, buf) is not None or _load_indices(st.value, buf):
        raise fail(InlineError, prim, f"block {blk.name!r} reads the buffer {buf.name!r} "
                   "it writes; it cannot be substituted into its readers", func)
    others = _elsewhere(func, buf, [bpath], "writes")
    if others:
        raise fail(InlineError, prim, f"buffer {buf.name!r} of block {blk.name!r} is also "
                   f"written by {others}; only a buffer with one writer can be inlined",
                   func)
    refuse_out_of_reach(func, bpath, st.value, buf, prim)
    _, nest = exclusive_nest(func, bpath, prim)
    body = Relocate(remove=nest).visit(func.body)
    # each load B[x] reads the value the block stored at the block variables
    # inverse(x) (a transposed layout stores at [v_j, v_i], a fused one at [v_i * 16 + v_j])
    body = _InlineLoads(buf, inv, st.value).visit(body)
    return func.with_body(body), None


def _elsewhere(func, buf, paths, *kinds) -> list:
    """The blocks anywhere in ``func`` whose ``kinds`` regions (``"reads"``,
    ``"writes"``) name ``buf``, but for the blocks at ``paths`` and those around them
    (which declare what they hold): loop_partition puts each part of a loop in a block
    of its own, so a buffer's other users need not be in this scope."""
    def around(p):
        return any(p == q[:len(p)] for q in paths)
    return [b.block.name for p, b in tree.walk(func)
            if isinstance(b, BlockRealize) and not around(p)
            and any(region_of(getattr(b.block, k), buf) is not None for k in kinds)]


def _refuse_opaque_use(func, buf, prim):
    """Inlining removes ``buf``: refuse when some block hands it to a call as memory
    (a region argument of ``T.call_extern``, an ``access_ptr``), which no load
    substitution can rewrite."""
    users = []

    class _Calls(Visitor):
        def visit_Block(self, blk):
            self.block = blk.name
            self.generic_visit(blk)

        def visit_Call(self, c):
            if any(isinstance(a, BufferRegion) and a.buffer is buf for a in c.args):
                users.append((getattr(self, "block", "root"), str(c)))
            self.generic_visit(c)
    _Calls().visit(func.body)
    if users:
        name, call = users[0]
        raise fail(InlineError, prim, f"buffer {buf.name!r} is accessed opaquely in block "
                   f"{name!r} ({call}): a call receives its memory, which inlining would "
                   "remove. Inline only buffers that are read and written element by "
                   "element", func)


def _load_indices(expr, buf) -> list:
    """The index tuples of every load of ``buf`` in ``expr``."""
    found = []
    post_order_visit(expr, lambda n: found.append(n.indices)
                     if isinstance(n, BufferLoad) and n.buffer is buf else None)
    return found


def _one_load(func, consumer, buf, prim):
    """The indices at which ``consumer`` loads ``buf`` (all loads alike)."""
    loads = _load_indices(consumer.body.value, buf)
    if not loads or any(not tree_same(ix, loads[0]) for ix in loads):
        raise fail(InlineError, prim, f"block {consumer.name!r} loads {buf.name!r} at "
                   "different indices; reverse_compute_inline needs one index map", func)
    return loads[0]


class _ReplaceLoads(Mutator):
    def __init__(self, buffer, value):
        self.buffer, self.value = buffer, value

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        return self.value if ld.buffer is self.buffer else ld


def _check_produced(func, prod, cons, load, buf, prim):
    """Every element the consumer loads is one the producer stores: otherwise (a
    padding border read under a condition) those consumer values would never be
    computed once the consumer runs inside the producer."""
    cdoms = {iv.var: iv.dom for iv in cons.iter_vars}
    pdoms = {iv.var: iv.dom for iv in prod.iter_vars}
    for d, (x, y) in enumerate(zip(load, prod.body.indices)):
        lo, hi = bounds(x, cdoms)
        plo, phi = bounds(y, pdoms)
        if not (provably_le(plo, lo) and provably_le(hi, phi)):
            raise fail(InlineError, prim, f"block {cons.name!r} loads {buf.name} in "
                       f"[{lo}, {hi}] along dimension {d}, but the producer {prod.name!r} "
                       f"stores only [{plo}, {phi}] there (e.g. a padding border read under "
                       "a condition): those values of the consumer would never be "
                       "computed. Inline the producer into the consumer instead "
                       "(compute_inline)", func)


def _consumer_guard(prod, cons, load, sigma) -> list:
    """Conditions on the producer's block variables under which its element is the one
    the consumer reads at ``sigma`` (the consumer's variables in terms of the
    producer's): the load map round-trips to the stored element, and the consumer's
    variables stay in their domain.  Conditions that always hold are dropped."""
    if _bijective_onto_stores(prod, cons, load):
        return []
    ana = Analyzer(index_no_overflow=True)
    for iv in prod.iter_vars:
        ana.bind(iv.var, iv.dom)
    store = prod.body.indices
    conds = [substitute(x, sigma) == y for x, y in zip(load, store)]
    for iv in cons.iter_vars:
        u = sigma[iv.var]
        conds += [u >= iv.dom.min, u < simplify(iv.dom.min + iv.dom.extent)]
    return [c for c in (ana.simplify(c) for c in conds) if not ana.can_prove(c)]


def _fold_into_reduction(prod, cst, buf):
    """How the consumer store ``cst`` folds into the reduction ``prod`` into ``buf``, or
    None: ``("copy", None)`` when it copies ``buf`` as it is (the reduction can
    accumulate straight into the consumer's buffer: a transposed matmul result), or
    ``("bias", x)`` when it adds ``x`` to a sum (the sum can start from ``x``:
    ``(init + sum) + x == (init + x) + sum``).  The reduction's init and steps must all
    use one accumulator element."""
    pst, init = prod.body, prod.init
    if not (isinstance(pst, BufferStore) and pst.buffer is buf
            and isinstance(init, BufferStore) and init.buffer is buf
            and tree_same(init.indices, pst.indices)
            and all(tree_same(ix, pst.indices) for ix in _load_indices(pst.value, buf))
            and not _load_indices(init.value, buf)):
        return None
    v = cst.value
    if isinstance(v, BufferLoad) and v.buffer is buf:
        return "copy", None
    if not (isinstance(v, Add) and isinstance(pst.value, Add)
            and any(_is_load_of(t, buf) for t in (pst.value.a, pst.value.b))):
        return None
    for this, other in ((v.a, v.b), (v.b, v.a)):
        if _is_load_of(this, buf) and not _load_indices(other, buf):
            return "bias", other
    return None


def _is_load_of(e, buf) -> bool:
    return isinstance(e, BufferLoad) and e.buffer is buf


def _bijective_onto_stores(prod, cons, load) -> bool:
    """Whether the consumer's load reaches every element of its bounding box and the
    producer stores only inside that box: then every element the producer stores is
    read by exactly one consumer iteration and no guard is needed.  The load is
    injective (it was inverted), so it fills its box when the box has as many elements
    as the consumer's (constant) domain."""
    cdoms = {iv.var: iv.dom for iv in cons.iter_vars}
    pdoms = {iv.var: iv.dom for iv in prod.iter_vars}
    points = box = 1
    for iv in cons.iter_vars:
        ext = simplify(iv.dom.extent)
        if not isinstance(ext, IntImm):
            return False
        points *= ext.value
    for x, y in zip(load, prod.body.indices):
        lo, hi = bounds(x, cdoms)
        plo, phi = bounds(y, pdoms)
        size = simplify(hi - lo + 1)
        if not (isinstance(size, IntImm) and provably_le(lo, plo) and provably_le(phi, hi)):
            return False
        box *= size.value
    return points == box


@primitive("reverse_compute_inline", block=BLOCK)
def reverse_compute_inline(func, block):
    """Inline a consumer into its single producer, which then writes the consumer's
    output; removes the consumer and the intermediate buffer.

    Legal when the consumer is a complete block whose body is one BufferStore, it
    reads exactly one buffer produced in its scope, loads it at an invertible map of
    its block variables, is its only reader, and the producer is a complete block
    storing that buffer at its block variables over the same domain.

    Before/after::

        B[i] = A[i] * 2.0                 C[i] = A[i] * 2.0 + 1.0
        C[i] = B[i] + 1.0

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i] + 1.0, name="C")])
        >>> g, _ = reverse_compute_inline(f, BlockRV("C"))
        >>> tree.get(g, tree.find_block(g, "B")).block.body.buffer.name
        'C'
    """
    return _reverse_inline(func, block, "reverse_compute_inline")


@primitive("fuse_reduction_epilogue", reduction_block=BLOCK, epilogue_block=BLOCK)
def fuse_reduction_epilogue(func, reduction_block, epilogue_block):
    """Fold an epilogue into the reduction it reads (TensorIR's primitive): a copy makes
    the reduction accumulate into the epilogue's buffer; ``out = result + bias`` makes
    the sum start from ``bias``.  ReLU and clipping epilogues are refused: TensorIR
    applies them at every reduction step, which changes the result.

    Before/after ``fuse_reduction_epilogue("C", "D")``::

        C[i, j] = 0  (init)               D[i, j] = bias[i, j]  (init)
        C[i, j] = C[i, j] + A[i, k] * B[k, j]
        D[i, j] = C[i, j] + bias[i, j]    D[i, j] = D[i, j] + A[i, k] * B[k, j]

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A, bias = T.placeholder((2, 3), name="A"), T.placeholder((2,), name="bias")
        >>> k = T.reduce_axis((0, 3), name="k")
        >>> C = T.compute((2,), lambda i: T.sum(A[i, k], axis=k), name="C")
        >>> D = T.compute((2,), lambda i: C[i] + bias[i], name="D")
        >>> f = T.create_prim_func([A, bias, D])
        >>> g, _ = fuse_reduction_epilogue(f, BlockRV("C"), BlockRV("D"))
        >>> print(tree.get(g, tree.find_block(g, "C")).block.init)
        D[v_i] = bias[v_i]
    """
    prim = "fuse_reduction_epilogue"
    red = tree.get(func, block_path(func, reduction_block, prim)).block
    cons = tree.get(func, block_path(func, epilogue_block, prim)).block
    if red.init is None:
        raise fail(InlineError, prim, f"block {red.name!r} is not a reduction block (it has "
                   f"no init); use reverse_compute_inline to fold {cons.name!r} into it",
                   func)
    written = {id(w.buffer) for w in red.writes}
    if not any(id(r.buffer) in written for r in cons.reads):
        raise fail(InlineError, prim, f"block {cons.name!r} reads no buffer that block "
                   f"{red.name!r} writes; pass the reduction and its own epilogue", func)
    return _reverse_inline(func, epilogue_block, prim)


def _reverse_inline(func, block, prim):
    """``reverse_compute_inline`` of ``block`` (errors name ``prim``)."""
    cpath = block_path(func, block, prim)
    cons = tree.get(func, cpath).block
    if not is_complete(cons):
        raise fail(InlineError, prim, f"block {cons.name!r} is not a complete block (it is "
                   "a reduction, or reads what it writes); only a spatial consumer can be "
                   "inlined into its producer", func)
    cst, _ = _store_of(func, cons, prim, "block")   # an injective store (any order)
    scope = tree.enclosing_block(func, cpath)
    blocks = child_blocks(func, scope)
    produced = []
    for r in cons.reads:
        ws = [(p, b) for p, b in blocks if p != cpath and region_of(b.block.writes, r.buffer)]
        if ws:
            produced.append((r.buffer, ws))
    if len(produced) != 1:
        names = [b.name for b, _ in produced]
        raise fail(InlineError, prim, f"block {cons.name!r} reads {len(produced)} buffers "
                   f"produced in its scope ({names}); reverse_compute_inline needs exactly "
                   "one producer", func)
    buf, ws = produced[0]
    if len(ws) != 1:
        raise fail(InlineError, prim, f"buffer {buf.name!r} has {len(ws)} writers; "
                   "reverse_compute_inline needs a single producer", func)
    ppath, preal = ws[0]
    prod = preal.block
    if is_param(func, buf):
        raise fail(InlineError, prim, f"the producer {prod.name!r} writes the function "
                   f"parameter {buf.name!r}, which must stay", func)
    reduction = not is_complete(prod)
    fold = _fold_into_reduction(prod, cst, buf) if reduction else None
    if fold is not None and fold[0] == "bias" and prim == "reverse_compute_inline":
        raise fail(InlineError, prim, f"block {cons.name!r} adds a value to the result of "
                   f"the reduction {prod.name!r}: that changes the reduction's init, which "
                   f"is what fuse_reduction_epilogue({prod.name!r}, {cons.name!r}) does",
                   func)
    if reduction and fold is None:
        raise fail(InlineError, prim, f"the producer {prod.name!r} of block {cons.name!r} is "
                   "not a complete block (a reduction), and the consumer is neither a plain "
                   "copy of its result nor the result plus a value (a bias a sum can start "
                   "from); other epilogues (ReLU, clipping) would change the result if "
                   "applied per reduction step. Use compute_at / reverse_compute_at "
                   "instead", func)
    if not isinstance(prod.body, BufferStore) or len(prod.writes) != 1:
        raise fail(InlineError, prim, f"producer {prod.name!r} has a non-trivial body: only "
                   "a block whose body is one BufferStore to one buffer can be inlined "
                   "into", func)
    pst = prod.body
    _refuse_opaque_use(func, buf, prim)
    readers = [b.block.name for p, b in blocks
               if p != cpath and region_of(b.block.reads, buf) is not None]
    if readers:
        raise fail(InlineError, prim, f"buffer {buf.name!r} is also read by {readers}; "
                   f"block {cons.name!r} must be its only consumer", func)
    others = _elsewhere(func, buf, [ppath, cpath], "reads", "writes")
    if others:
        raise fail(InlineError, prim, f"buffer {buf.name!r} is also used by {others} "
                   f"outside this scope; block {cons.name!r} must be its only consumer and "
                   f"{prod.name!r} its only producer", func)
    load = _one_load(func, cons, buf, prim)
    inv = _inverse(func, cons, load, prim, f"block {cons.name!r} loads {buf.name}")
    # the consumer's variables for the element the producer stores at each iteration
    sigma = access_inverse.at(inv, pst.indices)
    _check_produced(func, prod, cons, load, buf, prim)
    guard = _consumer_guard(prod, cons, load, sigma)
    # the consumer's own T.where, carried over to the producer's variables
    _, cnest = exclusive_nest(func, cpath, prim)
    cconds = predicate_conditions(func, tree.get(func, cpath), nest_loops(cnest), prim,
                                  InlineError)
    refuse_cut_producer(func, preal, cons, cpath, load, cconds, prim)
    guard += [simplify(substitute(c, sigma)) for c in cconds]
    cidx = tuple(simplify(substitute(e, sigma)) for e in cst.indices)
    init = None
    if reduction:
        if guard:
            raise fail(InlineError, prim, f"block {cons.name!r} copies only part of what the "
                       f"reduction {prod.name!r} computes (it would need the guard "
                       f"{' and '.join(map(str, guard))}), and a reduction's steps cannot be "
                       "guarded one by one; use reverse_compute_at instead", func)
        # the accumulator moves to the consumer's buffer: init and every step store there
        acc = BufferLoad(cst.buffer, cidx)
        store = BufferStore(cst.buffer, _ReplaceLoads(buf, acc).visit(pst.value), cidx)
        start = prod.init.value
        if fold[0] == "bias":
            bias = substitute(fold[1], sigma)
            zero = isinstance(start, (IntImm, FloatImm)) and start.value == 0
            start = bias if zero else start + bias
        init = BufferStore(cst.buffer, start, cidx)
    else:
        value = _ReplaceLoads(buf, pst.value).visit(substitute(cst.value, sigma))
        store = BufferStore(cst.buffer, value, cidx)
    reads = [r for r in prod.reads if r.buffer is not buf]
    # what the consumer adds is read first, by the init
    extra = [substitute(r, sigma) for r in cons.reads if r.buffer is not buf]
    if reduction:
        reads, extra = extra, reads
    for r in extra:
        k = next((n for n, o in enumerate(reads) if o.buffer is r.buffer), None)
        if k is None:
            reads.append(r)
        else:
            reads[k] = union(reads[k], r)
    writes = tuple(substitute(w, sigma) for w in cons.writes)
    new_prod = with_fields(prod, body=store, reads=tuple(reads), writes=writes,
                           **({"init": init} if reduction else {}))
    _, nest = exclusive_nest(func, cpath, prim)

    vm = dict(zip([iv.var for iv in prod.iter_vars], preal.iter_values))
    pred = preal.predicate
    if guard:
        parts = []    # the producer's own conditions, then new ones it lacks
        for c in conjuncts(pred) + [simplify(substitute(c, vm)) for c in guard]:
            if not any(tree_same(c, p) for p in parts):   # variables by identity
                parts.append(c)
        pred = all_of(*parts)

    def place(_realize):
        return with_fields(_realize, block=new_prod, predicate=pred)

    body = Relocate(remove=nest, target=preal, place=place).visit(func.body)
    body = _DropAlloc(buf).visit(body)
    return func.with_body(body), None


class _DropAlloc(Mutator):
    def __init__(self, buffer):
        self.buffer = buffer

    def visit_Block(self, blk):
        new = self.generic_visit(blk)
        allocs = tuple(b for b in new.alloc_buffers if b is not self.buffer)
        if len(allocs) == len(new.alloc_buffers):
            return new
        return with_fields(new, alloc_buffers=allocs)
