"""Buffer loads, stores and allocations for the interpreter, with bounds checks.

Every access checks each index against the array's shape and raises
:class:`~cuvil_tir.LoweringError` naming the buffer and the index: numpy's negative
indexing would otherwise wrap silently.  A vector index (a ``Ramp``, or any vector
expression) makes a vector access: one element per lane.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> from cuvil_tir.interp.exprs import ExprCompiler, Frame
    >>> A = T.decl_buffer((4,), "float32", "A")
    >>> c = ExprCompiler(Frame())
    >>> with c.buffer_binding(A) as k:
    ...     c.frame.bufs[k] = np.arange(4, dtype="float32")
    ...     f = c.expr(A[T.Ramp(T.const(1), T.const(1), 3)])
    ...     [float(x) for x in f()]
    [1.0, 2.0, 3.0]
"""

from __future__ import annotations

import numpy as np

from .. import dtype as D
from ..errors import LoweringError
from . import scalar as S


def _oob(kind: str, buf, idx, shape):
    idx_text = ", ".join(str(i) for i in idx)
    shape_text = ", ".join(str(s) for s in shape)
    return LoweringError(f"out-of-bounds {kind} buffer {buf.name}: index [{idx_text}] is "
                         f"outside its shape ({shape_text})")


def _in_bounds(idx, shape) -> bool:
    for i, n in zip(idx, shape):
        if not 0 <= i < n:
            return False
    return True


def _reader(dt: str):
    """``read(array, index_tuple) -> value`` for element dtype ``dt``."""
    conv = S.load_converter(dt)
    if conv is None:
        return lambda a, idx: a[idx]
    if D.element(dt) == "bfloat16":
        table = S._BF16_TO_F32
        return lambda a, idx: table[a.item(idx)]
    return lambda a, idx: a.item(idx)


def _lane_indices(vals, n: int):
    """Per-lane index tuples from index values that are ints or n-tuples."""
    cols = [v if isinstance(v, tuple) else (int(v),) * n for v in vals]
    return list(zip(*cols))


def compile_load(c, e):
    """The closure of a ``BufferLoad`` (scalar or vector)."""
    buf = e.buffer
    k = c.buffer(buf, e)
    bufs = c.frame.bufs
    fs = [c.expr(ix) for ix in e.indices]
    read = _reader(buf.dtype)
    n = e.lanes
    if n > 1:
        def vload():
            a = bufs[k]
            shape = a.shape
            out = []
            for idx in _lane_indices([f() for f in fs], n):
                if not _in_bounds(idx, shape):
                    raise _oob("load from", buf, idx, shape)
                out.append(read(a, idx))
            return tuple(out)
        return vload
    if len(fs) == 1:
        (f0,) = fs

        def load1():
            a = bufs[k]
            i = f0()
            if 0 <= i < a.shape[0]:
                return read(a, i)
            raise _oob("load from", buf, (i,), a.shape)
        return load1
    if len(fs) == 2:
        f0, f1 = fs

        def load2():
            a = bufs[k]
            i, j = f0(), f1()
            s = a.shape
            if 0 <= i < s[0] and 0 <= j < s[1]:
                return read(a, (i, j))
            raise _oob("load from", buf, (i, j), s)
        return load2

    def load():
        a = bufs[k]
        idx = tuple(f() for f in fs)
        if _in_bounds(idx, a.shape) and len(idx) == a.ndim:
            return read(a, idx)
        raise _oob("load from", buf, idx, a.shape)
    return load


def compile_masked_load(c, e):
    """``f(mask)`` loading only the lanes of a vector ``BufferLoad`` where ``mask``
    holds (the others read as 0), so a guarded vector load never touches the lanes its
    guard excludes."""
    buf = e.buffer
    k = c.buffer(buf, e)
    bufs = c.frame.bufs
    fs = [c.expr(ix) for ix in e.indices]
    read = _reader(buf.dtype)
    zero = S.to_dtype(buf.dtype)(0)
    n = e.lanes

    def masked(mask):
        a = bufs[k]
        shape = a.shape
        out = []
        for idx, m in zip(_lane_indices([f() for f in fs], n), mask):
            if not m:
                out.append(zero)
            elif _in_bounds(idx, shape):
                out.append(read(a, idx))
            else:
                raise _oob("load from", buf, idx, shape)
        return tuple(out)
    return masked


def compile_store(c, s):
    """The closure of a ``BufferStore`` (scalar or vector)."""
    buf = s.buffer
    k = c.buffer(buf, s)
    bufs = c.frame.bufs
    fs = [c.expr(ix) for ix in s.indices]
    fv = c.expr(s.value)
    conv = S.store_converter(buf.dtype)
    n = max([ix.lanes for ix in s.indices] + [s.value.lanes])
    if n > 1:
        vec_value = s.value.lanes > 1

        def vstore():
            a = bufs[k]
            v = fv()
            vals = v if vec_value else (v,) * n
            shape = a.shape
            for idx, x in zip(_lane_indices([f() for f in fs], n), vals):
                if not _in_bounds(idx, shape):
                    raise _oob("store to", buf, idx, shape)
                a[idx] = conv(x) if conv else x
        return vstore
    if len(fs) == 1:
        (f0,) = fs

        def store1():
            a = bufs[k]
            i = f0()
            v = fv()
            if not 0 <= i < a.shape[0]:
                raise _oob("store to", buf, (i,), a.shape)
            a[i] = conv(v) if conv else v
        return store1

    def store():
        a = bufs[k]
        idx = tuple(f() for f in fs)
        v = fv()
        if not (_in_bounds(idx, a.shape) and len(idx) == a.ndim):
            raise _oob("store to", buf, idx, a.shape)
        a[idx] = conv(v) if conv else v
    return store


def compile_shape(c, buf):
    """A closure giving ``buf``'s shape as a tuple of non-negative ints."""
    fs = [c.expr(d) for d in buf.shape]

    def shape():
        dims = tuple(int(f()) for f in fs)
        if any(d < 0 for d in dims):
            raise LoweringError(f"buffer {buf.name}: negative extent in shape {dims}")
        return dims
    return shape


def new_array(buf, dims):
    """Fresh zero-filled storage for ``buf`` (bfloat16 as uint16 bits).

    Example::

        >>> import cuvil_tir as T
        >>> new_array(T.decl_buffer((2,), "bfloat16", "X"), (2,)).dtype
        dtype('uint16')
    """
    return np.zeros(dims, D.to_numpy(buf.dtype))
