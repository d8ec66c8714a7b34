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


class MarkedArray(np.ndarray):
    """Fresh integer/bool storage whose ``written`` mask records initialised elements.

    Integers have no spare bit pattern to poison, so a read of an element no store
    has written raises instead (floats are filled with NaN, see :func:`new_array`).

    Example::

        >>> import cuvil_tir as T
        >>> a = new_array(T.decl_buffer((2,), "int32", "X"), (2,))
        >>> type(a).__name__, a.written.tolist()
        ('MarkedArray', [False, False])
    """

    written: np.ndarray


def _uninitialised(buf, idx):
    idx_text = ", ".join(str(i) for i in (idx if isinstance(idx, tuple) else (idx,)))
    return LoweringError(f"read of uninitialised memory: buffer {buf.name}[{idx_text}] "
                         "is read before any store wrote it (a schedule lost an init "
                         "or a producer's iterations)")


def _reader(dt: str, buf=None):
    """``read(array, index_tuple) -> value`` for element dtype ``dt``; reading an
    unwritten element of a :class:`MarkedArray` raises."""
    conv = S.load_converter(dt)
    if conv is None:
        def raw(a, idx):
            return a[idx]
    elif D.element(dt) == "bfloat16":
        table = S._BF16_TO_F32

        def raw(a, idx):
            return table[a.item(idx)]
    elif D.is_float8(dt):
        def raw(a, idx):
            return conv(a.item(idx))
    else:
        def raw(a, idx):
            return a.item(idx)

    def read(a, idx):
        if a.__class__ is MarkedArray and not a.written[idx]:
            raise _uninitialised(buf, idx)
        return raw(a, idx)
    return read


def _mark(a, idx):
    if a.__class__ is MarkedArray:
        a.written[idx] = True


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
    read = _reader(buf.dtype, buf)
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
    read = _reader(buf.dtype, buf)
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
                _mark(a, idx)
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
            _mark(a, i)
        return store1

    def store():
        a = bufs[k]
        idx = tuple(f() for f in fs)
        v = fv()
        if not (_in_bounds(idx, a.shape) and len(idx) == a.ndim):
            raise _oob("store to", buf, idx, a.shape)
        a[idx] = conv(v) if conv else v
        _mark(a, idx)
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


_BF16_NAN = 0x7FC0


def new_array(buf, dims):
    """Fresh poisoned storage for ``buf``: floats are NaN (bfloat16 as uint16 bits),
    integers and bools a :class:`MarkedArray` whose unwritten elements cannot be read,
    so a schedule that reads memory nothing initialised never passes by luck.

    Example::

        >>> import cuvil_tir as T
        >>> new_array(T.decl_buffer((2,), "bfloat16", "X"), (2,)).dtype
        dtype('uint16')
        >>> new_array(T.decl_buffer((2,), "float32", "Y"), (2,)).tolist()
        [nan, nan]
    """
    dt = buf.dtype
    if D.element(dt) == "bfloat16":
        return np.full(dims, _BF16_NAN, D.to_numpy(dt))
    if D.is_float8(dt):                          # NaN of e4m3fn and of e5m2
        return np.full(dims, 0x7F, D.to_numpy(dt))
    if D.is_float(dt):
        return np.full(dims, np.nan, D.to_numpy(dt))
    a = np.zeros(dims, D.to_numpy(dt)).view(MarkedArray)
    a.written = np.zeros(dims, bool)
    return a
