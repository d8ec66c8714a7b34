"""Statement nodes, including TensorIR blocks.

A ``Block`` is the unit of computation: its iter vars say which iterations are
data-parallel (``"spatial"``) and which reduce (``"reduce"``); ``reads``/``writes`` are
the buffer regions it touches; ``init`` runs once before the first reduction step.
A ``BlockRealize`` instantiates a block with iter values bound to the enclosing loops.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> s = For(i, T.const(0), T.const(8), "serial", BufferStore(A, T.const(0.0), (i,)))
    >>> s.kind
    'serial'
"""

from __future__ import annotations

from typing import Any
import string

from . import dtype as D
from .errors import DTypeError, LoweringError, ShapeError
from .expr import Expr, IntImm, Var, as_expr
from .node import Node, node
from .thread_axes import is_thread_axis, tags


class Stmt(Node):
    """Base of statements.

    Example::

        >>> isinstance(Evaluate(IntImm(0)), Stmt)
        True
    """

    __slots__ = ()


FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
ITER_KINDS = ("spatial", "reduce", "scan", "opaque")


def _annotations(ann) -> tuple:
    if ann is None:
        return ()
    if isinstance(ann, dict):
        ann = ann.items()
    return tuple(sorted((str(k), _plain(v)) for k, v in ann))


def _plain(v):
    # one normal form per annotation value, whoever wrote it (the parser reads TVM's
    # ``[0, 1]`` as a list, a schedule records a tuple): sequences are tuples
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


@node
class Range(Node):
    """The half-open interval ``[min, min + extent)``.

    Example::

        >>> Range.from_extent(8).extent.value
        8
    """

    min: Expr
    extent: Expr

    @staticmethod
    def from_extent(extent, lo=0) -> "Range":
        """``Range(lo, extent)`` from Python numbers or expressions."""
        e = as_expr(extent, "int32")
        return Range(as_expr(lo, e.dtype), e)

    __hash__ = Node.__hash__


@node
class IterVar(Node):
    """A block iteration variable: its domain and kind: ``spatial`` (independent
    instances), ``reduce`` (a commutative reduction), ``scan`` (TensorIR's ordered
    iterator: its instances run in order; no primitive reorders or parallelizes it) or
    ``opaque`` (unknown).

    Example::

        >>> IterVar(Var("vi"), Range.from_extent(4), "spatial").kind
        'spatial'
    """

    var: Var
    dom: Range
    kind: str = "spatial"

    def __post_init__(self):
        if self.kind not in ITER_KINDS:
            raise LoweringError(f"IterVar kind must be one of {ITER_KINDS}, found "
                                f"{self.kind!r}")

    __hash__ = Node.__hash__

    def as_expr(self) -> Var:
        """The iteration variable, so ``ry + 1`` works as in TVM's te."""
        return self.var


def _forward(name):
    def op(self, *args):
        return getattr(self.var, name)(*args)
    op.__name__ = name
    return op


# te code does arithmetic directly on reduce axes (``y + ry``): forward to the variable
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__lt__", "__le__",
              "__gt__", "__ge__", "__neg__", "astype"):
    setattr(IterVar, _name, _forward(_name))


@node
class BufferRegion(Node):
    """A rectangular region of a buffer, one ``Range`` per dimension.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4, 4), "float32", "A")
        >>> len(BufferRegion.full(A).region)
        2
    """

    buffer: Any
    region: tuple

    def __post_init__(self):
        object.__setattr__(self, "region", tuple(self.region))

    @staticmethod
    def full(buffer) -> "BufferRegion":
        """The region covering the whole buffer."""
        return BufferRegion(buffer, tuple(Range(IntImm(0, s.dtype), s) for s in buffer.shape))

    __hash__ = Node.__hash__


@node
class BufferStore(Stmt):
    """``buffer[indices] = value``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> BufferStore(A, T.const(1.0), (T.const(0),)).buffer.name
        'A'
    """

    buffer: Any
    value: Expr
    indices: tuple

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(self.indices))
        if len(self.indices) != len(self.buffer.shape):
            raise ShapeError(f"store to {self.buffer.name}: expected "
                             f"{len(self.buffer.shape)} index(es), found {len(self.indices)}")
        bdt = self.buffer.dtype
        if D.element(self.value.dtype) != D.element(bdt) or \
                self.value.lanes % D.lanes(bdt):
            raise DTypeError(f"store to {self.buffer.name}: expected a value of dtype "
                             f"{bdt}, found {self.value.dtype}; cast it with "
                             f"T.cast(value, '{bdt}')")

    __hash__ = Node.__hash__


@node
class For(Stmt):
    """A loop ``for loop_var in range(min, min + extent)`` of a given kind.

    ``kind`` is one of ``serial parallel vectorized unrolled thread_binding``; a
    ``thread_binding`` loop names its ``thread_tag``, an axis of
    :mod:`cuvil_tir.thread_axes` (``"threadIdx.x"`` …).

    Example::

        >>> import cuvil_tir as T
        >>> For(T.var("i"), T.const(0), T.const(4), "unrolled", Evaluate(T.const(0))).extent.value
        4
    """

    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    thread_tag: str | None = None
    annotations: tuple = ()

    def __post_init__(self):
        if self.kind not in FOR_KINDS:
            raise LoweringError(f"For kind must be one of {FOR_KINDS}, found {self.kind!r}")
        if self.kind == "thread_binding" and not is_thread_axis(self.thread_tag):
            raise LoweringError(f"thread_binding loop needs a registered thread axis "
                                f"({', '.join(tags())}), found {self.thread_tag!r}")
        object.__setattr__(self, "annotations", _annotations(self.annotations))

    __hash__ = Node.__hash__


@node
class SeqStmt(Stmt):
    """Statements run in order.

    Example::

        >>> len(SeqStmt((Evaluate(IntImm(0)), Evaluate(IntImm(1)))).seq)
        2
    """

    seq: tuple

    def __post_init__(self):
        object.__setattr__(self, "seq", tuple(self.seq))

    __hash__ = Node.__hash__

    def __getitem__(self, k: int) -> Stmt:
        """The ``k``-th statement (``seq_stmt[1]`` is ``seq_stmt.seq[1]``).

        Example::

            >>> SeqStmt((Evaluate(IntImm(0)), Evaluate(IntImm(1))))[1].value.value
            1
        """
        return self.seq[k]


def seq(*stmts) -> Stmt:
    """Flatten nested sequences; a single statement is returned as is.

    Example::

        >>> isinstance(seq(Evaluate(IntImm(0))), Evaluate)
        True
    """
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            s = seq(*s)
            if s is None:
                continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if not flat:
        return SeqStmt(())
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


@node
class IfThenElse(Stmt):
    """``if condition: then_case else: else_case`` (``else_case`` may be None).

    Example::

        >>> import cuvil_tir as T
        >>> IfThenElse(T.var("i") < 2, Evaluate(IntImm(0))).else_case is None
        True
    """

    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self):
        if not D.is_bool(self.condition.dtype):
            raise DTypeError(f"if condition must be bool, found {self.condition.dtype}")

    __hash__ = Node.__hash__


@node
class LetStmt(Stmt):
    """Bind ``var = value`` for ``body``.

    Example::

        >>> LetStmt(Var("x"), IntImm(1), Evaluate(IntImm(0))).var.name
        'x'
    """

    var: Var
    value: Expr
    body: Stmt
    __hash__ = Node.__hash__


@node
class Allocate(Stmt):
    """Allocate ``buffer`` (in its scope) for the duration of ``body``.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((4,), "float32", "B", scope="local")
        >>> Allocate(B, Evaluate(IntImm(0))).buffer.scope
        'local'
    """

    buffer: Any
    body: Stmt
    __hash__ = Node.__hash__


@node
class Evaluate(Stmt):
    """Evaluate an expression for its side effects (e.g. an extern call).

    Example::

        >>> Evaluate(IntImm(0)).value.value
        0
    """

    value: Expr
    __hash__ = Node.__hash__


@node
class Block(Stmt):
    """A TensorIR block: iter vars, accessed regions, optional init, local buffers.

    Example::

        >>> blk = Block("B", (), (), (), Evaluate(IntImm(0)))
        >>> blk.name
        'B'
    """

    name: str
    iter_vars: tuple
    reads: tuple
    writes: tuple
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple = ()
    annotations: tuple = ()

    def __post_init__(self):
        for f in ("iter_vars", "reads", "writes", "alloc_buffers"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        object.__setattr__(self, "annotations", _annotations(self.annotations))

    __hash__ = Node.__hash__


@node
class BlockRealize(Stmt):
    """Run ``block`` with its iter vars bound to ``iter_values`` when ``predicate``.

    Example::

        >>> br = BlockRealize((), IntImm(1, "bool"), Block("root", (), (), (), Evaluate(IntImm(0))))
        >>> br.block.name
        'root'
    """

    iter_values: tuple
    predicate: Expr
    block: Block

    def __post_init__(self):
        object.__setattr__(self, "iter_values", tuple(self.iter_values))
        if len(self.iter_values) != len(self.block.iter_vars):
            raise ShapeError(f"block {self.block.name}: {len(self.block.iter_vars)} iter "
                             f"vars but {len(self.iter_values)} iter values")

    __hash__ = Node.__hash__


#: kinds of ``AssertStmt``: which error a failed check raises
ASSERT_KINDS = ("assert", "bounds")


@node
class AssertStmt(Stmt):
    """A run-time check: when ``condition`` is false, execution stops and the caller
    gets ``T.RuntimeCheckError`` (``kind="bounds"``: ``T.BoundsCheckError``) with
    ``message.format(*values)``; nothing after the check runs.

    ``message`` is a ``str.format`` pattern with one ``{}`` per value (literal braces
    doubled); ``values`` are integer scalars read at run time (an index, a size).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> s = AssertStmt(i < 8, "index {} is not below 8", (i,))
        >>> print(T.to_text(s).strip())
        T.assert_(i < 8, "index {} is not below 8", i)
    """

    condition: Expr
    message: str
    values: tuple = ()
    kind: str = "assert"

    def __post_init__(self):
        object.__setattr__(self, "values", tuple(self.values))
        if not D.is_bool(self.condition.dtype) or D.lanes(self.condition.dtype) != 1:
            raise DTypeError(f"assert condition must be a scalar bool, found "
                             f"{self.condition.dtype}")
        if not isinstance(self.message, str):
            raise DTypeError(f"assert message must be a str, found "
                             f"{type(self.message).__name__}")
        holes = sum(1 for _, field, _, _ in string.Formatter().parse(self.message)
                    if field is not None)
        if holes != len(self.values):
            raise ShapeError(f"assert message {self.message!r} has {holes} '{{}}' "
                             f"placeholder(s) but {len(self.values)} value(s) were given; "
                             "double literal braces ('{{')")
        for v in self.values:
            if not (D.is_int(v.dtype) or D.is_uint(v.dtype)) or D.lanes(v.dtype) != 1:
                raise DTypeError(f"assert values must be integer scalars, found "
                                 f"{v.dtype} ({v})")
        if self.kind not in ASSERT_KINDS:
            raise LoweringError(f"assert kind must be one of {ASSERT_KINDS}, found "
                                f"{self.kind!r}")

    __hash__ = Node.__hash__

    def format(self, values) -> str:
        """The failure message with ``values`` (Python ints) filled in.

        Example::

            >>> import cuvil_tir as T
            >>> AssertStmt(T.var("i") < 8, "index {} too big", (T.var("i"),)).format([9])
            'index 9 too big'
        """
        return self.message.format(*(int(v) for v in values))


def assert_(condition, message: str, *values, kind: str = "assert") -> AssertStmt:
    """The statement ``T.assert_(condition, message, *values)`` (see
    :class:`AssertStmt`); Python numbers become int32 constants.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.var("n")
        >>> T.assert_(n > 0, "n = {} must be positive", n).values[0] is n
        True
    """
    return AssertStmt(as_expr(condition, "bool"), message,
                      tuple(as_expr(v, "int32") for v in values), kind)
