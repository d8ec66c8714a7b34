"""Index maps given as Python functions: how they are called, and what they return.

``transform_layout``, ``transform_block_layout`` and the reindexing primitives take a
function from indices to new indices.  It may name every index (``lambda i, j: (j,
i)``), or gather the leading ones (``lambda *rest, k: (*rest, k // 4, k % 4)``: ``rest``
takes the indices that the named parameters leave over, as TVM's ``IndexMap`` does).
In ``transform_layout``'s map, :data:`AXIS_SEPARATOR` between two results starts a new
physical axis of the buffer (see ``Buffer.axis_separators``).

Example::

    >>> params, exprs = apply_index_map(lambda *rest, k: [*rest, k // 4, k % 4], 3, "A")
    >>> [p.name for p in params], [str(e) for e in exprs]
    (['rest0', 'rest1', 'k'], ['rest0', 'rest1', 'k // 4', 'k % 4'])
"""

from __future__ import annotations

import inspect
import weakref

from cuvil_tir.expr import Cast, IntImm, Var, as_expr
from cuvil_tir.visitor import Mutator, used_vars, substitute
from cuvil_tir.analysis import tree
from cuvil_tir.stmt import Block

from ..errors import LayoutError, schedule_error


class _AxisSeparator:
    """The marker type of :data:`AXIS_SEPARATOR` (one instance)."""

    __slots__ = ()

    def __repr__(self):
        return "AXIS_SEPARATOR"


#: in a ``transform_layout`` index map's results, starts a new physical axis:
#: ``lambda i: (i // 4, AXIS_SEPARATOR, i % 4)`` gives ``axis_separators=[1]``
AXIS_SEPARATOR = _AxisSeparator()

# the number of indices a ``*rest`` map last gathered, so that the trace can record it
# (the function alone does not say how many indices it was called with)
_ARITY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def index_names(fn, ndim: int | None = None) -> list | None:
    """The names of ``fn``'s indices when called with ``ndim`` of them (``ndim=None``:
    the count it was last applied with, for a ``*rest`` map); None when it cannot take
    that many (or does not say: a builtin).

    Example::

        >>> index_names(lambda i, j: (j, i), 2), index_names(lambda *r, k: r, 3)
        (['i', 'j'], ['r0', 'r1', 'k'])
    """
    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None if ndim is None else [f"i{d}" for d in range(ndim)]
    pos = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = [p.name for p in ps if p.kind == p.VAR_POSITIONAL]
    kwonly = [p.name for p in ps if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if not star:
        return pos if ndim is None or len(pos) == ndim else None
    if ndim is None:
        ndim = _ARITY.get(fn)
        if ndim is None:
            return None
    rest = ndim - len(pos) - len(kwonly)
    if rest < 0:
        return None
    try:
        _ARITY[fn] = ndim
    except TypeError:       # not weakly referenceable: a trace cannot record it then
        pass
    return pos + [f"{star[0]}{d}" for d in range(rest)] + kwonly


def call_index_map(fn, params: list):
    """``fn`` applied to ``params`` (one per name :func:`index_names` gave): the
    keyword-only parameters after ``*rest`` take the last ones by name.

    Example::

        >>> i, j = Var("i"), Var("j")
        >>> call_index_map(lambda *r, k: (k, *r), [i, j])
        (j, i)
    """
    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn(*params)
    kwonly = [p.name for p in ps if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if not kwonly:
        return fn(*params)
    head, tail = params[:len(params) - len(kwonly)], params[len(params) - len(kwonly):]
    return fn(*head, **dict(zip(kwonly, tail)))


def apply_index_map(index_map, ndim: int, buf_name: str, prim: str = "transform_layout",
                    what: str = "", separators: bool = False, dtype: str = "int32"):
    """``(params, exprs)``: fresh ``dtype`` vars, one per index of ``index_map``, and
    the index expressions it returns over them; with ``separators=True``, ``(params,
    exprs, axis_separators)`` (the positions of :data:`AXIS_SEPARATOR` markers).
    Refused (``LayoutError``) when the map cannot take ``ndim`` indices or returns
    something else than integers.  ``what`` names the owner in messages (default:
    ``buffer 'buf_name' has``)."""
    what = what or f"buffer {buf_name!r} has"
    names = index_names(index_map, ndim)
    if names is None:
        unit = "dimension" if what.startswith("buffer") else "iteration variable"
        taken = index_names(index_map)
        raise schedule_error(LayoutError, prim,
                             f"index_map takes {len(taken) if taken else 'another number of'}"
                             f" index(es) but {what} {ndim} {unit}(s); write a lambda with "
                             f"one parameter per {unit} (or *rest for the leading ones)")
    params = [Var(n, dtype) for n in names]
    out = call_index_map(index_map, params)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    seps = []
    for k, x in enumerate(outs):
        if x is AXIS_SEPARATOR:
            seps.append(k - len(seps))
    if seps and not separators:
        raise schedule_error(LayoutError, prim, "AXIS_SEPARATOR groups a buffer's axes; "
                             f"only transform_layout takes it, {prim} does not")
    try:
        exprs = [as_expr(x, dtype) for x in outs if x is not AXIS_SEPARATOR]
    except Exception as err:
        raise schedule_error(LayoutError, prim,
                             f"index_map must return integer index expressions, returned "
                             f"{out!r} ({err})") from None
    for x in exprs:
        if x.dtype not in ("int32", "int64"):
            raise schedule_error(LayoutError, prim,
                                 f"index_map returned {x} of dtype {x.dtype}; indices are "
                                 "int32/int64")
    return (params, exprs, tuple(seps)) if separators else (params, exprs)


class _Retype(Mutator):
    def __init__(self, dtype, vmap):
        self.dtype, self.vmap = dtype, vmap

    def visit_IntImm(self, c):
        return IntImm(c.value, self.dtype) if c.dtype in _INDEX and c.dtype != self.dtype \
            else c

    def visit_Var(self, v):
        if id(v) in self.vmap:
            return self.vmap[id(v)]
        return Cast(self.dtype, v) if v.dtype in _INDEX and v.dtype != self.dtype else v


_INDEX = ("int32", "int64")


def retype_index(e, dtype: str, vmap: dict | None = None):
    """The index expression ``e`` computed in ``dtype``: its int32/int64 constants
    retyped, the variables of ``vmap`` (``{id(var): replacement}``) replaced and any
    other index variable of another dtype cast.  This is how a recorded map replays on
    indices of another dtype.

    Example::

        >>> i, j = Var("i"), Var("j", "int64")
        >>> e = retype_index(i // 8 + 1, "int64", {id(i): j})
        >>> str(e), e.dtype
        ('j // T.int64(8) + T.int64(1)', 'int64')
    """
    return _Retype(dtype, vmap or {}).visit(e)


def function_vars(func) -> dict:
    """``{name: var}`` of the variables a function declares: its scalar parameters and
    the size variables of its buffers' shapes.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> A = T.placeholder((n,), name="A")
        >>> f = T.create_prim_func([A, T.compute((n,), lambda i: A[i], name="B")])
        >>> list(function_vars(f))
        ['n']
    """
    out: dict = {}
    for p in func.params:
        if isinstance(p, Var):
            out.setdefault(p.name, p)
    bufs = [p for p in func.params if not isinstance(p, Var)]
    bufs += [b for _, s in tree.walk(func) if isinstance(s, Block) for b in s.alloc_buffers]
    for b in bufs:
        for d in b.shape:
            for v in used_vars(d):
                out.setdefault(v.name, v)
    return out


def bind_free_vars(exprs, params, func, prim: str) -> list:
    """``exprs`` with each variable that is neither an index (``params``) nor one of
    ``func``'s replaced by ``func``'s variable of the same name: a map replayed from a
    trace names the function's size variables by name.  A name the function does not
    have is refused."""
    known = function_vars(func)
    own = {id(v) for v in known.values()} | {id(p) for p in params}
    vmap = {}
    for x in exprs:
        for v in used_vars(x):
            if id(v) in own or v in vmap:
                continue
            target = known.get(v.name)
            if target is None or target.dtype != v.dtype:
                raise schedule_error(LayoutError, prim, f"the index map uses the variable "
                                     f"{v.name!r} ({v.dtype}), which the function does not "
                                     f"declare (it has {sorted(known) or 'none'})")
            vmap[v] = target
    return [substitute(x, vmap) for x in exprs] if vmap else list(exprs)


__all__ = ["AXIS_SEPARATOR", "apply_index_map", "call_index_map", "index_names",
           "retype_index", "function_vars", "bind_free_vars"]
