"""TVMScript of TVM's lowered GPU TIR: thread environments, ``T.allocate`` statements
and buffers declared over another buffer's data.

TVM prints a function after its GPU passes in this form (its thread-sync tests are
written in it); these read it into ordinary Cuvil IR:

* ``tx = T.env_thread("threadIdx.x")`` declares the thread variable ``tx``;
  ``T.launch_thread(tx, 4)`` launches it for the rest of the suite: a loop
  ``for tx in T.thread_binding(4, thread="threadIdx.x")`` around what follows;
* ``B = T.allocate([24], "float32", "shared")`` allocates for the rest of the suite
  (an ``Allocate`` whose body is what follows);
* ``B_1 = T.Buffer((24,), data=B)`` and ``A_1 = T.Buffer((16,), data=A.data)``
  declare a buffer over existing memory: the same buffer when the shape is the same,
  else a *reshaped view* (``A_1[i]`` of a ``(4, 4)`` buffer ``A`` is ``A[i // 4, i %
  4]``, row-major, as the memory is laid out);
* ``scope="shared.dyn"`` (TVM's dynamic shared memory) is ``"shared"``: Cuvil moves a
  kernel's shared memory to dynamic shared memory by itself beyond 48 KB.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4, 4), "float32")):
    ...     tx = T.env_thread("threadIdx.x")
    ...     T.launch_thread(tx, 16)
    ...     A_1 = T.Buffer((16,), data=A.data)
    ...     A_1[tx] = T.float32(0)
    ... ''')
    >>> print(f.body)
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        A[tx // 4, tx % 4] = T.float32(0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..buffer import Buffer
from ..errors import CuvilError
from ..expr import Expr, IntImm, Var
from ..stmt import Allocate, BufferRegion, Range
from .evaluate import Spec, make_access, to_expr

#: TVM's scope names read as another Cuvil scope
SCOPE_ALIASES = {"shared.dyn": "shared"}


@dataclass(frozen=True)
class EnvThread:
    """``T.env_thread(tag)`` bound to a name: the variable a ``T.launch_thread`` binds."""

    tag: str
    var: Var


class ReshapedView:
    """A buffer declared over another's memory with another shape (row-major)."""

    is_buffer_view = True

    def __init__(self, name: str, source: Buffer, shape: tuple):
        self.name = name
        self.source = source
        self.view_shape = shape
        self.dtype = source.dtype
        self.region = BufferRegion.full(source).region
        self.lead = 0

    def getitem(self, idx):
        if any(isinstance(ix, Range) for ix in idx):
            raise CuvilError(f"{self.name} is a reshaped view of {self.source.name}: index "
                             "it element by element, or slice the source buffer")
        flat = None
        for ix, st in zip(idx, _strides(self.view_shape)):
            term = to_expr(ix, "int32") * st if st != 1 else to_expr(ix, "int32")
            flat = term if flat is None else flat + term
        flat = flat if flat is not None else IntImm(0, "int32")
        out = []
        for d, (n, st) in enumerate(zip(self.source.shape, _strides(self.source.shape))):
            part = flat // st if st != 1 else flat
            out.append(part % n if d > 0 else part)
        return make_access(self.source, out)

    def full(self) -> BufferRegion:
        return BufferRegion.full(self.source)

    def elem_offset(self) -> Expr:
        return IntImm(0, "int32")

    def __repr__(self) -> str:
        return f"{self.name} (a reshaped view of {self.source.name})"


def _strides(shape) -> list:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc = acc * n
    return list(reversed(out))


def _const_shape(shape) -> list | None:
    vals = [s.value if isinstance(s, IntImm) else s for s in shape]
    return vals if all(isinstance(v, int) for v in vals) else None


class TVMLoweredMixin:
    """The Builder's statements of TVM's lowered GPU TIR (module docstring)."""

    def b_env_thread(self, tag):
        return Spec("env_thread", (tag,))

    def env_thread(self, name: str, v: Spec, t):
        tag = v.args[0] if v.args else v.kwargs.get("thread_tag")
        if not isinstance(tag, str):
            raise self.error("T.env_thread expects a thread tag, e.g. "
                             "T.env_thread(\"threadIdx.x\")", t)
        self.bind(name, EnvThread(tag, Var(name, "int32")))

    def allocate_rest(self, name: str, v: Spec, ctx, rest, t):
        """``B = T.allocate(...)``: an Allocate of ``B`` around the rest of the suite."""
        buf = self.make_buffer(name, v, t)
        self.let_rest = Allocate(buf, self.rest_of_suite(buf, "buffer", ctx, rest))
        return "consumed"

    def buffer_over_data(self, name: str, data, shape, dtype, t):
        """``T.Buffer(shape, dtype, data=...)`` over a ``T.allocate``'d buffer, a
        constant or another buffer's ``.data``: that buffer, or a reshaped view."""
        source = data.buffer if isinstance(data, BufferRegion) else data
        if isinstance(data, BufferRegion) and \
                BufferRegion.full(source).region != data.region:
            raise self.error(f"{name}: data= of a part of {source.name}; declare it over "
                             f"the whole buffer ({source.name}.data)", t)
        shape = tuple(to_expr(s, "int32") for s in
                      (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if dtype is not None and str(dtype) != source.dtype:
            raise self.error(f"{name}: declared {dtype} over {source.name} of "
                             f"{source.dtype}; Cuvil does not reinterpret memory", t)
        if [str(s) for s in shape] == [str(s) for s in source.shape]:
            self.bind(name, source, "buffer")
            return None
        a, b = _const_shape(shape), _const_shape(source.shape)
        if a is None or b is None or math.prod(a) != math.prod(b):
            raise self.error(f"{name}: declared with shape {tuple(str(s) for s in shape)} "
                             f"over {source.name} of shape "
                             f"{tuple(str(s) for s in source.shape)}; a view over another "
                             "buffer's data needs constant shapes of the same size", t)
        self.bind(name, ReshapedView(name, source, shape), "buffer")
        return None


__all__ = ["EnvThread", "ReshapedView", "SCOPE_ALIASES", "TVMLoweredMixin"]
