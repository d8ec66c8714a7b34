"""The visitor and mutator every pass is built on.

``Visitor.visit(node)`` calls ``visit_<ClassName>`` (or the method of the nearest base
class, e.g. ``visit_BinaryOp``, ``visit_Var`` for a ``SizeVar``), falling back to a
walk over the node's fields.  ``Mutator`` does the same but returns a node: when no
child changed, it returns the *input object itself*, so unchanged subtrees are shared
and ``new is old`` tells a pass nothing happened.  Buffers are definitions: they are
passed to ``visit_buffer`` (identity by default) and not walked into.

Example::

    >>> import cuvil_tir as T
    >>> i, j = T.var("i"), T.var("j")
    >>> e = i * 2 + 1
    >>> str(substitute(e, {i: j}))
    'j * 2 + 1'
    >>> substitute(e, {j: i}) is e
    True
"""

from __future__ import annotations

from .buffer import Buffer
from .expr import Expr, as_expr
from .node import _FIELDS, Node, field_names

#: the class attribute holding a visitor class's own dispatch table (value class -> what
#: ``visit`` calls): each class owns its table, so a class made inside a function (a
#: pass's local ``Visitor``, one per call) takes its table with it when it goes; one
#: module-wide table keyed by class kept every such class alive (a tuning run's parent
#: grew by ~1 MB per candidate)
_TABLE = "_cvl_dispatch"


def _method(visitor_cls, node_cls, generic_name):
    fn = getattr(visitor_cls, generic_name)
    for klass in node_cls.__mro__:
        cand = getattr(visitor_cls, "visit_" + klass.__name__, None)
        if cand is not None:
            return cand
    return fn


def _call_visit_buffer(self, n):
    return self.visit_buffer(n)


def _call_visit_tuple(self, n):
    return self.visit_tuple(n)


def _visit_each(self, n):
    for v in n:
        self.visit(v)


def _nothing(self, n):
    return None


def _itself(self, n):
    return n


def _entry(visitor_cls, value_cls, base) -> object:
    """What ``visit`` calls for a value of ``value_cls``, found once per pair of classes
    (``visit`` runs for every node of every pass: one table lookup, no isinstance
    chain): a node's ``visit_<Class>`` or ``generic_visit``, a buffer's
    ``visit_buffer``, a tuple's walk, and for anything else nothing (a Visitor) or the
    value itself (a Mutator)."""
    if issubclass(value_cls, Node):
        fn = _call_visit_buffer if issubclass(value_cls, Buffer) else \
            _method(visitor_cls, value_cls, "generic_visit")
    elif issubclass(value_cls, tuple):
        fn = _call_visit_tuple if base is Mutator else _visit_each
    else:
        fn = _itself if base is Mutator else _nothing
    visitor_cls.__dict__[_TABLE][value_cls] = fn
    return fn


class Visitor:
    """Read-only traversal; override ``visit_<Class>`` and call ``self.generic_visit``.

    Example::

        >>> import cuvil_tir as T
        >>> class CountVars(Visitor):
        ...     def __init__(self): self.n = 0
        ...     def visit_Var(self, v): self.n += 1
        >>> c = CountVars(); c.visit(T.var("i") + T.var("j")); c.n
        2
    """

    _cvl_dispatch: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._cvl_dispatch = {}   # the class's own table (see _TABLE)

    def visit(self, n):
        fn = self._cvl_dispatch.get(type(n))
        if fn is None:
            fn = _entry(type(self), type(n), Visitor)
        return fn(self, n)

    def generic_visit(self, n):
        for f in _FIELDS.get(type(n)) or field_names(type(n)):
            v = getattr(n, f)
            if isinstance(v, (Node, tuple)):
                self.visit(v)

    def visit_buffer(self, buf):
        """Called for every buffer reference; nothing by default."""
        return None


class Mutator:
    """Rebuilding traversal that shares unchanged subtrees.

    Example::

        >>> import cuvil_tir as T
        >>> class Double(Mutator):
        ...     def visit_IntImm(self, c): return T.const(c.value * 2, c.dtype)
        >>> str(Double().visit(T.var("i") + 3))
        'i + 6'
    """

    _cvl_dispatch: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._cvl_dispatch = {}   # the class's own table (see _TABLE)

    def visit(self, n):
        fn = self._cvl_dispatch.get(type(n))
        if fn is None:
            fn = _entry(type(self), type(n), Mutator)
        return fn(self, n)

    def visit_tuple(self, t: tuple) -> tuple:
        out = [self.visit(v) if isinstance(v, (Node, tuple)) else v for v in t]
        if all(a is b for a, b in zip(out, t)):
            return t
        return tuple(out)

    def generic_visit(self, n):
        names = _FIELDS.get(type(n)) or field_names(type(n))
        vals = []
        changed = False
        for f in names:
            v = getattr(n, f)
            nv = self.visit(v) if isinstance(v, (Node, tuple)) else v
            changed |= nv is not v
            vals.append(nv)
        if not changed:
            return n
        return type(n)(*vals)

    def visit_buffer(self, buf):
        """Map a buffer reference; identity by default."""
        return buf


class _Substitute(Mutator):
    def __init__(self, vmap, bmap):
        self.vmap = vmap
        self.bmap = bmap

    def visit_Var(self, v):
        r = self.vmap.get(v)
        return v if r is None else r

    def visit_buffer(self, buf):
        r = self.bmap.get(buf) if self.bmap else None
        return buf if r is None else r


def substitute(n, vmap: dict, bmap: dict | None = None):
    """Replace variables (and optionally buffers) in an expression or statement.

    Values of ``vmap`` may be expressions or Python numbers.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(substitute(i + 1, {i: 4}))
        '4 + 1'
    """
    if not vmap and not bmap:
        return n
    vm = {k: (v if isinstance(v, Expr) else as_expr(v, k.dtype)) for k, v in vmap.items()}
    return _Substitute(vm, bmap or {}).visit(n)


def post_order_visit(n, fn) -> None:
    """Call ``fn`` on every node below ``n`` (children first), buffers excluded.

    Example::

        >>> import cuvil_tir as T
        >>> seen = []
        >>> post_order_visit(T.var("i") + 1, lambda x: seen.append(type(x).__name__))
        >>> seen
        ['Var', 'IntImm', 'Add']
    """

    _PostOrder(fn).visit(n)


def used_vars(n) -> list:
    """Variables used in ``n`` in order of first use (definitions included).

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> [v.name for v in used_vars(i * j + i)]
        ['i', 'j']
    """
    v = _UsedVars()
    v.visit(n)
    return list(v.seen.values())


# one class each, not one per call: the dispatch cache is keyed by visitor class
class _PostOrder(Visitor):
    def __init__(self, fn):
        self.fn = fn

    def generic_visit(self, node):
        Visitor.generic_visit(self, node)
        self.fn(node)


class _UsedVars(Visitor):
    def __init__(self):
        self.seen: dict = {}

    def visit_Var(self, v):
        self.seen.setdefault(id(v), v)
