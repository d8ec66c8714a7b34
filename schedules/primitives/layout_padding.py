"""The padding a ``transform_layout`` introduces: which elements it is, what fills them.

A layout whose bounding box holds more elements than the buffer (``i -> (i // 4, i %
4)`` on 14 elements gives 4 x 4) has *padding*: elements no old index maps to, which no
access of the function touches.  ``pad_value`` says what they hold (a number, or a
function of the new indices), so that a later schedule may read whole tiles.  It is
written in one of TensorIR's forms, the first that applies:

1. *in the producer*: when one loop nest writes the buffer, visiting every old index
   in row-major order (``for i in range(14): B[i] = ...``) and storing nothing else,
   its loops are rebuilt over the new shape and the store becomes
   ``B[i, j] = T.if_then_else(<padding>, pad, <value>)`` (the value is computed only
   off the padding, so nothing reads out of bounds);
2. *after the producer*: a block ``<buffer>_pad`` under ``T.where(<padding>)`` placed
   after the statement holding the last write of the buffer;
3. for a map whose padding Cuvil cannot write down (no inverse), an intermediate is
   filled whole *before* its writers (which then overwrite the image); a parameter is
   refused, since that would overwrite the caller's elements.

A buffer nothing writes (an input) gets no fill: its caller supplies the padding.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import IterVar, Range
    >>> i, a, b = T.var("i"), T.var("a"), T.var("b")
    >>> str(padding_predicate((T.const(14),), [i], [i // 4, i % 4], (a, b)))
    'a == 3 and 2 <= b'
"""

from __future__ import annotations

import dataclasses

from cuvil_tir import arith
from cuvil_tir import dtype as D
from cuvil_tir.analysis import tree
from cuvil_tir.analysis.linear_maps import linear_inverse
from cuvil_tir.analysis.map_inverse import NotInvertible, inverse
from cuvil_tir.block_regions import infer_block_regions
from cuvil_tir.errors import CuvilError, ScheduleError
from cuvil_tir.expr import (EQ, LE, NE, BufferLoad, Expr, IntImm, Not,
                            Or, Var, as_expr, const)
from cuvil_tir.node import same
from cuvil_tir.op import any as any_of, if_then_else
from cuvil_tir.ops.assume import assume
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                            IterVar, Range, SeqStmt)
from cuvil_tir.visitor import Mutator, Visitor, substitute, used_vars

from ..errors import LayoutError, ScheduleArgumentError, schedule_error
from .index_maps import call_index_map, index_names
from .split_maps import split_inverse, split_of
from .insertion import insert_after, insert_before


def pad_value_at(pad_value, buf, ndim: int, prim: str):
    """``pad_value`` as a function of the new indices returning an expression of
    ``buf``'s dtype (None without one); refused when its type does not match the buffer
    (``0`` for a float buffer: write ``0.0``) or when it reads a buffer.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((4, 4), "int32", "B")
        >>> i, j = T.var("i"), T.var("j")
        >>> str(pad_value_at(lambda a, b: a + b, B, 2, "p")((i, j)))
        'i + j'
    """
    if pad_value is None:
        return None
    if callable(pad_value) and not isinstance(pad_value, Expr):
        if index_names(pad_value, ndim) is None:
            raise schedule_error(ScheduleArgumentError, prim, f"option 'pad_value' to {prim}"
                                 f": a function of the new indices takes {ndim} of them "
                                 f"for buffer {buf.name!r}")

        def at(idx):
            return _checked_value(call_index_map(pad_value, list(idx)), buf, prim)
        at((Var("probe", "int32"),) * ndim if ndim else ())   # refused now, not later
        return at
    value = _checked_value(pad_value, buf, prim)
    return lambda idx: value


class _Loads(Visitor):
    def __init__(self):
        self.found = []

    def visit_BufferLoad(self, ld):
        self.found.append(ld.buffer.name)


def _checked_value(v, buf, prim):
    where = f"option 'pad_value' to {prim}"
    dt = buf.dtype
    if isinstance(v, bool) or not isinstance(v, (int, float, Expr)):
        raise schedule_error(ScheduleArgumentError, prim, f"{where}: expected an int, a "
                             f"float, an expression or a function of the new indices, "
                             f"found {v!r}")
    if isinstance(v, int) and not D.is_integer(dt):
        raise schedule_error(ScheduleArgumentError, prim, f"{where}: the int {v} does not "
                             f"match buffer {buf.name!r} of dtype {dt}; write {float(v)!r}")
    if isinstance(v, float) and not D.is_float(dt):
        raise schedule_error(ScheduleArgumentError, prim, f"{where}: the float {v} does not "
                             f"match buffer {buf.name!r} of dtype {dt}")
    if isinstance(v, Expr):
        if v.dtype != dt:
            raise schedule_error(ScheduleArgumentError, prim, f"{where}: {v} has dtype "
                                 f"{v.dtype}, buffer {buf.name!r} holds {dt}")
        loads = _Loads()
        loads.visit(v)
        if loads.found:
            raise schedule_error(ScheduleArgumentError, prim, f"{where}: the value {v} "
                                 f"reads buffer(s) {sorted(set(loads.found))}; the padding "
                                 "may only be a function of the new indices")
        return v
    try:
        return as_expr(v, dt)
    except CuvilError as err:
        raise schedule_error(ScheduleArgumentError, prim, f"{where}: {v!r} is not a value "
                             f"of buffer {buf.name!r}'s dtype {dt} "
                             f"({str(err).split('] ', 1)[-1]})") from None


def padding_predicate(old_shape, params, exprs, idx) -> Expr | None:
    """The condition that the new-layout element ``idx`` is padding, over ``idx``;
    None when Cuvil cannot write it down (a map without an inverse).

    A dimension split as ``(p // c, p % c)`` (``c`` constant) is padding where
    ``p // c == E // c and E % c <= p % c`` (``E`` its extent), written on the two new
    indices, as TensorIR writes it; other maps: the inverse falls outside the old
    shape or does not map back to ``idx``."""
    split = _split_predicate(old_shape, params, exprs, idx)
    if split is not None:
        return split
    if linear_inverse(old_shape, params, exprs, list(idx)) is not None:
        return const(False)     # a row-major numbering of the box fills its image exactly
    return _inverse_predicate(old_shape, params, exprs, idx)


def _split_predicate(old_shape, params, exprs, idx):
    """The padding condition when each result of the map is an index ``p``, a split
    ``((p + o) // c, (p + o) % c)`` (constant ``o >= 0``; ``c`` a positive constant or
    a symbolic divisor, see :mod:`.split_maps`) or a constant; None for other maps."""
    used: dict = {}
    conds = []
    for k, x in enumerate(exprs):
        if isinstance(x, IntImm):          # a constant result k: the others are padding
            used[k] = x
            if x.value:
                conds.append(NE(idx[k], const(x.value, idx[k].dtype)))
    for p, extent in zip(params, old_shape):
        outs = [k for k, x in enumerate(exprs) if any(v is p for v in used_vars(x))]
        if len(outs) == 1 and exprs[outs[0]] is p:
            used[outs[0]] = p
            continue
        split = split_of(exprs, outs, p, params)
        if split is None:
            return None
        div, mod, c, o = split
        used[div] = used[mod] = p
        a, b = idx[div], idx[mod]
        c = c if not isinstance(c, IntImm) else const(c.value, extent.dtype)
        if o == 0:
            if not (isinstance(extent, IntImm) and isinstance(c, IntImm) and
                    extent.value % c.value == 0):
                conds.append(EQ(a, extent // c) & LE(extent % c, b))
        else:
            x = a * c + b
            conds.append(Or(x < const(o, a.dtype), extent + const(o, a.dtype) <= x))
    if len(used) != len(exprs):
        return None
    return any_of(conds)


def _inverse_predicate(old_shape, params, exprs, idx):
    inv = inverse_of(old_shape, params, exprs, idx)
    if inv is None:
        return None
    outside = [c for p, n in zip(params, old_shape)
               for c in (inv[p] < const(0, p.dtype), inv[p] >= n)]
    back = [NE(substitute(x, inv), v) for x, v in zip(exprs, idx)]
    ana = _bound(idx, None)
    conds = [c for c in (ana.simplify(c) for c in outside + back)
             if not ana.can_prove(Not(c))]      # drop the conditions that never hold
    return any_of(conds)


def inverse_of(old_shape, params, exprs, idx=None):
    """``{param: expression over idx}`` inverting the map on ``[0, old_shape)`` (fresh
    ``idx`` when not given); None when Cuvil cannot invert it (then it may not be
    one-to-one).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> inv = inverse_of((T.const(8),), [i], [i // 4, i % 4], [T.var("a"), T.var("b")])
        >>> str(inv[i])
        'a * 4 + b'
    """
    if idx is None:
        idx = [Var(f"n{k}", x.dtype) for k, x in enumerate(exprs)]
    old = [IterVar(p, Range(const(0, p.dtype), n), "spatial")
           for p, n in zip(params, old_shape)]
    try:
        return inverse(old, exprs, list(idx))
    except (NotInvertible, ScheduleError, ValueError):
        # symbolic divisors (i // n, i % n): a split, or nothing
        return split_inverse(old_shape, params, exprs, list(idx))


def _bound(idx, shape):
    ana = arith.Analyzer(index_no_overflow=True)
    if shape is not None:
        for v, n in zip(idx, shape):
            ana.bind(v, Range(const(0, v.dtype), n))
    return ana


def fill(new_buf, pad_at, where, assumption: bool = False) -> For:
    """A loop nest over ``new_buf``'s shape around a block ``<buffer>_pad`` that stores
    ``pad_at(idx)`` where ``where(idx)`` holds; with ``assumption``, a block
    ``<buffer>_assumption`` stating ``T.assume(not where or buf[idx] == pad)`` instead
    (an input's padding is its caller's: recorded, never checked or relied on).

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((2,), "float32", "B")
        >>> fill(B, lambda idx: T.const(0.0), lambda idx: idx[0] == 1).body.block.name
        'B_pad'
    """
    loops = [Var(f"ax{d}", n.dtype) for d, n in enumerate(new_buf.shape)]
    ivs = [IterVar(Var(f"v{d}", n.dtype), Range(const(0, n.dtype), n), "spatial")
           for d, n in enumerate(new_buf.shape)]
    idx = tuple(iv.var for iv in ivs)
    region = BufferRegion(new_buf, tuple(Range(v, const(1, v.dtype)) for v in idx))
    if assumption:
        holds = Or(Not(where(idx)), EQ(BufferLoad(new_buf, idx), pad_at(idx)))
        block = Block(f"{new_buf.name}_assumption", tuple(ivs), (region,), (),
                      Evaluate(assume(holds)))
        stmt = BlockRealize(tuple(loops), const(True), block)
    else:
        cond = substitute(where(idx), dict(zip(idx, loops)))
        stmt = BlockRealize(tuple(loops), cond,
                            Block(f"{new_buf.name}_pad", tuple(ivs), (), (region,),
                                  BufferStore(new_buf, pad_at(idx), idx)))
    for v, n in reversed(list(zip(loops, new_buf.shape))):
        stmt = For(v, const(0, v.dtype), n, "serial", stmt)
    return stmt


def write_padding(func, g, old, new, params, exprs, pad_at, prim, blk):
    """``g`` (``func`` with ``old`` re-laid out as ``new``) with the padding filled by
    ``pad_at`` in the first form of the module docstring that applies."""
    stores = [p for p, s in tree.walk(g) if isinstance(s, BufferStore) and s.buffer is new]
    if not stores:
        # an input: the caller supplies the padding; what it holds is recorded
        where = padding_predicate(old.shape, params, exprs, tuple(
            Var(f"v{d}", n.dtype) for d, n in enumerate(new.shape)))
        if where is None or not any(p is new for p in g.params):
            return g
        scope = ("block", "body")
        first = scope + (("seq", 0),) if isinstance(tree.get(g, scope), SeqStmt) else scope
        return insert_before(g, first, fill(
            new, pad_at, lambda idx: padding_predicate(old.shape, params, exprs, idx),
            assumption=True))
    ndim = len(new.shape)
    probe = tuple(Var(f"v{d}", n.dtype) for d, n in enumerate(new.shape))
    if padding_predicate(old.shape, params, exprs, probe) is None:
        if any(p is new for p in g.params):
                    raise schedule_error(LayoutError, prim, f"the padding of parameter "
                                 f"{old.name!r} under this index map cannot be told apart "
                                 "from its elements (the map has no inverse Cuvil can "
                                 "write); use an invertible map such as lambda i: "
                                 "(i // 4, i % 4)", func, blk)
        # the writers overwrite the image: fill everything before them
        return insert_before(g, _first_in_scope(g, new, stores[0]),
                             fill(new, pad_at, lambda idx: const(True)))
    nest = _row_major_nest(func, old)
    if nest is not None:
        out = _pad_in_producer(g, nest, new, params, exprs, pad_at, ndim)
        if out is not None:
            return out
    return insert_after(g, _first_in_scope(g, new, stores[-1]), fill(
        new, pad_at, lambda idx: padding_predicate(old.shape, params, exprs, idx)))


def _scope_path(g, buf) -> tuple:
    """The path of the block realize whose block allocates ``buf`` (root: a parameter)."""
    for path, s in tree.walk(g):
        if isinstance(s, BlockRealize) and any(b is buf for b in s.block.alloc_buffers):
            return path
    return ()


def _first_in_scope(g, buf, path) -> tuple:
    """The statement directly in the body of ``buf``'s allocating block (or a sequence
    there) that holds ``path``."""
    scope = _scope_path(g, buf) + ("block", "body")
    body = tree.get(g, scope)
    if isinstance(body, SeqStmt):
        return path[:len(scope) + 1]
    return scope


# -- form 1: the producer's loops rebuilt over the new shape -------------------------------

_ALLOWED = (For, SeqStmt, BlockRealize, Block, BufferStore)


def _row_major_nest(func, buf):
    """``(loop_paths, realize_path, first_iter)`` of the one loop nest writing every
    element of ``buf`` in row-major order and nothing else, as :func:`write_padding`'s
    first form needs; None when there is no such nest."""
    stores = [(p, s) for p, s in tree.walk(func) if isinstance(s, BufferStore)
              and s.buffer is buf]
    if not stores or not buf.shape:
        return None
    first = _store_nest(func, buf, *stores[0])
    if first is None:
        return None
    loop_paths, realize_path, k = first
    top, inner = loop_paths[0], loop_paths[-1]
    if any(tree.get(func, outer).body is not tree.get(func, nxt)
           for outer, nxt in zip(loop_paths, loop_paths[1:])):
        # a loop of the nest holds something else too (a consumer computed at it):
        # rebuilding the nest would drop it
        return None
    for p, s in stores:
        if p[:len(inner)] != inner or not same(s.indices, stores[0][1].indices):
            return None
    if tree.enclosing_block(func, top) != _scope_path(func, buf):
        return None
    index = stores[0][1].indices
    for _, s in tree.walk(tree.get(func, inner).body):
        if not isinstance(s, _ALLOWED) or isinstance(s, BufferStore) and s.buffer is not buf \
                or isinstance(s, Block) and s.alloc_buffers:
            return None
        if isinstance(s, BufferStore) and not _reads_only_at(s.value, buf, index):
            # B[i] = B[i - 1] + ...: the new loops visit the old indices in another
            # order under some maps, which would change what such a read sees
            return None
        if isinstance(s, For) and _reads(s.min, s.extent) or \
                isinstance(s, BlockRealize) and _reads(s.predicate, *s.iter_values):
            return None
    return loop_paths, realize_path, k


def _reads_only_at(e, buf, index) -> bool:
    found = []

    class _V(Visitor):
        def visit_BufferLoad(self, ld):
            if ld.buffer is buf and not same(ld.indices, index):
                found.append(ld)
            self.generic_visit(ld)
    _V().visit(e)
    return not found


def _reads(*exprs) -> bool:
    loads = _Loads()
    for e in exprs:
        loads.visit(e)
    return bool(loads.found)


def _store_nest(func, buf, path, store):
    """The loops (paths) a store's indices run over one to one, the path of the block
    realize binding them (None: loop variables index directly) and the position of the
    first of its iterators."""
    anc = tree.ancestors(func, path)
    realizes = [(p, s) for p, s in anc if isinstance(s, BlockRealize)]
    loops = [(p, s) for p, s in anc if isinstance(s, For)]
    idx = list(store.indices)
    realize_path, k = None, 0
    if realizes and realizes[-1][0] != ():
        rpath, real = realizes[-1]
        ivs = real.block.iter_vars
        pos = [next((n for n, iv in enumerate(ivs) if iv.var is x), None) for x in idx]
        if all(n is not None for n in pos):
            k = pos[0]
            if pos != list(range(k, k + len(idx))) or not _true(real.predicate):
                return None
            for n, d in zip(pos, buf.shape):
                iv = ivs[n]
                if iv.kind != "spatial" or not _zero(iv.dom.min) or \
                        not same(iv.dom.extent, d):
                    return None
            idx = [real.iter_values[n] for n in pos]
            realize_path = rpath
        elif any(x is iv.var for x in idx for iv in ivs):
            return None
    by_var = {id(s.loop_var): n for n, (_, s) in enumerate(loops)}
    at = [by_var.get(id(x)) if isinstance(x, Var) else None for x in idx]
    if None in at or at != list(range(at[0], at[0] + len(at))):
        return None
    nest = loops[at[0]:at[-1] + 1]
    for (p, lp), d in zip(nest, buf.shape):
        if lp.kind != "serial" or lp.annotations or not _zero(lp.min) or \
                not same(lp.extent, d):
            return None
    if realize_path is not None and len(realize_path) <= len(nest[-1][0]):
        return None                    # the binding block must sit inside the nest
    if any(len(nest[0][0]) < len(p) < len(nest[-1][0]) for p, _ in realizes):
        return None                    # no block between the nest's loops
    if realize_path is not None and any(len(nest[-1][0]) < len(p) < len(realize_path)
                                        for p, _ in realizes):
        return None
    return [p for p, _ in nest], realize_path, k


def _true(e) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


def _zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _pad_in_producer(g, nest, new, params, exprs, pad_at, ndim):
    loop_paths, realize_path, k = nest
    shape = new.shape
    loops = [Var(f"ax{d}", n.dtype) for d, n in enumerate(shape)]
    inv_loops = inverse_of([tree.get(g, p).extent for p in loop_paths], params, exprs, loops)
    if inv_loops is None:
        return None
    old_loops = [tree.get(g, p).loop_var for p in loop_paths]
    vmap = {lv: inv_loops[p] for lv, p in zip(old_loops, params)}
    idx = tuple(loops)
    realize = None
    if realize_path is not None:
        realize = tree.get(g, realize_path)
        ivs = realize.block.iter_vars
        new_ivs = [IterVar(Var(f"v{d}", n.dtype), Range(const(0, n.dtype), n), "spatial")
                   for d, n in enumerate(shape)]
        idx = tuple(iv.var for iv in new_ivs)
        inv_ivs = inverse_of([ivs[k + d].dom.extent for d in range(len(params))], params,
                           exprs, list(idx))
        for d, p in enumerate(params):
            vmap[ivs[k + d].var] = inv_ivs[p]
    pred = padding_predicate([tree.get(g, p).extent for p in loop_paths], params, exprs,
                             idx)
    ana = _bound(idx, shape)
    if realize is not None:
        for lv, n in zip(loops, shape):
            ana.bind(lv, Range(const(0, lv.dtype), n))
    rewrite = _Rewrite(new, vmap, idx, if_then_else_of(pred, pad_at(idx)), ana,
                       realize.block if realize is not None else None, k, len(params),
                       new_ivs if realize is not None else None, loops)
    try:
        body = rewrite.visit(tree.get(g, loop_paths[-1]).body)
    except CuvilError:
        return None
    stmt = body
    for lv, n in reversed(list(zip(loops, shape))):
        stmt = For(lv, const(0, lv.dtype), n, "serial", stmt)
    return tree.replace(g, loop_paths[0], stmt)


def if_then_else_of(pred, pad):
    """``value -> T.if_then_else(pred, pad, value)``.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(if_then_else_of(i == 3, T.const(0))(i + 1))
        'T.if_then_else(i == 3, 0, i + 1)'
    """
    return lambda value: if_then_else(pred, pad, value)


class _Rewrite(Mutator):
    """The producer's body over the new loops: old loop and block variables become the
    inverse of the map, stores to the buffer store at the new indices through
    ``guard`` (the ``if_then_else``), and the block binding the old indices gets the
    new iterators in their place."""

    def __init__(self, buf, vmap, idx, guard, ana, block, k, n_old, new_ivs, loops):
        self.buf, self.vmap, self.idx, self.guard, self.ana = buf, vmap, idx, guard, ana
        self.block, self.k, self.n_old, self.new_ivs, self.loops = \
            block, k, n_old, new_ivs, loops

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def _indices(self, indices):
        return tuple(self.ana.simplify(substitute(x, self.vmap)) for x in indices)

    def visit_BufferLoad(self, ld):
        out = Mutator.generic_visit(self, ld)
        if ld.buffer is not self.buf:
            return out
        return BufferLoad(self.buf, tuple(self.ana.simplify(x) for x in out.indices))

    def visit_BufferStore(self, st):
        value = self.visit(st.value)
        return BufferStore(self.buf, self.guard(value), self.idx)

    def visit_BlockRealize(self, r):
        if self.block is None or r.block is not self.block:
            out = Mutator.generic_visit(self, r)
            return _with_regions(out)
        blk = r.block
        # the old iterators are replaced, not rewritten: only the body and init change
        blk = _replace(blk, body=self.visit(blk.body),
                       init=self.visit(blk.init) if blk.init is not None else None)
        ivs = blk.iter_vars
        k, n = self.k, self.n_old
        new_ivs = ivs[:k] + tuple(self.new_ivs) + ivs[k + n:]
        values = tuple(self.visit(v) for v in r.iter_values)
        values = values[:k] + tuple(self.loops) + values[k + n:]
        out = BlockRealize(values, r.predicate, _replace(blk, iter_vars=new_ivs))
        return _with_regions(out)


def _replace(blk, **changes):
    return dataclasses.replace(blk, **changes)


def _with_regions(r):
    blk = r.block
    if not blk.iter_vars and not blk.reads and not blk.writes:
        return r
    reads, writes = infer_block_regions(blk)
    return BlockRealize(r.iter_values, r.predicate, _replace(blk, reads=reads, writes=writes))


__all__ = ["pad_value_at", "padding_predicate", "fill", "write_padding", "if_then_else_of",
           "inverse_of"]
