"""``annotate_buffer_access``: declare the region a block reads or writes of a buffer.

Region analysis bounds each index of a block's body over the block's variables; an
index it cannot bound well (``x[clamp(floor(vh * 2.0 + 0.5))]``) makes the region the
whole buffer, and ``compute_at`` of its producer then computes all of it per tile.
``annotate_buffer_access(block, i, "read", ranges)`` replaces the ``i``-th read region
with ``ranges(*block_vars)``: per dimension an index ``e`` (one element) or a pair
``(lo, hi)`` (the half-open ``[lo, hi)``).  The block records the annotation
``explicit_read_region`` (``explicit_write_region``) with the buffer index, as TVM does.

The region is a contract the primitives trust, so it is checked: every access of the
body to that buffer must lie inside it, proven from the bounds of the indices or, when
they are not enough, by evaluating the indices and the region at every point of the
block's (constant) domain.  A region that cannot be shown to cover the accesses is
refused (``AnnotationError``).

Example::

    >>> import cuvil_tir as T
    >>> from schedules import Schedule
    >>> X = T.placeholder((5,), name="X")
    >>> sch = Schedule(T.create_prim_func([X, T.compute((5,), lambda i: X[i] - 1.0,
    ...                                                 name="Y")]))
    >>> sch.annotate_buffer_access("Y", 0, "read", lambda vi: ((vi - 1, vi + 2),))
    >>> str(tree.get(sch.func, tree.find_block(sch.func, "Y")).block.reads[0])
    'X[v_i - 1:v_i - 1 + 3]'
"""

from __future__ import annotations

import inspect
import itertools

from cuvil_tir.block_regions import block_accesses
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import GE, LE, IntImm, Var, as_expr
from cuvil_tir.stmt import BufferRegion, Range
from cuvil_tir.visitor import Visitor, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.interp.exprs import ExprCompiler, Frame
from ..analysis import block_path
from ..errors import AnnotationError, fail
from ..primitive import BLOCK, INDEX, Kind, Mismatch, primitive
from .nests import with_fields

PRIM = "annotate_buffer_access"
_ENUMERATE_LIMIT = 1 << 18     # domain points the coverage check may evaluate
KEYS = {"read": "explicit_read_region", "write": "explicit_write_region"}


def _flat(items):
    out = []
    for it in items:
        if isinstance(it, (tuple, list)):
            if len(it) != 2:
                raise Mismatch(f"a range {it!r} is not a pair (lo, hi)")
            out += [it[0], it[1]]
        else:
            out += [it, as_expr(it, "int32") + 1]
    return out


def _ranges(fn):
    """The ranges function in one flat form the trace records: ``(lo0, hi0, lo1, ...)``.
    A function giving only indices is kept as it is (each is one element)."""
    if not callable(fn) or isinstance(fn, type):
        raise Mismatch()
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        raise Mismatch("its parameters cannot be inspected") from None
    out = fn(*[Var(n) for n in names])
    if not isinstance(out, (tuple, list)):
        raise Mismatch("it returns one value; return one index or (lo, hi) per dimension")
    if not any(isinstance(x, (tuple, list)) for x in out):
        return fn
    _flat(out)      # a malformed range fails here, as an argument error

    def flat(*vs):
        return tuple(_flat(fn(*vs)))
    flat.__signature__ = inspect.signature(fn)
    return flat


RANGES = Kind("ranges", "a function of the block's iteration variables giving, per "
              "buffer dimension, an index or a pair (lo, hi)", _ranges)


def _region(func, blk, buf, fn):
    vals = list(fn(*[iv.var for iv in blk.iter_vars]))
    n = len(buf.shape)
    if len(vals) == n:
        pairs = [(as_expr(v, "int32"), None) for v in vals]
    elif len(vals) == 2 * n:
        pairs = [(as_expr(vals[2 * d], "int32"), as_expr(vals[2 * d + 1], "int32"))
                 for d in range(n)]
    else:
        raise fail(AnnotationError, PRIM, f"the ranges give {len(vals)} values for buffer "
                   f"{buf.name!r} of {n} dimension(s); give one index or one (lo, hi) "
                   "pair per dimension", func)
    own = {id(iv.var) for iv in blk.iter_vars}
    dims = []
    for d, (lo, hi) in enumerate(pairs):
        for e in (lo, hi):
            stray = [v.name for v in used_vars(e) if id(v) not in own] if e is not None \
                else []
            if stray:
                raise fail(AnnotationError, PRIM, f"dimension {d} of the region uses "
                           f"{stray}, not iteration variables of block {blk.name!r}", func)
        lo = simplify(lo)
        ext = IntImm(1, lo.dtype) if hi is None else simplify(hi - lo)
        if isinstance(ext, IntImm) and ext.value <= 0:
            raise fail(AnnotationError, PRIM, f"dimension {d} of the region [{lo}, {hi}) "
                       "is empty; give (lo, hi) with hi > lo", func)
        dims.append(Range(lo, ext))
    return BufferRegion(buf, tuple(dims))


class _Indices(Visitor):
    """Index tuples of the accesses to ``buf`` (loads or stores)."""

    def __init__(self, buf, write):
        self.buf, self.write, self.out = buf, write, []

    def visit_BufferLoad(self, ld):
        self.generic_visit(ld)
        if not self.write and ld.buffer is self.buf:
            self.out.append(ld.indices)

    def visit_BufferStore(self, st):
        self.generic_visit(st)
        if self.write and st.buffer is self.buf:
            self.out.append(st.indices)


def _proven(blk, region, write):
    """Whether the bounds of every access prove it inside ``region``."""
    ana = Analyzer(index_no_overflow=True)
    for iv in blk.iter_vars:
        ana.bind(iv.var, iv.dom)
    for a in block_accesses(blk):
        if a.buffer is not region.buffer or a.write != write:
            continue
        for b, r in zip(a.bounds, region.region):
            if b is None or b[0].dtype != r.min.dtype:
                return False
            end = simplify(r.min + r.extent - 1)
            if not (ana.can_prove(LE(r.min, b[0])) and ana.can_prove(GE(end, b[1]))):
                return False
    return True


def _evaluated(blk, region, write):
    """Whether every access is inside ``region`` at every point of the block's domain
    (None: the domain is not constant and small, or an index depends on data)."""
    c = _Indices(region.buffer, write)
    for s in (blk.init, blk.body):
        if s is not None:
            c.visit(s)
    loads = []
    for idx in c.out:
        for e in idx:
            _Loads(loads).visit(e)
    if loads:
        return None
    doms = []
    for iv in blk.iter_vars:
        if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
            return None
        doms.append(range(iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value))
    total = 1
    for d in doms:
        total *= len(d)
    if total > _ENUMERATE_LIMIT:
        return None
    known = {id(iv.var) for iv in blk.iter_vars}
    exprs = [e for idx in c.out for e in idx] + [x for r in region.region
                                                 for x in (r.min, r.extent)]
    if any(id(v) not in known for e in exprs for v in used_vars(e)):
        return None    # an index uses a loop inside the block
    comp = ExprCompiler(Frame())
    slots = []
    with _bound(comp, [iv.var for iv in blk.iter_vars], slots):
        idxs = [[comp.expr(e) for e in idx] for idx in c.out]
        rs = [(comp.expr(r.min), comp.expr(r.extent)) for r in region.region]
        env = comp.frame.env
        for point in itertools.product(*doms):
            for s, x in zip(slots, point):
                env[s] = x
            box = [(lo(), lo() + ext()) for lo, ext in rs]
            for idx in idxs:
                for f, (lo, hi) in zip(idx, box):
                    if not lo <= int(f()) < hi:
                        return False
    return True


class _Loads(Visitor):
    def __init__(self, out):
        self.out = out

    def visit_BufferLoad(self, ld):
        self.out.append(ld)


class _bound:
    """Bind each of ``vars`` to a frame slot for the compiled expressions."""

    def __init__(self, comp, vars_, slots):
        self.comp, self.vars, self.slots, self.ctx = comp, vars_, slots, []

    def __enter__(self):
        for v in self.vars:
            cm = self.comp.binding(v)
            self.slots.append(cm.__enter__())
            self.ctx.append(cm)
        return self

    def __exit__(self, *exc):
        for cm in reversed(self.ctx):
            cm.__exit__(*exc)
        return False


@primitive(PRIM, block=BLOCK, buffer_index=INDEX, gen_new_ranges=RANGES,
           error=AnnotationError)
def annotate_buffer_access(func, block, buffer_index: int, buf_type: str, gen_new_ranges):
    """Replace the block's ``buffer_index``-th read (``buf_type="read"``) or write
    (``"write"``) region by ``gen_new_ranges(*block_vars)``: per dimension an index or
    a pair ``(lo, hi)`` (half-open).  The block is annotated ``explicit_read_region``
    / ``explicit_write_region``.  The region must cover every access of the body to
    that buffer (checked); primitives then size producers and caches from it.

    Before/after ``annotate_buffer_access(B, 0, "read", lambda vi: ((vi - 1, vi + 2),))``::

        T.reads(A[0:8])                    T.reads(A[vi - 1:vi - 1 + 3])
                                           T.block_attr({"explicit_read_region": (0,)})

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
        >>> try:
        ...     annotate_buffer_access(f, BlockRV("B"), 0, "read", lambda vi: (vi + 1,))
        ... except AnnotationError as err:
        ...     print(err.reason[:52])
        the region A[v_i + 1] does not cover what block 'B' 
    """
    if buf_type not in KEYS:
        raise fail(AnnotationError, PRIM, f"argument 3, 'buf_type' to {PRIM}: expected "
                   f"'read' or 'write', found {buf_type!r}")
    bpath = block_path(func, block, PRIM)
    br = tree.get(func, bpath)
    blk = br.block
    pool = blk.reads if buf_type == "read" else blk.writes
    if buffer_index >= len(pool):
        raise fail(AnnotationError, PRIM, f"buffer_index {buffer_index} is out of range: "
                   f"block {blk.name!r} {buf_type}s {len(pool)} buffer(s) "
                   f"{[r.buffer.name for r in pool]}", func)
    buf = pool[buffer_index].buffer
    region = _region(func, blk, buf, gen_new_ranges)
    write = buf_type == "write"
    if not _proven(blk, region, write) and not _evaluated(blk, region, write):
        raise fail(AnnotationError, PRIM, f"the region {region} does not cover what block "
                   f"{blk.name!r} {'writes' if write else 'reads'} of {buf.name!r} (or "
                   "Cuvil cannot show it does: the indices are not bounded inside it, and "
                   "the domain is too large or an index depends on data); primitives "
                   "would compute too little from it", func)
    regions = list(pool)
    regions[buffer_index] = region
    key = KEYS[buf_type]
    ann = dict(blk.annotations)
    marked = tuple(ann.get(key, ()))
    if not any(getattr(m, "value", m) == buffer_index for m in marked):
        marked = marked + (IntImm(buffer_index, "int32"),)
    ann[key] = marked
    new = with_fields(blk, annotations=ann,
                      **{"reads" if not write else "writes": tuple(regions)})
    return tree.replace(func, bpath, with_fields(br, block=new)), None


__all__ = ["annotate_buffer_access"]
