"""``tensorize(loop_or_block, intrin_name)``: replace a loop nest by a tensor intrinsic.

The subtree is matched against the intrinsic's ``desc`` up to renaming: loop extents,
block iter kinds and domains, bindings, the body's expression structure and dtypes.
Each desc buffer binds to a region of a scheduled buffer: the scheduled index is the
desc index plus an offset that depends only on the enclosing (outer) variables.  The
first mismatch is reported precisely.  On success the block's body becomes ``impl``,
whose buffer accesses are shifted by the bound offsets.  A loop is blockized first.

Example::

        >>> import schedules as S
    >>> from cuvil_tir.te.examples import matmul
    >>> sch = S.Schedule(matmul(8, 8, 8))
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> try:
    ...     sch.tensorize(i, "cpu.gemm_4x8x4_f32")
    ... except S.ScheduleError as err:
    ...     print(err.message)
    tensorize: loop extent mismatch at loop 'i': desc has 4, found 8 (intrinsic 'cpu.gemm_4x8x4_f32')
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import ScheduleError
from cuvil_tir.expr import Cast, Expr, FloatImm, IntImm, Ramp, Var, const
from cuvil_tir.ops.access_ptr import access_ptr, access_ptr_parts, is_access_ptr
from cuvil_tir.ops.elem_offset import elem_offset_name
from cuvil_tir.node import Node, field_names, same
from cuvil_tir.stmt import Block, BlockRealize, BufferRegion, For, LetStmt, Range
from cuvil_tir.visitor import Mutator, Visitor, substitute, used_vars

from cuvil_tir.analysis import tree
from ..errors import ScheduleArgumentError, schedule_error
from ..handles import BlockRV, LoopRV
from ..primitive import BLOCK_OR_LOOP, STR, primitive
from ..index_dtype import index_dtype, with_index_dtype
from cuvil_tir.tensor_intrin import TensorIntrin
from cuvil_tir.arith.affine import from_linear_form, linear_form
from .blockize import blockize_path
from .reduction import resolve_block, resolve_loop


class TensorizeMismatchError(ScheduleError):
    """The scheduled subtree does not match the intrinsic's ``desc``.

    Example::

        >>> TensorizeMismatchError("tensorize: loop extent mismatch").code
        'CVL-E103'
    """


def strip_root(func) -> tuple:
    """``(body, alloc_buffers)`` of a function, without a trivial root block.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> type(strip_root(matmul(4, 4, 4))[0]).__name__
        'For'
    """
    body = func.body
    if isinstance(body, BlockRealize) and not body.block.iter_vars:
        return body.block.body, body.block.alloc_buffers
    return body, ()


class _Matcher:
    """Walk desc (``p``) and the scheduled subtree (``q``) together."""

    def __init__(self, intrin: TensorIntrin):
        self.name = intrin.name
        self.params = {id(b): b for b in intrin.desc.params}
        self.vmap: dict = {}      # id(desc var) -> scheduled var
        self.inner: set = set()   # ids of scheduled vars bound inside the subtree
        self.bufs: dict = {}      # id(desc buffer) -> (buffer, lead, offsets)
        self.doms: dict = {}      # var bound inside (desc or scheduled) -> its Range
        self.where = "the top of the desc"

    def fail(self, what: str):
        # "<kind>: <detail>" reads "<kind> <where>: <detail>", naming the first mismatch
        kind, _, detail = what.partition(": ")
        text = f"{kind} {self.where}" + (f": {detail}" if detail else "")
        return schedule_error(TensorizeMismatchError, "tensorize",
                              f"{text} (intrinsic {self.name!r})")

    # statements ------------------------------------------------------------------------
    def stmt(self, p, q):
        if type(p) is not type(q):
            raise self.fail(f"statement mismatch: desc has {type(p).__name__}, found "
                            f"{type(q).__name__}")
        if isinstance(p, For):
            self.where = f"at loop {q.loop_var.name!r}"
            for what, a, b in (("extent", p.extent, q.extent), ("min", p.min, q.min)):
                if not (isinstance(b, IntImm) and isinstance(a, IntImm)) or a.value != b.value:
                    raise self.fail(f"loop {what} mismatch: desc has {a}, found {b}")
            self.bind_var(p.loop_var, q.loop_var)
            self.doms[q.loop_var] = Range(q.min, q.extent)
            self.doms[p.loop_var] = Range(p.min, p.extent)
            self.stmt(p.body, q.body)
        elif isinstance(p, BlockRealize):
            self.block(p, q)
        elif type(p).__name__ == "SeqStmt":
            if len(p.seq) != len(q.seq):
                raise self.fail(f"sequence length mismatch: desc has {len(p.seq)} "
                                f"statements, found {len(q.seq)}")
            for a, b in zip(p.seq, q.seq):
                self.stmt(a, b)
        elif type(p).__name__ == "BufferStore":
            self.where = f"in the store to {q.buffer.name!r}"
            self.buffer(p.buffer, p.indices, q.buffer, q.indices)
            self.expr(self.norm(p.value), self.norm(q.value))
        else:
            self.fields(p, q)

    def block(self, p, q):
        pb, qb = p.block, q.block
        self.where = f"at block {qb.name!r}"
        if len(pb.iter_vars) != len(qb.iter_vars):
            raise self.fail(f"block iter var count mismatch: desc has "
                            f"{len(pb.iter_vars)}, found {len(qb.iter_vars)}")
        for a, b in zip(pb.iter_vars, qb.iter_vars):
            if a.kind != b.kind:
                raise self.fail(f"block iter kind mismatch for {b.var.name!r}: desc has "
                                f"{a.kind}, found {b.kind}")
            for what, x, y in (("extent", a.dom.extent, b.dom.extent),
                               ("min", a.dom.min, b.dom.min)):
                if not same(x, y):
                    raise self.fail(f"block iter var {b.var.name!r} {what} mismatch: "
                                    f"desc has {x}, found {y}")
        for a, b in zip(p.iter_values, q.iter_values):
            self.expr(a, b)
        self.expr(p.predicate, q.predicate)
        for a, b in zip(pb.iter_vars, qb.iter_vars):
            self.bind_var(a.var, b.var)
            self.doms[b.var] = b.dom
            self.doms[a.var] = a.dom
        if qb.init is not None:
            raise self.fail("the scheduled block has an init but the desc describes an "
                            "update; tensorize the loop (it blockizes, moving the init "
                            "out) or decompose_reduction first")
        self.stmt(pb.body, qb.body)

    def norm(self, e):
        """``e`` simplified over the ranges of the variables bound inside the tile:
        both sides compare in TensorIR's normal form (``vi // 8`` with ``vi`` in
        ``[0, 8)`` is ``0``, ``(o * 8 + vi) % 8`` is ``vi``)."""
        ana = Analyzer(index_no_overflow=True)
        for v, r in self.doms.items():
            ana.bind(v, r)
        return ana.simplify(e)

    def bind_var(self, a, b):
        self.vmap[id(a)] = b
        self.inner.add(id(b))

    # expressions ---------------------------------------------------------------------
    def expr(self, p, q):
        if type(p) is not type(q):
            raise self.fail(f"expression mismatch: desc has {type(p).__name__} ({p}), "
                            f"found {type(q).__name__} ({q})")
        if isinstance(p, Expr) and p.dtype != q.dtype:
            raise self.fail(f"dtype mismatch: desc has {p.dtype}, found {q.dtype} "
                            f"(in {q})")
        if isinstance(p, Var):
            got = self.vmap.get(id(p))
            if got is not q:
                raise self.fail(f"variable mismatch: desc uses {p.name!r} where "
                                f"{q.name!r} is found")
        elif isinstance(p, (IntImm, FloatImm)):
            if p.value != q.value:
                raise self.fail(f"constant mismatch: desc has {p}, found {q}")
        elif type(p).__name__ == "BufferLoad":
            self.buffer(p.buffer, p.indices, q.buffer, q.indices)
        else:
            self.fields(p, q)

    def fields(self, p, q):
        for f in field_names(type(p)):
            a, b = getattr(p, f), getattr(q, f)
            if isinstance(a, Node) and not isinstance(a, Buffer):
                if isinstance(a, Expr):
                    self.expr(a, b)
                else:
                    self.stmt(a, b)
            elif isinstance(a, tuple):
                if len(a) != len(b):
                    raise self.fail(f"{f} length mismatch in {type(p).__name__}")
                for x, y in zip(a, b):
                    self.fields_item(x, y)
            elif a != b and not isinstance(a, Buffer):
                raise self.fail(f"{type(p).__name__}.{f} mismatch: desc has {a!r}, "
                                f"found {b!r}")

    def fields_item(self, x, y):
        if isinstance(x, Expr):
            self.expr(x, y)
        elif isinstance(x, Node):
            self.stmt(x, y)
        elif x != y:
            raise self.fail(f"mismatch: desc has {x!r}, found {y!r}")

    # buffers ---------------------------------------------------------------------------
    def buffer(self, pbuf, pidx, qbuf, qidx):
        if id(pbuf) not in self.params:
            raise self.fail(f"desc buffer {pbuf.name!r} is not a desc parameter")
        if pbuf.dtype != qbuf.dtype:
            raise self.fail(f"dtype mismatch: desc buffer {pbuf.name!r} is {pbuf.dtype}, "
                            f"found {qbuf.name!r} of {qbuf.dtype}")
        d, r = len(pidx), len(qidx)
        if d > r:
            raise self.fail(f"rank mismatch: desc buffer {pbuf.name!r} has {d} dims, "
                            f"{qbuf.name!r} has {r}")
        # a leading index over the tile's own ranges too ((o * 16 + vi) // 16 is o:
        # a tile picked out of a transform_layout-ed buffer)
        lead = tuple(self.norm(e) for e in qidx[:r - d])
        for e in lead:
            self.outer_only(e, qbuf)
        offs = []
        for a, b in zip(pidx, qidx[r - d:]):
            mapped = substitute(a, {v: self.vmap[id(v)] for v in used_vars(a)
                                    if id(v) in self.vmap})
            # both sides over the tile's own ranges: vi // 8 with vi in [0, 8) is 0,
            # (o * 8 + vi) // 8 is o, as TensorIR's matcher normalises them
            mapped, b = self.norm(mapped), self.norm(b)
            la, lb = linear_form(mapped), linear_form(b)
            if la is None or lb is None:
                # a non-linear index (a packed layout's (o * 16 + i) // 4 against the
                # desc's i // 4): the offset is what is left of the difference
                off = const(0, b.dtype) if same(mapped, b) else self.norm(b - mapped)
                if any(id(v) in self.inner for v in used_vars(off)):
                    raise self.fail(f"index mismatch on {qbuf.name!r}: desc has {a}, "
                                    f"found {b}")
                offs.append(off)
                continue
            terms = dict(lb[0])
            for k, (v, c) in la[0].items():
                terms[k] = (v, terms.get(k, (v, 0))[1] - c)
            terms = {k: t for k, t in terms.items() if t[1]}
            off = from_linear_form(terms, lb[1] - la[1], b.dtype)
            self.outer_only(off, qbuf, f"index {b} is not desc index {a} plus an offset "
                                       "fixed for the whole tile")
            offs.append(off)
        key = (qbuf, lead, tuple(offs))
        old = self.bufs.get(id(pbuf))
        if old is None:
            self.bufs[id(pbuf)] = key
        elif old[0] is not qbuf or not same(old[1:], key[1:]):
            raise self.fail(f"desc buffer {pbuf.name!r} is accessed at two different "
                            f"regions of {qbuf.name!r}")

    def outer_only(self, e, qbuf, why=None):
        bad = [v.name for v in used_vars(e) if id(v) in self.inner]
        if bad:
            raise self.fail(f"index mismatch on {qbuf.name!r}: "
                            f"{why or f'leading index {e} varies inside the tile'} "
                            f"(uses {bad})")


def _offset(off, idx):
    if isinstance(off, IntImm) and off.value == 0:
        return idx
    if isinstance(idx, Ramp):
        base = off if isinstance(idx.base, IntImm) and idx.base.value == 0 else off + idx.base
        return Ramp(base, idx.stride, idx.lanes)
    if isinstance(idx, IntImm) and idx.value == 0:
        return off
    return off + idx


class _Rebind(Mutator):
    """Point impl's parameter accesses at the matched regions.

    Two conventions for memory handed to a call: Cuvil's, where ``C.data`` (the
    parameter's whole region) becomes the tile's region (a pointer to the tile), and
    TVM's, for a parameter whose ``C.elem_offset`` the impl uses
    (``T.tvm_mma_sync(C.data, C.elem_offset // 256, ...)``): ``C.data`` is then the
    whole scheduled buffer and ``C.elem_offset`` the tile's flat offset in it, as TVM's
    tensorize binds them.  An ``access_ptr`` of a parameter is, as in TVM, an address
    in the scheduled buffer: its offset counts from the tile's start."""

    def __init__(self, binding: dict, by_name: dict | None = None, whole=frozenset()):
        self.binding = binding   # id(impl param) -> (buffer, lead, offsets)
        self.by_name = by_name or {}   # impl param name -> id(impl param)
        self.whole = whole       # ids of the params bound in TVM's convention

    def _start(self, pid, dtype):
        """The flat offset of the tile of parameter ``pid`` in its scheduled buffer."""
        buf, lead, offs = self.binding[pid]
        idx = list(lead) + list(offs)
        strides = buf.strides or buf.default_strides()
        total = None
        # the form of a matched view's offset (TVMScript's C_sub.elem_offset)
        for i, st in zip(idx, strides[len(strides) - len(idx):]):
            term = i * st
            total = term if total is None else total + term
        total = const(0, dtype) if total is None else total
        return total if total.dtype == dtype else Cast(dtype, total)

    def visit_Call(self, c):
        name = elem_offset_name(c)
        if name is not None and name in self.by_name:
            return self._start(self.by_name[name], c.dtype)
        if is_access_ptr(c) and id(c.args[0].buffer) in self.binding:
            buf, off, ext, mask = access_ptr_parts(c)
            off, ext = self.visit(off), self.visit(ext)
            if id(buf) not in self.whole:     # TVM's: the offset already holds the start
                off = _offset(self._start(id(buf), off.dtype), off)
            return access_ptr(self.binding[id(buf)][0], off, ext, mask)
        return self.generic_visit(c)

    def _idx(self, buf, indices):
        buf2, lead, offs = self.binding[id(buf)]
        return buf2, lead + tuple(_offset(o, i) for o, i in zip(offs, indices))

    def visit_BufferLoad(self, ld):
        idx = self.visit(ld.indices)
        if id(ld.buffer) not in self.binding:
            return ld if idx is ld.indices else type(ld)(ld.buffer, idx)
        buf, full = self._idx(ld.buffer, idx)
        return type(ld)(buf, full)

    def visit_BufferStore(self, st):
        idx = self.visit(st.indices)
        value = self.visit(st.value)
        if id(st.buffer) not in self.binding:
            if idx is st.indices and value is st.value:
                return st
            return type(st)(st.buffer, value, idx)
        buf, full = self._idx(st.buffer, idx)
        return type(st)(buf, value, full)

    def visit_BufferRegion(self, r):
        # an impl that calls the hardware (T.call_extern on regions of its params)
        if id(r.buffer) not in self.binding:
            return r
        buf, lead, offs = self.binding[id(r.buffer)]
        if id(r.buffer) in self.whole and _is_whole(r):
            return BufferRegion.full(buf)
        one = [Range(e, const(1, e.dtype)) for e in lead]
        return BufferRegion(buf, tuple(one) + tuple(
            Range(_offset(o, rg.min), rg.extent) for o, rg in zip(offs, r.region)))


def instantiate(intrin: TensorIntrin, binding: dict) -> tuple:
    """``(body, alloc_buffers)`` of impl with fresh local vars/buffers, params rebound.

    ``binding`` maps ``id(desc param)`` to ``(buffer, lead indices, offsets)``.

    Example::

        >>> intrin = TensorIntrin.get("cpu.gemm_4x8x4_f32")
        >>> import cuvil_tir as T
        >>> big = [T.decl_buffer((8, 8), "float32", n) for n in "ABC"]
        >>> z = (T.const(0), T.const(0))
        >>> b = {id(p): (big[k], (), z) for k, p in enumerate(intrin.desc.params)}
        >>> body, allocs = instantiate(intrin, b)
        >>> [a.name for a in allocs]
        ['acc']
    """
    body, allocs = strip_root(intrin.impl)
    vmap, bmap = {}, {}
    for _, s in tree.walk(body):
        if isinstance(s, (For, LetStmt)):
            v = s.loop_var if isinstance(s, For) else s.var
            vmap[v] = Var(v.name, v.dtype)
        if isinstance(s, BlockRealize):
            for iv in s.block.iter_vars:
                vmap[iv.var] = Var(iv.var.name, iv.var.dtype)
            for b in s.block.alloc_buffers:
                bmap[b] = _copy_buffer(b)

    class _Lets(Mutator):
        def visit_Let(self, e):
            vmap.setdefault(e.var, Var(e.var.name, e.var.dtype))
            return Mutator.generic_visit(self, e)

    _Lets().visit(body)
    for b in allocs:
        bmap[b] = _copy_buffer(b)
    body = substitute(body, vmap, bmap)
    rebind = {id(ip): binding[id(dp)] for dp, ip in zip(intrin.desc.params, intrin.impl.params)
              if id(dp) in binding}
    by_name = {ip.name: id(ip) for ip in intrin.impl.params if id(ip) in rebind}
    # TVM's convention, per parameter: the impl reads its elem_offset
    whole = frozenset(by_name[n] for n in _offsets_used(body) if n in by_name)
    for dp, ip in zip(intrin.desc.params, intrin.impl.params):
        if id(dp) not in binding and any(
                isinstance(s, Node) and getattr(s, "buffer", None) is ip
                for _, s in tree.walk(body)):
            raise schedule_error(ScheduleArgumentError, "tensorize",
                                 f"intrinsic {intrin.name!r}: impl uses parameter "
                                 f"{ip.name!r} whose desc counterpart {dp.name!r} is "
                                 "never accessed, so it has no region to bind to")
    return _Rebind(rebind, by_name, whole).visit(body), tuple(bmap[b] for b in allocs)


def _offsets_used(body) -> set:
    """The names of the buffers whose ``elem_offset`` ``body`` uses."""
    names: set = set()

    class _Find(Visitor):
        def visit_Call(self, c):
            name = elem_offset_name(c)
            if name is not None:
                names.add(name)
            self.generic_visit(c)

    _Find().visit(body)
    return names


def _is_whole(r: BufferRegion) -> bool:
    """``r`` is its buffer's whole region (what ``A.data`` reads as)."""
    return all(isinstance(d.min, IntImm) and d.min.value == 0 and same(d.extent, s)
               for d, s in zip(r.region, r.buffer.shape))


def _copy_buffer(b: Buffer) -> Buffer:
    return b.with_changes()


def _in_index_dtype(intrin: TensorIntrin, dtype) -> TensorIntrin:
    """``intrin`` with its indices in ``dtype`` when the scheduled nest's differ (an
    int32 intrinsic on int64 shapes), so that desc matches and impl indexes alike."""
    have = index_dtype(intrin.desc)
    if dtype is None or have is None or dtype == have or \
            {dtype, have} - {"int32", "int64"}:
        return intrin
    return TensorIntrin(intrin.name, with_index_dtype(intrin.desc, dtype),
                        with_index_dtype(intrin.impl, dtype))


def tensorize_block_path(func, bpath: tuple, intrin: TensorIntrin):
    """Tensorize the block whose ``BlockRealize`` is at ``bpath``.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 8, 4)
        >>> g = tensorize_block_path(*blockize_path(f, ("block", "body"))[:1],
        ...     ("block", "body"), TensorIntrin.get("cpu.gemm_4x8x4_f32"))
        >>> g.body.block.body.block.name
        'C_o'
    """
    realize = tree.get(func, bpath)
    blk = realize.block
    if not tree.blocks_under(blk.body):
        raise schedule_error(ScheduleArgumentError, "tensorize",
                             f"block {blk.name!r} has no loop nest with a block inside; "
                             "pass the loop that should become the intrinsic (tensorize "
                             "blockizes it)", func, blk)
    intrin = _in_index_dtype(intrin, index_dtype(blk.body))
    pattern, _ = strip_root(intrin.desc)
    m = _Matcher(intrin)
    m.stmt(pattern, blk.body)
    body, allocs = instantiate(intrin, m.bufs)
    new = Block(blk.name, blk.iter_vars, blk.reads, blk.writes, body, blk.init,
                blk.alloc_buffers + allocs, blk.annotations)
    return tree.replace(func, bpath, BlockRealize(realize.iter_values, realize.predicate,
                                                  new))


@primitive("tensorize", loop_or_block=BLOCK_OR_LOOP, intrin_name=STR)
def tensorize(func, loop_or_block, intrin_name: str):
    """Replace the computation at ``loop_or_block`` by the registered tensor
    intrinsic ``intrin_name`` (see ``S.TensorIntrin.register``), after checking it
    matches the intrinsic's description.

    Before/after ``tensorize(i_1, "dot_4")``::

        for i_1 in T.serial(4):           T.call_extern("dot_4", ...)
            C[...] += A[...] * B[...]

    Example::

        >>> import schedules as S
        >>> from cuvil_tir.te.examples import matmul
        >>> sch = S.Schedule(matmul(4, 8, 4))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> sch.tensorize(i, "cpu.gemm_4x8x4_f32")
        >>> sch.get_block("C_o").name
        'C_o'
    """
    intrin = TensorIntrin.get(intrin_name) if isinstance(intrin_name, str) else None
    if intrin is None:
        raise schedule_error(ScheduleArgumentError, "tensorize",
                             f"intrin_name must be a registered name (str), found "
                             f"{intrin_name!r}")
    if isinstance(loop_or_block, LoopRV):
        g, name = blockize_path(func, resolve_loop(func, loop_or_block, "tensorize"),
                                "tensorize")
        return tensorize_block_path(g, tree.find_block(g, name), intrin), None
    if isinstance(loop_or_block, BlockRV):
        return tensorize_block_path(func, resolve_block(func, loop_or_block, "tensorize"),
                                    intrin), None
    raise schedule_error(ScheduleArgumentError, "tensorize",
                         f"expected a LoopRV or BlockRV, found {loop_or_block!r}")


__all__ = ["tensorize", "TensorizeMismatchError", "instantiate", "strip_root",
           "tensorize_block_path"]
