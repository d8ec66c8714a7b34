"""Capture (closure) analysis: what a statement uses from outside it.

Halide calls it a *closure*: to run a statement somewhere else (a thread of a pool, a
GPU kernel, an accelerator program) every buffer and every scalar it refers to but
does not define must be passed to it.  :func:`capture` finds them once, for every
outlining in Cuvil (:mod:`cuvil_tir.transform.outline`):

* **scalars**: variables used and not bound inside the statement (loop, let, block
  iteration variables are bound; so are the ``bound`` ones given by the caller);
* **buffers**: buffers read or written and not allocated inside it (``Allocate``,
  a block's ``alloc_buffers``), each with its *effect*: ``"read"``, ``"write"`` or
  ``"readwrite"``.  A load reads, a store writes, a buffer region passed to a call
  has the effect the op registry (or ``T.call_extern``'s ``effect``) declares, a tile
  op (``tiles`` in the registry) writes the tiles it declares written, a block's
  ``reads``/``writes`` regions read/write.

Both come in order of first use.  The size of an allocation inside the statement is
computed where it is, so its shape's variables are used.  With ``shapes=True`` the
variables in the shapes and strides of the captured buffers count as used too (a
function taking the buffers as parameters then declares their shapes from its own
parameters).

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> B = T.decl_buffer((8,), "float32", "B")
    >>> i, x = T.var("i"), T.var("x")
    >>> c = capture(T.For(i, T.const(0), T.const(8), "serial",
    ...                   T.BufferStore(B, A[i] * T.cast(x, "float32"), (i,))))
    >>> [b.name for b in c.buffers], [v.name for v in c.scalars], c.effect(B)
    (['B', 'A'], ['x'], 'write')
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ops
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import BufferLoad, Call
from ..ops.gpu import tiles_of
from ..stmt import BufferRegion
from ..visitor import Visitor

#: the effects a captured buffer may have
BUFFER_EFFECTS = ("read", "write", "readwrite")
# what an op's declared effect does to the buffer regions it is given
_OP_ACCESS = {"pure": (True, False), "reads": (True, False), "writes": (False, True),
              "barrier": (False, False), "opaque": (True, True)}


@dataclass(frozen=True)
class Capture:
    """What a statement uses from outside it (:func:`capture`).

    ``buffers`` and ``scalars`` in order of first use; ``effects[k]`` is the effect
    on ``buffers[k]``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> c = Capture((A,), (), ("readwrite",))
        >>> c.reads(A), c.writes(A), [b.name for b in c.written]
        (True, True, ['A'])
    """

    buffers: tuple = ()
    scalars: tuple = ()
    effects: tuple = ()

    def effect(self, buf: Buffer) -> str:
        """The effect on captured buffer ``buf``; a buffer not captured is a
        ``LoweringError``."""
        for b, e in zip(self.buffers, self.effects):
            if b is buf:
                return e
        raise LoweringError(f"capture: buffer {buf.name} is not used by the statement; "
                            f"it uses {', '.join(b.name for b in self.buffers) or 'none'}")

    def reads(self, buf: Buffer) -> bool:
        """Whether the statement reads ``buf``."""
        return self.effect(buf) != "write"

    def writes(self, buf: Buffer) -> bool:
        """Whether the statement writes ``buf``."""
        return self.effect(buf) != "read"

    @property
    def written(self) -> tuple:
        """The captured buffers the statement writes."""
        return tuple(b for b, e in zip(self.buffers, self.effects) if e != "read")

    def ordered(self, first) -> "Capture":
        """The same capture with the buffers and scalars found in ``first`` (a
        function's parameters) leading, in its order; the others keep their order.

        Example::

            >>> import cuvil_tir as T
            >>> A, B = (T.decl_buffer((4,), "float32", n) for n in "AB")
            >>> [b.name for b in Capture((B, A), (), ("read", "write")).ordered([A, B]).buffers]
            ['A', 'B']
        """
        rank = {id(p): k for k, p in enumerate(first)}

        def key(pair):
            return rank.get(id(pair[1][0]), len(rank)), pair[0]
        bufs = sorted(enumerate(zip(self.buffers, self.effects)), key=key)
        scalars = sorted(enumerate((v,) for v in self.scalars), key=key)
        return Capture(tuple(b for _, (b, _) in bufs), tuple(v for _, (v,) in scalars),
                       tuple(e for _, (_, e) in bufs))


def capture(stmt, bound=(), shapes: bool = False) -> Capture:
    """The buffers and scalars ``stmt`` uses from outside it (module docstring);
    the variables in ``bound`` count as defined.  A definition covers its scope only:
    a loop's bounds, a let's value and an allocation's size are outside it.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> A = T.decl_buffer((n,), "float32", "A")
        >>> s = T.BufferStore(A, T.float32(0), (T.const(0),))
        >>> [v.name for v in capture(s).scalars], [v.name for v in capture(s, shapes=True).scalars]
        ([], ['n'])
    """
    found = _Uses()
    for v in bound:
        found.bind(v)
    found.visit(stmt)
    bufs = list(found.bufs.values())
    if shapes:
        for b in bufs:
            found.visit(b.shape)
            found.visit(b.strides)
    return Capture(tuple(bufs), tuple(found.vars.values()),
                   tuple(_effect(found.access[id(b)]) for b in bufs))


def _effect(access) -> str:
    read, write = access
    if read and write:
        return "readwrite"
    return "write" if write else "read"


def call_access(call: Call) -> tuple:
    """``(reads, writes)``: what ``call`` does to the buffer regions it is given, from
    the op registry (``T.call_extern``: its ``effect`` argument).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "int8", "A")
        >>> call_access(T.call_extern("int32", "f", T.BufferRegion.full(A), effect="reads"))
        (True, False)
    """
    return _OP_ACCESS.get(ops.call_effect(call), (True, True))


class _Uses(Visitor):
    """Free variables and buffers, with scopes: ``bound``/``own`` count the
    definitions enclosing the node being visited."""

    def __init__(self):
        self.vars: dict = {}
        self.bound: dict = {}
        self.bufs: dict = {}
        self.access: dict = {}
        self.own: dict = {}

    def bind(self, v) -> None:
        self.bound[id(v)] = self.bound.get(id(v), 0) + 1

    def unbind(self, v) -> None:
        self.bound[id(v)] -= 1

    def visit_Var(self, v):
        if not self.bound.get(id(v)):
            self.vars.setdefault(id(v), v)

    def use(self, b, read: bool, write: bool) -> None:
        if self.own.get(id(b)):
            return
        self.bufs.setdefault(id(b), b)
        r, w = self.access.get(id(b), (False, False))
        self.access[id(b)] = (r or read, w or write)

    def visit_buffer(self, b):
        # a buffer reached without an access (a declaration, a region of a pure call)
        self.use(b, False, False)

    def visit_BufferLoad(self, e):
        self.use(e.buffer, True, False)
        self.visit(e.indices)

    def visit_BufferStore(self, s):
        self.use(s.buffer, False, True)
        self.visit(s.value)
        self.visit(s.indices)

    def visit_Call(self, e):
        read, write = call_access(e)
        for a in e.args:
            if isinstance(a, BufferRegion):
                self.use(a.buffer, read, write)
        for t in tiles_of(e):      # a tile op writes through the element it loads
            arg = e.args[t.arg]
            if t.writes and isinstance(arg, BufferLoad):
                self.use(arg.buffer, False, True)
        self.generic_visit(e)

    def scoped(self, v, outside, inside) -> None:
        self.visit(outside)
        self.bind(v)
        self.visit(inside)
        self.unbind(v)

    def visit_For(self, s):
        self.scoped(s.loop_var, (s.min, s.extent), s.body)

    def visit_LetStmt(self, s):
        self.scoped(s.var, s.value, s.body)

    def visit_Let(self, e):
        self.scoped(e.var, e.value, e.body)

    def owning(self, bufs, inside) -> None:
        # an allocation's size is computed where it is: its shape's variables are used
        for b in bufs:
            self.visit(b.shape)
            self.visit(b.strides)
        for b in bufs:
            self.own[id(b)] = self.own.get(id(b), 0) + 1
        inside()
        for b in bufs:
            self.own[id(b)] -= 1

    def visit_Allocate(self, s):
        self.owning((s.buffer,), lambda: self.visit(s.body))

    def visit_Block(self, b):
        for iv in b.iter_vars:
            self.visit(iv.dom)
        for iv in b.iter_vars:
            self.bind(iv.var)

        def inside():
            for r in b.reads:
                self.use(r.buffer, True, False)
                self.visit(r.region)
            for r in b.writes:
                self.use(r.buffer, False, True)
                self.visit(r.region)
            self.visit(b.body)
            if b.init is not None:
                self.visit(b.init)
        self.owning(b.alloc_buffers, inside)
        for iv in b.iter_vars:
            self.unbind(iv.var)


__all__ = ["BUFFER_EFFECTS", "Capture", "call_access", "capture"]
