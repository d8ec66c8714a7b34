"""The calling signature of a built function, recorded from the *unlowered* PrimFunc.

Lowering flattens buffers, so shapes, dtypes and the symbolic sizes users see are
read before it: one :class:`ParamSpec` per parameter (buffer or scalar) and the
symbolic size variables in ABI order (first use in the parameters' shapes).

Example::

    >>> import cuvil_tir as T
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n, 4), name="A")
    >>> B = T.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    >>> sig = Signature.from_func(T.create_prim_func([A, B]))
    >>> [(p.name, p.writes) for p in sig.params], [v.name for v in sig.size_vars]
    ([('A', False), ('B', True)], ['n'])
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import IntImm, Var
from cuvil_tir.op import extern_writes
from cuvil_tir.stmt import BufferRegion
from cuvil_tir.visitor import Visitor, used_vars


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``kind`` is ``"buffer"`` or ``"scalar"``.

    ``shape`` entries are Python ints (constant dims) or expressions (symbolic).

    Example::

        >>> ParamSpec(0, "A", "buffer", "float32", (4,), False).rank
        1
    """

    index: int
    name: str
    kind: str
    dtype: str
    shape: tuple = ()
    writes: bool = False
    var: Var | None = None

    @property
    def rank(self) -> int:
        """Number of dimensions (0 for scalars)."""
        return len(self.shape)

    def shape_text(self) -> str:
        """The shape as users wrote it: ``(n, 128)``."""
        dims = [str(d) for d in self.shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


class _Stores(Visitor):
    def __init__(self):
        self.ids: set[int] = set()

    def visit_BufferStore(self, s):
        self.ids.add(id(s.buffer))
        self.generic_visit(s)

    def visit_Block(self, blk):
        for region in blk.writes:
            self.ids.add(id(region.buffer))
        self.generic_visit(blk)

    def visit_Call(self, c):
        # an extern call may write the regions it is given, unless it says otherwise
        # (pure, reads, or writes:K naming the ones it writes)
        if ops.callee(c) is not None:
            written = extern_writes(c)
            for k, a in enumerate(c.args[2:]):
                if isinstance(a, BufferRegion) and (written is None or k in written):
                    self.ids.add(id(a.buffer))
        self.generic_visit(c)


def stored_buffers(node) -> set[int]:
    """``id()`` of every buffer ``node`` writes (stores and block write regions).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((1,), "float32", "A")
        >>> id(A) in stored_buffers(T.BufferStore(A, T.const(0.0), (T.const(0),)))
        True
    """
    v = _Stores()
    v.visit(node)
    return v.ids


@dataclass(frozen=True)
class Signature:
    """Name, parameters and symbolic sizes of a built function.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> Signature.from_func(f).params[0].shape
        (2,)
    """

    name: str
    params: tuple
    size_vars: tuple
    #: the function declared (attribute ``cuvil.allow_inplace``) that its outputs may
    #: share memory with its inputs; otherwise overlapping arguments are refused
    allow_inplace: bool = False

    @staticmethod
    def from_func(func, lowered=None, name: str | None = None) -> "Signature":
        """Read the signature of ``func``; ``lowered`` adds the stores lowering made."""
        writes = stored_buffers(func.body)
        low_writes = stored_buffers(lowered.body) if lowered is not None else set()
        scalars = {id(p) for p in func.params if isinstance(p, Var)}
        params, sizes = [], []
        for k, p in enumerate(func.params):
            if isinstance(p, Buffer):
                shape = tuple(d.value if isinstance(d, IntImm) else d for d in p.shape)
                low = lowered.params[k] if lowered is not None and \
                    k < len(lowered.params) else None
                w = id(p) in writes or (low is not None and id(low) in low_writes)
                params.append(ParamSpec(k, p.name, "buffer", p.dtype, shape, w))
                for v in used_vars(p.shape):
                    if id(v) not in scalars and all(v is not s for s in sizes):
                        sizes.append(v)
            else:
                params.append(ParamSpec(k, p.name, "scalar", p.dtype, (), False, p))
        return Signature(name or func.name, tuple(params), tuple(sizes),
                         bool(func.attr("cuvil.allow_inplace", False)))

    @property
    def buffers(self) -> tuple:
        """The buffer parameters."""
        return tuple(p for p in self.params if p.kind == "buffer")

    def describe(self) -> str:
        """``name(A: float32(n, 4), B: float32(n, 4))``, for messages and reprs."""
        parts = []
        for p in self.params:
            if p.kind == "buffer":
                parts.append(f"{p.name}: {p.dtype}{p.shape_text()}")
            else:
                parts.append(f"{p.name}: {p.dtype}")
        return f"{self.name}({', '.join(parts)})"


def storage_dtype(dt: str):
    """The numpy dtype arrays of element dtype ``dt`` must have.

    Example::

        >>> storage_dtype("bfloat16")
        dtype('uint16')
    """
    return D.to_numpy(dt)
