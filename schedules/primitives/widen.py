"""``widen``: store a staged copy converted to the dtype its readers compute in.

A GEMM over bfloat16 operands that accumulates in float32 reads
``T.Cast("float32", B[k, j])`` in its inner loop: without a bfloat16 dot instruction,
every load widens again (on x86 two extra instructions per vector, on the FMA ports).
Staging the operand (``cache_read``, then packing it) already copies it once; ``widen``
makes that copy store the converted value, so the inner loop reads float32 and runs
pure FMAs.  The conversion must be exact (bfloat16 and float16 to float32, int8 to
int16 or int32 ...), and every read of the buffer must be the cast to that dtype: the
readers then see exactly the values they computed before.  TensorIR has no such
primitive (``unsafe_set_dtype`` keeps a cast at every read and may round); this is
its exact half.

Before/after ``widen(B_global, "float32")``::

    B_global = T.alloc_buffer((k, n), "bfloat16")    B_global = T.alloc_buffer((k, n))
    B_global[k, j] = B[k, j]                          B_global[k, j] = T.Cast("float32", B[k, j])
    ... T.Cast("float32", B_global[k, j]) ...         ... B_global[k, j] ...

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4,), "bfloat16", name="A")
    >>> B = T.compute((4,), lambda i: A[i], name="B")
    >>> C = T.compute((4,), lambda i: B[i].astype("float32") * 2.0, name="C")
    >>> g, _ = widen(T.create_prim_func([A, C]), BlockRV("B"), "float32")
    >>> g.body.block.alloc_buffers[0].dtype
    'float32'
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.expr import BufferLoad
from cuvil_tir.visitor import Mutator, Visitor

from ..errors import StorageError, schedule_error
from ..primitive import BLOCK, STR, primitive
from .buffer_ref import block_buffer, is_allocated, is_param, passed_to_calls, swap_buffer
from .set_dtype import Retype, checked_dtype

#: (exponent bits, mantissa bits) of the float formats a conversion may widen
_FLOATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def exact_conversion(src: str, dst: str) -> bool:
    """Whether every value of scalar dtype ``src`` converts to ``dst`` and back
    unchanged (a widening): a float with at least the exponent and mantissa bits, an
    integer with the range, a float whose mantissa holds every integer of ``src``.

    Example::

        >>> [exact_conversion(s, d) for s, d in [("bfloat16", "float32"),
        ...  ("float16", "bfloat16"), ("uint8", "int16"), ("int8", "uint16"),
        ...  ("int8", "float16"), ("int32", "float32"), ("float32", "float32")]]
        [True, False, True, False, True, False, False]
    """
    if src == dst:
        return False
    if src in _FLOATS and dst in _FLOATS:
        return all(d >= s for s, d in zip(_FLOATS[src], _FLOATS[dst]))
    if not D.is_integer(src) or D.is_bool(src):
        return False
    value_bits = D.bits(src) - (1 if D.is_int(src) else 0)   # magnitude bits of src
    if dst in _FLOATS:
        return value_bits <= _FLOATS[dst][1] + 1
    if not D.is_integer(dst) or D.is_bool(dst):
        return False
    if D.is_uint(dst):
        return D.is_uint(src) and D.bits(dst) >= D.bits(src)
    return D.bits(dst) - 1 >= value_bits


class _Reads(Visitor):
    """The blocks whose reads of ``buf`` are not ``Cast(dtype, buf[...])``."""

    def __init__(self, buf, dtype):
        self.buf, self.dtype, self.block, self.bad = buf, dtype, None, []

    def visit_Block(self, blk):
        outer, self.block = self.block, blk
        self.generic_visit(blk)
        self.block = outer

    def visit_Cast(self, c):
        if isinstance(c.value, BufferLoad) and c.value.buffer is self.buf and \
                D.element(c.dtype) == self.dtype:
            self.visit(c.value.indices)     # an index may read the buffer too
            return
        self.generic_visit(c)

    def visit_BufferLoad(self, ld):
        if ld.buffer is self.buf:
            self.bad.append((self.block, ld))
        self.generic_visit(ld)


class _Widen(Retype):
    """Stores to ``old`` cast into ``new`` (:class:`.set_dtype.Retype`); every
    ``Cast(new dtype, old[...])`` (the only reads :func:`widen` lets through) reads
    ``new`` as it is."""

    def visit_Cast(self, c):
        if isinstance(c.value, BufferLoad) and c.value.buffer is self.old:
            return BufferLoad(self.new, self.visit(c.value.indices))
        return Mutator.generic_visit(self, c)


def _bad_read(buf, dtype, func):
    """``(block, load)``: the first read of ``buf`` in ``func`` that is not under the cast
    to ``dtype``, or None."""
    finder = _Reads(buf, dtype)
    finder.visit(func.body)
    return finder.bad[0] if finder.bad else None


@primitive("widen", block=BLOCK, dtype=STR)
def widen(func, block, dtype: str):
    """Store the buffer ``block`` writes (a staged copy, allocated in the function) in
    the wider ``dtype`` its readers convert it to: every store casts to ``dtype`` and
    every read ``T.Cast(dtype, buf[...])`` becomes ``buf[...]``.  Refused unless the
    conversion is exact (:func:`exact_conversion`: bfloat16/float16 to float32,
    int8/uint8 to int16/int32 ...) and every read of the buffer is that cast, so the
    readers compute on the same values.

    Before/after ``widen(B_global, "float32")`` (a bfloat16 GEMM's staged operand)::

        B_global[v0, v1] = B[v0, v1]       B_global[v0, v1] = T.Cast("float32", B[v0, v1])
        C[i, j] += T.Cast("float32", A[i, k]) * T.Cast("float32", B_global[k, j])
                                           C[i, j] += T.Cast("float32", A[i, k]) * B_global[k, j]

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4,), "bfloat16", name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i].astype("float32")
        ...                                      * 2.0, name="C")])
        >>> sch = S.Schedule(f)
        >>> staged = sch.cache_read("C", 0, "global")
        >>> sch.widen(staged, "float32")
        >>> from cuvil_tir.analysis import tree
        >>> str(tree.get(sch.func, tree.find_block(sch.func, "C")).block.body)
        'C[v_i] = A_global[v_i] * T.float32(2)'
    """
    prim = "widen"
    _, blk, buf = block_buffer(func, block, 0, "write", prim)
    if len(blk.writes) != 1:
        raise schedule_error(StorageError, prim, f"block {blk.name!r} writes "
                             f"{len(blk.writes)} buffers {[w.buffer.name for w in blk.writes]};"
                             " expected the one-buffer copy of a cache_read", func, blk)
    if is_param(func, buf) or not is_allocated(func, buf):
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} written by block "
                             f"{blk.name!r} is not allocated in the function (a parameter's "
                             "dtype is the caller's); stage it with cache_read first and "
                             "widen the copy", func, blk)
    dt = checked_dtype(dtype, prim, "'float32' or 'int32'", func, blk)
    if D.lanes(dt) != 1 or D.lanes(buf.dtype) != 1 or not exact_conversion(buf.dtype, dt):
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} of dtype {buf.dtype} "
                             f"to {dt} is not an exact widening: expected a wider scalar "
                             "dtype that holds every value (bfloat16/float16 to float32, "
                             "int8/uint8 to int16/int32); to accept rounding use "
                             "unsafe_set_dtype", func, blk)
    calls = passed_to_calls(func, buf)
    if calls:
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} is passed to "
                             f"{sorted(set(calls))}, which read(s) its memory as "
                             f"{buf.dtype}; widen a copy the calls do not take", func, blk)
    bad = _bad_read(buf, dt, func)
    if bad is not None:
        where, load = bad
        name = where.name if where is not None else "the function body"
        raise schedule_error(StorageError, prim, f"block {name!r} reads {load} not as "
                             f'T.Cast("{dt}", {buf.name}[...]); expected every read of '
                             f"{buf.name!r} converted to {dt}, so that storing it widened "
                             "changes no value. Widen a copy only such readers read",
                             func, where)
    new = buf.with_changes(dtype=dt)
    return swap_buffer(func, buf, new, _Widen(buf, new).visit(func.body)), None


__all__ = ["exact_conversion", "widen"]
