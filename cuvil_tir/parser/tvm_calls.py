"""TVMScript's calls and conversions that Cuvil's own text form does not have.

* ``T.tvm_<op>(...)``: TVM's backend builtins, read as opaque extern calls
  (:func:`tvm_builtin`);
* ``T.assume(cond)``: the ``assume`` op (:mod:`cuvil_tir.ops.assume`), a hint;
* ``T.tvm_access_ptr(T.type_annotation(dtype), A.data, offset, extent, mask)`` and
  ``A.access_ptr(mask, offset=..., extent=...)``: a :class:`Pointer`, which is the
  region it covers where a call receives memory and the ``access_ptr`` op
  (:mod:`cuvil_tir.ops.access_ptr`) everywhere else (``T.evaluate(A.access_ptr("r"))``
  marks an opaque access);
* TVM's implicit conversions, only for a function written against a module flagged
  ``__tvmscript_namespace__`` (see :attr:`ExprEvaluator.tvm_dialect`): an integer
  meeting a float literal (:func:`float_literal_promotes`) and a store of another
  dtype (:func:`tvm_store_value`).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse("def f(A: T.Buffer((4, 4), 'float32')):\\n"
    ...             "    T.evaluate(A.access_ptr('r', offset=2, extent=5))\\n")
    >>> str(f.body.value)
    'T.tvm_access_ptr(T.type_annotation("float32"), A.data, 2, 5, 1)'
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as D
from ..errors import CuvilError
from ..expr import Cast, Expr, FloorDiv, IntImm
from ..op import call_extern
from ..ops.access_ptr import MASKS, access_ptr
from ..ops.assume import assume
from ..stmt import BufferRegion, Range
from .values import Pointer, to_expr, unify


def tvm_builtin(name: str):
    """``T.tvm_<op>(*args, dtype=...)``, one of TVM's backend builtins (``tvm_fill_fragment``,
    ``tvm_load_matrix_sync`` ...): read as an opaque call of the extern ``tvm_<op>``, so
    that a schedule can move it (it reads and writes what its block declares); only a
    target that provides the symbol can run it.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.parse("def f(A: T.Buffer((4,), 'float32')):\\n"
        ...             "    T.evaluate(T.tvm_fill_fragment(A.data, 4, 0, dtype='handle'))\\n")
        >>> f.body.value.args[0].value, f.body.value.dtype
        ('tvm_fill_fragment', 'handle')
    """
    if name == "tvm_access_ptr":
        return tvm_access_ptr

    def call(*args, dtype="handle"):
        return call_extern(dtype, name, *args)
    call.__name__ = name
    call.takes_memory = True
    return call


@dataclass(frozen=True)
class TypeAnnotation:
    """``T.type_annotation(dtype)``: the element type a TVM pointer is annotated with."""

    dtype: str


def type_annotation(dtype="handle"):
    """``T.type_annotation(dtype="float16")`` (only meaningful as the first argument of
    ``T.tvm_access_ptr``).

    Example::

        >>> type_annotation(dtype="float16").dtype
        'float16'
    """
    return TypeAnnotation(D.canonical(dtype))


def tvm_access_ptr(annotation, data, offset, extent, mask, dtype="handle"):
    """``T.tvm_access_ptr(T.type_annotation(dt), A.data, offset, extent, mask)``: the
    ``access_ptr`` op over ``A``'s flat elements ``[offset, offset + extent)``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4, 4), "float32", "A")
        >>> p = tvm_access_ptr(type_annotation("float32"), T.BufferRegion.full(A), 4, 8, 1)
        >>> p.args[3].value
        'r'
    """
    if not isinstance(annotation, TypeAnnotation):
        raise CuvilError(f"T.tvm_access_ptr: expected T.type_annotation(dtype) first, "
                         f"found {annotation!r}")
    if not isinstance(data, BufferRegion) or not _is_full(data):
        raise CuvilError(f"T.tvm_access_ptr: expected a buffer's data (A.data) second, "
                         f"found {data!r}")
    buf = data.buffer
    if annotation.dtype != buf.dtype:
        raise CuvilError(f"T.tvm_access_ptr: the type annotation {annotation.dtype} "
                         f"differs from {buf.name}'s dtype {buf.dtype}; a pointer "
                         "reinterpreting a buffer's elements is not supported")
    if dtype != "handle":
        raise CuvilError(f"T.tvm_access_ptr(..., dtype={dtype!r}): a pointer has dtype "
                         "'handle'")
    return access_ptr(buf, offset, extent, mask)


def _is_full(r: BufferRegion) -> bool:
    return all(isinstance(x.min, IntImm) and x.min.value == 0 and
               str(x.extent) == str(s) for x, s in zip(r.region, r.buffer.shape))


def make_pointer(base, access_mask, offset, extent, view: bool) -> Pointer:
    """``base.access_ptr(access_mask, offset=offset, extent=extent)`` of a buffer or a
    view matched inside a block (see :mod:`.tvmscript`).

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((64,), "float32", "B")
        >>> str(make_pointer(B, "r", 4, 8, False).region)
        'B[4:12]'
    """
    if access_mask not in MASKS and access_mask not in MASKS.values():
        raise CuvilError(f"access_ptr: the access mask is 'r', 'w' or 'rw', found "
                         f"{access_mask!r}")
    region = base.full() if view else BufferRegion.full(base)
    buf = region.buffer
    start = base.elem_offset() if view else IntImm(0, "int32")
    size = _size(base.view_shape if view else buf.shape)
    lo = _add(start, _as_int(offset))
    ext = _as_int(extent) if extent is not None else size - _as_int(offset)
    call = access_ptr(buf, lo, ext, access_mask)
    if _is_zero(offset) and extent is None:
        return Pointer(call, region)
    if buf.ndim == 1:
        return Pointer(call, BufferRegion(buf, (Range(lo, ext),)))
    return Pointer(call, None)


def _as_int(v) -> Expr:
    return to_expr(v, "int32")


def _is_zero(v) -> bool:
    return (isinstance(v, int) and v == 0) or (isinstance(v, IntImm) and v.value == 0)


def _add(a: Expr, b: Expr) -> Expr:
    if _is_zero(a):
        return b
    return a if _is_zero(b) else a + b


def _size(shape) -> Expr:
    total = None
    for s in shape:
        total = s if total is None else total * s
    return total if total is not None else IntImm(1, "int32")


def ceildiv(a, b):
    """``T.ceildiv(a, b)``: ``a / b`` rounded up, for a positive constant ``b``
    (``(a + b - 1) // b``; floor division makes it exact for negative ``a`` too).

    Example::

        >>> import cuvil_tir as T
        >>> str(ceildiv(T.var("n"), 1024))
        '(n + 1023) // 1024'
    """
    a, b = unify(a, b)
    if not (isinstance(b, IntImm) and b.value > 0):
        raise CuvilError(f"T.ceildiv: the divisor must be a positive integer constant, "
                         f"found {b}; write the rounding out with // for other divisors")
    return FloorDiv(a + IntImm(b.value - 1, b.dtype), b)


def float_literal_promotes(x, other=None):
    """TVM's Python frontend's one promotion: an integer expression meeting a Python float
    literal (``10.0 * vi``) is cast to float32.  Only for a function written against a
    module flagged ``__tvmscript_namespace__``; Cuvil's own text asks for the cast.  The
    cast is explicit in the IR, so the printed form reads back in either dialect.

    Example::

        >>> import cuvil_tir as T
        >>> str(float_literal_promotes(T.var("i"), 10.0))
        'T.Cast("float32", i)'
    """
    if isinstance(x, Expr) and isinstance(other, float) and D.lanes(x.dtype) == 1 \
            and D.is_integer(x.dtype):
        return Cast("float32", x)
    return x


def tvm_store_value(value: Expr, buffer) -> Expr:
    """A store's value in TVM's dialect: TVM's parser casts a value of another dtype to
    the buffer's.  Cuvil keeps the conversions that are defined for every value, made
    explicit as a ``Cast`` (so the printed text reads back in Cuvil's own dialect): an
    integer or bool to a float (rounded to nearest), a float to another float (rounded
    to nearest, out of range to infinity), an integer to a wider integer.  A float to an
    integer (undefined out of range) or a narrowing integer conversion (wraps
    silently) stays an error asking for the cast.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((4,), "float32", "B")
        >>> str(tvm_store_value(T.var("vi"), B))
        'T.Cast("float32", vi)'
    """
    src, dst = value.dtype, buffer.dtype
    if D.element(src) == D.element(dst) or D.lanes(src) != D.lanes(dst) and \
            D.lanes(dst) != 1:
        return value
    s, d = D.element(src), D.element(dst)
    widening_int = D.is_integer(s) and D.is_integer(d) and D.is_uint(s) == D.is_uint(d) \
        and D.bits(d) > D.bits(s)
    if D.is_float(d) and (D.is_float(s) or D.is_integer(s) or D.is_bool(s)) or widening_int:
        return Cast(D.with_lanes(d, D.lanes(src)), value)
    raise CuvilError(f"store to {buffer.name}: TVM would convert the {src} value to "
                     f"{dst} silently, which is not defined for every value (a float "
                     f"out of the integer's range, or a narrowing integer wrap); cast it "
                     f"with T.Cast(\"{dst}\", value) to say which conversion is meant")


#: TVMScript's functions that Cuvil's namespace does not have
TVM_FUNCS = {"type_annotation": type_annotation, "ceildiv": ceildiv, "assume": assume}

__all__ = ["TVM_FUNCS", "ceildiv", "tvm_builtin", "type_annotation", "tvm_access_ptr", "TypeAnnotation",
           "Pointer", "make_pointer", "float_literal_promotes", "tvm_store_value"]
