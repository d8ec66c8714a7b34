"""The check of a block's declared regions against what its body accesses.

A block's ``reads``/``writes`` are a contract the schedule primitives rely on
(``compute_at`` sizes the producer from them).  A hand-written ``T.reads(B[vi])`` whose
body reads ``B[vi + 1]`` would let a primitive compute too little, silently; so the
parser and :class:`schedules.Schedule` check declared regions against the body (the
accesses: :mod:`cuvil_tir.block_regions`).

A block without iterators that declares no regions (the root) is not checked.
The check reports only what is provably wrong: a buffer accessed but not declared, or
an access whose bound is provably outside the declared range.  Accesses under a
condition (``if``, ``T.if_then_else``) are not bounded, since the guard may keep them
inside.  An interval bound overshoots where a ``T.where`` cuts a nest through a
compound of its loops: before an access is reported outside, its exact bounds over the
points of a small nest are taken (:mod:`cuvil_tir.region_points`).  A nested block's
declared region may be looser than what it accesses (a blockized block whose inner
``T.where`` cuts its tile): before it is reported outside its parent's, the accesses
of its body are checked in its place.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((7,), lambda i: A[i] + A[i + 1], name="B")])
    >>> check_block_regions(f.body.block.body.body.block)          # root > loop > B
"""

from __future__ import annotations

from .block_regions import Access, _accesses, _analyzer
from .errors import LoweringError
from .expr import GT, LT, IntImm
from .function import PrimFunc
from .printer import to_text
from .region_points import NEVER
from .node import field_names
from .stmt import Block, For, Range, Stmt
from .analysis.tree import walk


def check_block_regions(block: Block, outer: dict | None = None) -> None:
    """Raise ``LoweringError`` when ``block``'s body provably accesses outside its
    declared ``reads``/``writes`` (see the module docstring).  ``outer``: ``{Var:
    Range}`` of the loops and iterators around the block, where known: the points of
    small nests (:mod:`cuvil_tir.region_points`) may then name them; they never make
    an access outside.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> B = T.decl_buffer((8,), "float32", "B")
        >>> v = T.var("vi")
        >>> blk = T.Block("B", (T.IterVar(v, T.Range.from_extent(7), "spatial"),),
        ...               (T.BufferRegion(A, (T.Range(v, T.const(1)),)),),
        ...               (T.BufferRegion(B, (T.Range(v, T.const(1)),)),),
        ...               T.BufferStore(B, A[v + 1], (v,)))
        >>> try:
        ...     check_block_regions(blk)
        ... except T.LoweringError as err:
        ...     print(err.message.splitlines()[0])
        block 'B' reads A[vi + 1] outside its declared T.reads(A[vi]): dimension 0 reaches vi + 1, past the declared end vi
    """
    if not block.iter_vars and not block.reads and not block.writes:
        return      # the root (or an opaque block) declaring nothing: nothing to trust
    ana = _analyzer(block)
    for a in _accesses(block, ana, outer):
        declared = _declared(block, a)
        kind = "writes" if a.write else "reads"
        if declared is None:
            raise LoweringError(
                f"block '{block.name}' {kind} {a.text} but its T.{kind}(...) does not name "
                f"buffer '{a.buffer.name}'\n  fix: add {a.buffer.name}[...] to "
                f"T.{kind}, or leave T.reads/T.writes out to have them inferred")
        what = _provably_outside(a, declared, ana)
        if what is not None:
            _outside(block, a, kind, declared, *what)


def _provably_outside(a: Access, declared, ana):
    """``(dimension, what)`` where ``a`` leaves ``declared`` by its interval bounds and
    neither its points nor (a nested block's region) its body's accesses keep it in."""
    what = _outside_by(a, declared, ana)
    if what is None or _inside_by_points(a, declared, ana) or \
            _inside_through_body(a, declared, ana):
        return None
    return what


def _inside_by_points(a: Access, declared, ana) -> bool:
    """Whether the exact bounds of ``a`` over the points of a small nest (see
    :mod:`cuvil_tir.region_points`) keep it in ``declared``."""
    got = a.exact() if a.exact is not None else None
    if got is None:
        return False
    if NEVER in got:
        return True
    dims = tuple(b if p is None else (IntImm(p[0], r.min.dtype), IntImm(p[1], r.min.dtype))
                 for b, p, r in zip(a.bounds, got, declared.region))
    return _outside_by(Access(a.buffer, dims, a.write, a.guarded, a.text), declared,
                       ana) is None


def _outside_by(a: Access, declared, ana):
    """``(dimension, what)`` where ``a`` provably leaves ``declared``, else None."""
    if a.guarded:
        return None
    for d, (b, r) in enumerate(zip(a.bounds, declared.region)):
        if b is None:
            continue
        lo, hi = b
        end = ana.fixed_simplify(r.min + r.extent - 1)
        if lo is not None and lo.dtype == r.min.dtype and ana.fixed_prove(LT(lo, r.min)):
            return d, (f"starts at {to_text(lo)}, before the declared start "
                       f"{to_text(r.min)}")
        if hi is not None and hi.dtype == end.dtype and ana.fixed_prove(GT(hi, end)):
            return d, f"reaches {to_text(hi)}, past the declared end {to_text(end)}"
    return None


def _inside_through_body(a: Access, declared, ana) -> bool:
    """Whether the accesses of the body of the nested block ``a`` comes from (its
    declared region overshooting what the body accesses) all stay in ``declared``."""
    if a.inner is None:
        return False
    for b in a.inner():
        if b.buffer is a.buffer and b.write == a.write and \
                _provably_outside(b, declared, ana) is not None:
            return False
    return True


def _declared(block: Block, a: Access):
    # a load of a buffer the block writes may be covered by its write region
    # (the update of a reduction reads its own output)
    pools = (block.writes,) if a.write else (block.reads, block.writes)
    for pool in pools:
        for r in pool:
            if r.buffer is a.buffer:
                return r
    return None


def _outside(block, a, kind, declared, d, what):
    raise LoweringError(
        f"block '{block.name}' {kind} {a.text} outside its declared "
        f"T.{kind}({to_text(declared)}): dimension {d} {what}\n  fix: declare the "
        f"region the body {kind[:-1]}s, or leave T.reads/T.writes out to have them "
        "inferred; a primitive such as compute_at trusts the declared regions")


def verify_block_regions(func: PrimFunc, since: PrimFunc | None = None) -> PrimFunc:
    """Check every block of ``func`` with :func:`check_block_regions`; returns ``func``.
    With ``since`` (the function ``func`` was made from), only the blocks that are not
    in ``since`` itself are checked: IR is immutable, and a statement a transform left
    alone (the same object, everything under it with it) was checked there, so the
    walk does not enter it.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> verify_block_regions(f) is f
        True
    """
    known = set() if since is None else {id(s) for _, s in walk(since)}
    # the loops and iterators around each block, as the parser passes them: the check
    # then reads a function as it reads the function's text
    _check_new(func.body, {}, known)
    return func


def _check_new(stmt, outer: dict, known: set) -> None:
    """Check the blocks under ``stmt`` that are not in ``known`` (ids of statements
    already checked), with ``outer`` the loops and iterators around ``stmt``.  Only
    statements are walked: no block lives inside an expression."""
    if id(stmt) in known:
        return
    if isinstance(stmt, For):
        _check_new(stmt.body, {**outer, stmt.loop_var: Range(stmt.min, stmt.extent)},
                   known)
        return
    if isinstance(stmt, Block):
        check_block_regions(stmt, outer)
        inner = {**outer, **{iv.var: iv.dom for iv in stmt.iter_vars}}
        for part in (stmt.init, stmt.body):
            if part is not None:
                _check_new(part, inner, known)
        return
    for name in field_names(type(stmt)):
        v = getattr(stmt, name)
        if isinstance(v, Stmt):
            _check_new(v, outer, known)
        elif name == "seq":
            for s in v:
                _check_new(s, outer, known)


__all__ = ["check_block_regions", "verify_block_regions"]
